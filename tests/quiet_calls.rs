//! The attribute tells the truth for a quiet function: a call after quiet (a fresh
//! process, or minutes without calls, even after an outage drained the budget) makes
//! every attempt its attribute allows, and a rare caller gets the retries it needs.
//! Under tokio's paused clock, with each function's own default budget.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{Policy, idempotent, retry, retry_fn};

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

/// Counts the attempts of the calls a test makes.
struct Attempts(AtomicU32);

impl Attempts {
    const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    /// One attempt: its number since the last `take`.
    fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The attempts since the last `take`.
    fn take(&self) -> u32 {
        self.0.swap(0, Ordering::SeqCst)
    }
}

static LONE: Attempts = Attempts::new();

#[retry(base = "100ms", jitter = "none")]
#[idempotent]
async fn lone() -> io::Result<()> {
    LONE.next();
    Err(reset())
}

static LONE_NINE: Attempts = Attempts::new();

#[retry(attempts = 9, base = "100ms", cap = "1s", jitter = "none")]
#[idempotent]
async fn lone_nine() -> io::Result<()> {
    LONE_NINE.next();
    Err(reset())
}

// The first call of a fresh process makes every attempt its attribute allows: the
// default 6, or the 9 it says.
// Can fail: a fresh budget holding the old reserve of 2 (3 attempts).
#[tokio::test(start_paused = true)]
async fn a_lone_call_in_a_fresh_process_makes_every_attempt() {
    lone().await.unwrap_err();
    assert_eq!(LONE.take(), 6);
    lone_nine().await.unwrap_err();
    assert_eq!(LONE_NINE.take(), 9);
}

static DRAINED: Attempts = Attempts::new();

#[retry(base = "100ms", jitter = "none")]
#[idempotent]
async fn drained() -> io::Result<()> {
    DRAINED.next();
    Err(reset())
}

// An outage, a call a second, drains the budget until calls get no retry; after 5
// minutes of quiet, a lone call makes all 6 attempts again.
// Can fail: a reserve refilled only by requests (1 attempt after the quiet).
#[tokio::test(start_paused = true)]
async fn a_lone_call_after_an_outage_and_quiet_makes_every_attempt() {
    persevere::seed_thread_rng(11);
    let mut calls = 0;
    loop {
        drained().await.unwrap_err();
        calls += 1;
        if DRAINED.take() == 1 {
            break;
        }
        assert!(calls < 100, "the budget never ran dry");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(300)).await;
    drained().await.unwrap_err();
    assert_eq!(DRAINED.take(), 6);
}

static RARE: Attempts = Attempts::new();

/// Its dependency fails twice, then answers.
#[retry(base = "100ms", jitter = "none")]
#[idempotent]
async fn rare() -> io::Result<u32> {
    let attempt = RARE.next();
    if attempt <= 2 {
        return Err(reset());
    }
    Ok(attempt)
}

// Called once a minute, each call failing twice before it succeeds: every one of 30
// calls succeeds.
// Can fail: no refill with time (1 of 30 succeeded on the old budget).
#[tokio::test(start_paused = true)]
async fn a_caller_once_a_minute_succeeds_every_time() {
    persevere::seed_thread_rng(12);
    let mut succeeded = 0;
    for _ in 0..30 {
        if matches!(rare().await, Ok(3)) {
            succeeded += 1;
        }
        RARE.take();
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert_eq!(succeeded, 30);
}

// `retry_fn` with `Policy::new()` (the budget of policies that name none, with the
// default reserve of 5) keeps the same promise for a lone call.
#[tokio::test(start_paused = true)]
async fn retry_fn_with_the_default_policy_makes_every_attempt() {
    static POLICY: Policy = Policy::new().with_base(Duration::from_millis(100));
    let attempts = AtomicU32::new(0);
    let outcome: io::Result<()> = retry_fn(&POLICY, || {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err(reset()) }
    })
    .await;
    outcome.unwrap_err();
    assert_eq!(attempts.load(Ordering::SeqCst), 6);
}

static HISTORY: persevere::RetryBudget = persevere::RetryBudget::new();
static HISTORY_ATTEMPTS: Attempts = Attempts::new();

/// Succeeds or fails at once, as told; no wait between attempts.
#[retry(base = "0s", budget = HISTORY)]
#[idempotent]
async fn after_history(fail: bool) -> io::Result<()> {
    HISTORY_ATTEMPTS.next();
    if fail { Err(reset()) } else { Ok(()) }
}

// The exact bound (Finagle's: retries over n failing calls = ratio x n + what the budget
// held, within one), through `#[retry]` and its batches, after a burst of 20,000 calls
// that succeeded and then an hour of quiet: 10,000 failing calls a millisecond apart
// retry 1,000 + the reserve of 5 times. A second outage 5 s after the first, the budget
// still busy and spent, gets the 1,000 alone.
// Can fail: the burst's 2,000 tokens kept (3,000 retries).
#[tokio::test(start_paused = true)]
async fn the_exact_bound_holds_after_a_burst_and_after_quiet() {
    persevere::seed_thread_rng(13);
    for _ in 0..20_000 {
        after_history(false).await.unwrap();
        tokio::time::advance(Duration::from_micros(50)).await;
    }
    tokio::time::advance(Duration::from_secs(3600)).await;
    for held in [5, 0] {
        HISTORY_ATTEMPTS.take();
        for _ in 0..10_000 {
            after_history(true).await.unwrap_err();
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let retries = HISTORY_ATTEMPTS.take() - 10_000;
        assert!(
            retries.abs_diff(1000 + held) <= 1,
            "{retries} retries, held {held}"
        );
        tokio::time::advance(Duration::from_secs(5)).await;
    }
}
