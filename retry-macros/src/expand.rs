//! Code generation for `#[retry]`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Ident, ItemFn, Path, parse_quote};

use crate::args::{self, Args, Jitter, Layers, On, push};
use crate::duration;
use crate::func::{self, RetryFn};

/// Expands `#[retry(args)] item`. On any error, the errors are emitted together with
/// the function as written, so its callers see no cascade of "cannot find function".
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(e) => {
            let e = syn::Error::new(
                e.span(),
                "`#[retry]` goes on a function with a body: `async fn` or `fn`, free or in an `impl` block",
            );
            return with_item(e, item);
        }
    };
    let (args, mut errors) = args::parse(args);
    let krate = args
        .krate
        .clone()
        .unwrap_or_else(|| parse_quote!(::persevere));
    check_args(&args, &mut errors);
    let plan = func::analyse(&item, &krate, &mut errors);
    check_idempotent(&args, &item, &mut errors);
    let key_check = plan
        .as_ref()
        .and_then(|plan| check_key(&args, plan, &krate, &mut errors));
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
        (None, Some(plan)) => generate(&args, &krate, plan, key_check.unwrap_or_default()),
        (Some(errors), _) => with_item(errors, item.into_token_stream()),
        (None, None) => unreachable!("analyse reports why it cannot plan"),
    }
}

/// `krate::__private` with every token at `span`, so that an error the compiler reports
/// on a call through it points at the user's token rather than at the attribute.
pub fn private_at(krate: &Path, span: Span) -> TokenStream {
    quote!(#krate::__private)
        .into_iter()
        .map(|mut token| {
            token.set_span(span);
            token
        })
        .collect()
}

fn with_item(errors: syn::Error, item: TokenStream) -> TokenStream {
    let errors = errors.to_compile_error();
    quote! { #errors #item }
}

/// Checks between arguments: the backoff's base against its cap.
fn check_args(args: &Args, errors: &mut Option<syn::Error>) {
    let Some(base) = args.base else { return };
    let (cap, default) = match args.cap {
        Some(cap) => (cap.value, false),
        None => (persevere_default_cap(), true),
    };
    if base.value > cap {
        let message = if default {
            format!(
                "`base` ({}) exceeds the default `cap` ({}); lower `base` or raise `cap`, e.g. `cap = \"{}\"`",
                duration::display(base.value),
                duration::display(cap),
                duration::display(base.value * 10),
            )
        } else {
            format!(
                "`base` ({}) exceeds `cap` ({}); the first wait would already be above the longest allowed, so lower `base` or raise `cap`",
                duration::display(base.value),
                duration::display(cap),
            )
        };
        push(errors, syn::Error::new(base.span, message));
    }
}

fn persevere_default_cap() -> std::time::Duration {
    std::time::Duration::from_secs(20)
}

/// `#[retry]` repeats the call, so the call must be safe to repeat.
fn check_idempotent(args: &Args, item: &ItemFn, errors: &mut Option<syn::Error>) {
    let marked = args.idempotent
        || args.key.is_some()
        || matches!(args.on, Some(On::Unsent(_)))
        || item.attrs.iter().any(is_idempotent_attr);
    if !marked {
        push(
            errors,
            syn::Error::new(
                item.sig.ident.span(),
                format!(
                    "`{}` is retried but not marked safe to repeat: a retry may run it twice, and repeating a write that already took effect (a payment, an insert) does it twice\n\
                     = help: if running it twice is harmless, add `#[idempotent]` to the function\n\
                     = help: if it is a write, take a `key: persevere::IdempotencyKey` parameter, send it with the request, and write `#[retry(key = key, ...)]`\n\
                     = help: to retry only failures where the request never left (connection refused), write `#[retry(on = unsent, ...)]`",
                    item.sig.ident
                ),
            ),
        );
    }
}

/// `#[idempotent]` or `#[persevere::idempotent]` among the function's attributes.
fn is_idempotent_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "idempotent")
}

