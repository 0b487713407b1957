//! The grammar of the hedging keys: `hedge`, when a slow attempt gets a copy sent beside
//! it (after a delay, or after a percentile of recent latencies), and `hedges`, how many
//! copies at most.

use std::time::Duration;

use proc_macro2::Span;
use syn::parse::ParseStream;
use syn::{LitInt, LitStr};

use crate::args::parsed::{HedgeAt, Spanned};
use crate::duration;

/// What `hedge` takes, for the errors.
const WHAT: &str = "a delay such as \"50ms\", or a percentile of the function's recent attempt latencies such as \"p95\"";

/// `hedge = "50ms"` or `hedge = "p95"`.
pub fn hedge(input: ParseStream) -> syn::Result<Spanned<HedgeAt>> {
    let lit: LitStr = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), format!("expected {WHAT}, in a string")))?;
    let span = lit.span();
    let text = lit.value();
    let value = if let Some(number) = text.strip_prefix('p') {
        HedgeAt::Percentile(percentile(&text, number, span)?)
    } else {
        if let Some(number) = text.strip_prefix('P') {
            return Err(syn::Error::new(
                span,
                format!("a percentile is written with a small `p`: \"p{number}\""),
            ));
        }
        if let Some(unitless) = unitless(&text, span) {
            return Err(unitless);
        }
        HedgeAt::After(delay(&text, span)?)
    };
    Ok(Spanned { value, span })
}

/// The fraction that `text`, `p` and then `number`, stands for (0.95 for `"p95"`): from
/// the median up to, not including, the slowest attempt.
fn percentile(text: &str, number: &str, span: Span) -> syn::Result<f64> {
    let not_a_percentile = || {
        syn::Error::new(
            span,
            format!(
                "\"{text}\" is not a percentile; write `p` and a number from 50 up to (not including) 100, e.g. \"p95\" or \"p99.9\""
            ),
        )
    };
    // Digits and at most one point: no sign, exponent, `inf` or `NaN`.
    let plain = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.matches('.').count() <= 1;
    let percent: f64 = match number.parse() {
        Ok(percent) if plain => percent,
        _ => return Err(not_a_percentile()),
    };
    if !(50.0..100.0).contains(&percent) {
        let why = if percent >= 100.0 {
            "no attempt is slower than the slowest, so no hedge would ever be sent"
        } else {
            "below the median, most calls would be sent twice"
        };
        return Err(syn::Error::new(
            span,
            format!(
                "`hedge = \"{text}\"`: {why}; write a percentile from p50 up to (not including) p100, e.g. \"p95\" or \"p99.9\""
            ),
        ));
    }
    Ok(percent / 100.0)
}

/// The error for `text` if it is a plain number without a unit: each fix suggested is one
/// that compiles. Anything else that reads as a number (`inf`, `1e3`, `-5`) is left to
/// the duration's own message.
fn unitless(text: &str, span: Span) -> Option<syn::Error> {
    let plain = text.contains(|c: char| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && text.matches('.').count() <= 1;
    let value = text.parse::<f64>().ok().filter(|_| plain)?;
    let percentile = (50.0..100.0).contains(&value);
    // Below a millisecond, tokio's timer cannot wait: a fraction reads as seconds.
    let unit = if value >= 1.0 { "ms" } else { "s" };
    let message = match (percentile, value > 0.0) {
        (true, _) => format!(
            "\"{text}\" has no unit: write a percentile \"p{text}\" or a delay such as \"{text}ms\""
        ),
        (false, true) => {
            format!("\"{text}\" has no unit: write a delay such as \"{text}{unit}\"")
        }
        (false, false) => format!(
            "\"{text}\" has no unit, and `hedge` after no delay would send every request twice; write the time after which an attempt is slow, e.g. \"50ms\", or a percentile such as \"p95\""
        ),
    };
    Some(syn::Error::new(span, message))
}

/// The delay `text` is: a duration no shorter than tokio's timer can wait.
fn delay(text: &str, span: Span) -> syn::Result<Duration> {
    let delay = duration::parse(text)
        .map_err(|m| syn::Error::new(span, format!("{m}; `hedge` takes {WHAT}")))?;
    if delay.is_zero() {
        return Err(syn::Error::new(
            span,
            "`hedge` after no delay would send every request twice; write the time after which an attempt is slow, e.g. \"50ms\", or a percentile such as \"p95\"",
        ));
    }
    if delay < Duration::from_millis(1) {
        return Err(syn::Error::new(
            span,
            format!(
                "`hedge = \"{text}\"` is shorter than tokio's timer can wait (1 ms): the copy would go at 1 ms all the same; write at least \"1ms\", or a percentile such as \"p95\""
            ),
        ));
    }
    Ok(delay)
}

/// `hedges = N`, from 1 to 3.
pub fn hedges(input: ParseStream) -> syn::Result<Spanned<u32>> {
    let message =
        "`hedges` is the most copies of a slow attempt sent beside it: a whole number from 1 to 3";
    let lit: LitInt = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), message))?;
    match lit.base10_parse::<u32>() {
        Ok(n @ 1..=3) => Ok(Spanned {
            value: n,
            span: lit.span(),
        }),
        _ => Err(syn::Error::new(lit.span(), message)),
    }
}
