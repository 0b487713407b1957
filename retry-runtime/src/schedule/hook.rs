//! The hook `#[retry(before_wait = ...)]` calls before each wait.

use std::time::Duration;

/// What a `before_wait` hook is told: which attempt failed, how, and how long the call
/// will now wait. The hook is a plain function, called directly (no boxing):
///
/// ```
/// use persevere::BeforeWait;
///
/// fn log_wait(event: &BeforeWait<'_, std::io::Error>) {
///     eprintln!(
///         "{}: attempt {} failed ({}); retrying in {:?}",
///         event.function, event.attempt, event.error, event.wait
///     );
/// }
/// ```
///
/// used as `#[retry(before_wait = log_wait)]` on a function returning
/// `std::io::Result<T>`; the hook may also be generic over the error type.
#[derive(Debug)]
pub struct BeforeWait<'a, E> {
    /// The retried function's path.
    pub function: &'static str,
    /// The number of the attempt that failed, from 1.
    pub attempt: u32,
    /// Its error.
    pub error: &'a E,
    /// The wait before the next attempt.
    pub wait: Duration,
}
