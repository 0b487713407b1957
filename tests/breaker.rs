//! The circuit breaker through `#[retry(breaker = ...)]`, under tokio's paused clock.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use persevere::{
    BreakerState, CircuitBreaker, CircuitOpen, Class, Classify, RetryBudget, idempotent, retry,
};
use tokio::time::{Instant, sleep};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

static BREAKER: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(3)
    .with_open_for(Duration::from_secs(10))
    .with_probes(1);
static DOWN: AtomicBool = AtomicBool::new(true);
static CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 1, breaker = BREAKER, budget = UNLIMITED)]
#[idempotent]
async fn call_dependency() -> io::Result<&'static str> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    if DOWN.load(Ordering::SeqCst) {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok("up")
    }
}

#[tokio::test(start_paused = true)]
async fn closed_open_half_open_closed_and_reopened() {
    // Closed: failures go through until three in a row.
    for _ in 0..3 {
        let e = call_dependency().await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
    }
    assert_eq!(CALLS.load(Ordering::SeqCst), 3);
    assert_eq!(BREAKER.state(now()), BreakerState::Open);

    // Open: calls fail at once, without running, with the breaker's error.
    let e = call_dependency().await.unwrap_err();
    let open = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<persevere::CircuitOpen>())
        .expect("a CircuitOpen error");
    assert_eq!(open.retry_in(), Duration::from_secs(10));
    assert_eq!(CALLS.load(Ordering::SeqCst), 3);

    // Half-open after the open time: a failed probe reopens it.
    sleep(Duration::from_secs(10)).await;
    assert_eq!(BREAKER.state(now()), BreakerState::HalfOpen);
    call_dependency().await.unwrap_err();
    assert_eq!(CALLS.load(Ordering::SeqCst), 4);
    assert_eq!(BREAKER.state(now()), BreakerState::Open);
    call_dependency().await.unwrap_err();
    assert_eq!(CALLS.load(Ordering::SeqCst), 4);

    // The dependency recovers: the next probe succeeds and closes it.
    DOWN.store(false, Ordering::SeqCst);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(call_dependency().await.unwrap(), "up");
    assert_eq!(BREAKER.state(now()), BreakerState::Closed);
    assert_eq!(call_dependency().await.unwrap(), "up");
    assert_eq!(CALLS.load(Ordering::SeqCst), 6);
    let snapshot = BREAKER.snapshot(now());
    assert_eq!(snapshot.opened, 2);
    assert_eq!(snapshot.rejected, 2);
}

static PROBED: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_secs(1))
    .with_probes(2);
static IN_FLIGHT: AtomicU32 = AtomicU32::new(0);
static MOST_IN_FLIGHT: AtomicU32 = AtomicU32::new(0);
static PROBE_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 1, breaker = PROBED, budget = UNLIMITED)]
#[idempotent]
async fn slow_probe(fail: bool) -> io::Result<()> {
    PROBE_CALLS.fetch_add(1, Ordering::SeqCst);
    let now_in_flight = IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
    MOST_IN_FLIGHT.fetch_max(now_in_flight, Ordering::SeqCst);
    sleep(Duration::from_millis(100)).await;
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    if fail {
        Err(io::ErrorKind::TimedOut.into())
    } else {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_in_half_open_never_exceed_the_probes() {
    slow_probe(true).await.unwrap_err();
    assert_eq!(PROBED.state(now()), BreakerState::Open);
    sleep(Duration::from_secs(1)).await;
    PROBE_CALLS.store(0, Ordering::SeqCst);
    MOST_IN_FLIGHT.store(0, Ordering::SeqCst);

    let callers: Vec<_> = (0..50).map(|_| tokio::spawn(slow_probe(false))).collect();
    let mut refused = 0;
    for caller in callers {
        if caller.await.unwrap().is_err() {
            refused += 1;
        }
    }
    assert_eq!(PROBE_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(MOST_IN_FLIGHT.load(Ordering::SeqCst), 2);
    assert_eq!(refused, 48);
    assert_eq!(PROBED.state(now()), BreakerState::Closed);
}

static CANCELLED: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_secs(1))
    .with_probes(1);

#[retry(attempts = 1, breaker = CANCELLED, budget = UNLIMITED)]
#[idempotent]
async fn hangs(fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::ErrorKind::TimedOut.into());
    }
    sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_probe_gives_its_place_back() {
    hangs(true).await.unwrap_err();
    sleep(Duration::from_secs(1)).await;
    // The probe is cancelled by a caller's timeout.
    assert!(
        tokio::time::timeout(Duration::from_millis(10), hangs(false))
            .await
            .is_err()
    );
    // Its place is free again: the next caller is let through as a probe.
    let started = Instant::now();
    assert!(
        tokio::time::timeout(Duration::from_millis(10), hangs(false))
            .await
            .is_err(),
        "the probe was refused at once instead of running"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(10));
}

static RATE: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(0)
    .with_failure_rate(0.5, 10, Duration::from_secs(10))
    .with_open_for(Duration::from_secs(5));
static RATE_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 1, breaker = RATE, budget = UNLIMITED)]
#[idempotent]
async fn half_fail() -> io::Result<()> {
    let n = RATE_CALLS.fetch_add(1, Ordering::SeqCst);
    if n % 2 == 1 {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok(())
    }
}

