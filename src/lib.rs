// The crate page is the README (its code blocks run as doc tests of the `integration`
// package, which has the crates they use), then a map of the API.
#![cfg_attr(not(doctest), doc = include_str!("../README.md"))]
//!
//! ## The API at a glance
//!
//! - [`retry`](macro@retry), [`idempotent`](macro@idempotent) and
//!   [`Classify`](derive@Classify): the attributes and the derive, each documented with
//!   every option and an example;
//! - [`Classify`] and [`Class`]: which failures a retry can fix;
//! - [`Policy`], [`Jitter`], [`Backoff`]: the schedule of waits;
//! - [`RetryBudget`], [`CircuitBreaker`], [`deadline`]: protection for the fleet;
//! - [`IdempotencyKey`]: what makes a write safe to repeat;
//! - [`stats`] and [`telemetry`]: what retried calls did;
//! - `http`, `reqwest`, `tower`, `rusqlite` and `anyhow` (cargo features of the same
//!   names): HTTP classification, `Retry-After`, headers for keys and deadlines, a tower
//!   layer that installs incoming deadlines, and classification of SQLite and `anyhow`
//!   errors.
//!
//! Without the macros, [`retry_fn`] and [`retry_blocking`] drive a closure with a
//! [`Policy`]. The [`guide`] has each topic of the README at length.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use persevere_macros::{Classify, idempotent, retry};
// `http`, `reqwest`, `rusqlite` and `tower`, as the runtime was built with them (the
// features of the same names here turn them on there); none, without those features.
#[allow(unused_imports)]
pub use persevere_runtime::integrations::*;
pub use persevere_runtime::{
    AttemptTimedOut, Backoff, BeforeWait, BreakerSnapshot, BreakerState, BudgetSnapshot,
    CircuitBreaker, CircuitOpen, Class, Classify, Decision, Delays, GiveUp, IdempotencyKey, Jitter,
    Layers, Limit, ParseKeyError, Permit, Policy, Repeat, RetryBudget, RetryState, RetryStats,
    StatsSnapshot, nested_failure_handled, retry_blocking, retry_fn, seed_thread_rng,
};
pub use persevere_runtime::{attempt, backoff, deadline, stats, telemetry};

pub mod guide;

#[doc(hidden)]
pub mod __private {
    pub use persevere_runtime::macro_support::*;
}

/// The examples of `#[retry]`, `#[idempotent]` and `#[derive(Classify)]`, whose
/// documentation lives in the macro crate (which cannot use itself through this one),
/// compiled and run as doc tests here.
#[cfg(doctest)]
#[doc = include_str!("../retry-macros/doc/retry.md")]
#[doc = include_str!("../retry-macros/doc/idempotent.md")]
#[doc = include_str!("../retry-macros/doc/classify.md")]
pub struct MacroDoctests;
