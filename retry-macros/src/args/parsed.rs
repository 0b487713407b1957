//! The arguments of `#[retry(...)]` once read: each value in the form the checks and the
//! expansion use, with the span of its tokens where an error may point at it.

use std::time::Duration;

use proc_macro2::Span;
use syn::{Ident, Path};

/// A value with the span of the tokens it was written as.
#[derive(Clone, Copy, Debug)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// Which jitter the user named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    None,
    Full,
    Equal,
    Decorrelated,
}

/// What the function does with failures of nested `#[retry]` calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layers {
    Innermost,
    Every,
}

/// Which failures to retry.
#[derive(Clone)]
pub enum On {
    /// The error type's `Classify` impl decides.
    Transient(Span),
    /// Only failures that prove the request never left.
    Unsent(Span),
    /// Only failures that prove the operation took no effect: never sent, or undone in
    /// full (a transaction rolled back).
    NotApplied(Span),
    /// A user function `fn(&E) -> bool`.
    Predicate(Path),
}

impl On {
    /// A filter that retries only failures without effect, which a function not marked
    /// safe to repeat may use: its keyword, and what its failures prove of the request;
    /// `None` for the others.
    pub fn without_effect(on: Option<&On>) -> Option<(&'static str, &'static str)> {
        match on {
            Some(On::Unsent(_)) => Some(("unsent", "never to have left")),
            Some(On::NotApplied(_)) => Some(("not_applied", "to have taken no effect")),
            _ => None,
        }
    }
}

/// When a slow attempt is hedged: after a delay, or after a percentile of the function's
/// recent attempt latencies (a fraction, 0.95 for `"p95"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeAt {
    After(Duration),
    Percentile(f64),
}

/// The parsed arguments; `None` where the user left the default. A value keeps its span
/// where a later check or the generated code reports an error at it.
#[derive(Default)]
pub struct Args {
    pub deadline: Option<Spanned<Duration>>,
    pub attempts: Option<u32>,
    pub base: Option<Duration>,
    pub cap: Option<Duration>,
    pub multiplier: Option<f64>,
    pub jitter: Option<Jitter>,
    pub on: Option<On>,
    pub attempt_timeout: Option<Spanned<Duration>>,
    pub max_retry_after: Option<Duration>,
    pub uncertain_attempts: Option<u32>,
    pub budget: Option<Path>,
    pub breaker: Option<Path>,
    pub before_wait: Option<Path>,
    pub layers: Option<Layers>,
    pub key: Option<Ident>,
    pub hedge: Option<Spanned<HedgeAt>>,
    pub hedges: Option<Spanned<u32>>,
    pub krate: Option<Path>,
    /// Each key given, with the span of its name: where an error about how it combines
    /// with another key points.
    pub written: Vec<(&'static str, Span)>,
}

impl Args {
    /// The span of the key `name`'s name, if it was given.
    pub fn span_of(&self, name: &str) -> Option<Span> {
        self.written
            .iter()
            .find(|(written, _)| *written == name)
            .map(|(_, span)| *span)
    }
}
