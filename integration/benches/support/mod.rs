//! The functions the benchmarks call, shared by `overhead.rs` (criterion, wall time) and
//! `instructions.rs` (a fixed number of calls, for `valgrind --tool=callgrind`), so that
//! both measure exactly the same code.
//!
//! Every variant runs the same body, `Ok(black_box(x + 1))`: directly, under
//! `#[retry]`, under backon, under tokio-retry, and under tower's retry middleware.
//! The "once" variants fail once with a transient error, then succeed, with a zero wait.
//!
//! The body hides `x + 1` from the optimiser, not the whole `Result`: `black_box` of a
//! 16-byte `Result` is written as two 8-byte stores and, depending on how the caller was
//! inlined, read back as one 16-byte load, which the CPU cannot forward from the stores
//! (a stall of about 6 ns here). Whether a variant paid it depended on inlining, not on
//! the wrapper, and it made the direct call slower than two of the wrappers around it.

// Each benchmark binary uses a different subset of these functions.
#![allow(dead_code)]

use std::cell::Cell;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use persevere::{Class, Classify, RetryBudget, idempotent, retry};
use tokio_retry::strategy::{ExponentialBackoff, jitter};
use tower::ServiceExt;

/// The error of every benchmarked function: always transient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure;

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

/// A budget that never refuses: the "once" benchmarks retry on every call, and the
/// default budget (10 % of requests) would refuse most of those retries, turning the
/// benchmark into one of giving up.
pub static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// The budget shared by the functions of the contention benchmark.
pub static SHARED: RetryBudget = RetryBudget::new();

thread_local! {
    static FAILS_LEFT: Cell<u32> = const { Cell::new(0) };
}

/// Makes the next `n` attempts on this thread of any `flaky` function fail.
#[inline]
pub fn fail_next(n: u32) {
    FAILS_LEFT.set(n);
}

#[inline]
fn flaky_body(x: u64) -> Result<u64, Failure> {
    let left = FAILS_LEFT.get();
    if left > 0 {
        FAILS_LEFT.set(left - 1);
        return Err(Failure);
    }
    Ok(black_box(x + 1))
}

// --- async, succeeding at once -----------------------------------------------------

/// The function every async variant wraps.
pub async fn direct(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

/// `direct` under `#[retry]` with the default policy: deadline, default budget, stats.
#[retry]
#[idempotent]
pub async fn retried(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

pub fn backon_call(x: u64) -> impl Future<Output = Result<u64, Failure>> {
    (move || direct(x)).retry(ExponentialBuilder::default())
}

pub fn tokio_retry_call(x: u64) -> impl Future<Output = Result<u64, Failure>> {
    tokio_retry::Retry::start(
        ExponentialBackoff::from_millis(10).map(jitter).take(3),
        move || direct(x),
    )
}

/// A tower retry policy that never retries.
#[derive(Clone, Copy)]
pub struct NeverRetry;

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for NeverRetry {
    type Future = Ready<()>;

    fn retry(&mut self, _req: &mut Req, _result: &mut Result<Res, E>) -> Option<Ready<()>> {
        None
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

pub fn tower_call(x: u64) -> impl Future<Output = Result<u64, Failure>> {
    tower::retry::Retry::new(NeverRetry, tower::service_fn(direct)).oneshot(x)
}

// --- async, one transient failure then success, zero wait ---------------------------

pub async fn flaky(x: u64) -> Result<u64, Failure> {
    flaky_body(x)
}

/// The baseline of the "once" group: the loop one would write by hand.
pub async fn hand_loop_once(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    loop {
        if let Ok(v) = flaky(x).await {
            return Ok(v);
        }
    }
}

#[retry(base = "0s", budget = UNLIMITED)]
#[idempotent]
pub async fn retried_flaky(x: u64) -> Result<u64, Failure> {
    flaky_body(x)
}

pub async fn retry_once(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    retried_flaky(x).await
}

pub async fn backon_once(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    (move || flaky(x))
        .retry(ExponentialBuilder::default().with_min_delay(Duration::ZERO))
        .await
}

pub async fn tokio_retry_once(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    tokio_retry::Retry::start(
        ExponentialBackoff::from_millis(0).map(jitter).take(3),
        move || flaky(x),
    )
    .await
}

/// A tower retry policy that retries failures up to its count, with no wait.
#[derive(Clone, Copy)]
pub struct RetryErrors(pub u32);

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for RetryErrors {
    type Future = Ready<()>;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, E>) -> Option<Ready<()>> {
        if result.is_err() && self.0 > 0 {
            self.0 -= 1;
            Some(ready(()))
        } else {
            None
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

pub async fn tower_once(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    tower::retry::Retry::new(RetryErrors(2), tower::service_fn(flaky))
        .oneshot(x)
        .await
}

// --- blocking -------------------------------------------------------------------------

#[inline(never)]
pub fn direct_sync(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

#[retry]
#[idempotent]
#[inline(never)]
pub fn retried_sync(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

pub fn hand_loop_once_sync(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    loop {
        if let Ok(v) = flaky_body(x) {
            return Ok(v);
        }
    }
}

#[retry(base = "0s", budget = UNLIMITED)]
#[idempotent]
fn retried_flaky_sync(x: u64) -> Result<u64, Failure> {
    flaky_body(x)
}

pub fn retry_once_sync(x: u64) -> Result<u64, Failure> {
    fail_next(1);
    retried_flaky_sync(x)
}

// --- a budget shared between threads --------------------------------------------------

/// Succeeds at once; shares `SHARED` with `shared_budget_b`.
#[retry(budget = SHARED)]
#[idempotent]
pub fn shared_budget_a(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

/// Succeeds at once; shares `SHARED` with `shared_budget_a`, but has its own statistics.
#[retry(budget = SHARED)]
#[idempotent]
pub fn shared_budget_b(x: u64) -> Result<u64, Failure> {
    Ok(black_box(x + 1))
}

/// A current-thread runtime with the timer, as `#[tokio::main(flavor = "current_thread")]`
/// builds it.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}
