//! The grammar of the keys that shape the schedule: how long the call may take
//! (`deadline`, `attempt_timeout`), how many attempts it makes (`attempts`,
//! `uncertain_attempts`), and how long it waits between them (`base`, `cap`,
//! `multiplier`, `jitter`, `max_retry_after`).

use std::time::Duration;

use syn::parse::ParseStream;
use syn::{LitFloat, LitInt, LitStr};

use crate::args::key::Key;
use crate::args::parsed::{Jitter, Spanned};
use crate::duration;

/// A duration in a string, `"30s"`.
pub fn duration(input: ParseStream) -> syn::Result<Spanned<Duration>> {
    let lit: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a duration in a string, e.g. \"30s\", \"200ms\" or \"1m30s\"",
        )
    })?;
    let value = duration::parse(&lit.value()).map_err(|m| syn::Error::new(lit.span(), m))?;
    Ok(Spanned {
        value,
        span: lit.span(),
    })
}

/// A duration that is not zero, for `key`.
pub fn positive_duration(input: ParseStream, key: &Key) -> syn::Result<Spanned<Duration>> {
    let d = duration(input)?;
    if d.value.is_zero() {
        return Err(syn::Error::new(
            d.span,
            format!("`{}` must be greater than zero; {}", key.name, key.example),
        ));
    }
    Ok(d)
}

/// A count of attempts, the first call included: at least 1.
pub fn attempts(input: ParseStream, key: &Key) -> syn::Result<u32> {
    let lit: LitInt = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("expected a whole number; {}", key.example),
        )
    })?;
    let name = key.name;
    let value: u32 = lit.base10_parse().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`{name}` must be a whole number from 1 to 4294967295"),
        )
    })?;
    if value == 0 {
        let message = if name == "attempts" {
            "`attempts = 0` would never call the function; it counts the first call, so write `attempts = 1` for no retries".to_owned()
        } else {
            format!(
                "`{name}` must be at least 1: it counts the first call too, so write `{name} = 1` to never retry those failures"
            )
        };
        return Err(syn::Error::new(lit.span(), message));
    }
    Ok(value)
}

/// The factor from one wait to the next: a finite number, at least 1.
pub fn multiplier(input: ParseStream) -> syn::Result<f64> {
    let (value, span) = if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    } else if input.peek(LitFloat) {
        let lit: LitFloat = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    } else {
        return Err(syn::Error::new(
            input.span(),
            "expected a number: `multiplier = 2` or `multiplier = 1.5`",
        ));
    };
    if !value.is_finite() {
        return Err(syn::Error::new(
            span,
            "`multiplier` is not a finite number: it is too large for an `f64`; write a factor such as `multiplier = 2`",
        ));
    }
    if value < 1.0 {
        return Err(syn::Error::new(
            span,
            "`multiplier` must be at least 1: waits must not shrink from one retry to the next",
        ));
    }
    Ok(value)
}

/// The jitter's name in a string, `"full"`.
pub fn jitter(input: ParseStream) -> syn::Result<Jitter> {
    const KINDS: &str = "\"none\", \"full\", \"equal\", \"decorrelated\"";
    let lit: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("expected the jitter in a string, one of {KINDS}"),
        )
    })?;
    match lit.value().as_str() {
        "none" => Ok(Jitter::None),
        "full" => Ok(Jitter::Full),
        "equal" => Ok(Jitter::Equal),
        "decorrelated" => Ok(Jitter::Decorrelated),
        other => Err(syn::Error::new(
            lit.span(),
            format!("unknown jitter \"{other}\"; expected one of {KINDS}"),
        )),
    }
}
