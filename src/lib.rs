//! Declarative retries that cannot make an outage worse.
//!
//! ```
//! use persevere::{idempotent, retry};
//! # #[derive(Debug)] struct User;
//! # #[derive(Debug)] struct ApiError;
//! # impl persevere::Classify for ApiError {
//! #     fn classify(&self) -> persevere::Class { persevere::Class::Transient }
//! # }
//! # struct Client;
//! # impl Client { async fn get_user(&self, _: u64) -> Result<User, ApiError> { Ok(User) } }
//!
//! #[retry(deadline = "30s", jitter = "full", on = transient)]
//! #[idempotent]
//! async fn fetch_user(client: &Client, id: u64) -> Result<User, ApiError> {
//!     client.get_user(id).await
//! }
//! ```
//!
//! One attribute gives the function exponential backoff with jitter, a total deadline,
//! error classification, server-driven delays, a retry budget and, if asked, a circuit
//! breaker; the compiler refuses to retry a function that is not marked safe to repeat.
//! The README tells the whole story; the pieces are documented where they are defined:
//!
//! - [`retry`](macro@retry) and [`idempotent`](macro@idempotent): the attributes;
//! - [`Classify`] and [`Class`]: which failures a retry can fix;
//! - [`Policy`], [`Jitter`], [`Backoff`]: the schedule of waits;
//! - [`RetryBudget`], [`CircuitBreaker`], [`deadline`]: protection for the fleet;
//! - [`IdempotencyKey`]: what makes a write safe to repeat;
//! - `http` and `reqwest` (cargo features of the same names): HTTP classification,
//!   `Retry-After`, and headers for keys and deadlines.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use persevere_macros::{Classify, idempotent, retry};
#[cfg(feature = "http")]
pub use persevere_runtime::http;
#[cfg(feature = "reqwest")]
pub use persevere_runtime::reqwest;
#[cfg(feature = "rusqlite")]
pub use persevere_runtime::rusqlite;
#[cfg(feature = "tower")]
pub use persevere_runtime::tower;
pub use persevere_runtime::{
    AttemptTimedOut, Backoff, BeforeWait, BreakerSnapshot, BreakerState, BudgetSnapshot,
    CircuitBreaker, CircuitOpen, Class, Classify, Delays, GiveUp, IdempotencyKey, Jitter, Layers,
    ParseKeyError, Permit, Policy, RetryBudget, RetryState, RetryStats, StatsSnapshot, Step,
    retry_blocking, retry_fn, seed_thread_rng,
};
pub use persevere_runtime::{backoff, deadline, stats, telemetry};

#[doc(hidden)]
pub mod __private {
    pub use persevere_runtime::macro_support::*;
}

/// Every code block of the README, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
