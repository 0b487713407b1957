//! The function under `#[retry]`: what it takes, what it returns, and how each attempt
//! gets its arguments afresh.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, PatIdent, ReturnType, Signature, Type};

use crate::diag::{locate, push};

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
    /// A check of each parameter not marked `#[savepoint]` that it is not an open
    /// transaction, at the parameter, which binds what the probes found to
    /// [`TRANSACTION_FACTS`]; empty if no parameter is probed.
    pub outside_transaction: TokenStream,
    /// Whether a parameter is probed, and [`TRANSACTION_FACTS`] bound.
    pub probed: bool,
    /// Whether the function takes an `&mut` (the receiver or a parameter): each attempt
    /// must then borrow it from the call, which only an attempt inside the function's
    /// own body can do.
    pub exclusive: bool,
}

/// Plans the expansion of `item`: `None` if it has no return type (which `valid`
/// reports). `private` is the runtime's `__private` module; `savepoints` says which
/// parameters were marked `#[savepoint]` (see [`take_savepoints`]).
pub fn analyse(item: &ItemFn, private: &TokenStream, savepoints: &[bool]) -> Option<RetryFn> {
    let mut item = item.clone();
    let sig = &mut item.sig;
    // A function without a return type is reported by `valid`.
    let output = match &sig.output {
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => None,
    };
    let (mut rebinds, mut named, mut exclusive) = (Vec::new(), Vec::new(), false);
    let (outside_transaction, probed) = outside_transaction(sig, private, savepoints);
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
        outside_transaction,
        probed,
        exclusive,
    })
}

/// Takes `#[savepoint]` off the parameters of `item`, which the compiler would not know,
/// and says which parameters had it: their body rolls back to a savepoint of its own
/// before each attempt, so they may be open transactions. A `#[savepoint]` with
/// arguments is reported.
pub fn take_savepoints(item: &mut ItemFn, errors: &mut Option<syn::Error>) -> Vec<bool> {
    let mut marked = Vec::new();
    for input in &mut item.sig.inputs {
        let (attrs, named) = match input {
            FnArg::Receiver(receiver) => (&mut receiver.attrs, true),
            FnArg::Typed(arg) => (&mut arg.attrs, simple_name(&arg.pat).is_some()),
        };
        let mut found = false;
        attrs.retain(|attr| {
            if !attr.path().is_ident("savepoint") {
                return true;
            }
            let problem = if attr.meta.require_path_only().is_err() {
                Some("`#[savepoint]` takes no arguments: it marks a transaction parameter whose body rolls back to a savepoint before each attempt")
            } else if found {
                Some("`#[savepoint]` is given twice on this parameter; remove one")
            } else if !named {
                Some("`#[savepoint]` marks a transaction parameter bound to a name (`tx: &mut Transaction<'_>`), which it checks is one; bind this one to a name")
            } else if !cfg!(feature = "transactions") {
                Some("`#[savepoint]` lets an open transaction through the check that needs persevere's feature `transactions` (which `rusqlite`, `postgres` and `sqlx` turn on); without it nothing is checked: remove `#[savepoint]`, or turn the feature on")
            } else {
                None
            };
            if let Some(problem) = problem {
                push(errors, syn::Error::new_spanned(attr, problem));
            }
            found = true;
            false
        });
        marked.push(found);
    }
    marked
}

/// The name the probes' findings are bound to, before the call: what the function's
/// `Handling` is given (`with_transactions`). Hygienic, so the body cannot see it.
pub const TRANSACTION_FACTS: &str = "__persevere_transactions";

/// The check of each parameter of `sig` (as written) not marked `#[savepoint]` that it is
/// not an open transaction: by its value where it is bound to a name (`self` too), by
/// its type where a pattern binds it (unless the type is an `impl Trait`, which a body
/// cannot name).
///
/// The checks run at the start of the call, and what they find is bound, as nested
/// pairs, to [`TRANSACTION_FACTS`]: for a connection that can tell
/// (`TransactionAware`), whether it is inside an open transaction now; for any other
/// parameter, nothing (a zero-sized value):
///
/// ```text
/// let __persevere_transactions = (
///     outside_transaction(TransactionProbe::of(&conn).probe()),
///     (outside_transaction(TransactionProbe::of(&id).probe()), ()),
/// );
/// ```
fn outside_transaction(
    sig: &Signature,
    private: &TokenStream,
    savepoints: &[bool],
) -> (TokenStream, bool) {
    let mut checks = TokenStream::new();
    // Without a database feature, no transaction type of persevere's exists to catch:
    // a crate pays for the check (about 1 M instructions of rustc a parameter,
    // BENCHMARKS.md) only with one, or with `transactions` for a type of its own.
    if !cfg!(feature = "transactions") {
        return (checks, false);
    }
    let mut facts = Vec::new();
    for (index, input) in sig.inputs.iter().enumerate() {
        if savepoints.get(index).copied().unwrap_or(false) {
            // A `#[savepoint]` on anything but a transaction is a mistake: it says so.
            let value = match input {
                FnArg::Receiver(receiver) => {
                    let this = &receiver.self_token;
                    Some(quote!(#this))
                }
                FnArg::Typed(arg) => simple_name(&arg.pat).map(|ident| quote!(#ident)),
            };
            if let Some(value) = value {
                let span = input.span();
                let private = locate(private.clone(), span);
                checks.extend(quote_spanned! {span=> #private::savepoint(&#value);});
            }
            continue;
        }
        let made = match input {
            FnArg::Receiver(receiver) => {
                let this = &receiver.self_token;
                quote!(TransactionProbe::of(&#this))
            }
            FnArg::Typed(arg) => match simple_name(&arg.pat) {
                Some(ident) => quote!(TransactionProbe::of(&#ident)),
                None if !names_impl(&arg.ty) => {
                    let ty = &arg.ty;
                    quote!(TransactionProbe::<#ty>::new())
                }
                None => continue,
            },
        };
        facts.push(probe(made, input.span(), private));
    }
    if facts.is_empty() {
        return (checks, false);
    }
    let found = facts
        .into_iter()
        .rev()
        .fold(quote!(()), |rest, fact| quote!((#fact, #rest)));
    let name = Ident::new(TRANSACTION_FACTS, Span::mixed_site());
    checks.extend(quote! { let #name = #found; });
    (checks, true)
}

/// The check that the parameter at `span`, whose probe `made` makes, is not an open
/// transaction, which is what the probe found: reported at the parameter.
fn probe(made: TokenStream, span: Span, private: &TokenStream) -> TokenStream {
    let private = locate(private.clone(), span);
    let made = locate(made, span);
    quote_spanned! {span=>
        #private::outside_transaction(#private::#made.probe())
    }
}

/// Whether `ty` names an `impl Trait`, which a body cannot name.
fn names_impl(ty: &Type) -> bool {
    fn any_impl(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => any_impl(group.stream()),
            _ => false,
        })
    }
    any_impl(quote!(#ty))
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
