//! Code generation for `#[retry]`.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, Path, Type};

use crate::args::{self, Args, HedgeAt, Jitter, Layers, On};
use crate::diag::{locate, with_item};
use crate::func::{self, RetryFn};
use crate::item::{LightFn, inner_attributes, is_attr};
use crate::valid;

/// Expands `#[retry(args)] item`. On any error, the errors are emitted together with
/// the function as written, so its callers see no cascade of "cannot find function".
///
/// `written_above` is the path of the `#[retry]` when an `#[idempotent]` written above
/// it expands it (see `idempotent.rs`): the function is then marked safe to repeat, and
/// the path is used in the generated function so that its import stays used.
pub fn retry(args: TokenStream, written: TokenStream, written_above: Option<&Path>) -> TokenStream {
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
    let plan = func::analyse(&item, &private);
    let key_check = plan
        .as_ref()
        .and_then(|plan| valid::key(&args, plan, &private, &mut errors));
    match (errors, plan) {
        (None, Some(plan)) => generate(
            &args,
            &private,
            plan,
            body,
            key_check.unwrap_or_default(),
            written_above,
        ),
        (Some(errors), _) if written_above.is_some() => {
            with_item(errors, as_written(item, &body, written_above))
        }
        (Some(errors), _) => with_item(errors, written),
        (None, None) => unreachable!("valid reports a function without a return type"),
    }
}