#[retry(attempts = 1, breaker = RATE, budget = UNLIMITED)]
#[idempotent]
async fn not_found() -> io::Result<()> {
    Err(io::ErrorKind::NotFound.into())
}

#[tokio::test(start_paused = true)]
async fn failure_rate_opens_once_the_minimum_is_reached_and_permanent_errors_are_healthy() {
    // Permanent errors show a dependency that answers: they never open the breaker.
    for _ in 0..20 {
        not_found().await.unwrap_err();
    }
    assert_eq!(RATE.state(now()), BreakerState::Closed);
    sleep(Duration::from_secs(11)).await;
    for _ in 0..9 {
        let _ = half_fail().await;
    }
    assert_eq!(RATE.state(now()), BreakerState::Closed, "below the minimum");
    let _ = half_fail().await;
    assert_eq!(RATE.state(now()), BreakerState::Open);
    assert_eq!(RATE_CALLS.load(Ordering::SeqCst), 10);
}

// ---- The breaker and the statistics agree with what happened -------------------------

static TRIPPED: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(3)
    .with_open_for(Duration::from_secs(60));
static TRIP_BUDGET: RetryBudget = RetryBudget::new();

#[derive(Debug, PartialEq)]
enum DependencyError {
    Down(u32),
    Open,
    TimedOut,
}

impl Classify for DependencyError {
    fn classify(&self) -> Class {
        match self {
            DependencyError::Down(_) | DependencyError::TimedOut => Class::Transient,
            DependencyError::Open => Class::Permanent,
        }
    }
}

impl From<CircuitOpen> for DependencyError {
    fn from(_: CircuitOpen) -> Self {
        DependencyError::Open
    }
}

impl From<persevere::AttemptTimedOut> for DependencyError {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        DependencyError::TimedOut
    }
}

static TRIP_ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(base = "100ms", jitter = "none", breaker = TRIPPED, budget = TRIP_BUDGET)]
#[idempotent]
async fn trips_the_breaker() -> Result<u32, DependencyError> {
    Err(DependencyError::Down(
        TRIP_ATTEMPTS.fetch_add(1, Ordering::SeqCst) + 1,
    ))
}

// One call makes 3 attempts and trips the breaker; 3 more calls are refused. The call
// that tripped it returns the dependency's last error at once, without waiting out a
// backoff it will not use; the refused calls return `CircuitOpen`. The statistics count
// 2 retries and 3 refusals, and the budget spent a token on the 2 retries made only.
// Can fail: before, the tripping call waited 400 ms and returned `Open`, the statistics
// said 0 retries, and the budget had granted 3 retries.
#[tokio::test(start_paused = true)]
async fn the_call_that_trips_the_breaker_returns_its_error_and_the_counts_agree() {
    let start = tokio::time::Instant::now();
    assert_eq!(trips_the_breaker().await, Err(DependencyError::Down(3)));
    assert_eq!(start.elapsed(), Duration::from_millis(100 + 200));
    for _ in 0..3 {
        assert_eq!(trips_the_breaker().await, Err(DependencyError::Open));
    }
    assert_eq!(TRIP_ATTEMPTS.load(Ordering::SeqCst), 3);
    let stats = persevere::stats::get("trips_the_breaker").expect("called");
    assert_eq!(
        (stats.requests, stats.attempts, stats.retries),
        (4, 3, 2),
        "{stats:?}"
    );
    assert_eq!(stats.failed.breaker_opened, 1);
    assert_eq!(stats.failed.circuit_open, 3);
    assert_eq!(TRIP_BUDGET.snapshot(now()).retries, 2);
    let table = persevere::stats::all().to_string();
    assert!(
        table.contains("breaker") && table.contains("budget"),
        "{table}"
    );
}

// An open breaker refuses a call before its body runs, also inside an enclosing deadline
// (where the call starts its clock at its first poll for another reason too).
// Can fail: the two reasons to begin at the first poll cancelled out, and the body ran.
static INSIDE_BREAKER: CircuitBreaker = CircuitBreaker::new().with_consecutive_failures(1);
static INSIDE_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 1, breaker = INSIDE_BREAKER, budget = UNLIMITED)]
#[idempotent]
async fn inside_a_scope() -> io::Result<()> {
    INSIDE_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_refuses_a_call_inside_a_deadline_before_its_body_runs() {
    let scoped = || persevere::deadline::scope(Duration::from_secs(5), inside_a_scope());
    assert_eq!(
        scoped().await.unwrap_err().kind(),
        io::ErrorKind::ConnectionReset
    );
    assert_eq!(INSIDE_BREAKER.state(now()), BreakerState::Open);
    let refused = scoped().await.unwrap_err();
    assert!(
        refused
            .get_ref()
            .is_some_and(|inner| inner.is::<CircuitOpen>()),
        "{refused:?}"
    );
    assert_eq!(INSIDE_CALLS.load(Ordering::SeqCst), 1);
}
