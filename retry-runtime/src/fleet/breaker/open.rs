//! The failure of a call an open breaker refused.

use std::fmt;
use std::time::Duration;

use crate::classify::class::{Class, Classify};

/// A call refused by an open circuit breaker, without running.
///
/// A function with `breaker = ...` must be able to return it as its own error, through
/// `From<CircuitOpen>`; `std::io::Error` converts from it already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitOpen {
    pub(super) retry_in: Duration,
}

impl CircuitOpen {
    /// How long until the breaker lets a probe through; zero when it is half-open and
    /// its probes are taken.
    pub const fn retry_in(&self) -> Duration {
        self.retry_in
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the circuit breaker is open; the next probe in {:?}",
            self.retry_in
        )
    }
}

impl std::error::Error for CircuitOpen {}

/// Never retried: the breaker has already decided the dependency needs a rest.
impl Classify for CircuitOpen {
    fn classify(&self) -> Class {
        Class::Permanent
    }
}

impl From<CircuitOpen> for std::io::Error {
    fn from(e: CircuitOpen) -> Self {
        std::io::Error::other(e)
    }
}
