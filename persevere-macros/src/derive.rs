//! `#[derive(Classify)]`: an error's classes, variant by variant.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields, Ident};

use crate::diag::{locate, push};

const CLASSES: &str = "#[transient], #[permanent], #[unsent], #[uncertain], #[classify] (to ask its single field's own `Classify` impl), or #[timed_out] (for the `persevere::AttemptTimedOut` of an attempt cut short)";

/// The class a variant (or a struct) is marked with.
enum Marked {
    Transient,
    Permanent,
    Unsent,
    Uncertain,
    Delegate,
    /// The variant that holds an attempt cut short: transient, and made from
    /// `AttemptTimedOut` by a `From` impl.
    TimedOut,
}

/// One variant, or the struct itself, ready to become a match arm.
struct Arm {
    pattern: TokenStream,
    class: TokenStream,
    /// For the `#[timed_out]` variant: the value made from an `AttemptTimedOut` `e`.
    timed_out: Option<TokenStream>,
}

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
    let krate = &krate;
    let arms: Vec<Arm> = match &input.data {
        Data::Enum(data) => data
            .variants
            .iter()
            .filter_map(|v| {
                let path = {
                    let ident = &v.ident;
                    quote!(Self::#ident)
                };
                arm(&v.attrs, &v.fields, &v.ident, path, krate, &mut errors)
            })
            .collect(),
        Data::Struct(data) => arm(
            &input.attrs,
            &data.fields,
            &input.ident,
            quote!(Self),
            krate,
            &mut errors,
        )
        .into_iter()
        .collect(),
        Data::Union(data) => {
            push(
                &mut errors,
                syn::Error::new(
                    data.union_token.span,
                    "`#[derive(Classify)]` works on enums and structs, not unions",
                ),
            );
            Vec::new()
        }
    };
    let timed_out: Vec<&TokenStream> = arms.iter().filter_map(|a| a.timed_out.as_ref()).collect();
    if timed_out.len() > 1 {
        push(
            &mut errors,
            syn::Error::new(
                input.ident.span(),
                "only one variant can be `#[timed_out]`: it is the one `From<persevere::AttemptTimedOut>` makes",
            ),
        );
    }
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

/// Where persevere is: `::persevere`, or the path of `#[persevere(crate = "...")]` on
/// the type, for a crate that depends on it under another name.
fn krate(attrs: &[Attribute], errors: &mut Option<syn::Error>) -> TokenStream {
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

fn arm(
    attrs: &[Attribute],
    fields: &Fields,
    name: &Ident,
    path: TokenStream,
    krate: &TokenStream,
    errors: &mut Option<syn::Error>,
) -> Option<Arm> {
    let marked = class_of(attrs, name, errors)?;
    let binding = format_ident!("__persevere_field", span = Span::mixed_site());

    // Each field marked `#[retry_after]`, with the span of its mark.
    let retry_after: Vec<_> = fields
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let mark = f.attrs.iter().find(|a| a.path().is_ident("retry_after"))?;
            Some((i, f, mark.meta.span()))
        })
        .collect();
    if let Some((_, _, extra)) = retry_after.get(1) {
        push(
            errors,
            syn::Error::new(
                *extra,
                "only one field can be `#[retry_after]`: the server gives one wait",
            ),
        );
        return None;
    }

    let span = name.span();
    let class = match marked {
        Marked::Transient => quote_spanned!(span=> #krate::Class::Transient),
        Marked::Permanent => quote_spanned!(span=> #krate::Class::Permanent),
        Marked::Unsent => quote_spanned!(span=> #krate::Class::Unsent),
        Marked::Uncertain => quote_spanned!(span=> #krate::Class::Uncertain),
        Marked::Delegate => {
            if let Some((_, _, mark)) = retry_after.first() {
                push(
                    errors,
                    syn::Error::new(
                        *mark,
                        format!(
                            "`{name}` is `#[classify]`: its field's own `Classify` impl says how to classify it (and what wait the server asked for), so a `#[retry_after]` mark here would be ignored; remove it, or mark the variant #[transient] to use this field's wait"
                        ),
                    ),
                );
                return None;
            }
            if fields.len() != 1 {
                push(
                    errors,
                    syn::Error::new(
                        name.span(),
                        format!(
                            "`#[classify]` asks the variant's single field how to classify it, but `{name}` has {} fields; mark the variant #[transient], #[permanent], #[unsent] or #[uncertain] instead",
                            fields.len()
                        ),
                    ),
                );
                return None;
            }
            let field = fields.iter().next().expect("one field");
            let member = member(0, field);
            let class = locate(
                quote!(#krate::Classify::classify(#binding)),
                field.ty.span(),
            );
            return Some(Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class,
                timed_out: None,
            });
        }
        Marked::TimedOut => {
            if fields.len() != 1 || !retry_after.is_empty() {
                push(
                    errors,
                    syn::Error::new(
                        name.span(),
                        format!(
                            "`#[timed_out]` marks the variant that holds the `persevere::AttemptTimedOut` of an attempt cut short, as its only field, but `{name}` has {} fields; write `{name}(persevere::AttemptTimedOut)`",
                            fields.len()
                        ),
                    ),
                );
                return None;
            }
            let field = fields.iter().next().expect("one field");
            let member = member(0, field);
            // At the field's type, where one that is not `AttemptTimedOut` is reported.
            let error = Ident::new("error", Span::mixed_site());
            let value = locate(
                quote!(#path { #member: #krate::__private::timed_out_field(#error) }),
                field.ty.span(),
            );
            // The field is read here, so that a crate that only matches the variant is
            // not told that its field is never read.
            return Some(Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class: quote_spanned!(span=> #krate::__private::timed_out_class(#binding)),
                timed_out: Some(value),
            });
        }
    };
    match retry_after.first() {
        None => Some(Arm {
            pattern: quote!(#path { .. }),
            class,
            timed_out: None,
        }),
        Some((index, field, mark)) => {
            if let Marked::Permanent = marked {
                push(
                    errors,
                    syn::Error::new(
                        *mark,
                        format!(
                            "`{name}` is `#[permanent]`, so it is never retried and a `#[retry_after]` field would be ignored; mark it #[transient] or remove #[retry_after]"
                        ),
                    ),
                );
                return None;
            }
            let member = member(*index, field);
            let wait = locate(
                quote!(#krate::__private::retry_after_field(#binding)),
                field.ty.span(),
            );
            Some(Arm {
                pattern: quote!(#path { #member: #binding, .. }),
                class: quote! {
                    match #wait {
                        ::core::option::Option::Some(wait) => #krate::Class::RetryAfter(wait),
                        ::core::option::Option::None => #class,
                    }
                },
                timed_out: None,
            })
        }
    }
}

/// How a pattern names the field at `index`: its name, or its position in a tuple.
fn member(index: usize, field: &syn::Field) -> TokenStream {
    match &field.ident {
        Some(ident) => quote!(#ident),
        None => {
            let index = syn::Index::from(index);
            quote!(#index)
        }
    }
}

fn class_of(attrs: &[Attribute], name: &Ident, errors: &mut Option<syn::Error>) -> Option<Marked> {
    let mut found: Option<Marked> = None;
    for attr in attrs {
        let marked = if attr.path().is_ident("transient") {
            Marked::Transient
        } else if attr.path().is_ident("permanent") {
            Marked::Permanent
        } else if attr.path().is_ident("unsent") {
            Marked::Unsent
        } else if attr.path().is_ident("uncertain") {
            Marked::Uncertain
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
