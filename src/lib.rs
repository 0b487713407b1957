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
//! See the README for the whole story; the runtime's pieces are documented where they
//! are re-exported below.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use persevere_macros::{idempotent, retry};
pub use persevere_runtime::{
    AttemptTimedOut, Backoff, BreakerSnapshot, BreakerState, BudgetSnapshot, CircuitBreaker,
    CircuitOpen, Class, Classify, Clock, Delays, GiveUp, IdempotencyKey, Jitter, Nesting,
    ParseKeyError, Permit, Policy, Retry, RetryBudget, RetryState, Step, SystemClock, TokioClock,
    backoff, deadline, retry, retry_blocking, seed_thread_rng,
};

#[doc(hidden)]
pub mod __private {
    pub use persevere_runtime::macro_support::*;
}
