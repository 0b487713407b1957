//! `#[idempotent]`: the mark that a function is safe to repeat.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{ItemFn, Meta, parse_quote};

use crate::item::{LightFn, is_attr};

// Input:
//
//     #[idempotent]
//     #[retry(deadline = "5s")]
//     async fn fetch(...) -> Result<User, ApiError> { ... }
//
// Output:
//
//     #[retry(__idempotent, deadline = "5s")]
//     async fn fetch(...) -> Result<User, ApiError> { ... }
//
// Written after `#[retry]`, it is seen by `#[retry]` among the function's attributes and
// expands to the function unchanged.
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        let error = syn::Error::new_spanned(
            &args,
            "`#[idempotent]` takes no arguments; write `#[idempotent]`",
        )
        .to_compile_error();
        return quote! { #error #item };
    }
    let Ok(LightFn {
        item: mut function,
        body,
    }) = LightFn::split(item.clone())
    else {
        // A method declared in a trait, without a body, may be marked for its
        // implementations' readers; anything else is a mistake.
        if syn::parse2::<syn::TraitItemFn>(item.clone()).is_ok() {
            return item;
        }
        let error = syn::Error::new(
            proc_macro2::Span::call_site(),
            "`#[idempotent]` goes on a function: it marks the function as safe to repeat for `#[retry]`",
        )
        .to_compile_error();
        return quote! { #error #item };
    };
    for attr in &mut function.attrs {
        if !is_attr(attr, "retry") {
            continue;
        }
        attr.meta = match &attr.meta {
            Meta::Path(path) => parse_quote!(#path(__idempotent)),
            Meta::List(list) => {
                let path = &list.path;
                let tokens = &list.tokens;
                parse_quote!(#path(__idempotent, #tokens))
            }
            Meta::NameValue(_) => continue,
        };
    }
    let ItemFn {
        attrs, vis, sig, ..
    } = function;
    quote! { #(#attrs)* #vis #sig #body }
}
