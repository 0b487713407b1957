//! Events and metrics for retried calls, each behind its cargo feature.
//!
//! # Tracing (feature `tracing`, on by default)
//!
//! Events have the target `persevere`. A call that fails once opens a span `retry`
//! (fields `function`, `deadline_ms`, `max_attempts`, `jitter`) that covers its
//! later attempts and events, so what an attempt logs is tied to its call; a call that
//! succeeds at once makes no span and no event.
//!
//! | event | level | fields |
//! | --- | --- | --- |
//! | an attempt failed and will be retried | `DEBUG` | `attempt`, `error` (its `Display`), `class`, `wait_ms` |
//! | a call succeeded after retries | `DEBUG` | `attempts`, `elapsed_ms` |
//! | a call gave up: attempts or uncertain attempts exhausted, deadline, `Retry-After` too long, budget spent | `WARN` | `attempts`, `elapsed_ms`, `reason`, `error` |
//! | a call gave up: permanent error, breaker open, already retried by a nested call, inside an open transaction | `DEBUG` | the same |
//! | a hedge was sent beside a slow attempt (`hedge = ...`) | `DEBUG` | `function`, `hedge` (1 for the first), `after_ms` |
//! | a hedge succeeded before the attempt it hedged | `DEBUG` | `function`, `latency_ms` |
//! | a circuit breaker opened | `WARN` | `function` |
//! | a circuit breaker closed | `INFO` | `function` |
//!
//! Why these levels: a single retried failure is routine and says little, so it is
//! `DEBUG`; alert on the retry ratio (see [`crate::fleet::stats`]) instead. A call that retries
//! and still fails is the signal that retrying did not help, so it is `WARN`. A permanent
//! error is the caller's to report, with its own context; logging it here too would
//! report it twice.
//!
//! # Metrics (feature `metrics`)
//!
//! Through the [`metrics`](https://docs.rs/metrics) facade, each with the label
//! `function` (the function's path):
//!
//! | name | kind | meaning |
//! | --- | --- | --- |
//! | `persevere_calls_total` | counter | calls, with label `outcome` = `ok` or `error` |
//! | `persevere_attempts_total` | counter | attempts, first ones included |
//! | `persevere_retries_total` | counter | attempts beyond the first |
//! | `persevere_give_ups_total` | counter | failed calls, with label `reason` |
//! | `persevere_budget_refusals_total` | counter | retries the budget refused |
//! | `persevere_breaker_refusals_total` | counter | calls an open breaker refused before any attempt |
//! | `persevere_breaker_transitions_total` | counter | breaker moves, with label `to` = `open` or `closed` |
//! | `persevere_hedges_total` | counter | hedges sent (each also an attempt) |
//! | `persevere_hedges_won_total` | counter | hedges that succeeded before the attempt they hedged |
//! | `persevere_wait_seconds` | histogram | each wait between attempts |
//! | `persevere_attempts_per_success` | histogram | attempts a successful call took |
//!
//! With no recorder installed, each costs one atomic load.

use std::fmt;
use std::time::Duration;

use crate::classify::class::Class;
use crate::classify::give_up::GiveUp;
use crate::fleet::breaker::BreakerState;
use crate::schedule::policy::Policy;

/// The span of a call that has failed at least once; `None` when no subscriber wants it.
#[cfg(feature = "tracing")]
pub(crate) type CallSpan = Option<Box<tracing::Span>>;
#[cfg(not(feature = "tracing"))]
pub(crate) type CallSpan = ();

/// Opens the call's span, `span`, if it has none yet and a subscriber wants it.
#[cfg(feature = "tracing")]
pub(crate) fn open_span(span: &mut CallSpan, policy: &Policy) {
    if span.is_some() {
        return;
    }
    let opened = tracing::debug_span!(
        target: "persevere",
        "retry",
        function = policy.name(),
        deadline_ms = policy.deadline().as_millis() as u64,
        max_attempts = policy.attempts(),
        jitter = ?policy.jitter(),
    );
    *span = (!opened.is_disabled()).then(|| Box::new(opened));
}

