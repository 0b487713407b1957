//! A retried call allocates nothing: not when it succeeds at once, not when it is
//! retried, on the async path or the blocking one.
//!
//! A counting global allocator counts the allocations of the current thread only, while
//! counting is on, so the other tests of this binary (run on other threads) do not
//! interfere. Each check warms up first: a function's first call registers its
//! statistics and may initialise thread-locals (the jitter generator), which is
//! allowed to allocate once.
//!
//! On a failure, the test prints a backtrace of each counted allocation (the first few),
//! which names the code that allocated.

use std::cell::Cell;
use std::hint::black_box;

use persevere::{Class, Classify, RetryBudget, idempotent, retry};

#[path = "support/counting.rs"]
mod counting;

use counting::{TRACED, TRACES, allocations, start_counting, stop_counting};

#[derive(Debug, PartialEq)]
struct Failure;

impl Classify for Failure {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

impl From<persevere::AttemptTimedOut> for Failure {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        Failure
    }
}

/// Never refuses: the checks retry on every call.
static UNLIMITED: RetryBudget = RetryBudget::unlimited();

thread_local! {
    static FAILS_LEFT: Cell<u32> = const { Cell::new(0) };
    static ATTEMPTS: Cell<u32> = const { Cell::new(0) };
}

/// Fails while `FAILS_LEFT` lasts, then returns `x + 1`; counts its attempts.
fn body(x: u64) -> Result<u64, Failure> {
    ATTEMPTS.set(ATTEMPTS.get() + 1);
    let left = FAILS_LEFT.get();
    if left > 0 {
        FAILS_LEFT.set(left - 1);
        return Err(Failure);
    }
    black_box(Ok(x + 1))
}

/// Makes the next `fails` attempts fail, and resets the attempt count.
fn script(fails: u32) {
    FAILS_LEFT.set(fails);
    ATTEMPTS.set(0);
}

#[retry]
#[idempotent]
async fn succeeds(x: u64) -> Result<u64, Failure> {
    body(x)
}

#[retry(base = "0s", budget = UNLIMITED)]
#[idempotent]
async fn flaky(x: u64) -> Result<u64, Failure> {
    body(x)
}

#[retry]
#[idempotent]
fn succeeds_blocking(x: u64) -> Result<u64, Failure> {
    body(x)
}

#[retry(base = "0s", budget = UNLIMITED)]
#[idempotent]
fn flaky_blocking(x: u64) -> Result<u64, Failure> {
    body(x)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

/// Makes a warm-up call of `call`, then one more while counting, each with its first
/// `fails` attempts failing; asserts that the counted call succeeded after `fails + 1`
/// attempts and allocated nothing. `what` names the call in the failure message.
async fn assert_async_call_allocates_nothing(
    what: &str,
    fails: u32,
    call: impl AsyncFn(u64) -> Result<u64, Failure>,
) {
    script(fails);
    assert_eq!(call(1).await, Ok(2));
    script(fails);
    start_counting();
    let outcome = call(black_box(1)).await;
    let count = stop_counting();
    assert_eq!((outcome, ATTEMPTS.get()), (Ok(2), fails + 1));
    assert_eq!(count, 0, "allocations in {what}");
}

/// `assert_async_call_allocates_nothing` for a blocking call.
fn assert_blocking_call_allocates_nothing(
    what: &str,
    fails: u32,
    call: impl Fn(u64) -> Result<u64, Failure>,
) {
    script(fails);
    assert_eq!(call(1), Ok(2));
    script(fails);
    let (outcome, count) = allocations(|| call(black_box(1)));
    assert_eq!((outcome, ATTEMPTS.get()), (Ok(2), fails + 1));
    assert_eq!(count, 0, "allocations in {what}");
}

#[test]
fn an_async_call_that_succeeds_at_once_allocates_nothing() {
    runtime().block_on(assert_async_call_allocates_nothing(
        "an async call that succeeded at once",
        0,
        succeeds,
    ));
}

#[test]
fn an_async_call_retried_twice_allocates_nothing() {
    runtime().block_on(assert_async_call_allocates_nothing(
        "an async call retried twice",
        2,
        flaky,
    ));
}

#[test]
fn a_blocking_call_that_succeeds_at_once_allocates_nothing() {
    assert_blocking_call_allocates_nothing(
        "a blocking call that succeeded at once",
        0,
        succeeds_blocking,
    );
}

#[test]
fn a_blocking_call_retried_twice_allocates_nothing() {
    assert_blocking_call_allocates_nothing("a blocking call retried twice", 2, flaky_blocking);
}

/// The counter itself works: a `Box` is one allocation.
#[test]
fn the_counter_counts() {
    let (_, count) = allocations(|| {
        // No backtrace for this one: it is expected.
        TRACES.set(TRACED);
        black_box(Box::new(7u64))
    });
    assert_eq!(count, 1);
}
