//! The failure of an attempt cut off by its time limit.

use std::fmt;
use std::time::Duration;

use crate::classify::{Class, Classify};

/// An attempt ran past its `attempt_timeout` (or past the call's deadline) and was
/// cancelled.
///
/// It counts as a transient failure. A function with `attempt_timeout` set must be able
/// to return it as its own error, through `From<AttemptTimedOut>`:
///
/// ```
/// use persevere_runtime::AttemptTimedOut;
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
}

impl AttemptTimedOut {
    /// An attempt cancelled after `limit`.
    pub const fn after(limit: Duration) -> Self {
        Self { limit }
    }

    /// How long the attempt was allowed to run.
    pub const fn limit(&self) -> Duration {
        self.limit
    }
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the attempt timed out after {:?}", self.limit)
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
        assert_eq!(cut.to_string(), "the attempt timed out after 250ms");
        let io = std::io::Error::from(cut);
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(io.to_string(), "the attempt timed out after 250ms");
    }
}
