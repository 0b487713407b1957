//! Code generation for `#[retry]`: the function's `Site` ([`site`]) and `Handling`
//! ([`handling`]), the pieces both expansions share ([`parts`]), and the two expansions:
//! one future for an async fn that takes no `&mut` ([`future`]), a loop in the
//! function's own body for the others ([`steps`]). This file checks the function and
//! picks the expansion.

mod future;
mod handling;
mod opaque;
mod parts;
mod site;
mod steps;

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream};
use quote::quote;
use syn::{ItemFn, Path};

use crate::args;
use crate::args::parsed::Args;
use crate::diag::with_item;
use crate::expand::parts::Parts;
use crate::func::{self, RetryFn};
use crate::item::{LightFn, RETRY_MARK, inner_attributes, is_attr, is_retry_mark, resolving};
use crate::valid;

/// Expands `#[retry(args)] item`. On any error, the errors are emitted together with
/// the function as written, so its callers see no cascade of "cannot find function".
///
/// `written_above` is the path of the `#[retry]` when an `#[idempotent]` written above
/// it expands it (see `idempotent.rs`): the function is then marked safe to repeat, and
/// the path is used in the generated function so that its import stays used.
pub fn retry(args: TokenStream, written: TokenStream, written_above: Option<&Path>) -> TokenStream {
    if args.is_empty() && is_retry_mark(&written) {
        return written;
    }
    let LightFn { mut item, body } = match LightFn::split(written.clone()) {
        Ok(function) => function,
        Err(e) => {
            let e = syn::Error::new(
                e.span(),
                "`#[retry]` goes on a function with a body: `async fn` or `fn`, free or in an `impl` block",
            );
            return with_item(e, written);
        }
    };
    let (args, mut errors) = args::parse(args);
    let savepoints = func::take_savepoints(&mut item, &mut errors);
    // A second `#[retry]` below this one would wrap the function this one generates. It
    // is reported alone, and the function is emitted without either, so that the second
    // one does not report again what this one would.
    if let Some(second) = item.attrs.iter().find(|attr| is_attr(attr, "retry")) {
        let mut twice = syn::Error::new_spanned(
            second,
            "`#[retry]` is given twice; merge the arguments into one `#[retry(...)]`",
        );
        if let Some(e) = errors {
            twice.combine(e);
        }
        let mut item = item;
        item.attrs.retain(|attr| !is_attr(attr, "retry"));
        return with_item(twice, as_written(item, &body, written_above));
    }
    // The runtime's support module, `krate::__private`, which the generated code calls.
    let private = match &args.krate {
        Some(krate) => quote!(#krate::__private),
        None => quote!(::persevere::__private),
    };
    valid::function(&args, &item, written_above.is_some(), &mut errors);
    let mut plan = func::analyse(&item, &private, &savepoints);
    let key_check = plan
        .as_ref()
        .and_then(|plan| valid::key(&args, plan, &private, &mut errors));
    let checks = match &mut plan {
        Some(plan) => {
            let mut checks = key_check.unwrap_or_default();
            checks.extend(std::mem::take(&mut plan.outside_transaction));
            checks
        }
        None => TokenStream::new(),
    };
    match (errors, plan) {
        (None, Some(plan)) => generate(&args, &private, plan, body, checks, written_above),
        (Some(errors), _) if written_above.is_some() => {
            with_item(errors, as_written(item, &body, written_above))
        }
        // Without `#[savepoint]`, which the compiler does not know.
        (Some(errors), _) => with_item(errors, as_written(item, &body, None)),
        (None, None) => unreachable!("valid reports a function without a return type"),
    }
}

/// The function as written, to emit with errors. If an `#[idempotent]` above expanded
/// `#[retry]`, the compiler never resolved that `#[retry]`: an item that resolves its
/// path, after the body's inner attributes, keeps its import from being reported unused.
pub fn as_written(item: ItemFn, body: &Group, written_above: Option<&Path>) -> TokenStream {
    let ItemFn {
        attrs, vis, sig, ..
    } = item;
    let Some(path) = written_above else {
        return quote!(#(#attrs)* #vis #sig #body);
    };
    let (mut stream, statements) = inner_attributes(body);
    stream.extend(resolving(path, RETRY_MARK));
    stream.extend(statements);
    let mut moved = Group::new(Delimiter::Brace, stream);
    moved.set_span(body.span());
    quote!(#(#attrs)* #vis #sig #moved)
}

// Input: `#[retry(args)]` on a checked function. Output: one future (`future.rs`) for an
// async fn that takes no `&mut`, else a loop in the function's own body (`steps.rs`).
//
// Both give the function a `Site` static, its policy as written: `budget = NAME` adds
// `.with_budget(&NAME)` to the policy and makes the site with `false` for `true` (no
// budget of its own); `key = k` adds `idempotency_key(&k);` at the top, and each
// parameter not marked `#[savepoint]` a check that it is not an open transaction
// (`outside_transaction`, at the parameter), whose findings the handling is given
// (`.with_transactions(facts)`). The other keys
// fill `Handling`'s hooks, which the driver calls: `breaker = NAME` gives
// `circuit_open::<R>` (located at `NAME`, where a missing conversion is reported),
// `attempt_timeout` gives `timed_out::<R>`, `before_wait = hook` gives `hook`. Internal
// names are `Span::mixed_site()`, invisible to `body`.
fn generate(
    args: &Args,
    private: &TokenStream,
    plan: RetryFn,
    body: Group,
    checks: TokenStream,
    written_above: Option<&Path>,
) -> TokenStream {
    let probed = plan.probed;
    let mut parts = Parts::new(args, private, plan, &body, checks, written_above);
    if probed {
        // What the parameters' probes found (`func::outside_transaction`), for the
        // driver: a call given a connection inside a transaction does not retry.
        let handling = &parts.handling;
        let facts = Ident::new(func::TRANSACTION_FACTS, Span::mixed_site());
        parts.handling = quote!(#handling.with_transactions(#facts));
    }
    if parts.sig.asyncness.is_some() && !parts.exclusive {
        future::expand(args, private, parts)
    } else {
        steps::expand(private, parts)
    }
}
