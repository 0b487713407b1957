//! The deadline bounds an async call however its time is spent: an attempt still running
//! when the deadline passes is dropped (cancelled), and the call returns the attempt's
//! `AttemptTimedOut`, converted into the function's own error. All in virtual time.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{AttemptTimedOut, Class, Classify, RetryBudget, idempotent, retry};
use tokio::time::Instant;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Counts the attempts started and those that ran to their end (not cancelled).
#[derive(Default)]
struct Attempts {
    started: AtomicU32,
    finished: AtomicU32,
}

impl Attempts {
    fn start(&self) -> u32 {
        self.started.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn finish(&self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn counts(&self) -> (u32, u32) {
        (
            self.started.load(Ordering::SeqCst),
            self.finished.load(Ordering::SeqCst),
        )
    }
}

// The reported case: a 1 s deadline over an attempt that takes 4 s. The call returns at
// 1 s with the attempt's timeout, and the attempt never finishes.
// Can fail: before the deadline cut attempts, the call returned after 4 s with `Ok`.
#[retry(deadline = "1s", budget = UNLIMITED)]
#[idempotent]
async fn slow(attempts: &Attempts) -> io::Result<u32> {
    attempts.start();
    tokio::time::sleep(secs(4)).await;
    attempts.finish();
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_still_running_at_the_deadline_is_cut_there() {
    let attempts = Attempts::default();
    let start = Instant::now();
    let error = slow(&attempts).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(1));
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(attempts.counts(), (1, 0));
}

// A dependency that hangs forever, under the default 30 s deadline.
#[retry(budget = UNLIMITED)]
#[idempotent]
async fn hangs(attempts: &Attempts) -> io::Result<u32> {
    attempts.start();
    std::future::pending::<()>().await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_dependency_that_hangs_is_cut_at_the_default_deadline() {
    let attempts = Attempts::default();
    let start = Instant::now();
    let error = hangs(&attempts).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(30));
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(attempts.counts(), (1, 0));
}

// A later attempt is cut too: the first fails at once, the wait is 1 s, the second hangs
// and is cut at the 5 s deadline, 4 s into it; its timeout says how long it was given.
#[retry(deadline = "5s", base = "1s", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn fails_then_hangs(attempts: &Attempts) -> Result<u32, ApiError> {
    if attempts.start() == 1 {
        return Err(ApiError::Unavailable);
    }
    std::future::pending::<()>().await;
    attempts.finish();
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_later_attempt_is_cut_at_the_deadline_with_what_was_left() {
    let attempts = Attempts::default();
    let start = Instant::now();
    let result = fails_then_hangs(&attempts).await;
    assert_eq!(start.elapsed(), secs(5));
    assert_eq!(
        result,
        Err(ApiError::TimedOut(AttemptTimedOut::after(secs(4))))
    );
    assert_eq!(attempts.counts(), (2, 0));
}

// An error type of the user's own, made able to say "cut short" by `#[timed_out]`.
#[derive(Debug, PartialEq, Classify)]
enum ApiError {
    #[transient]
    Unavailable,
    #[timed_out]
    TimedOut(AttemptTimedOut),
}

#[test]
fn timed_out_under_derive_makes_the_conversion_and_is_transient() {
    let error = ApiError::from(AttemptTimedOut::after(secs(2)));
    assert_eq!(error, ApiError::TimedOut(AttemptTimedOut::after(secs(2))));
    assert_eq!(error.classify(), Class::Transient);
}

// Nested: the inner call runs under what is left of the outer deadline, and its attempt
// is cut there, not at its own 60 s. The outer layer does not retry the inner failure.
#[retry(deadline = "60s", budget = UNLIMITED)]
#[idempotent]
async fn inner_hangs(attempts: &Attempts) -> io::Result<u32> {
    attempts.start();
    std::future::pending::<()>().await;
    Ok(1)
}

#[retry(deadline = "3s", budget = UNLIMITED)]
#[idempotent]
async fn outer(outer: &Attempts, inner: &Attempts) -> io::Result<u32> {
    outer.start();
    tokio::time::sleep(secs(1)).await;
    inner_hangs(inner).await
}

#[tokio::test(start_paused = true)]
async fn a_nested_attempt_is_cut_at_the_outer_deadline() {
    let (outer_attempts, inner_attempts) = (Attempts::default(), Attempts::default());
    let start = Instant::now();
    let error = outer(&outer_attempts, &inner_attempts).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(3));
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(outer_attempts.counts(), (1, 0));
    assert_eq!(inner_attempts.counts(), (1, 0));
}

// An attempt that finishes before the deadline is not disturbed by the timer: 900 ms of
// a 1 s deadline, and the call succeeds.
#[retry(deadline = "1s", budget = UNLIMITED)]
#[idempotent]
async fn just_in_time(attempts: &Attempts) -> io::Result<u32> {
    attempts.start();
    tokio::time::sleep(Duration::from_millis(900)).await;
    attempts.finish();
    Ok(7)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_ends_before_the_deadline_is_left_alone() {
    let attempts = Attempts::default();
    assert_eq!(just_in_time(&attempts).await.unwrap(), 7);
    assert_eq!(attempts.counts(), (1, 1));
}

// A blocking call cannot be cancelled: its attempt runs to its end, and the body reads
// what is left of the deadline for its own timeouts.
#[retry(deadline = "2s", budget = UNLIMITED)]
#[idempotent]
fn blocking_reads_its_deadline(seen: &std::sync::Mutex<Option<Duration>>) -> io::Result<u32> {
    *seen.lock().unwrap() = persevere::deadline::remaining();
    Ok(1)
}

#[test]
fn a_blocking_body_reads_what_is_left_of_its_deadline() {
    let seen = std::sync::Mutex::new(None);
    assert_eq!(blocking_reads_its_deadline(&seen).unwrap(), 1);
    let left = seen
        .lock()
        .unwrap()
        .expect("a blocking call has a deadline");
    assert!(
        left <= secs(2) && left > Duration::from_millis(1500),
        "{left:?}"
    );
}

// A call its caller drops while it waits to retry (the caller's own timeout) gives its
// budget token back: the budget counts the retries made, and none was.
// Can fail: before, five such calls left the budget 5 retries and 5 tokens poorer.
static WAITS: RetryBudget = RetryBudget::new().with_floor(100);

#[retry(base = "1s", jitter = "none", budget = WAITS)]
#[idempotent]
async fn fails_then_waits(attempts: &Attempts) -> io::Result<u32> {
    attempts.start();
    Err(io::ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_while_it_waits_gives_its_retry_back() {
    let attempts = Attempts::default();
    for _ in 0..5 {
        let cut =
            tokio::time::timeout(Duration::from_millis(500), fails_then_waits(&attempts)).await;
        assert!(
            cut.is_err(),
            "the caller's timeout fires during the 1 s wait"
        );
    }
    assert_eq!(attempts.counts(), (5, 0));
    let budget = WAITS.snapshot(Instant::now().into_std());
    assert_eq!(budget.retries, 0, "{budget:?}");
    assert!(budget.tokens >= 99.9, "{budget:?}");
}
