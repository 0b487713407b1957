//! The expansion of an async fn that takes no `&mut`: it returns one future, the
//! driver's, which makes each attempt with a closure over the arguments.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;

use crate::args::parsed::{Args, HedgeAt};
use crate::diag::locate;
use crate::expand::parts::{Parts, hidden};
use crate::expand::site::duration;

// Input:
//
//     #[retry(deadline = "5s")]
//     #[idempotent]
//     async fn fetch(client: &Client, id: u64) -> Result<User, ApiError> { body }
//
// Output (paths are `::persevere::__private::...`):
//
//     fn fetch(client: &Client, id: u64) -> impl Future<Output = Result<User, ApiError>> {
//         // the body's inner attributes, `#![...]`, if any
//         static SITE: Site = Site::new(&SITE, concat!(module_path!(), "::fetch"),
//             Policy::new().with_deadline(Duration::new(5, 0)), true);
//         #[idempotent] fn mark() {} // the `#[idempotent]` read here, its import kept used
//         let _ = mark;
//         retrying::<Result<User, ApiError>, _, _, _, _, _, _>(
//             &SITE.policy,
//             move || {
//                 let id = fresh(&id);
//                 async move {
//                     if let Some(fake) = None::<Result<User, ApiError>> { return fake; }
//                     body
//                 }
//             },
//             Handling::new(by_classify, Describe::<Result<User, ApiError>>::new().show(),
//                 Unused, Unused, Unused),
//         )
//     }
//
// `hedge = ...` calls `hedged` instead, given a static `Hedge` that says when, before
// the closure. A return type with `impl Trait` in it is named with `_` in its place
// (`Describe` with `()`), so that the driver's result defines the opaque type.
pub fn expand(args: &Args, private: &TokenStream, parts: Parts) -> TokenStream {
    let Parts {
        attrs,
        vis,
        mut sig,
        output,
        named,
        rebinds,
        site,
        site_static,
        marks,
        checks,
        handling,
        inner,
        stmts,
        typed,
        ..
    } = parts;
    // `impl` from this crate, of edition 2024, captures every lifetime of the arguments
    // whatever the edition of the caller's crate; at the return type, where an error
    // about it is reported.
    sig.asyncness = None;
    sig.output = syn::parse2(locate(
        quote!(-> impl ::core::future::Future<Output = #output>),
        output.span(),
    ))
    .expect("a return type");
    // Names the return type, which the attempt's `async` block takes as its output
    // type; located at it, so that one that is not a `Result` is reported there. A
    // hedged function is driven the same way, its attempts hedged.
    let (retrying, hedge_static, hedge_arg) = match &args.hedge {
        None => (quote!(#private::retrying), quote!(), quote!()),
        Some(at) => {
            let (hedge_static, hedge_arg) = hedge(at.value, args, private);
            (quote!(#private::hedged), hedge_static, hedge_arg)
        }
    };
    let retrying = locate(quote!(#retrying::<#named, _, _, _, _, _, _>), output.span());
    let mut arguments = Group::new(
        Delimiter::Parenthesis,
        quote! {
            &#site.policy,
            #hedge_arg
            move || {
                #(#rebinds)*
                async move {
                    #typed
                    #stmts
                }
            },
            #handling,
        },
    );
    arguments.set_span(Span::call_site().located_at(output.span()));
    quote! {
        #(#attrs)*
        #vis #sig {
            #inner
            #site_static
            #hedge_static
            #marks
            #checks
            #retrying #arguments
        }
    }
}

/// The static `Hedge` that says when a slow attempt is hedged, and the argument that
/// hands it to the driver.
fn hedge(at: HedgeAt, args: &Args, private: &TokenStream) -> (TokenStream, TokenStream) {
    let hedge = hidden("__PERSEVERE_HEDGE");
    let mut spec = match at {
        HedgeAt::After(d) => {
            let d = duration(d, private);
            quote!(#private::Hedge::after(#d))
        }
        HedgeAt::Percentile(q) => {
            let q = proc_macro2::Literal::f64_suffixed(q);
            quote!(#private::Hedge::percentile(#q))
        }
    };
    if let Some(n) = &args.hedges {
        let n = n.value;
        spec.extend(quote!(.with_hedges(#n)));
    }
    (
        quote!(static #hedge: #private::Hedge = #spec;),
        quote!(&#hedge,),
    )
}
