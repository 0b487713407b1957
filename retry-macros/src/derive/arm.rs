//! Generating the match arm of each checked variant: its pattern, its class, and for the
//! `#[timed_out]` variant the value `From<AttemptTimedOut>` makes.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Field, Ident};

use crate::derive::attr::Class;
use crate::derive::check::Checked;
use crate::diag::locate;

/// One variant, or the struct itself, ready to become a match arm.
pub struct Arm {
    pub pattern: TokenStream,
    pub class: TokenStream,
    /// For the `#[timed_out]` variant: the value made from an `AttemptTimedOut` `e`.
    pub timed_out: Option<TokenStream>,
}

/// The arm of the variant `name`, written `path` in a pattern (`Self::Name`, or `Self`
/// for a struct).
pub fn arm(checked: Checked, name: &Ident, path: TokenStream, krate: &TokenStream) -> Arm {
    let binding = format_ident!("__persevere_field", span = Span::mixed_site());
    let span = name.span();
    match checked {
        Checked::Class(class, None) => Arm {
            pattern: quote!(#path { .. }),
            class: fixed(class, span, krate),
            timed_out: None,
        },
        Checked::Class(class, Some((index, field))) => {
            let class = fixed(class, span, krate);
            let member = member(index, field);
            let wait = locate(
                quote!(#krate::__private::retry_after_field(#binding)),
                field.ty.span(),
            );
            Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class: quote! {
                    match #wait {
                        ::core::option::Option::Some(wait) => #krate::Class::RetryAfter(wait),
                        ::core::option::Option::None => #class,
                    }
                },
                timed_out: None,
            }
        }
        Checked::Delegate(field) => {
            let member = member(0, field);
            let class = locate(
                quote!(#krate::Classify::classify(#binding)),
                field.ty.span(),
            );
            Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class,
                timed_out: None,
            }
        }
        Checked::TimedOut(field) => {
            let member = member(0, field);
            // At the field's type, where one that is not `AttemptTimedOut` is reported.
            let error = Ident::new("error", Span::mixed_site());
            let value = locate(
                quote!(#path { #member: #krate::__private::timed_out_field(#error) }),
                field.ty.span(),
            );
            // The field is read here, so that a crate that only matches the variant is
            // not told that its field is never read.
            Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class: quote_spanned!(span=> #krate::__private::timed_out_class(#binding)),
                timed_out: Some(value),
            }
        }
    }
}

/// The runtime's `Class` variant for `class`, at the variant's name.
fn fixed(class: Class, span: Span, krate: &TokenStream) -> TokenStream {
    match class {
        Class::Transient => quote_spanned!(span=> #krate::Class::Transient),
        Class::Permanent => quote_spanned!(span=> #krate::Class::Permanent),
        Class::Unsent => quote_spanned!(span=> #krate::Class::Unsent),
        Class::NotApplied => quote_spanned!(span=> #krate::Class::NotApplied),
        Class::Uncertain => quote_spanned!(span=> #krate::Class::Uncertain),
    }
}

/// How a pattern names the field at `index`: its name, or its position in a tuple.
fn member(index: usize, field: &Field) -> TokenStream {
    match &field.ident {
        Some(ident) => quote!(#ident),
        None => {
            let index = syn::Index::from(index);
            quote!(#index)
        }
    }
}
