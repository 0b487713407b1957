//! The checks of `#[retry]` beyond parsing its arguments: what the function must be, and
//! how the arguments fit it. Each error points at the offending tokens and says what to
//! write.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Signature, Type, TypeParamBound};

use crate::args::{Args, HedgeAt, Layers, On};
use crate::diag::{locate, push};
use crate::func::{RetryFn, bare};
use crate::item::is_attr;

/// The deadline of a call whose attribute names none: the runtime's `Policy::DEFAULT`.
const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Checks the function and the arguments together, adding every problem to `errors`.
/// `marked_above`: an `#[idempotent]` written above `#[retry]` marks the function.
pub fn function(args: &Args, item: &ItemFn, marked_above: bool, errors: &mut Option<syn::Error>) {
    signature(item, errors);
    idempotent(args, item, marked_above, errors);
    unsent(args, safe_to_repeat(args, item, marked_above), errors);
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
    output(sig, errors);
    for input in &sig.inputs {
        if let FnArg::Receiver(receiver) = input {
            if !matches!(bare(&receiver.ty), Type::Reference(_)) {
                // `self: Arc<Self>`, `self: Box<Self>`: the fix keeps the type.
                let message = if receiver.colon_token.is_some() {
                    format!(
                        "`#[retry]` needs the receiver by reference: every attempt uses it, and a `self` taken by value would be used up by the first attempt; take `self: &{}` (clone it inside the body where an attempt needs its own)",
                        as_written(&receiver.ty)
                    )
                } else {
                    "`#[retry]` needs `&self` or `&mut self`: every attempt uses the receiver, and a `self` taken by value would be used up by the first attempt".to_owned()
                };
                push(errors, syn::Error::new(receiver.self_token.span, message));
            }
        }
    }
}

/// The return type, where it is plainly not a `Result`: reported here, once, at the type.
/// The trait the generated code needs of the type would report it too, but names the
/// runtime's internals, and does so at each place the type is used. A type this cannot
/// judge, such as an alias (`io::Result<T>`, `anyhow::Result<T>`, `type Reply = ...`), is
/// left to the trait.
fn output(sig: &Signature, errors: &mut Option<syn::Error>) {
    let ReturnType::Type(_, ty) = &sig.output else {
        return;
    };
    let written = bare(ty);
    let message = if sig.asyncness.is_none() && is_future(written) {
        let what = match written {
            Type::ImplTrait(_) => "`impl Future`",
            _ => "a future",
        };
        format!(
            "`#[retry]` on a function returning {what} is not supported: write it as an `async fn` returning the `Result`"
        )
    } else if !may_be_result(written) {
        "`#[retry]` needs a function that returns `Result`: this type has no `Err`, so no failure can be seen or retried; declare `-> Result<T, E>`".to_owned()
    } else if let Some(opaque) = opaque_within(written) {
        push(
            errors,
            syn::Error::new_spanned(
                opaque,
                "`#[retry]` cannot wrap a function whose result has `impl Trait` in it: each attempt's result passes through the retry driver, which must name its type, and Rust allows `impl Trait` only in a signature; name the type, or box it (`Box<dyn Trait>`)",
            ),
        );
        return;
    } else {
        return;
    };
    push(errors, syn::Error::new_spanned(ty, message));
}

/// `ty` as a user writes it: `Arc<Self>`, not the token stream's `Arc < Self >`.
fn as_written(ty: &Type) -> String {
    let spaced = quote!(#ty).to_string();
    let mut written = String::with_capacity(spaced.len());
    let mut tokens = spaced.split(' ').peekable();
    while let Some(token) = tokens.next() {
        written.push_str(token);
        let next = tokens.peek().copied().unwrap_or_default();
        let joined = ["<", "&", "::", "'"].contains(&token)
            || [">", "<", ",", "::"].contains(&next)
            || next.is_empty();
        if !joined {
            written.push(' ');
        }
    }
    written
}

/// The first `impl Trait` inside `ty`'s generic arguments, tuples, references, arrays
/// and slices (`Result<impl Display, E>`, `io::Result<(u8, impl Debug)>`).
fn opaque_within(ty: &Type) -> Option<&Type> {
    match ty {
        Type::ImplTrait(_) => Some(ty),
        Type::Group(group) => opaque_within(&group.elem),
        Type::Paren(paren) => opaque_within(&paren.elem),
        Type::Reference(reference) => opaque_within(&reference.elem),
        Type::Array(array) => opaque_within(&array.elem),
        Type::Slice(slice) => opaque_within(&slice.elem),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(opaque_within),
        Type::Path(path) => path.path.segments.iter().find_map(|segment| {
            let syn::PathArguments::AngleBracketed(arguments) = &segment.arguments else {
                return None;
            };
            arguments.args.iter().find_map(|argument| match argument {
                syn::GenericArgument::Type(ty) => opaque_within(ty),
                _ => None,
            })
        }),
        _ => None,
    }
}

/// Whether `ty` may be a `Result`: false for the types that plainly are not (`()`, a
/// tuple, a reference, `impl Trait`, a primitive, `String`, `Option<T>`...).
fn may_be_result(ty: &Type) -> bool {
    /// Types of the language and the standard library, by the last segment of their path.
    const NOT_RESULT: &[&str] = &[
        "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64", "String", "Option", "Vec", "Box", "Rc", "Arc", "Cow",
        "HashMap", "HashSet", "BTreeMap", "BTreeSet", "VecDeque",
    ];
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_none_or(|last| !NOT_RESULT.contains(&last.ident.to_string().as_str())),
        Type::Tuple(_)
        | Type::Reference(_)
        | Type::Array(_)
        | Type::Slice(_)
        | Type::Ptr(_)
        | Type::BareFn(_)
        | Type::Never(_)
        | Type::TraitObject(_)
        | Type::ImplTrait(_) => false,
        // An alias, a generic, an associated type, a macro: the trait decides.
        _ => true,
    }
}

