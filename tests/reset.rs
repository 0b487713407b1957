//! Tests can start from a clean slate: `persevere::stats::reset()` refills every retried
//! function's budget and zeroes its statistics, so one test's outage does not drain the
//! budget of the next test that calls the same function.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use persevere::{idempotent, retry};

static CALLS: AtomicU32 = AtomicU32::new(0);

/// Held by each test here: a reset in one would refill the budget the other is draining
/// (seen: a first call of `down` that made 4 attempts).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// The default budget: a reserve of one whole call's retries (5), and a tenth of a retry
// per request.
#[retry(base = "1ms", jitter = "none")]
#[idempotent]
async fn down() -> io::Result<u32> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

/// The attempts one call of `down` makes.
async fn attempts_of_one_call() -> u32 {
    let before = CALLS.load(Ordering::SeqCst);
    assert!(down().await.is_err());
    CALLS.load(Ordering::SeqCst) - before
}

// Can fail: without the reset, the drained budget leaves the call one attempt.
#[tokio::test(start_paused = true)]
async fn reset_refills_a_drained_budget_and_zeroes_the_statistics() {
    let _one = ONE_AT_A_TIME.lock().await;
    // An outage drains the reserve: the first call makes all 6 of its attempts, and soon
    // a call is refused any retry (a tenth of a token per request grants one now and
    // then).
    assert_eq!(attempts_of_one_call().await, 6);
    let mut calls = 1;
    while attempts_of_one_call().await > 1 {
        calls += 1;
        assert!(calls < 50, "the budget never ran dry");
    }
    let stats = persevere::stats::get("down").expect("called");
    assert_eq!(stats.requests, calls + 1);

    persevere::stats::reset();
    let stats = persevere::stats::get("down").expect("still registered");
    assert_eq!((stats.requests, stats.attempts, stats.retries), (0, 0, 0));
    assert_eq!(attempts_of_one_call().await, 6);
}

#[retry]
#[idempotent]
async fn up() -> io::Result<u32> {
    Ok(1)
}

// Calls that succeed at once are counted per thread and added in batches; a reset drops
// what this thread has pending too, so the counts start from nothing.
// Can fail: a reset that leaves the thread's batch, whose five calls come back at the
// next read.
#[tokio::test(start_paused = true)]
async fn reset_forgets_the_calls_a_thread_has_not_added_yet() {
    let _one = ONE_AT_A_TIME.lock().await;
    for _ in 0..5 {
        up().await.unwrap();
    }
    persevere::stats::reset();
    let stats = persevere::stats::get("up").expect("registered");
    assert_eq!((stats.requests, stats.succeeded), (0, 0));
    up().await.unwrap();
    let stats = persevere::stats::get("up").expect("registered");
    assert_eq!((stats.requests, stats.succeeded), (1, 1));
}

static WAITING_BUDGET: persevere::RetryBudget = persevere::RetryBudget::new();

#[retry(base = "10s", jitter = "none", budget = WAITING_BUDGET)]
#[idempotent]
async fn waits_long() -> io::Result<u32> {
    Err(io::ErrorKind::ConnectionReset.into())
}

// A reset while a call waits to retry, and the call then dropped by its caller: the
// retry it was granted and never made is given back without taking the zeroed count
// below zero.
// Can fail: `retries: 18446744073709551615` in the budget's snapshot.
#[tokio::test(start_paused = true)]
async fn a_call_dropped_after_a_reset_leaves_the_counts_sane() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut call = Box::pin(waits_long());
    let waited = tokio::time::timeout(std::time::Duration::from_secs(1), &mut call).await;
    assert!(waited.is_err(), "the call is waiting for its retry");
    persevere::stats::reset();
    drop(call);
    let now = tokio::time::Instant::now().into_std();
    let budget = WAITING_BUDGET.snapshot(now);
    assert_eq!(
        (budget.requests, budget.retries, budget.refusals),
        (0, 0, 0)
    );
    let stats = persevere::stats::get("waits_long").expect("registered");
    assert!(stats.retries <= 1 && stats.attempts <= 2, "{stats:?}");
}
