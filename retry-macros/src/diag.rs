//! Diagnostics: errors gathered to be reported together, and tokens moved to where an
//! error about them should point.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::quote;

/// Adds `e` to the errors so far.
pub fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// `tokens`, groups included, moved to the location of `span`, so that an error the
/// compiler reports on them points at the user's token rather than at the attribute.
/// Each keeps its own resolution (hygiene), so names still refer to what they did and
/// the compiler still knows generated tokens as generated, not suggesting edits to them.
pub fn locate(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut moved = Group::new(group.delimiter(), locate(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                TokenTree::Group(moved)
            }
            mut token => {
                token.set_span(token.span().located_at(span));
                token
            }
        })
        .collect()
}

/// The errors, followed by the item as written: its callers see no cascade of "cannot
/// find function", and IDEs keep working.
pub fn with_item(errors: syn::Error, item: TokenStream) -> TokenStream {
    let errors = errors.to_compile_error();
    quote! { #errors #item }
}
