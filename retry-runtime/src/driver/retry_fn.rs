//! Retrying a closure: what `#[retry]` does, without the macros.

use std::future::Future;

use crate::classify::class::Classify;
use crate::classify::timed_out::AttemptTimedOut;
use crate::driver::handling::{Handling, Unused, ViaDebug};
use crate::driver::retrying::retrying;
use crate::driver::run::Run;
use crate::driver::step::step_blocking;
use crate::fleet::breaker::CircuitOpen;
use crate::schedule::policy::Policy;

/// Retries the async operation `op` under `policy`, classifying failures with their
/// [`Classify`] impl; what `#[retry]` does, without the macro. The error type must be
/// able to report a timed-out attempt and an open circuit breaker, as `std::io::Error`
/// does.
///
/// `op` is called once per attempt: the first time at once, then when the wait before
/// the attempt is over; after an attempt cut at its time limit (`attempt_timeout`),
/// when the wait begins, so that the cut attempt's future is dropped at once. Waits use
/// tokio's timer, so the future must be polled inside a tokio runtime with the `time`
/// driver enabled.
///
/// ```
/// use std::io;
/// use persevere::{Policy, retry_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # tokio::time::pause();
/// static POLICY: Policy = Policy::new();
/// let mut calls = 0;
/// let answer = retry_fn(&POLICY, || {
///     calls += 1;
///     let fail = calls < 3;
///     async move {
///         if fail { Err(io::Error::from(io::ErrorKind::ConnectionReset)) } else { Ok(42) }
///     }
/// })
/// .await;
/// assert_eq!(answer.unwrap(), 42);
/// assert_eq!(calls, 3);
/// # }
/// ```
pub fn retry_fn<T, E, F, Fut>(policy: &Policy, op: F) -> impl Future<Output = Result<T, E>>
where
    E: Classify + std::fmt::Debug + From<AttemptTimedOut> + From<CircuitOpen>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retrying(
        policy,
        op,
        Handling::new(
            |error: &E| error.classify(),
            ViaDebug,
            |open| Err(E::from(open)),
            |timeout| Err(E::from(timeout)),
            Unused,
        ),
    )
}

/// Retries the blocking operation `op` under `policy`, sleeping the thread between
/// attempts; what `#[retry]` does on a plain function, without the macro.
///
/// The policy's attempt timeout does not apply: a blocking call cannot be cancelled.
///
/// ```
/// use std::{io, time::Duration};
/// use persevere::{Policy, retry_blocking};
///
/// static POLICY: Policy = Policy::new().with_base(Duration::from_millis(1));
/// let mut calls = 0;
/// let answer: io::Result<u32> = retry_blocking(&POLICY, || {
///     calls += 1;
///     if calls < 2 { Err(io::ErrorKind::TimedOut.into()) } else { Ok(7) }
/// });
/// assert_eq!(answer.unwrap(), 7);
/// assert_eq!(calls, 2);
/// ```
pub fn retry_blocking<T, E, F>(policy: &Policy, mut op: F) -> Result<T, E>
where
    E: Classify + std::fmt::Debug + From<CircuitOpen>,
    F: FnMut() -> Result<T, E>,
{
    let handling = Handling::new(
        |error: &E| error.classify(),
        ViaDebug,
        |open| Err(E::from(open)),
        Unused,
        Unused,
    );
    let mut run = Run::blocking(policy);
    loop {
        if let Some(outcome) = step_blocking(&mut run, &mut op, &handling) {
            return outcome;
        }
    }
}
