//! The function's `Site`, the static that holds its name and its policy: the policy's
//! settings as written, with a budget of the function's own unless it names one.

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::args::parsed::{Args, Jitter, Layers, On};

/// `static site: Site = Site::new(&site, "module::function", policy, own_budget);`.
pub fn site_static(
    args: &Args,
    private: &TokenStream,
    site: &Ident,
    function: &Ident,
) -> TokenStream {
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
}

/// `d` as the runtime's `Duration::new(secs, nanos)`.
pub fn duration(d: Duration, private: &TokenStream) -> TokenStream {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    quote!(#private::Duration::new(#secs, #nanos))
}

/// The policy's settings as written, with `budget = NAME` its budget; the `Site` gives
/// it its statistics, and a budget of the function's own unless it names one.
fn policy(args: &Args, private: &TokenStream) -> TokenStream {
    let duration = |d: Duration| duration(d, private);
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
    match args.on {
        Some(On::Unsent(_)) => policy.extend(quote!(.with_repeat(#private::Repeat::OnlyUnsent))),
        Some(On::NotApplied(_)) => {
            policy.extend(quote!(.with_repeat(#private::Repeat::OnlyNotApplied)));
        }
        _ => {}
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
