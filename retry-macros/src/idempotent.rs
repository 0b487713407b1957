//! `#[idempotent]`: the mark that a function is safe to repeat.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Attribute, ItemFn, Meta};

use crate::diag::with_item;
use crate::expand;
use crate::item::{LightFn, is_attr};

// Input:
//
//     #[idempotent]
//     #[retry(deadline = "5s")]
//     async fn fetch(...) -> Result<User, ApiError> { ... }
//
// Output: what `#[retry(deadline = "5s")]` makes of `fetch`, told that `fetch` is marked.
//
// The mark is `#[idempotent]` itself, never tokens: written above `#[retry]`, this
// expands `#[retry]` in its place and tells it so; written below, `#[retry]` finds it
// among the function's attributes. A marker added to `#[retry]`'s arguments, or an
// attribute left for it to find, would be tokens a user could write by hand to pass the
// idempotency check without `#[idempotent]`, and an attribute would also need a path
// that resolves wherever the function is, which a macro does not know.
//
// With no `#[retry]` below, it expands to the function unchanged.
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
            Span::call_site(),
            "`#[idempotent]` goes on a function: it marks the function as safe to repeat for `#[retry]`",
        )
        .to_compile_error();
        return quote! { #error #item };
    };
    let Some(at) = function
        .attrs
        .iter()
        .position(|attr| is_attr(attr, "retry"))
    else {
        return item;
    };
    let retry = function.attrs.remove(at);
    let path = retry.path().clone();
    // Expanding `#[retry]` now runs it before the attributes written between the two:
    // harmless for those that only annotate, a change of meaning for another macro. The
    // function is then emitted without `#[retry]`, which would report it not marked.
    if let Some(between) = function.attrs[..at].iter().find(|attr| !annotates(attr)) {
        let error = syn::Error::new_spanned(
            between,
            "write `#[idempotent]` right above or below `#[retry]`: an attribute between them would apply after `#[retry]` instead of before",
        );
        return with_item(error, expand::as_written(function, &body, Some(&path)));
    }
    let args = match retry.meta {
        Meta::List(list) => list.tokens,
        Meta::Path(_) => TokenStream::new(),
        Meta::NameValue(pair) => {
            let error = syn::Error::new_spanned(
                pair,
                "`#[retry]` takes its arguments in parentheses, e.g. `#[retry(deadline = \"5s\")]`",
            );
            return with_item(error, item);
        }
    };
    let ItemFn {
        attrs, vis, sig, ..
    } = function;
    expand::retry(args, quote! { #(#attrs)* #vis #sig #body }, Some(&path))
}

/// Whether `attr` only annotates the function (documentation, lints, hints), so that it
/// means the same whichever macro expands first.
fn annotates(attr: &Attribute) -> bool {
    const ANNOTATIONS: &[&str] = &[
        "doc",
        "allow",
        "warn",
        "deny",
        "forbid",
        "expect",
        "inline",
        "cold",
        "must_use",
        "deprecated",
        "track_caller",
        "cfg",
    ];
    let path = attr.path();
    ANNOTATIONS.iter().any(|name| path.is_ident(name))
        || path
            .segments
            .first()
            .is_some_and(|s| s.ident == "rustfmt" || s.ident == "clippy")
}
