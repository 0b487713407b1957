//! The runtime of [persevere](https://docs.rs/persevere): retry policy, backoff and
//! jitter, deadlines and classification.
//!
//! Most users reach it through `#[persevere::retry]`; it is usable on its own, without
//! the macros, through [`retry`] and [`retry_blocking`], or piece by piece: a [`Policy`]
//! says what a call may do, a [`Backoff`] yields its waits, a [`RetryState`] decides
//! after each failure whether to wait or give up, and [`Classify`] says which failures a
//! retry can fix.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod attempt;
pub mod backoff;
pub mod batch;
mod breaker;
mod budget;
mod classify;
pub mod deadline;
mod driver;
mod hook;
#[cfg(feature = "http")]
pub mod http;
mod key;
mod layer;
#[doc(hidden)]
pub mod macro_support;
mod policy;
#[cfg(feature = "reqwest")]
pub mod reqwest;
mod rng;
#[cfg(feature = "rusqlite")]
pub mod rusqlite;
pub mod stats;
pub mod telemetry;
mod timeout;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

pub use attempt::{GiveUp, RetryState, Step};
pub use backoff::{Backoff, Delays};
pub use breaker::{BreakerSnapshot, BreakerState, CircuitBreaker, CircuitOpen, Permit};
pub use budget::{BudgetSnapshot, RetryBudget};
pub use classify::{Class, Classify};
pub use driver::{Clock, Retry, SystemClock, TokioClock, retry, retry_blocking};
pub use hook::BeforeWait;
pub use key::{IdempotencyKey, ParseKeyError};
pub use policy::{Jitter, Nesting, Policy};
pub use rng::seed_thread_rng;
pub use stats::{RetryStats, StatsSnapshot};
pub use timeout::AttemptTimedOut;
