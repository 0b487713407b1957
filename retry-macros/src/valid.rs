//! The checks of `#[retry]` beyond parsing its arguments: what the function must be, and
//! how the arguments fit it. Each error points at the offending tokens and says what to
//! write.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Type};

use crate::args::{Args, On};
use crate::diag::{locate, push};
use crate::func::RetryFn;
use crate::item::is_attr;

/// Checks the function and the arguments together, adding every problem to `errors`.
pub fn function(args: &Args, item: &ItemFn, errors: &mut Option<syn::Error>) {
    signature(item, errors);
    idempotent(args, item, errors);
    if let (Some(timeout), None) = (&args.attempt_timeout, &item.sig.asyncness) {
        push(
            errors,
            syn::Error::new(
                timeout.span,
                "`attempt_timeout` needs an `async fn`: a blocking call cannot be cancelled once started; remove it, or make the function async",
            ),
        );
    }
}

/// What the signature of a function that is repeated must be: not `const`, returning a
/// value, and taking `self`, if at all, by reference.
fn signature(item: &ItemFn, errors: &mut Option<syn::Error>) {
    let sig = &item.sig;
    if let Some(constness) = &sig.constness {
        push(
            errors,
            syn::Error::new(
                constness.span,
                "`#[retry]` cannot go on a `const fn`: retrying waits between attempts, which a constant cannot do; remove `const`",
            ),
        );
    }
    if let ReturnType::Default = sig.output {
        push(
            errors,
            syn::Error::new(
                sig.ident.span(),
                format!(
                    "`#[retry]` needs a function that returns `Result`: `{}` returns nothing, so no failure can be seen or retried; declare `-> Result<T, E>`",
                    sig.ident
                ),
            ),
        );
    }
    for input in &sig.inputs {
        if let FnArg::Receiver(receiver) = input {
            if !matches!(*receiver.ty, Type::Reference(_)) {
                push(
                    errors,
                    syn::Error::new(
                        receiver.self_token.span,
                        "`#[retry]` needs `&self` or `&mut self`: every attempt uses the receiver, and a `self` taken by value would be used up by the first attempt",
                    ),
                );
            }
        }
    }
}

/// `#[retry]` repeats the call, so the call must be safe to repeat.
fn idempotent(args: &Args, item: &ItemFn, errors: &mut Option<syn::Error>) {
    let marked = args.idempotent
        || args.key.is_some()
        || matches!(args.on, Some(On::Unsent(_)))
        || item.attrs.iter().any(|attr| is_attr(attr, "idempotent"));
    if !marked {
        push(
            errors,
            syn::Error::new(
                item.sig.ident.span(),
                format!(
                    "`{}` is retried but not marked safe to repeat: a retry may run a write that already took effect (a payment, an insert) a second time\n\
                     = help: if running it twice is harmless, add `#[idempotent]` to the function\n\
                     = help: if it is a write, take a `key: persevere::IdempotencyKey` parameter, send it with the request, and write `#[retry(key = key, ...)]`\n\
                     = help: to retry only failures where the request never left (connection refused), write `#[retry(on = unsent, ...)]`",
                    item.sig.ident
                ),
            ),
        );
    }
}

/// `key = name`: `name` is a parameter, and an idempotency key.
pub fn key(
    args: &Args,
    plan: &RetryFn,
    private: &TokenStream,
    errors: &mut Option<syn::Error>,
) -> Option<TokenStream> {
    let key = args.key.as_ref()?;
    match plan.named.iter().find(|(name, _)| name == key) {
        Some((name, ty)) => Some(locate(
            quote!(#private::idempotency_key(&#name);),
            ty.span(),
        )),
        None => {
            let names: Vec<String> = plan.named.iter().map(|(n, _)| n.to_string()).collect();
            let known = if names.is_empty() {
                "the function has no named parameters".to_owned()
            } else {
                format!("its parameters are: {}", names.join(", "))
            };
            push(
                errors,
                syn::Error::new(
                    key.span(),
                    format!(
                        "`key = {key}` names no parameter of this function; {known}. Add a parameter `{key}: persevere::IdempotencyKey`"
                    ),
                ),
            );
            None
        }
    }
}