/// `key = name`: `name` is a parameter, and an idempotency key.
fn check_key(
    args: &Args,
    plan: &RetryFn,
    krate: &Path,
    errors: &mut Option<syn::Error>,
) -> Option<TokenStream> {
    let key = args.key.as_ref()?;
    match plan.named.iter().find(|(name, _)| name == key) {
        Some((name, ty)) => {
            let private = private_at(krate, ty.span());
            Some(quote_spanned! {ty.span()=>
                #private::idempotency_key(&#name);
            })
        }
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

fn policy(args: &Args, krate: &Path, budget: &TokenStream, stats: &Ident) -> TokenStream {
    let duration = |d: std::time::Duration| {
        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
        quote!(#krate::__private::Duration::new(#secs, #nanos))
    };
    let mut policy =
        quote!(#krate::__private::Policy::new().with_budget(#budget).with_stats(&#stats));
    if let Some(d) = args.deadline {
        let d = duration(d.value);
        policy.extend(quote!(.with_deadline(#d)));
    }
    if let Some(n) = args.attempts {
        let n = n.value;
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
        let m = m.value;
        policy.extend(quote!(.with_multiplier(#m)));
    }
    if let Some(j) = args.jitter {
        let j = match j.value {
            Jitter::None => quote!(None),
            Jitter::Full => quote!(Full),
            Jitter::Equal => quote!(Equal),
            Jitter::Decorrelated => quote!(Decorrelated),
        };
        policy.extend(quote!(.with_jitter(#krate::__private::Jitter::#j)));
    }
    if let Some(d) = args.attempt_timeout {
        let d = duration(d.value);
        policy.extend(quote!(.with_attempt_timeout(::core::option::Option::Some(#d))));
    }
    if let Some(d) = args.max_retry_after {
        let d = duration(d.value);
        policy.extend(quote!(.with_max_retry_after(#d)));
    }
    if let Some(path) = &args.breaker {
        let breaker = quote_spanned!(path.span()=> &#path);
        policy.extend(quote!(.with_breaker(#breaker)));
    }
    if let Some(n) = args.uncertain_attempts {
        let n = n.value;
        policy.extend(quote!(.with_uncertain_attempts(#n)));
    }
    if let Some(layers) = args.layers {
        let nesting = match layers.value {
            Layers::Innermost => quote!(Innermost),
            Layers::Every => quote!(Every),
        };
        policy.extend(quote!(.with_nesting(#krate::__private::Nesting::#nesting)));
    }
    policy
}

/// The classifier for `on = ...`, spanned where a missing impl should be reported.
fn classifier(args: &Args, plan: &RetryFn, krate: &Path) -> TokenStream {
    match &args.on {
        None => {
            let private = private_at(krate, plan.output.span());
            quote_spanned!(plan.output.span()=> #private::by_classify)
        }
        Some(On::Transient(span)) => {
            let private = private_at(krate, *span);
            quote_spanned!(*span=> #private::by_classify)
        }
        Some(On::Unsent(span)) => {
            let private = private_at(krate, *span);
            quote_spanned!(*span=> #private::by_unsent)
        }
        Some(On::Predicate(path)) => {
            let private = private_at(krate, path.span());
            quote_spanned!(path.span()=> #private::by_predicate(#path))
        }
    }
}

// Input:
//
//     #[retry(deadline = "5s")]
//     #[idempotent]
//     async fn fetch(client: &Client, id: u64) -> Result<User, ApiError> { body }
//
// Output:
//
//     #[idempotent]
//     async fn fetch(client: &Client, id: u64) -> Result<User, ApiError> {
//         static BUDGET: RetryBudget = RetryBudget::new();
//         static POLICY: Policy =
//             Policy::new().with_budget(&BUDGET).with_deadline(Duration::new(5, 0));
//         let mut call = Retry::<TokioClock>::start(&POLICY);
//         loop {
//             let attempt = {
//                 let id = fresh(&id);
//                 let attempt: Attempt<Result<User, ApiError>> =
//                     attempt(&call, async { body }).await;
//                 attempt
//             };
//             match decide(&mut call, &attempt, by_classify, show) {
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
// A plain `fn` runs `attempt_blocking(&call, || -> Result<User, ApiError> { body })`
// per attempt and sleeps the thread. Internal names are `Span::mixed_site()`, invisible to `body`.
fn generate(args: &Args, krate: &Path, plan: RetryFn, key_check: TokenStream) -> TokenStream {
    let hidden = |name: &str| Ident::new(name, Span::mixed_site());
    let policy_name = hidden("__PERSEVERE_POLICY");
    let budget_name = hidden("__PERSEVERE_BUDGET");
    let stats_name = hidden("__PERSEVERE_STATS");
    let call = hidden("__persevere_call");
    let wait = hidden("__persevere_wait");
    let outcome = hidden("__persevere_outcome");
    let fake = hidden("__persevere_fake_return");

    let private = quote!(#krate::__private);
    // Without `budget = NAME`, the function gets a budget of its own.
    let (budget_static, budget) = match &args.budget {
        Some(path) => (quote!(), quote_spanned!(path.span()=> &#path)),
        None => (
            quote!(static #budget_name: #private::RetryBudget = #private::RetryBudget::new();),
            quote!(&#budget_name),
        ),
    };
    let function = &plan.item.sig.ident;
    let stats_static = quote! {
        static #stats_name: #private::RetryStats = #private::RetryStats::new(
            ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#function)),
        );
    };
    let policy = policy(args, krate, &budget, &stats_name);
    let classify = classifier(args, &plan, krate);
    let RetryFn {
        item,
        output,
        rebinds,
        ..
    } = plan;
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let at_output = private_at(krate, output.span());
    let decide = quote_spanned!(output.span()=> #at_output::decide);
    let is_async = sig.asyncness.is_some();
    let clock = if is_async {
        quote!(TokioClock)
    } else {
        quote!(SystemClock)
    };

    let attempt = if is_async {
        // The fake return edge gives the async block the function's return type before
        // its body is checked, so `?` and `return` in the body infer as they would in
        // the function itself.
        let body = quote! {
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
                #block
            }
        };
        let run = if args.attempt_timeout.is_some() {
            quote_spanned!(output.span()=> #at_output::attempt_within)
        } else {
            quote!(#private::attempt)
        };
        quote! {
            let #outcome: #private::Attempt<#output> = #run(&#call, #body).await;
        }
    } else {
        quote! {
            let #outcome: #private::Attempt<#output> =
                #private::attempt_blocking(&#call, || -> #output #block);
        }
    };
    // The events show the error by `Display`, else `Debug`, else its type's name; the
    // choice needs the concrete type, so it is made here, by autoref.
    let show = quote! {
        |error| {
            #[allow(unused_imports)]
            use #private::{ShowDebug as _, ShowDisplay as _, ShowOpaque as _};
            (&&&#private::Describe(error)).shown()
        }
    };
    let hook = match &args.before_wait {
        Some(path) => {
            let at_hook = private_at(krate, path.span());
            quote_spanned! {path.span()=>
                #path(&#at_hook::before_wait(&#call, &#outcome, #wait));
            }
        }
        None => quote!(),
    };
    let admit = match &args.breaker {
        Some(path) => {
            let at_breaker = private_at(krate, path.span());
            let admit = quote_spanned!(path.span()=> #at_breaker::admit::<#output, _>);
            quote! {
                if let ::core::result::Result::Err(#outcome) = #admit(&mut #call) {
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
            #budget_static
            #stats_static
            static #policy_name: #private::Policy = #policy;
            #key_check
            let mut #call = #private::Retry::<#private::#clock>::start(&#policy_name);
            loop {
                // The arguments' copies live only as long as the attempt; the outcome is
                // kept through the wait, to be returned if the deadline passes during it.
                let #outcome = {
                    #admit
                    #(#rebinds)*
                    #attempt
                    #outcome
                };
                match #decide(&mut #call, &#outcome, #classify, #show) {
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
