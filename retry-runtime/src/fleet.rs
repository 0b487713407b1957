//! Protection for the fleet, shared by every call of a function (or a `static`): rolling
//! counts ([`window`]), the retry budget ([`budget`]), the circuit breaker ([`breaker`]),
//! the statistics ([`stats`]) and the per-thread batches that keep first-try successes
//! cheap to count ([`batch`]).

pub(crate) mod batch;
pub(crate) mod breaker;
pub(crate) mod budget;
pub mod stats;
pub(crate) mod window;
