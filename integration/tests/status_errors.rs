//! persevere's own HTTP error types are an async `#[retry]` function's error as they
//! are, with no code of the user's: `http::StatusCode` and `persevere::http::StatusError`
//! convert from a cut attempt (504) and a breaker's refusal (503). That this file
//! compiles is half the test (before, each function here was a compile error asking for
//! an impl the orphan rule forbids the user to write); the other half is what each
//! conversion does to the call. Under tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use persevere::http::{StatusError, check};
use persevere::{AttemptTimedOut, CircuitBreaker, CircuitOpen, RetryBudget, idempotent, retry};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// The first attempt hangs (cut at 100 ms), the second is answered 503, the third 200.
async fn answer(calls: &AtomicU32) -> StatusCode {
    match calls.fetch_add(1, Ordering::SeqCst) + 1 {
        1 => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK
        }
        2 => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::OK,
    }
}

#[retry(attempt_timeout = "100ms", base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn by_status(calls: &AtomicU32) -> Result<u32, StatusCode> {
    let status = answer(calls).await;
    if status.is_success() {
        Ok(calls.load(Ordering::SeqCst))
    } else {
        Err(status)
    }
}

#[retry(attempt_timeout = "100ms", base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn by_status_error(calls: &AtomicU32) -> Result<u32, StatusError> {
    check(answer(calls).await, &HeaderMap::new())?;
    Ok(calls.load(Ordering::SeqCst))
}

// A cut attempt is a 504 (transient) and retried; the 503 after it too; the third
// succeeds.
// Can fail: a cut attempt made a permanent status, or the call ending at the cut.
#[tokio::test(start_paused = true)]
async fn a_cut_attempt_is_a_gateway_timeout_and_is_retried() {
    let calls = AtomicU32::new(0);
    let start = tokio::time::Instant::now();
    assert_eq!(by_status(&calls).await, Ok(3));
    // Cut at 100 ms, a wait of 10 ms, the 503, a wait of 20 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(130));

    let calls = AtomicU32::new(0);
    assert_eq!(by_status_error(&calls).await, Ok(3));
}

#[retry(attempt_timeout = "100ms", attempts = 1, budget = UNLIMITED)]
#[idempotent]
async fn cut_once(calls: &AtomicU32) -> Result<u32, StatusError> {
    check(answer(calls).await, &HeaderMap::new())?;
    Ok(1)
}

// What the caller gets for an attempt cut and not retried.
#[tokio::test(start_paused = true)]
async fn the_caller_gets_504_for_a_cut_attempt() {
    let error = cut_once(&AtomicU32::new(0)).await.unwrap_err();
    assert_eq!(error.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(error.retry_after(), None);
    let cut = AttemptTimedOut::after(Duration::from_secs(1));
    assert_eq!(StatusCode::from(cut), StatusCode::GATEWAY_TIMEOUT);
}

static OPENS_AT_ONCE: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_secs(30));

#[retry(breaker = OPENS_AT_ONCE, attempts = 1, budget = UNLIMITED)]
#[idempotent]
async fn behind_breaker(status: StatusCode) -> Result<(), StatusCode> {
    Err(status)
}

static STATUS_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_secs(30));

#[retry(breaker = STATUS_BREAKER, attempts = 1, budget = UNLIMITED)]
#[idempotent]
async fn status_error_behind_breaker() -> Result<(), StatusError> {
    check(StatusCode::BAD_GATEWAY, &HeaderMap::new())
}

// A breaker's refusal is a 503; as a `StatusError` it asks to come back when the
// breaker lets a probe through.
#[tokio::test(start_paused = true)]
async fn a_breaker_refusal_is_service_unavailable() {
    assert_eq!(
        behind_breaker(StatusCode::BAD_GATEWAY).await,
        Err(StatusCode::BAD_GATEWAY)
    );
    assert_eq!(
        behind_breaker(StatusCode::BAD_GATEWAY).await,
        Err(StatusCode::SERVICE_UNAVAILABLE)
    );

    assert_eq!(
        status_error_behind_breaker().await.unwrap_err().status(),
        StatusCode::BAD_GATEWAY
    );
    let refused = status_error_behind_breaker().await.unwrap_err();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let wait = refused.retry_after().expect("the breaker's time");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
    let _: fn(CircuitOpen) -> StatusError = StatusError::from;
}
