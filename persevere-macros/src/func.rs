//! The function under `#[retry]`: what it takes, what it returns, and how each attempt
//! gets its arguments afresh.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, PatIdent, ReturnType, Type};

use crate::diag::locate;

/// A function `#[retry]` can wrap, with the per-attempt rebinding of its arguments.
pub struct RetryFn {
    /// The function, its signature adjusted where a parameter had to be renamed.
    pub item: ItemFn,
    /// The declared return type.
    pub output: Type,
    /// Statements that run at the start of each attempt: a clone of each by-value
    /// argument, a reborrow of each `&mut` argument.
    pub rebinds: Vec<TokenStream>,
    /// The parameters bound to a plain name, with their types, for `key = name`.
    pub named: Vec<(Ident, Type)>,
    /// Whether the function takes an `&mut` (the receiver or a parameter): each attempt
    /// must then borrow it from the call, which only an attempt inside the function's
    /// own body can do.
    pub exclusive: bool,
}

/// Plans the expansion of `item`: `None` if it has no return type (which `valid`
/// reports). `private` is the runtime's `__private` module.
pub fn analyse(item: &ItemFn, private: &TokenStream) -> Option<RetryFn> {
    let mut item = item.clone();
    let sig = &mut item.sig;
    // A function without a return type is reported by `valid`.
    let output = match &sig.output {
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => None,
    };
    let mut rebinds = Vec::new();
    let mut named = Vec::new();
    let mut exclusive = false;
    for (index, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            FnArg::Receiver(receiver) => {
                exclusive |=
                    matches!(bare(&receiver.ty), Type::Reference(r) if r.mutability.is_some());
            }
            FnArg::Typed(arg) => {
                // `fresh(&name)`, a copy of the argument for one attempt; the call is at
                // the parameter, where a type that is not `Clone` is reported.
                let span = arg.span();
                let fresh = |name: &Ident| {
                    let private = locate(private.clone(), span);
                    quote_spanned! {span=> #private::fresh(&#name)}
                };
                let ty = (*arg.ty).clone();
                exclusive |= matches!(bare(&ty), Type::Reference(r) if r.mutability.is_some());
                let simple = simple_name(&arg.pat);
                if let Some(ident) = &simple {
                    named.push((ident.clone(), ty.clone()));
                }
                match (bare(&ty), simple) {
                    // A shared reference is `Copy`: every attempt can use it as it is.
                    (Type::Reference(r), _) if r.mutability.is_none() => {}
                    (Type::Reference(_), Some(ident)) => {
                        rebinds.push(quote! { let #ident = &mut *#ident; });
                    }
                    // An `&mut` bound by a pattern is used through the pattern's
                    // bindings, which each attempt borrows in turn.
                    (Type::Reference(_), None) => {}
                    (_, _) if matches!(*arg.pat, Pat::Wild(_)) => {}
                    (_, Some(ident)) => {
                        // The signature's binding need not be `mut`: each attempt gets
                        // its own, mutable where the user asked for it.
                        let mutability = match &mut *arg.pat {
                            Pat::Ident(p) => p.mutability.take(),
                            _ => None,
                        };
                        let copy = fresh(&ident);
                        rebinds.push(quote! { let #mutability #ident = #copy; });
                    }
                    (_, None) => {
                        // A destructuring pattern: the argument gets a hidden name and
                        // each attempt destructures its own copy.
                        let hidden =
                            format_ident!("__persevere_arg{}", index, span = Span::mixed_site());
                        let pat = (*arg.pat).clone();
                        let copy = fresh(&hidden);
                        rebinds.push(quote! { let #pat: #ty = #copy; });
                        *arg.pat = Pat::Ident(PatIdent {
                            attrs: Vec::new(),
                            by_ref: None,
                            mutability: None,
                            ident: hidden,
                            subpat: None,
                        });
                    }
                }
            }
        }
    }
    Some(RetryFn {
        item,
        output: output?,
        rebinds,
        named,
        exclusive,
    })
}

/// `ty` without the parentheses and the invisible group around it: a type passed
/// through a `macro_rules!` fragment (`$t:ty`) arrives wrapped in a group, and an `&mut`
/// inside one must still be reborrowed, not cloned.
pub fn bare(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => bare(&group.elem),
        Type::Paren(paren) => bare(&paren.elem),
        ty => ty,
    }
}

/// The name a parameter is bound to, if its pattern is a plain (possibly `mut`) name.
fn simple_name(pat: &Pat) -> Option<Ident> {
    match pat {
        Pat::Ident(PatIdent {
            by_ref: None,
            subpat: None,
            ident,
            ..
        }) => Some(ident.clone()),
        _ => None,
    }
}
