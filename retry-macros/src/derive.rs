//! `#[derive(Classify)]`: an error's classes, variant by variant. The attributes are
//! read ([`attr`]), checked against the fields ([`check`]), and made into match arms
//! ([`arm`]); this file makes the impls from the arms.

mod arm;
mod attr;
mod check;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Data, DeriveInput, Ident};

use crate::derive::arm::{Arm, arm};
use crate::derive::attr::krate;
use crate::diag::push;

// Input:
//
//     #[derive(Classify)]
//     enum ApiError {
//         #[transient] Overloaded { #[retry_after] wait: Option<Duration> },
//         #[classify] Io(std::io::Error),
//         #[permanent] BadRequest(String),
//     }
//
// Output (`#[persevere(crate = "path")]` on the type replaces `::persevere` by `path`):
//
//     impl ::persevere::Classify for ApiError {
//         fn classify(&self) -> ::persevere::Class {
//             match self {
//                 Self::Overloaded { wait: f, .. } => match retry_after(f) {
//                     Some(d) => Class::RetryAfter(d),
//                     None => Class::Transient,
//                 },
//                 Self::Io { 0: f, .. } => Classify::classify(f),
//                 Self::BadRequest { .. } => Class::Permanent,
//             }
//         }
//     }
//
// and for a variant `#[timed_out] TimedOut(AttemptTimedOut)`, also
//
//     impl From<AttemptTimedOut> for ApiError {
//         fn from(e: AttemptTimedOut) -> Self { Self::TimedOut { 0: e } }
//     }
pub fn classify(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = None;
    let krate = krate(&input.attrs, &mut errors);
    let arms = arms(&input, &krate, &mut errors);
    let timed_out: Vec<&TokenStream> = arms.iter().filter_map(|a| a.timed_out.as_ref()).collect();
    check::one_timed_out(&input.ident, timed_out.len(), &mut errors);
    if let Some(errors) = errors {
        return errors.to_compile_error();
    }
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let patterns = arms.iter().map(|a| &a.pattern);
    let classes = arms.iter().map(|a| &a.class);
    let body = if arms.is_empty() {
        // An enum without variants has no values to classify.
        quote!(match *self {})
    } else {
        quote! {
            match self {
                #(#patterns => #classes,)*
            }
        }
    };
    let from = timed_out.first().map(|value| {
        let error = Ident::new("error", Span::mixed_site());
        quote! {
            #[automatically_derived]
            impl #impl_generics ::core::convert::From<#krate::AttemptTimedOut> for #name #ty_generics #where_clause {
                fn from(#error: #krate::AttemptTimedOut) -> Self {
                    #value
                }
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Classify for #name #ty_generics #where_clause {
            fn classify(&self) -> #krate::Class {
                #body
            }
        }
        #from
    }
}

/// The arm of each variant whose marks fit its fields (of the struct, if it is one),
/// each misfit added to `errors`.
fn arms(input: &DeriveInput, krate: &TokenStream, errors: &mut Option<syn::Error>) -> Vec<Arm> {
    match &input.data {
        Data::Enum(data) => data
            .variants
            .iter()
            .filter_map(|v| {
                let ident = &v.ident;
                let checked = check::variant(&v.attrs, &v.fields, ident, errors)?;
                Some(arm(checked, ident, quote!(Self::#ident), krate))
            })
            .collect(),
        Data::Struct(data) => check::variant(&input.attrs, &data.fields, &input.ident, errors)
            .map(|checked| arm(checked, &input.ident, quote!(Self), krate))
            .into_iter()
            .collect(),
        Data::Union(data) => {
            push(
                errors,
                syn::Error::new(
                    data.union_token.span,
                    "`#[derive(Classify)]` works on enums and structs, not unions",
                ),
            );
            Vec::new()
        }
    }
}