/// Without the `tracing` feature there is no span.
#[cfg(not(feature = "tracing"))]
pub(crate) fn open_span(_span: &mut CallSpan, _policy: &Policy) {}

/// Closes the call's span, if it has one.
pub(crate) fn close_span(span: &mut CallSpan) {
    #[cfg(feature = "tracing")]
    drop(span.take());
    let _ = span;
}

/// Whether the call has a span open.
#[inline]
pub(crate) fn is_open(span: &CallSpan) -> bool {
    #[cfg(feature = "tracing")]
    return span.is_some();
    #[cfg(not(feature = "tracing"))]
    {
        let _ = span;
        false
    }
}

/// Runs `f` inside the call's span, if it has one.
#[inline]
fn in_span(span: &CallSpan, f: impl FnOnce()) {
    #[cfg(feature = "tracing")]
    if let Some(span) = span {
        return span.in_scope(f);
    }
    let _ = span;
    f()
}

/// An attempt failed and the call will wait `wait` before the next.
pub(crate) fn retry_scheduled(
    policy: &Policy,
    span: &CallSpan,
    attempt: u32,
    error: &dyn fmt::Display,
    class: Class,
    wait: Duration,
) {
    in_span(span, || {
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "persevere",
            attempt,
            error = %error,
            class = ?class,
            wait_ms = wait.as_millis() as u64,
            "attempt failed; retrying"
        );
    });
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        counter("persevere_attempts_total", &labels.function).increment(1);
        counter("persevere_retries_total", &labels.function).increment(1);
        histogram("persevere_wait_seconds", &labels.function).record(wait.as_secs_f64());
    }
    let _ = (policy, attempt, error, class, wait);
}

/// A call succeeded at its attempt number `attempts`.
#[inline]
pub(crate) fn succeeded(
    policy: &Policy,
    span: &CallSpan,
    attempts: u32,
    elapsed: impl FnOnce() -> Duration,
) {
    #[cfg(feature = "tracing")]
    if attempts > 1 {
        let elapsed_ms = elapsed().as_millis() as u64;
        in_span(span, || {
            tracing::debug!(
                target: "persevere",
                attempts,
                elapsed_ms,
                "succeeded after retrying"
            );
        });
    }
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        counter("persevere_attempts_total", &labels.function).increment(1);
        counter("persevere_calls_total", &labels.ok).increment(1);
        histogram("persevere_attempts_per_success", &labels.function).record(f64::from(attempts));
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (span, elapsed);
    let _ = (policy, attempts);
}

/// A call gave up after `attempts` attempts.
pub(crate) fn gave_up(
    policy: &Policy,
    span: &CallSpan,
    attempts: u32,
    elapsed: Duration,
    reason: GiveUp,
    error: Option<&dyn fmt::Display>,
) {
    in_span(span, || {
        #[cfg(feature = "tracing")]
        {
            let alarming = is_alarming(reason);
            let error = error.map(tracing::field::display);
            let elapsed_ms = elapsed.as_millis() as u64;
            let reason = tracing::field::display(reason);
            if alarming {
                tracing::warn!(target: "persevere", function = policy.name(), attempts, elapsed_ms, %reason, error, "gave up");
            } else {
                tracing::debug!(target: "persevere", function = policy.name(), attempts, elapsed_ms, %reason, error, "gave up");
            }
        }
    });
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        if error.is_some() {
            counter("persevere_attempts_total", &labels.function).increment(1);
        }
        counter("persevere_calls_total", &labels.error).increment(1);
        counter("persevere_give_ups_total", &labels.reasons[reason.index()]).increment(1);
        if reason == GiveUp::BudgetExhausted {
            counter("persevere_budget_refusals_total", &labels.function).increment(1);
        }
        if reason == GiveUp::CircuitOpen {
            counter("persevere_breaker_refusals_total", &labels.function).increment(1);
        }
    }
    let _ = (policy, attempts, elapsed, reason, error);
}

