//! Reading the attributes of `#[derive(Classify)]`: the class each variant (or the
//! struct) is marked with, the fields marked `#[retry_after]`, and where persevere is.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{Attribute, Field, Fields, Ident};

use crate::diag::push;

const CLASSES: &str = "#[transient], #[permanent], #[unsent], #[not_applied], #[uncertain], #[classify] (to ask its single field's own `Classify` impl), or #[timed_out] (for the `persevere::AttemptTimedOut` of an attempt cut short)";

/// A class of its own, named as the runtime's `Class` variant of the same name.
#[derive(Clone, Copy)]
pub enum Class {
    Transient,
    Permanent,
    Unsent,
    NotApplied,
    Uncertain,
}

/// The class a variant (or a struct) is marked with.
pub enum Marked {
    /// `#[transient]`, `#[permanent]`, `#[unsent]`, `#[not_applied]` or `#[uncertain]`.
    Class(Class),
    /// `#[classify]`: its single field's own `Classify` impl says.
    Delegate,
    /// The variant that holds an attempt cut short: transient, and made from
    /// `AttemptTimedOut` by a `From` impl.
    TimedOut,
}

/// Where persevere is: `::persevere`, or the path of `#[persevere(crate = "...")]` on
/// the type, for a crate that depends on it under another name.
pub fn krate(attrs: &[Attribute], errors: &mut Option<syn::Error>) -> TokenStream {
    let mut krate = quote!(::persevere);
    for attr in attrs.iter().filter(|a| a.path().is_ident("persevere")) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let path: syn::Path = meta.value()?.parse::<syn::LitStr>()?.parse()?;
                krate = quote!(#path);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown key in `#[persevere(...)]`; the only one is `crate = \"path\"`, for a crate that depends on persevere under another name",
                ))
            }
        });
        if let Err(e) = parsed {
            push(errors, e);
        }
    }
    krate
}

/// The one class `attrs` mark the variant `name` with; `None`, the problem reported, if
/// they mark none, more than one, or one with arguments.
pub fn class_of(
    attrs: &[Attribute],
    name: &Ident,
    errors: &mut Option<syn::Error>,
) -> Option<Marked> {
    let mut found: Option<Marked> = None;
    for attr in attrs {
        let marked = if attr.path().is_ident("transient") {
            Marked::Class(Class::Transient)
        } else if attr.path().is_ident("permanent") {
            Marked::Class(Class::Permanent)
        } else if attr.path().is_ident("unsent") {
            Marked::Class(Class::Unsent)
        } else if attr.path().is_ident("not_applied") {
            Marked::Class(Class::NotApplied)
        } else if attr.path().is_ident("uncertain") {
            Marked::Class(Class::Uncertain)
        } else if attr.path().is_ident("classify") {
            Marked::Delegate
        } else if attr.path().is_ident("timed_out") {
            Marked::TimedOut
        } else {
            continue;
        };
        if let Err(e) = attr.meta.require_path_only() {
            push(
                errors,
                syn::Error::new(e.span(), "a class attribute takes no arguments"),
            );
            return None;
        }
        if found.is_some() {
            push(
                errors,
                syn::Error::new(
                    attr.meta.span(),
                    format!("`{name}` already has a class; give it exactly one of {CLASSES}"),
                ),
            );
            return None;
        }
        found = Some(marked);
    }
    if found.is_none() {
        push(
            errors,
            syn::Error::new(
                name.span(),
                format!(
                    "`{name}` has no class, so nobody has said whether retrying it can help; mark it {CLASSES}"
                ),
            ),
        );
    }
    found
}

/// Each field marked `#[retry_after]`, with its position and the span of its mark.
pub fn retry_after(fields: &Fields) -> Vec<(usize, &Field, Span)> {
    fields
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let mark = f.attrs.iter().find(|a| a.path().is_ident("retry_after"))?;
            Some((i, f, mark.meta.span()))
        })
        .collect()
}
