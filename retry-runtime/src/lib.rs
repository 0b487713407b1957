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

// The rooms, lowest first; each module imports only modules below it, in the order
// `checks/layering` holds (rustfmt sorts these lines):
// `classify` (what a failure means), `time`, `layer` (the enclosing call, its deadline),
// `fleet` (window, budget, breaker, stats), `schedule` (policy, backoff, the decision
// after a failure), `driver` (the call and the loop that runs it), `hedge`,
// `integrations`, and `macro_support` (what generated code calls). `key` and `rng` are
// leaves any room may use.
mod classify;
mod driver;
mod fleet;
mod hedge;
#[doc(hidden)]
pub mod integrations;
mod key;
mod layer;
#[doc(hidden)]
pub mod macro_support;
mod rng;
mod schedule;
mod time;

pub use driver::telemetry;
pub use fleet::stats;
pub use layer::{attempt, deadline};
pub use schedule::backoff;

pub use classify::class::{Class, Classify};
pub use classify::give_up::GiveUp;
pub use classify::timed_out::{AttemptTimedOut, Limit};
pub use driver::retry_fn::{retry_blocking, retry_fn};
pub use fleet::breaker::{BreakerSnapshot, BreakerState, CircuitBreaker, CircuitOpen, Permit};
pub use fleet::budget::{BudgetSnapshot, RetryBudget};
pub use fleet::stats::{RetryStats, StatsSnapshot};
#[cfg(feature = "transactions")]
pub use integrations::transaction::{OpenTransaction, TransactionAware};
pub use key::{IdempotencyKey, ParseKeyError};
pub use layer::frame::nested_failure_handled;
pub use rng::seed_thread_rng;
pub use schedule::backoff::{Backoff, Delays};
pub use schedule::hook::BeforeWait;
pub use schedule::policy::{Jitter, Layers, Policy, Repeat};
pub use schedule::state::{Decision, RetryState};
