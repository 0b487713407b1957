//! Why a retried call stopped retrying.

use std::fmt;

/// Why a call stopped retrying and returned its last failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GiveUp {
    /// The failure is one a retry cannot fix.
    Permanent,
    /// The policy's backstop on the number of attempts was reached.
    AttemptsExhausted,
    /// The next attempt could not start before the deadline.
    DeadlineExceeded,
    /// The server asked for a wait longer than the policy's `max_retry_after`.
    RetryAfterTooLong,
    /// The failures were of uncertain class (an HTTP 500) for the policy's
    /// `uncertain_attempts` attempts.
    UncertainExhausted,
    /// The retry budget refused the retry: retries are already at their share of
    /// requests, as in an outage.
    BudgetExhausted,
    /// The failure came out of a nested `#[retry]` call, which has already retried it.
    RetriedInside,
    /// The circuit breaker is open: the attempt was not made.
    CircuitOpen,
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GiveUp::Permanent => "the failure is permanent",
            GiveUp::AttemptsExhausted => "the attempts are exhausted",
            GiveUp::DeadlineExceeded => "the deadline leaves no time for another attempt",
            GiveUp::RetryAfterTooLong => "the server asked for a wait beyond max_retry_after",
            GiveUp::UncertainExhausted => "the uncertain failures reached their limit",
            GiveUp::BudgetExhausted => "the retry budget is spent",
            GiveUp::RetriedInside => "a nested retrying call already retried the failure",
            GiveUp::CircuitOpen => "the circuit breaker is open",
        })
    }
}

impl GiveUp {
    /// How many reasons there are: the length of the tables indexed by [`GiveUp::index`].
    pub(crate) const COUNT: usize = 8;

    /// This reason's position in a table of one entry per reason.
    pub(crate) const fn index(self) -> usize {
        match self {
            GiveUp::Permanent => 0,
            GiveUp::AttemptsExhausted => 1,
            GiveUp::UncertainExhausted => 2,
            GiveUp::DeadlineExceeded => 3,
            GiveUp::RetryAfterTooLong => 4,
            GiveUp::BudgetExhausted => 5,
            GiveUp::RetriedInside => 6,
            GiveUp::CircuitOpen => 7,
        }
    }

    #[cfg(feature = "metrics")]
    /// The `reason` label of `persevere_give_ups_total`, by [`GiveUp::index`].
    pub(crate) const LABELS: [&'static str; Self::COUNT] = [
        "permanent",
        "attempts_exhausted",
        "uncertain_exhausted",
        "deadline",
        "retry_after_too_long",
        "budget_refused",
        "retried_inside",
        "circuit_open",
    ];
}
