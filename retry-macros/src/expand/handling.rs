//! How the function treats its failures: the `Handling` the driver is given, with the
//! classifier `on = ...` names and the hooks the other keys fill.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::args::parsed::{Args, On};
use crate::diag::locate;
use crate::expand::opaque::with_opaque_as;

/// How the function treats its failures: `Handling::new(classify, show, on_open,
/// on_timeout, before_wait)`, each hook located where a missing conversion or a wrong
/// type is best reported, or `Unused`.
pub fn handling(
    args: &Args,
    declared: &Type,
    is_async: bool,
    private: &TokenStream,
) -> TokenStream {
    let output = &with_opaque_as(declared, &syn::parse_quote!(_));
    let classify = classifier(args, output, private);
    // Only the error type matters here, and nothing else gives an `impl Trait` in `T` a
    // type: `()` stands in for it.
    let described = with_opaque_as(declared, &syn::parse_quote!(()));
    // The events show the error by `Display`, else `Debug`, else its type's name; the
    // choice needs the concrete type, so it is made here, by autoref. Located at the
    // return type, with the rest, so that one that is not a `Result` is reported once.
    let show = locate(
        quote!(#private::Describe::<#described>::new().show()),
        output.span(),
    );
    let unused = quote!(#private::Unused);
    // A conversion is a function pointer: named as a function item, its bound would be
    // checked again wherever the item's type is, and a missing `From` reported thrice.
    let on_open = match &args.breaker {
        Some(path) => locate(
            quote!((#private::circuit_open::<#output> as fn(_) -> _)),
            path.span(),
        ),
        None => unused.clone(),
    };
    // An async attempt still running at the deadline (or past its `attempt_timeout`) is
    // cut: its error says so, made from `AttemptTimedOut`, named at the key that sets the
    // limit, or at the return type for the default deadline. A blocking one cannot be cut.
    let on_timeout = match (is_async, &args.attempt_timeout, &args.deadline) {
        (false, ..) => unused.clone(),
        (true, Some(limit), _) | (true, None, Some(limit)) => locate(
            quote!((#private::timed_out::<#output> as fn(_) -> _)),
            limit.span,
        ),
        (true, None, None) => locate(
            quote!((#private::timed_out::<#output> as fn(_) -> _)),
            output.span(),
        ),
    };
    let before_wait = match &args.before_wait {
        Some(path) => quote!(#path),
        None => unused,
    };
    // The call is located at the return type, so that the driver's need of an `Outcome`
    // from it is reported there, with the rest; the arguments keep their own locations.
    let new = locate(quote!(#private::Handling::new), output.span());
    let mut arguments = Group::new(
        Delimiter::Parenthesis,
        quote!(#classify, #show, #on_open, #on_timeout, #before_wait),
    );
    arguments.set_span(Span::call_site().located_at(output.span()));
    quote!(#new #arguments)
}

/// The classifier for `on = ...`, located where a missing impl should be reported: at
/// the `on` value, or at the return type. A function `decide` takes as a pointer: the
/// runtime's own for `transient`, `unsent` and `not_applied` (one copy per error type in
/// the build, not one per function; for the last two, the policy repeats only attempts
/// without effect), a
/// closure around a predicate.
fn classifier(args: &Args, output: &Type, private: &TokenStream) -> TokenStream {
    let (classifier, span) = match &args.on {
        None => (quote!(#private::by_classify), output.span()),
        Some(On::Transient(span) | On::Unsent(span) | On::NotApplied(span)) => {
            (quote!(#private::by_classify), *span)
        }
        Some(On::Predicate(path)) => {
            // Hygienic, so that a predicate the user named `error` is theirs, not this.
            // Typed, so that a predicate of the wrong type is reported against the
            // function's error type, at the predicate.
            let error = Ident::new("error", Span::mixed_site());
            (
                quote!(|#error: &<#output as #private::Outcome>::Err| #private::by_predicate(#error, &#path)),
                path.span(),
            )
        }
    };
    locate(classifier, span)
}
