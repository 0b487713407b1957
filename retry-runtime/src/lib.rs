//! The runtime of [persevere](https://docs.rs/persevere): retry policy, backoff and
//! jitter, deadlines and classification.
//!
//! Most users reach it through `#[persevere::retry]`; it is usable on its own, without
//! the macros, through [`retry_fn`] and [`retry_blocking`], or piece by piece: a [`Policy`]
//! says what a call may do, a [`Backoff`] yields its waits, a [`RetryState`] decides
//! after each failure whether to wait or give up, and [`Classify`] says which failures a
//! retry can fix.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// Each module imports only those below it, in the order `tests/layering.rs` checks.
pub mod attempt;
pub mod backoff;
mod batch;
mod breaker;
mod budget;
mod call;
mod classify;
mod clock;
pub mod deadline;
mod give_up;
mod handling;
mod hedge;
mod hedging;
mod hook;
#[cfg(feature = "http")]
pub mod http;
mod key;
mod latency;
mod layer;
mod limit;
#[doc(hidden)]
pub mod macro_support;
mod policy;
#[cfg(feature = "reqwest")]
pub mod reqwest;
mod retry_fn;
mod rng;
mod run;
#[cfg(feature = "rusqlite")]
pub mod rusqlite;
mod state;
pub mod stats;
mod step;
pub mod telemetry;
mod timeout;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

/// The optional integrations this build of the runtime has, whichever crate's features
/// turned them on: `persevere` re-exports them from here, so that its modules `http`,
/// `reqwest`, `rusqlite` and `tower` follow the runtime's features.
#[doc(hidden)]
pub mod integrations {
    #[cfg(feature = "http")]
    pub use crate::http;
    #[cfg(feature = "reqwest")]
    pub use crate::reqwest;
    #[cfg(feature = "rusqlite")]
    pub use crate::rusqlite;
    #[cfg(feature = "tower")]
    pub use crate::tower;
}

pub use backoff::{Backoff, Delays};
pub use breaker::{BreakerSnapshot, BreakerState, CircuitBreaker, CircuitOpen, Permit};
pub use budget::{BudgetSnapshot, RetryBudget};
pub use classify::{Class, Classify};
pub use give_up::GiveUp;
pub use hook::BeforeWait;
pub use key::{IdempotencyKey, ParseKeyError};
pub use layer::nested_failure_handled;
pub use policy::{Jitter, Layers, Policy, Repeat};
pub use retry_fn::{retry_blocking, retry_fn};
pub use rng::seed_thread_rng;
pub use state::{RetryState, Step};
pub use stats::{RetryStats, StatsSnapshot};
pub use timeout::{AttemptTimedOut, Limit};
