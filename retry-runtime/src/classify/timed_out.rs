//! The failure of an attempt cut off by its time limit.

use std::fmt;
use std::time::Duration;

use crate::classify::class::{Class, Classify};

/// An attempt ran past its `attempt_timeout`, or past the call's deadline, and was
/// cancelled; [`AttemptTimedOut::cut_by`] says which.
///
/// It counts as a transient failure. The error type of an async retried function must be
/// able to return it as its own error, through `From<AttemptTimedOut>`:
///
/// ```
/// use persevere::AttemptTimedOut;
///
/// #[derive(Debug)]
/// enum ApiError {
///     TimedOut(AttemptTimedOut),
///     // ...
/// }
///
/// impl From<AttemptTimedOut> for ApiError {
///     fn from(e: AttemptTimedOut) -> Self {
///         ApiError::TimedOut(e)
///     }
/// }
/// ```
///
/// `std::io::Error` converts from it already, as an error of kind `TimedOut`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptTimedOut {
    limit: Duration,
    by: Limit,
}

/// The time limit that cut an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The attempt's own `attempt_timeout`: the call may go on with another attempt.
    AttemptTimeout,
    /// The call's deadline (its own, or one it inherited from an enclosing call or
    /// deadline scope): no time is left for another attempt.
    Deadline,
}

impl AttemptTimedOut {
    /// An attempt cancelled at its `attempt_timeout`, after `limit`.
    pub const fn after(limit: Duration) -> Self {
        Self {
            limit,
            by: Limit::AttemptTimeout,
        }
    }

    /// An attempt cancelled at the call's deadline, after `limit`.
    pub const fn at_deadline(limit: Duration) -> Self {
        Self {
            limit,
            by: Limit::Deadline,
        }
    }

    /// How long the attempt was allowed to run.
    pub const fn limit(&self) -> Duration {
        self.limit
    }

    /// Which limit cut it.
    pub const fn cut_by(&self) -> Limit {
        self.by
    }
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.by {
            Limit::AttemptTimeout => write!(
                f,
                "the attempt timed out after {:?} (its attempt_timeout)",
                self.limit
            ),
            Limit::Deadline => write!(
                f,
                "the attempt was cut at the call's deadline, after {:?}",
                self.limit
            ),
        }
    }
}

impl std::error::Error for AttemptTimedOut {}

impl Classify for AttemptTimedOut {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

impl From<AttemptTimedOut> for std::io::Error {
    fn from(e: AttemptTimedOut) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The message a caller logs says what happened and after how long, also through the
    // `io::Error` it is turned into.
    #[test]
    fn it_says_after_how_long_the_attempt_was_cut() {
        let cut = AttemptTimedOut::after(Duration::from_millis(250));
        let said = "the attempt timed out after 250ms (its attempt_timeout)";
        assert_eq!(cut.to_string(), said);
        let io = std::io::Error::from(cut);
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(io.to_string(), said);
    }

    // A cut at the deadline says so, in other words than one at `attempt_timeout`.
    // Can fail: the same words for both (as before).
    #[test]
    fn it_says_which_limit_cut_the_attempt() {
        let cut = AttemptTimedOut::at_deadline(Duration::from_secs(2));
        assert_eq!(cut.cut_by(), Limit::Deadline);
        assert_eq!(cut.limit(), Duration::from_secs(2));
        assert_eq!(
            cut.to_string(),
            "the attempt was cut at the call's deadline, after 2s"
        );
        assert_eq!(
            AttemptTimedOut::after(Duration::from_secs(2)).cut_by(),
            Limit::AttemptTimeout
        );
    }
}
