//! The checks of `#[retry]` beyond parsing its arguments: what the function must be
//! ([`signature`]), and how the arguments fit it (this file). Each error points at the
//! offending tokens and says what to write.

mod signature;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Type};

use crate::args::parsed::{Args, HedgeAt, Layers, On};
use crate::diag::{locate, push};
use crate::func::{RetryFn, bare};
use crate::item::is_attr;
use crate::valid::signature::signature;

/// The deadline of a call whose attribute names none: the runtime's `Policy::DEFAULT`.
const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Checks the function and the arguments together, adding every problem to `errors`.
/// `marked_above`: an `#[idempotent]` written above `#[retry]` marks the function.
pub fn function(args: &Args, item: &ItemFn, marked_above: bool, errors: &mut Option<syn::Error>) {
    signature(item, errors);
    idempotent(args, item, marked_above, errors);
    without_effect(args, safe_to_repeat(args, item, marked_above), errors);
    hedge(args, item, marked_above, errors);
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

/// `#[retry]` repeats the call, so the call must be safe to repeat.
/// Only what the user writes marks it: `#[idempotent]` (above `#[retry]`, which
/// `marked_above` says, or below it, among the function's attributes), `key = ...` or
/// `on = unsent` or `on = not_applied`.
fn idempotent(args: &Args, item: &ItemFn, marked_above: bool, errors: &mut Option<syn::Error>) {
    let marked =
        safe_to_repeat(args, item, marked_above) || On::without_effect(args.on.as_ref()).is_some();
    if !marked {
        push(
            errors,
            syn::Error::new(
                item.sig.ident.span(),
                format!(
                    "`{}` is retried but not marked safe to repeat: a retry may run a write that already took effect (a payment, an insert) a second time\n\
                     = help: if running it twice is harmless, add `#[idempotent]` to the function\n\
                     = help: if it is a write, take a `key: persevere::IdempotencyKey` parameter, send it with the request, and write `#[retry(key = key, ...)]`\n\
                     = help: to retry only failures where the request never left (connection refused), write `#[retry(on = unsent, ...)]`; to retry also a database transaction the server rolled back in full (a serialization failure, a deadlock), `#[retry(on = not_applied, ...)]`",
                    item.sig.ident
                ),
            ),
        );
    }
}

/// Whether the function is marked safe to repeat whatever its attempt did:
/// `#[idempotent]` (above `#[retry]`, which `marked_above` says, or below it) or a key.
fn safe_to_repeat(args: &Args, item: &ItemFn, marked_above: bool) -> bool {
    marked_above || args.key.is_some() || item.attrs.iter().any(|attr| is_attr(attr, "idempotent"))
}

/// `on = unsent` and `on = not_applied` retry only the function's own failures without
/// effect (the runtime's `Repeat::OnlyUnsent` and `Repeat::OnlyNotApplied`): a key that
/// concerns only failures they never retry would do nothing, and is refused at its name,
/// saying why. `safe`: the function is marked safe to repeat besides (`#[idempotent]` or
/// a key).
fn without_effect(args: &Args, safe: bool, errors: &mut Option<syn::Error>) {
    let Some((on, _)) = On::without_effect(args.on.as_ref()) else {
        return;
    };
    let idle = [
        (
            "uncertain_attempts",
            args.uncertain_attempts.is_some(),
            format!(
                "`uncertain_attempts` limits the retries of failures of uncertain class (an HTTP 500, a connection lost mid-request), and `on = {on}` never retries those: the request may have taken effect"
            ),
        ),
        (
            "max_retry_after",
            args.max_retry_after.is_some(),
            format!(
                "`max_retry_after` limits the waits a server asks for (`Retry-After`), and `on = {on}` never retries a failure that carries one: the server received the request"
            ),
        ),
        (
            "layers",
            args.layers == Some(Layers::Every),
            format!(
                "`layers = \"every\"` retries failures that came out of nested `#[retry]` calls, and `on = {on}` never retries those: the nested call's attempts may have taken effect"
            ),
        ),
    ];
    let fix = if safe {
        format!("or drop `on = {on}`, since the function is marked safe to repeat already")
    } else {
        format!(
            "or, if the function is safe to repeat, mark it `#[idempotent]` (or give it a `key = ...`) and drop `on = {on}`"
        )
    };
    for (key, given, why) in idle {
        if let (true, Some(span)) = (given, args.span_of(key)) {
            push(
                errors,
                syn::Error::new(span, format!("{why}; remove `{key}`, {fix}")),
            );
        }
    }
}

/// `hedge` sends a copy of an attempt while the attempt may still be running: the
/// function must be safe to run twice at once (`#[idempotent]`, or a key that every copy
/// sends), async (a blocking call cannot run beside itself), and take no `&mut` (it
/// cannot be lent to two attempts at once).
fn hedge(args: &Args, item: &ItemFn, marked_above: bool, errors: &mut Option<syn::Error>) {
    let Some(hedge) = &args.hedge else {
        if let Some(hedges) = &args.hedges {
            push(
                errors,
                syn::Error::new(
                    hedges.span,
                    "`hedges` caps the copies that `hedge` sends, and `hedge` is not set; add `hedge = \"p95\"` (or a delay such as \"50ms\"), or remove `hedges`",
                ),
            );
        }
        return;
    };
    if let HedgeAt::After(delay) = hedge.value {
        hedge_delay(args, delay, hedge.span, errors);
    }
    if !safe_to_repeat(args, item, marked_above) {
        let unsent = match On::without_effect(args.on.as_ref()) {
            Some((on, proof)) => format!(
                "; `on = {on}` is not enough: a hedge is sent before the first request is known to have failed, let alone {proof}"
            ),
            None => String::new(),
        };
        push(
            errors,
            syn::Error::new(
                hedge.span,
                format!(
                    "`hedge` sends a request again while the first may still be running, so both may take effect: mark the function `#[idempotent]` if running it twice at once is harmless, or take a `key: persevere::IdempotencyKey` parameter that every copy sends, and write `key = key`{unsent}"
                ),
            ),
        );
    }
    if item.sig.asyncness.is_none() {
        push(
            errors,
            syn::Error::new(
                hedge.span,
                "`hedge` needs an `async fn`: a hedge runs beside the attempt it hedges, which a blocking function cannot do; make the function async, or remove `hedge`",
            ),
        );
    }
    hedge_exclusive(item, errors);
}

/// A hedge `delay` no shorter than the call's deadline or the attempt's time limit never
/// sends a copy: the attempt is cut first. Reported at `span`, the hedge's value.
fn hedge_delay(
    args: &Args,
    delay: std::time::Duration,
    span: Span,
    errors: &mut Option<syn::Error>,
) {
    // The deadline as written, or the runtime's default (`Policy::DEFAULT`'s 30 s).
    let (deadline, key) = match &args.deadline {
        Some(deadline) => (deadline.value, "`deadline`"),
        None => (DEFAULT_DEADLINE, "the default `deadline`"),
    };
    let limits = [
        (Some(deadline), key),
        (args.attempt_timeout.map(|t| t.value), "`attempt_timeout`"),
    ];
    for (limit, key) in limits {
        if let Some(limit) = limit {
            if delay >= limit {
                push(
                    errors,
                    syn::Error::new(
                        span,
                        format!(
                            "`hedge` waits {delay:?}, no shorter than {key} ({limit:?}): the attempt is cut before a copy is ever sent; hedge after a delay well below it"
                        ),
                    ),
                );
            }
        }
    }
}

/// Each `&mut` the hedged function takes (the receiver or a parameter), reported at it:
/// it cannot be lent to two copies of an attempt at once.
fn hedge_exclusive(item: &ItemFn, errors: &mut Option<syn::Error>) {
    for input in &item.sig.inputs {
        let exclusive = match input {
            FnArg::Receiver(receiver) => {
                matches!(bare(&receiver.ty), Type::Reference(r) if r.mutability.is_some())
                    .then(|| quote!(#receiver))
            }
            FnArg::Typed(arg) => match bare(&arg.ty) {
                Type::Reference(r) if r.mutability.is_some() => {
                    let ty = &arg.ty;
                    Some(quote!(#ty))
                }
                _ => None,
            },
        };
        if let Some(tokens) = exclusive {
            push(
                errors,
                syn::Error::new_spanned(
                    tokens,
                    "`hedge` runs copies of an attempt at once, and an `&mut` cannot be lent to two of them; take it by `&` (with interior mutability if it must change, or, for a handle that is cheap to clone, such as a tonic client, clone it in the body), or remove `hedge`",
                ),
            );
        }
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
