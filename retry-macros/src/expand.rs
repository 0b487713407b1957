//! Code generation for `#[retry]`.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, Type};

use crate::args::{self, Args, Jitter, Layers, On, push};
use crate::duration;
use crate::func::{self, RetryFn};
use crate::item::{LightFn, is_attr};

/// Expands `#[retry(args)] item`. On any error, the errors are emitted together with
/// the function as written, so its callers see no cascade of "cannot find function".
pub fn retry(args: TokenStream, written: TokenStream) -> TokenStream {
    let LightFn { item, body } = match LightFn::split(written.clone()) {
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
    // The runtime's support module, `krate::__private`, which the generated code calls.
    let private = match &args.krate {
        Some(krate) => quote!(#krate::__private),
        None => quote!(::persevere::__private),
    };
    check_args(&args, &mut errors);
    let plan = func::analyse(&item, &private, &mut errors);
    check_idempotent(&args, &item, &mut errors);
    let key_check = plan
        .as_ref()
        .and_then(|plan| check_key(&args, plan, &private, &mut errors));
    if let (Some(timeout), None) = (&args.attempt_timeout, &item.sig.asyncness) {
        push(
            &mut errors,
            syn::Error::new(
                timeout.span,
                "`attempt_timeout` needs an `async fn`: a blocking call cannot be cancelled once started; remove it, or make the function async",
            ),
        );
    }
    match (errors, plan) {
        (None, Some(plan)) => generate(&args, &private, plan, body, key_check.unwrap_or_default()),
        (Some(errors), _) => with_item(errors, written),
        (None, None) => unreachable!("analyse reports why it cannot plan"),
    }
}

/// `tokens`, groups included, moved to the location of `span`, so that an error the
/// compiler reports on them points at the user's token rather than at the attribute.
/// Each keeps its own resolution (hygiene), so names still refer to what they did and
/// the compiler still knows generated tokens as generated, not suggesting edits to them.
pub fn locate(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut moved = Group::new(group.delimiter(), locate(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                TokenTree::Group(moved)
            }
            mut token => {
                token.set_span(token.span().located_at(span));
                token
            }
        })
        .collect()
}

fn with_item(errors: syn::Error, item: TokenStream) -> TokenStream {
    let errors = errors.to_compile_error();
    quote! { #errors #item }
}

/// Checks between arguments: the backoff's base against its cap, and an attempt's
/// timeout against the call's deadline. Each error is at a literal the user wrote.
fn check_args(args: &Args, errors: &mut Option<syn::Error>) {
    let show = duration::display;
    match (args.base, args.cap) {
        (Some(base), Some(cap)) if base.value > cap.value => push(
            errors,
            syn::Error::new(
                base.span,
                format!(
                    "`base` ({}) exceeds `cap` ({}); the first wait would already be above the longest allowed, so lower `base` or raise `cap`",
                    show(base.value),
                    show(cap.value),
                ),
            ),
        ),
        (Some(base), None) if base.value > DEFAULT_CAP => push(
            errors,
            syn::Error::new(
                base.span,
                format!(
                    "`base` ({}) exceeds the default `cap` ({}); lower `base`, or raise `cap` to at least `cap = \"{}\"`",
                    show(base.value),
                    show(DEFAULT_CAP),
                    show(base.value),
                ),
            ),
        ),
        (None, Some(cap)) if cap.value < DEFAULT_BASE => push(
            errors,
            syn::Error::new(
                cap.span,
                format!(
                    "`cap` ({}) is below the default `base` ({}); set `base` too, at most `base = \"{}\"`",
                    show(cap.value),
                    show(DEFAULT_BASE),
                    show(cap.value),
                ),
            ),
        ),
        _ => {}
    }
    if let Some(timeout) = args.attempt_timeout {
        let deadline = args.deadline.unwrap_or(DEFAULT_DEADLINE);
        if timeout.value > deadline {
            let whose = if args.deadline.is_some() {
                "the"
            } else {
                "the default"
            };
            push(
                errors,
                syn::Error::new(
                    timeout.span,
                    format!(
                        "`attempt_timeout` ({}) exceeds {whose} `deadline` ({}); every attempt is cut at the deadline anyway, so lower it or raise `deadline`",
                        show(timeout.value),
                        show(deadline),
                    ),
                ),
            );
        }
    }
}

/// The runtime's defaults (`Policy::DEFAULT`, which the README's table also gives), for
/// the checks between arguments.
const DEFAULT_BASE: std::time::Duration = std::time::Duration::from_millis(200);
const DEFAULT_CAP: std::time::Duration = std::time::Duration::from_secs(20);
const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// `#[retry]` repeats the call, so the call must be safe to repeat.
fn check_idempotent(args: &Args, item: &ItemFn, errors: &mut Option<syn::Error>) {
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
fn check_key(
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

/// The policy's settings as written, with `budget = NAME` its budget; the `Site` gives
/// it its statistics, and a budget of the function's own unless it names one.
fn policy(args: &Args, private: &TokenStream) -> TokenStream {
    let duration = |d: std::time::Duration| {
        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
        quote!(#private::Duration::new(#secs, #nanos))
    };
    let mut policy = quote!(#private::Policy::new());
    if let Some(path) = &args.budget {
        let budget = quote_spanned!(path.span()=> &#path);
        policy.extend(quote!(.with_budget(#budget)));
    }
    if let Some(d) = args.deadline {
        let d = duration(d);
        policy.extend(quote!(.with_deadline(#d)));
    }
    if let Some(n) = args.attempts {
        policy.extend(quote!(.with_attempts(#n)));
    }
    if let Some(d) = args.base {
        let d = duration(d.value);
        policy.extend(quote!(.with_base(#d)));
    }
    if let Some(d) = args.cap {
        let d = duration(d.value);
        policy.extend(quote!(.with_cap(#d)));
    }
    if let Some(m) = args.multiplier {
        policy.extend(quote!(.with_multiplier(#m)));
    }
    if let Some(jitter) = args.jitter {
        let j = match jitter {
            Jitter::None => quote!(None),
            Jitter::Full => quote!(Full),
            Jitter::Equal => quote!(Equal),
            Jitter::Decorrelated => quote!(Decorrelated),
        };
        policy.extend(quote!(.with_jitter(#private::Jitter::#j)));
    }
    if let Some(d) = args.attempt_timeout {
        let d = duration(d.value);
        policy.extend(quote!(.with_attempt_timeout(::core::option::Option::Some(#d))));
    }
    if let Some(d) = args.max_retry_after {
        let d = duration(d);
        policy.extend(quote!(.with_max_retry_after(#d)));
    }
    if let Some(path) = &args.breaker {
        let breaker = quote_spanned!(path.span()=> &#path);
        policy.extend(quote!(.with_breaker(#breaker)));
    }
    if let Some(n) = args.uncertain_attempts {
        policy.extend(quote!(.with_uncertain_attempts(#n)));
    }
    if let Some(layers) = args.layers {
        let nesting = match layers {
            Layers::Innermost => quote!(Innermost),
            Layers::Every => quote!(Every),
        };
        policy.extend(quote!(.with_nesting(#private::Nesting::#nesting)));
    }
    policy
}

/// The classifier for `on = ...`, located where a missing impl should be reported: at
/// the `on` value, or at the return type. A function `decide` takes as a pointer: the
/// runtime's own for `transient` and `unsent` (one copy per error type in the build,
/// not one per function), a closure around a predicate.
fn classifier(args: &Args, output: &Type, private: &TokenStream) -> TokenStream {
    let (classifier, span) = match &args.on {
        None => (quote!(#private::by_classify), output.span()),
        Some(On::Transient(span)) => (quote!(#private::by_classify), *span),
        Some(On::Unsent(span)) => (quote!(#private::by_unsent), *span),
        // The error first, so that a predicate of the wrong type is reported against
        // the function's error type.
        Some(On::Predicate(path)) => {
            // Hygienic, so that a predicate the user named `error` is theirs, not this.
            let error = Ident::new("error", Span::mixed_site());
            (
                quote!(|#error| #private::by_predicate(#error, &#path)),
                path.span(),
            )
        }
    };
    locate(classifier, span)
}

// Input:
//
//     #[retry(deadline = "5s")]
//     #[idempotent]
//     async fn fetch(client: &Client, id: u64) -> Result<User, ApiError> { body }
//
// Output, for an async fn that takes no `&mut` and has no `attempt_timeout`, `breaker`
// or `before_wait` (see `one_future`; paths are `::persevere::__private::...`):
//
//     fn fetch(client: &Client, id: u64) -> impl Future<Output = Result<User, ApiError>> {
//         static SITE: Site = Site::new(&SITE, concat!(module_path!(), "::fetch"),
//             Policy::new().with_deadline(Duration::new(5, 0)), true);
//         use idempotent as _; // the `#[idempotent]` read here, its import kept used
//         retrying::<Result<User, ApiError>, _, _, _>(
//             &SITE,
//             move || {
//                 let id = fresh(&id);
//                 async move { body }
//             },
//             by_classify,
//             (&&&Describe::<Result<User, ApiError>>::new()).show(),
//         )
//     }
//
// Otherwise the function keeps its signature and loops in its own body:
//
//     async fn fill(buffer: &mut Vec<u8>) -> Result<usize, ApiError> {
//         static SITE: Site = ...;
//         let mut call = Retry::<TokioClock>::start_lazily(&SITE.policy);
//         loop {
//             let attempt = {
//                 let buffer = &mut *buffer;
//                 let attempt: Attempt<Result<usize, ApiError>> = attempt(&mut call, async {
//                     if false { let fake: Result<usize, ApiError> = loop {}; return fake; }
//                     body
//                 })
//                 .await;
//                 attempt
//             };
//             match decide(
//                 &mut call,
//                 &attempt,
//                 by_classify,
//                 (&&&Describe::of(&attempt)).show(),
//             ) {
//                 Some(wait) => {
//                     sleep(wait).await;
//                     if !resume(&mut call) {
//                         return attempt.outcome; // the deadline passed while waiting
//                     }
//                 }
//                 None => return attempt.outcome,
//             }
//         }
//     }
//
// `budget = NAME` adds `.with_budget(&NAME)` to the policy and makes the site with
// `false` for `true` (no budget of its own); `key = k` adds `idempotency_key(&k);` at
// the top; `breaker = NAME` begins each attempt with `admit`, returning its error while
// the breaker is open; `attempt_timeout` runs the attempt through `attempt_within`;
// `before_wait = hook` calls `hook(&before_wait(&call, &attempt, wait))` before the
// sleep. A plain `fn` starts with `Retry::<SystemClock>::start`, runs
// `attempt_blocking(&mut call, || -> Result<User, ApiError> { body })` per attempt and
// sleeps the thread with `block(wait)`. Internal locals are `Span::mixed_site()`,
// invisible to `body`.
fn generate(
    args: &Args,
    private: &TokenStream,
    plan: RetryFn,
    body: Group,
    key_check: TokenStream,
) -> TokenStream {
    let hidden = |name: &str| Ident::new(name, Span::mixed_site());
    let site = hidden("__PERSEVERE_SITE");
    let call = hidden("__persevere_call");
    let wait = hidden("__persevere_wait");
    let outcome = hidden("__persevere_outcome");
    let fake = hidden("__persevere_fake_return");

    // The function's statics: its policy, with a budget of its own unless it names one.
    let function = &plan.item.sig.ident;
    let site_static = {
        let own_budget = args.budget.is_none();
        let policy = policy(args, private);
        quote! {
            static #site: #private::Site = #private::Site::new(
                &#site,
                ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#function)),
                #policy,
                #own_budget,
            );
        }
    };
    let classify = classifier(args, &plan.output, private);
    let RetryFn {
        item,
        output,
        rebinds,
        exclusive,
        ..
    } = plan;
    let ItemFn {
        mut attrs,
        vis,
        sig,
        ..
    } = item;
    // `#[idempotent]` below `#[retry]` has done its work (it was read above): dropped,
    // it does not expand the generated function a second time for nothing, and a `use`
    // of its path keeps the import of it used.
    let mut marks = TokenStream::new();
    attrs.retain(|attr| {
        let read = is_attr(attr, "idempotent") && matches!(attr.meta, syn::Meta::Path(_));
        if read {
            let path = attr.path();
            marks.extend(quote!(#[allow(unused_imports)] use #path as _;));
        }
        !read
    });
    let key_check = quote!(#marks #key_check);
    let stmts = body.stream();
    let is_async = sig.asyncness.is_some();
    if is_async
        && !exclusive
        && args.attempt_timeout.is_none()
        && args.breaker.is_none()
        && args.before_wait.is_none()
    {
        return one_future(
            private,
            attrs,
            vis,
            sig,
            &output,
            &site_static,
            &site,
            &key_check,
            &classify,
            &rebinds,
            &stmts,
        );
    }
    // An async call starts its clock when it first needs it; a blocking one at once.
    let (clock, start) = if is_async {
        (quote!(TokioClock), quote!(start_lazily))
    } else {
        (quote!(SystemClock), quote!(start))
    };

    let attempt = if is_async {
        // The fake return edge gives the async block the function's return type before
        // its body is checked, so `?` and `return` in the body infer as they would in the
        // function itself. Not `move`: the attempt borrows the arguments of the function
        // it runs in.
        let future = quote! {
            async {
                #[allow(
                    unreachable_code,
                    clippy::diverging_sub_expression,
                    clippy::empty_loop,
                    clippy::let_unit_value,
                    clippy::needless_return
                )]
                if false {
                    let #fake: #output = loop {};
                    return #fake;
                }
                #stmts
            }
        };
        let run = match args.attempt_timeout {
            // Wholly at the literal: a missing `From<AttemptTimedOut>` is reported there.
            Some(timeout) => {
                let timed_out = locate(quote!(#private::timed_out::<#output>), timeout.span);
                quote!(#private::attempt_within(&mut #call, #future, #timed_out))
            }
            None => quote!(#private::attempt(&mut #call, #future)),
        };
        quote! {
            let #outcome: #private::Attempt<#output> = #run.await;
        }
    } else {
        quote! {
            let #outcome: #private::Attempt<#output> =
                #private::attempt_blocking(&mut #call, || -> #output #body);
        }
    };
    // The events show the error by `Display`, else `Debug`, else its type's name; the
    // choice needs the concrete type, so it is made here, by autoref.
    let show = quote! {
        {
            #[allow(unused_imports)]
            use #private::{ShowDebug as _, ShowDisplay as _, ShowOpaque as _};
            (&&&#private::Describe::of(&#outcome)).show()
        }
    };
    // Located at the return type, so that one that is not a `Result` is reported there;
    // the classifier keeps its own location.
    let decide = {
        let mut arguments = locate(quote!(&mut #call, &#outcome,), output.span());
        arguments.extend(quote!(#classify,));
        // Its type names the error type too: located with the rest, so that a return type
        // that is not a `Result` is reported once.
        arguments.extend(locate(show, output.span()));
        let mut arguments = Group::new(Delimiter::Parenthesis, arguments);
        arguments.set_span(Span::call_site().located_at(output.span()));
        let function = locate(quote!(#private::decide), output.span());
        quote!(#function #arguments)
    };
    let hook = match &args.before_wait {
        Some(path) => locate(
            quote!(#path(&#private::before_wait(&#call, &#outcome, #wait));),
            path.span(),
        ),
        None => quote!(),
    };
    let admit = match &args.breaker {
        Some(path) => {
            let admit = locate(
                quote!(#private::admit::<#output, _>(&mut #call)),
                path.span(),
            );
            quote! {
                if let ::core::result::Result::Err(#outcome) = #admit {
                    return #outcome;
                }
            }
        }
        None => quote!(),
    };
    let pause = if is_async {
        quote!(#private::sleep(#wait).await;)
    } else {
        quote!(#private::block(#wait);)
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            #site_static
            #key_check
            let mut #call = #private::Retry::<#private::#clock>::#start(&#site.policy);
            loop {
                // The arguments' copies live only as long as the attempt; the outcome is
                // kept through the wait, to be returned if the deadline passes during it.
                let #outcome = {
                    #admit
                    #(#rebinds)*
                    #attempt
                    #outcome
                };
                match #decide {
                    ::core::option::Option::Some(#wait) => {
                        #hook
                        #pause
                        if !#private::resume(&mut #call) {
                            return #outcome.outcome;
                        }
                    }
                    ::core::option::Option::None => return #outcome.outcome,
                }
            }
        }
    }
}

/// An `async fn` as a function returning the runtime's `retrying` future, which makes
/// each attempt with a closure over the arguments (see the comment above `generate`).
/// The function is then one state machine (its body's) and two small methods, not two
/// state machines, and the loop that drives its attempts is the runtime's, compiled once
/// per return type. A function that takes an `&mut` cannot have its attempts made by a
/// closure (each would borrow from the closure), nor can one with an attempt timeout, a
/// breaker or a `before_wait` hook, which the loop in the function's own body handles;
/// those keep the `async fn`.
#[allow(clippy::too_many_arguments)]
fn one_future(
    private: &TokenStream,
    attrs: Vec<syn::Attribute>,
    vis: syn::Visibility,
    mut sig: syn::Signature,
    output: &Type,
    site_static: &TokenStream,
    site: &Ident,
    key_check: &TokenStream,
    classify: &TokenStream,
    rebinds: &[TokenStream],
    stmts: &TokenStream,
) -> TokenStream {
    sig.asyncness = None;
    // `impl` from this crate, of edition 2024, captures every lifetime of the
    // arguments whatever the edition of the caller's crate.
    // At the return type, where an error about it is reported.
    sig.output = syn::parse2(locate(
        quote!(-> impl ::core::future::Future<Output = #output>),
        output.span(),
    ))
    .expect("a return type");
    // Names the return type, which the attempt's `async` block takes as its output type.
    let retrying = locate(
        quote!(#private::retrying::<#output, _, _, _>),
        output.span(),
    );
    let show = locate(
        quote! {
            {
                #[allow(unused_imports)]
                use #private::{ShowDebug as _, ShowDisplay as _, ShowOpaque as _};
                (&&&#private::Describe::<#output>::new()).show()
            }
        },
        output.span(),
    );
    // The call is located at the return type, so that one that is not a `Result` is
    // reported there; the arguments keep their own locations.
    let mut arguments = Group::new(
        Delimiter::Parenthesis,
        quote! {
            &#site,
            move || {
                #(#rebinds)*
                async move { #stmts }
            },
            #classify,
            #show,
        },
    );
    arguments.set_span(Span::call_site().located_at(output.span()));
    quote! {
        #(#attrs)*
        #vis #sig {
            #site_static
            #key_check
            #retrying #arguments
        }
    }
}
