//! Which attempt is running: the innermost `#[retry]` call's count, for a request to
//! say that it is a retry (an attempt header, `persevere::http::AttemptHeader`), so that
//! a server can shed retries before first attempts.

use crate::layer::frame;

/// The number of the attempt running now in the innermost `#[retry]` call: 1 for a
/// first attempt, and outside any `#[retry]` call (a request made once is a first
/// attempt); 2 for the first retry, and so on. Code in a
/// [`deadline::scope`](crate::layer::deadline::scope) counts as the attempt it runs in; a
/// nested `#[retry]` call counts its own attempts; a hedged copy counts as the attempt it
/// copies (a copy of a first attempt is 1); a tokio task spawned inside an attempt runs
/// outside it, and is 1, even where a `LocalSet` polls it inside the attempt's poll. A
/// future the attempt blocks on or polls itself is part of the attempt, as are the tasks
/// of another executor, which have no tokio task id to tell them apart.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Mutex;
/// use persevere::{attempt, idempotent, retry};
///
/// #[retry(attempts = 3, base = "1ms")]
/// #[idempotent]
/// async fn flaky(seen: &Mutex<Vec<(u32, Option<u32>)>>) -> std::io::Result<()> {
///     let mut seen = seen.lock().unwrap();
///     seen.push((attempt::number(), attempt::max()));
///     if seen.len() < 3 { Err(std::io::ErrorKind::TimedOut.into()) } else { Ok(()) }
/// }
///
/// let seen = Mutex::new(Vec::new());
/// flaky(&seen).await.unwrap();
/// assert_eq!(*seen.lock().unwrap(), [(1, None), (2, Some(3)), (3, Some(3))]);
/// assert_eq!(attempt::number(), 1);
/// # }
/// ```
pub fn number() -> u32 {
    frame::current_retry().map_or(1, |(number, _)| number)
}

/// The most attempts the innermost `#[retry]` call makes (its `attempts`), known in a
/// retry; `None` in a first attempt (which does not look it up, to stay cheap) and
/// outside any `#[retry]` call.
pub fn max() -> Option<u32> {
    frame::current_retry().map(|(_, max)| max)
}

/// Whether the attempt running now is a retry: [`number`] is 2 or more.
pub fn is_retry() -> bool {
    frame::current_retry().is_some()
}