/// Whether `ty` is a future: `impl Future<...>`, `Pin<...>` (a boxed future), or a path
/// ending in `Future` (`BoxFuture<'a, T>`).
fn is_future(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(bounds) => bounds.bounds.iter().any(|bound| {
            matches!(bound, TypeParamBound::Trait(t)
                if t.path.segments.last().is_some_and(|s| s.ident == "Future"))
        }),
        Type::Path(path) => {
            path.path.segments.last().is_some_and(|last| {
                last.ident == "Pin" || last.ident.to_string().ends_with("Future")
            })
        }
        _ => false,
    }
}

/// `#[retry]` repeats the call, so the call must be safe to repeat.
/// Only what the user writes marks it: `#[idempotent]` (above `#[retry]`, which
/// `marked_above` says, or below it, among the function's attributes), `key = ...` or
/// `on = unsent`.
fn idempotent(args: &Args, item: &ItemFn, marked_above: bool, errors: &mut Option<syn::Error>) {
    let marked = safe_to_repeat(args, item, marked_above) || matches!(args.on, Some(On::Unsent(_)));
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

/// Whether the function is marked safe to repeat whatever its attempt did:
/// `#[idempotent]` (above `#[retry]`, which `marked_above` says, or below it) or a key.
fn safe_to_repeat(args: &Args, item: &ItemFn, marked_above: bool) -> bool {
    marked_above || args.key.is_some() || item.attrs.iter().any(|attr| is_attr(attr, "idempotent"))
}

/// `on = unsent` retries only the function's own unsent failures (the runtime's
/// `Repeat::OnlyUnsent`): a key that concerns only failures it never retries would do
/// nothing, and is refused at its name, saying why. `safe`: the function is marked safe
/// to repeat besides (`#[idempotent]` or a key).
fn unsent(args: &Args, safe: bool, errors: &mut Option<syn::Error>) {
    if !matches!(args.on, Some(On::Unsent(_))) {
        return;
    }
    let idle = [
        (
            "uncertain_attempts",
            args.uncertain_attempts.is_some(),
            "`uncertain_attempts` limits the retries of failures of uncertain class (an HTTP 500, a connection lost mid-request), and `on = unsent` never retries those: the request may have taken effect",
        ),
        (
            "max_retry_after",
            args.max_retry_after.is_some(),
            "`max_retry_after` limits the waits a server asks for (`Retry-After`), and `on = unsent` never retries a failure that carries one: the server received the request",
        ),
        (
            "layers",
            args.layers == Some(Layers::Every),
            "`layers = \"every\"` retries failures that came out of nested `#[retry]` calls, and `on = unsent` never retries those: the nested call's attempts may have taken effect",
        ),
    ];
    let fix = if safe {
        "or drop `on = unsent`, since the function is marked safe to repeat already"
    } else {
        "or, if the function is safe to repeat, mark it `#[idempotent]` (or give it a `key = ...`) and drop `on = unsent`"
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
    // A delay no shorter than the call's deadline or the attempt's time limit never sends
    // a copy: the attempt is cut first.
    if let HedgeAt::After(delay) = hedge.value {
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
                            hedge.span,
                            format!(
                                "`hedge` waits {delay:?}, no shorter than {key} ({limit:?}): the attempt is cut before a copy is ever sent; hedge after a delay well below it"
                            ),
                        ),
                    );
                }
            }
        }
    }
    if !safe_to_repeat(args, item, marked_above) {
        let unsent = if matches!(args.on, Some(On::Unsent(_))) {
            "; `on = unsent` is not enough: a hedge is sent before the first request is known to have failed, let alone never to have left"
        } else {
            ""
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
                    "`hedge` runs copies of an attempt at once, and an `&mut` cannot be lent to two of them; take it by `&` (with interior mutability if it must change), or remove `hedge`",
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
