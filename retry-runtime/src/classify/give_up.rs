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
    /// The attempt may have taken effect, and the function repeats only attempts that
    /// provably did not ([`Repeat::OnlyUnsent`](crate::Repeat::OnlyUnsent), `on =
    /// unsent`, or [`Repeat::OnlyNotApplied`](crate::Repeat::OnlyNotApplied), `on =
    /// not_applied`): its failure was not of a class the policy admits, it was cut at
    /// its time limit, or it came out of a nested retried call.
    MayHaveTakenEffect,
    /// The circuit breaker was open when the call began: no attempt was made, and the
    /// call returned [`crate::CircuitOpen`].
    CircuitOpen,
    /// The circuit breaker opened during the call (on its failure, or on others' while
    /// it waited): the next attempt was not made, and the call returned its last
    /// failure.
    BreakerOpened,
    /// The function was called inside an open database transaction, through a
    /// connection parameter whose driver says so (rusqlite's `Connection`, sqlx's
    /// `PgConnection`; see `TransactionAware`, feature `transactions`): a statement
    /// that failed there aborted the transaction or left it to its caller, so the call
    /// returned its first failure, for the function that began the transaction to retry
    /// whole.
    InsideTransaction,
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
            GiveUp::MayHaveTakenEffect => {
                "the attempt may have taken effect, and only one that provably did not is safe to repeat"
            }
            GiveUp::CircuitOpen => "the circuit breaker is open",
            GiveUp::BreakerOpened => "the circuit breaker opened",
            GiveUp::InsideTransaction => {
                "the connection is inside an open transaction: retry the whole transaction, where it began"
            }
        })
    }
}

impl GiveUp {
    /// How many reasons there are: the length of the tables indexed by [`GiveUp::index`].
    pub(crate) const COUNT: usize = 11;

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
            GiveUp::BreakerOpened => 8,
            GiveUp::MayHaveTakenEffect => 9,
            GiveUp::InsideTransaction => 10,
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
        "breaker_opened",
        "may_have_taken_effect",
        "inside_transaction",
    ];
}