/// A call its caller dropped while it retried, after `attempts` attempts, one of them
/// still running if `in_flight`.
pub(crate) fn abandoned(policy: &Policy, span: &CallSpan, attempts: u32, in_flight: bool) {
    in_span(span, || {
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "persevere",
            function = policy.name(),
            attempts,
            "abandoned by its caller"
        );
    });
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        if in_flight {
            counter("persevere_attempts_total", &labels.function).increment(1);
        }
        counter("persevere_calls_total", &labels.abandoned).increment(1);
    }
    let _ = (policy, attempts, in_flight);
}

/// A hedge, number `hedge` of the attempt, was sent `after` the attempt started.
pub(crate) fn hedge_sent(policy: &Policy, hedge: u32, after: Duration) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "persevere",
        function = policy.name(),
        hedge,
        after_ms = after.as_millis() as u64,
        "slow attempt; hedge sent"
    );
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        counter("persevere_attempts_total", &labels.function).increment(1);
        counter("persevere_hedges_total", &labels.function).increment(1);
    }
    let _ = (policy, hedge, after);
}

/// A hedge succeeded, `latency` after it was sent, before the attempt it hedged.
pub(crate) fn hedge_won(policy: &Policy, latency: Duration) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "persevere",
        function = policy.name(),
        latency_ms = latency.as_millis() as u64,
        "hedge won"
    );
    #[cfg(feature = "metrics")]
    counter("persevere_hedges_won_total", &labels(policy).function).increment(1);
    let _ = (policy, latency);
}

/// A call's result moved its circuit breaker to `state`.
pub(crate) fn breaker_moved(policy: &Policy, state: BreakerState) {
    #[cfg(feature = "tracing")]
    match state {
        BreakerState::Open => {
            tracing::warn!(target: "persevere", function = policy.name(), "circuit breaker opened")
        }
        BreakerState::Closed => {
            tracing::info!(target: "persevere", function = policy.name(), "circuit breaker closed")
        }
        BreakerState::HalfOpen => {}
    }
    #[cfg(feature = "metrics")]
    {
        let labels = labels(policy);
        let to = match state {
            BreakerState::Open => &labels.to_open,
            BreakerState::Closed => &labels.to_closed,
            BreakerState::HalfOpen => &labels.to_half_open,
        };
        counter("persevere_breaker_transitions_total", to).increment(1);
    }
    let _ = (policy, state);
}

#[cfg(feature = "tracing")]
fn is_alarming(reason: GiveUp) -> bool {
    matches!(
        reason,
        GiveUp::AttemptsExhausted
            | GiveUp::UncertainExhausted
            | GiveUp::DeadlineExceeded
            | GiveUp::RetryAfterTooLong
            | GiveUp::BudgetExhausted
    )
}

/// The labels of calls under `policy`: its function's, or those of policies without
/// statistics.
#[cfg(feature = "metrics")]
fn labels(policy: &Policy) -> &'static crate::fleet::stats::MetricLabels {
    static UNNAMED: crate::fleet::stats::MetricLabels =
        crate::fleet::stats::MetricLabels::new("retry");
    match policy.stats() {
        Some(stats) => stats.labels(),
        None => &UNNAMED,
    }
}

#[cfg(feature = "metrics")]
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new("persevere", metrics::Level::INFO, Some("persevere"));

#[cfg(feature = "metrics")]
fn counter(name: &'static str, labels: &'static [metrics::Label]) -> metrics::Counter {
    let key = metrics::Key::from_static_parts(name, labels);
    metrics::with_recorder(|recorder| recorder.register_counter(&key, &METADATA))
}

#[cfg(feature = "metrics")]
fn histogram(name: &'static str, labels: &'static [metrics::Label]) -> metrics::Histogram {
    let key = metrics::Key::from_static_parts(name, labels);
    metrics::with_recorder(|recorder| recorder.register_histogram(&key, &METADATA))
}
