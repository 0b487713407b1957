//! The expansion of a function that loops in its own body, one `step` (an attempt and
//! the wait after it) at a time: an async fn that takes an `&mut`, since a closure cannot
//! lend an `&mut` to each attempt in turn, and a plain fn, with `step_blocking`.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::diag::locate;
use crate::expand::parts::{Parts, hidden};

// Input:
//
//     #[retry(deadline = "5s")]
//     #[idempotent]
//     async fn fill(buffer: &mut Vec<u8>) -> Result<usize, ApiError> { body }
//
// Output (paths are `::persevere::__private::...`):
//
//     async fn fill(buffer: &mut Vec<u8>) -> Result<usize, ApiError> {
//         static SITE: Site = ...;
//         let handling: Handling<Result<usize, ApiError>, _, _, _, _> = Handling::new(...);
//         let mut run = pin!(Run::lazy(&SITE.policy));
//         loop {
//             let buffer = &mut *buffer;
//             let attempt = async {
//                 if let Some(fake) = None::<Result<usize, ApiError>> { return fake; }
//                 body
//             };
//             if let Some(outcome) = step(run.as_mut(), attempt, &handling).await {
//                 return outcome;
//             }
//         }
//     }
//
// A plain fn makes its run with `Run::blocking`, its attempt a closure `|| -> R { body }`,
// and calls `step_blocking(&mut run, attempt, &handling)`.
pub fn expand(private: &TokenStream, parts: Parts) -> TokenStream {
    let Parts {
        attrs,
        vis,
        sig,
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
        body,
        ..
    } = parts;
    let run = hidden("__persevere_run");
    let handling_var = hidden("__persevere_handling");
    let outcome = hidden("__persevere_outcome");
    let is_async = sig.asyncness.is_some();
    let attempt = if is_async {
        // Not `move`: the attempt borrows the arguments of the function it runs in.
        quote! {
            async {
                #typed
                #stmts
            }
        }
    } else {
        let mut statements = Group::new(Delimiter::Brace, stmts);
        statements.set_span(body);
        quote!(|| -> #named #statements)
    };
    let step = step(private, &output, is_async, &run, &handling_var, attempt);
    let begin = if is_async {
        // Pinned: the call's timer is a tokio `Sleep`.
        quote!(::core::pin::pin!(#private::Run::lazy(&#site.policy)))
    } else {
        quote!(#private::Run::blocking(&#site.policy))
    };
    quote! {
        #(#attrs)*
        #vis #sig {
            #inner
            #site_static
            #marks
            #checks
            // Its error type is inferred from the attempts given to `step`, which the
            // driver requires to return an `Outcome`: reported there, once, if not.
            let #handling_var = #handling;
            let mut #run = #begin;
            loop {
                // The arguments' copies live only as long as the attempt.
                #(#rebinds)*
                if let ::core::option::Option::Some(#outcome) = #step {
                    return #outcome;
                }
            }
        }
    }
}

/// The call of one step: `step(run.as_mut(), attempt, &handling).await`, or
/// `step_blocking(&mut run, attempt, &handling)`. The call is located at the return type,
/// so that the driver's need of an `Outcome` from it is reported there, once; so are the
/// run and the handling it is given (the handling's error type is the `Outcome`'s), while
/// the attempt keeps the body's own.
fn step(
    private: &TokenStream,
    output: &Type,
    is_async: bool,
    run: &Ident,
    handling: &Ident,
    attempt: TokenStream,
) -> TokenStream {
    let (function, run, await_) = if is_async {
        (
            quote!(#private::step),
            quote!(#run.as_mut(),),
            locate(quote!(.await), output.span()),
        )
    } else {
        (
            quote!(#private::step_blocking),
            quote!(&mut #run,),
            quote!(),
        )
    };
    let function = locate(function, output.span());
    let run = locate(run, output.span());
    let handling = locate(quote!(, &#handling), output.span());
    let mut arguments = Group::new(Delimiter::Parenthesis, quote!(#run #attempt #handling));
    arguments.set_span(Span::call_site().located_at(output.span()));
    quote!(#function #arguments #await_)
}