/// The function as written, to emit with errors. If an `#[idempotent]` above expanded
/// `#[retry]`, the compiler never resolved that `#[retry]`: a `use` of its path, after
/// the body's inner attributes, keeps its import from being reported unused.
pub fn as_written(item: ItemFn, body: &Group, written_above: Option<&Path>) -> TokenStream {
    let ItemFn {
        attrs, vis, sig, ..
    } = item;
    let Some(path) = written_above else {
        return quote!(#(#attrs)* #vis #sig #body);
    };
    let (mut stream, statements) = inner_attributes(body);
    stream.extend(quote!(#[allow(unused_imports)] use #path as _;));
    stream.extend(statements);
    let mut moved = Group::new(Delimiter::Brace, stream);
    moved.set_span(body.span());
    quote!(#(#attrs)* #vis #sig #moved)
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
        let d = duration(d.value);
        policy.extend(quote!(.with_deadline(#d)));
    }
    if let Some(n) = args.attempts {
        policy.extend(quote!(.with_attempts(#n)));
    }
    if let Some(d) = args.base {
        let d = duration(d);
        policy.extend(quote!(.with_base(#d)));
    }
    if let Some(d) = args.cap {
        let d = duration(d);
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
    if let Some(On::Unsent(_)) = args.on {
        policy.extend(quote!(.with_repeat(#private::Repeat::OnlyUnsent)));
    }
    if let Some(layers) = args.layers {
        let nesting = match layers {
            Layers::Innermost => quote!(Innermost),
            Layers::Every => quote!(Every),
        };
        policy.extend(quote!(.with_layers(#private::Layers::#nesting)));
    }
    policy
}

/// The classifier for `on = ...`, located where a missing impl should be reported: at
/// the `on` value, or at the return type. A function `decide` takes as a pointer: the
/// runtime's own for `transient` and `unsent` (one copy per error type in the build,
/// not one per function; for `unsent`, the policy repeats only unsent attempts), a
/// closure around a predicate.
fn classifier(args: &Args, output: &Type, private: &TokenStream) -> TokenStream {
    let (classifier, span) = match &args.on {
        None => (quote!(#private::by_classify), output.span()),
        Some(On::Transient(span) | On::Unsent(span)) => (quote!(#private::by_classify), *span),
        // The error first, so that a predicate of the wrong type is reported against
        // the function's error type.
        Some(On::Predicate(path)) => {
            // Hygienic, so that a predicate the user named `error` is theirs, not this.
            // Typed, so that a predicate of the wrong type is reported against the
            // function's error type, at the predicate.
            let error = Ident::new("error", Span::mixed_site());
            (
                quote!(|#error: &<#output as #private::Outcome>::Err| #private::by_predicate(#error, &#path)),
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
// Output, for an async fn that takes no `&mut` (paths are `::persevere::__private::...`):
//
//     fn fetch(client: &Client, id: u64) -> impl Future<Output = Result<User, ApiError>> {
//         // the body's inner attributes, `#![...]`, if any
//         static SITE: Site = Site::new(&SITE, concat!(module_path!(), "::fetch"),
//             Policy::new().with_deadline(Duration::new(5, 0)), true);
//         use idempotent as _; // the `#[idempotent]` read here, its import kept used
//         retrying::<Result<User, ApiError>, _, _, _, _, _, _>(
//             &SITE.policy,
//             move || {
//                 let id = fresh(&id);
//                 async move {
//                     if let Some(fake) = None::<Result<User, ApiError>> { return fake; }
//                     body
//                 }
//             },
//             Handling::new(by_classify, (&&&Describe::<Result<User, ApiError>>::new()).show(),
//                 Unused, Unused, Unused),
//         )
//     }
//
// An async fn that takes an `&mut` keeps its signature and loops in its own body, one
// `step` (an attempt and the wait after it) at a time, since a closure cannot lend an
// `&mut` to each attempt in turn; a plain fn does the same with `step_blocking`:
//
//     async fn fill(buffer: &mut Vec<u8>) -> Result<usize, ApiError> {
//         static SITE: Site = ...;
//         let handling: Handling<Result<usize, ApiError>, _, _, _, _> = Handling::new(...);
//         let mut run = pin!(Run::lazy(&SITE.policy));
//         loop {
//             let buffer = &mut *buffer;
//             let attempt = async {
//                 if let Some(fake) = None::<Result<usize, ApiError>> { return fake; }
//                 body
//             };
//             if let Some(outcome) = step(run.as_mut(), attempt, &handling).await {
//                 return outcome;
//             }
//         }
//     }
//
// `budget = NAME` adds `.with_budget(&NAME)` to the policy and makes the site with
// `false` for `true` (no budget of its own); `key = k` adds `idempotency_key(&k);` at
// the top. The other keys fill `Handling`'s hooks, which the driver calls: `breaker =
// NAME` gives `circuit_open::<R>` (located at `NAME`, where a missing conversion is
// reported), `attempt_timeout` gives `timed_out::<R>`, `before_wait = hook` gives `hook`.
// Internal names are `Span::mixed_site()`, invisible to `body`.
fn generate(
    args: &Args,
    private: &TokenStream,
    plan: RetryFn,
    body: Group,
    key_check: TokenStream,
    written_above: Option<&Path>,
) -> TokenStream {
    let hidden = |name: &str| Ident::new(name, Span::mixed_site());
    let site = hidden("__PERSEVERE_SITE");
    let run = hidden("__persevere_run");
    let handling_var = hidden("__persevere_handling");
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
    let handling = handling(
        args,
        &plan.output,
        plan.item.sig.asyncness.is_some(),
        private,
    );
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
        mut sig,
        ..
    } = item;
    // `#[idempotent]` below `#[retry]` has done its work (it was read above): dropped,
    // it does not expand the generated function a second time for nothing, and a `use`
    // of its path keeps the import of it used; likewise the path of a `#[retry]` that an
    // `#[idempotent]` above it expanded, which the compiler never resolved.
    let mut marks = TokenStream::new();
    if let Some(path) = written_above {
        marks.extend(quote!(#[allow(unused_imports)] use #path as _;));
    }
    attrs.retain(|attr| {
        let read = is_attr(attr, "idempotent") && matches!(attr.meta, syn::Meta::Path(_));
        if read {
            let path = attr.path();
            marks.extend(quote!(#[allow(unused_imports)] use #path as _;));
        }
        !read
    });
    // The body's inner attributes go to the top of the generated function, which holds
    // the body; the fake return gives the attempt's async block the function's return
    // type before its body is checked, so `?`, `return` and the tail coerce and infer as
    // they would in the function itself (`Err(Box::new(e))` into a `Box<dyn Error>`).
    // It neither diverges nor needs a lint allowed, which a crate's `forbid` would refuse.
    let (inner, stmts) = inner_attributes(&body);
    let typed = quote! {
        if let ::core::option::Option::Some(#fake) = ::core::option::Option::<#output>::None {
            return #fake;
        }
    };
    let is_async = sig.asyncness.is_some();
    if is_async && !exclusive {
        // One future: the function returns the driver's `Retrying`, which makes each
        // attempt with a closure over the arguments. `impl` from this crate, of edition
        // 2024, captures every lifetime of the arguments whatever the edition of the
        // caller's crate; at the return type, where an error about it is reported.
        sig.asyncness = None;
        sig.output = syn::parse2(locate(
            quote!(-> impl ::core::future::Future<Output = #output>),
            output.span(),
        ))
        .expect("a return type");
        // Names the return type, which the attempt's `async` block takes as its output
        // type; located at it, so that one that is not a `Result` is reported there. A
        // hedged function is driven the same way, its attempts hedged, with a static
        // that says when.
        let (retrying, hedge_static, hedge_arg) = match &args.hedge {
            None => (quote!(#private::retrying), quote!(), quote!()),
            Some(at) => {
                let hedge = hidden("__PERSEVERE_HEDGE");
                let mut spec = match at.value {
                    HedgeAt::After(d) => {
                        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
                        quote!(#private::Hedge::after(#private::Duration::new(#secs, #nanos)))
                    }
                    HedgeAt::Percentile(q) => {
                        let q = proc_macro2::Literal::f64_suffixed(q);
                        quote!(#private::Hedge::percentile(#q))
                    }
                };
                if let Some(n) = &args.hedges {
                    let n = n.value;
                    spec.extend(quote!(.with_hedges(#n)));
                }
                (
                    quote!(#private::hedging),
                    quote!(static #hedge: #private::Hedge = #spec;),
                    quote!(&#hedge,),
                )
            }
        };
        let retrying = locate(
            quote!(#retrying::<#output, _, _, _, _, _, _>),
            output.span(),
        );
        let mut arguments = Group::new(
            Delimiter::Parenthesis,
            quote! {
                &#site.policy,
                #hedge_arg
                move || {
                    #(#rebinds)*
                    async move {
                        #typed
                        #stmts
                    }
                },
                #handling,
            },
        );
        arguments.set_span(Span::call_site().located_at(output.span()));
        return quote! {
            #(#attrs)*
            #vis #sig {
                #inner
                #site_static
                #hedge_static
                #marks
                #key_check
                #retrying #arguments
            }
        };
    }
    // The call is located at the return type, so that the driver's need of an `Outcome`
    // from it is reported there, once; so are the run and the handling it is given (the
    // handling's error type is the `Outcome`'s), while the attempt keeps the body's own.
    let (step, attempt) = if is_async {
        // Not `move`: the attempt borrows the arguments of the function it runs in.
        let attempt = quote! {
            async {
                #typed
                #stmts
            }
        };
        (quote!(#private::step), attempt)
    } else {
        let mut statements = Group::new(Delimiter::Brace, stmts);
        statements.set_span(body.span());
        (
            quote!(#private::step_blocking),
            quote!(|| -> #output #statements),
        )
    };
    let step = {
        let function = locate(step, output.span());
        let run = if is_async {
            locate(quote!(#run.as_mut(),), output.span())
        } else {
            locate(quote!(&mut #run,), output.span())
        };
        let handling = locate(quote!(, &#handling_var), output.span());
        let mut arguments = Group::new(Delimiter::Parenthesis, quote!(#run #attempt #handling));
        arguments.set_span(Span::call_site().located_at(output.span()));
        let await_ = if is_async {
            locate(quote!(.await), output.span())
        } else {
            quote!()
        };
        quote!(#function #arguments #await_)
    };
    let begin = if is_async {
        // Pinned: the call's timer is a tokio `Sleep`.
        quote!(::core::pin::pin!(#private::Run::lazy(&#site.policy)))
    } else {
        quote!(#private::Run::blocking(&#site.policy))
    };
    quote! {
        #(#attrs)*
        #vis #sig {
            #inner
            #site_static
            #marks
            #key_check
            // Its error type is inferred from the attempts given to `step`, which the
            // driver requires to return an `Outcome`: reported there, once, if not.
            let #handling_var = #handling;
            let mut #run = #begin;
            loop {
                // The arguments' copies live only as long as the attempt.
                #(#rebinds)*
                if let ::core::option::Option::Some(#outcome) = #step {
                    return #outcome;
                }
            }
        }
    }
}

/// How the function treats its failures: `Handling::new(classify, show, on_open,
/// on_timeout, before_wait)`, each hook located where a missing conversion or a wrong
/// type is best reported, or `Unused`.
fn handling(args: &Args, output: &Type, is_async: bool, private: &TokenStream) -> TokenStream {
    let classify = classifier(args, output, private);
    // The events show the error by `Display`, else `Debug`, else its type's name; the
    // choice needs the concrete type, so it is made here, by autoref. Located at the
    // return type, with the rest, so that one that is not a `Result` is reported once.
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
    let unused = quote!(#private::Unused);
    // A conversion is a function pointer: named as a function item, its bound would be
    // checked again wherever the item's type is, and a missing `From` reported thrice.
    let on_open = match &args.breaker {
        Some(path) => locate(
            quote!((#private::circuit_open::<#output> as fn(_) -> _)),
            path.span(),
        ),
        None => unused.clone(),
    };
    // An async attempt still running at the deadline (or past its `attempt_timeout`) is
    // cut: its error says so, made from `AttemptTimedOut`, named at the key that sets the
    // limit, or at the return type for the default deadline. A blocking one cannot be cut.
    let on_timeout = match (is_async, &args.attempt_timeout, &args.deadline) {
        (false, ..) => unused.clone(),
        (true, Some(limit), _) | (true, None, Some(limit)) => locate(
            quote!((#private::timed_out::<#output> as fn(_) -> _)),
            limit.span,
        ),
        (true, None, None) => locate(
            quote!((#private::timed_out::<#output> as fn(_) -> _)),
            output.span(),
        ),
    };
    let before_wait = match &args.before_wait {
        Some(path) => quote!(#path),
        None => unused,
    };
    // The call is located at the return type, so that the driver's need of an `Outcome`
    // from it is reported there, with the rest; the arguments keep their own locations.
    let new = locate(quote!(#private::Handling::new), output.span());
    let mut arguments = Group::new(
        Delimiter::Parenthesis,
        quote!(#classify, #show, #on_open, #on_timeout, #before_wait),
    );
    arguments.set_span(Span::call_site().located_at(output.span()));
    quote!(#new #arguments)
}
