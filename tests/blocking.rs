//! The behaviour of `#[retry]` on a plain (blocking) function: it sleeps the thread
//! between attempts, in real time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use persevere::{Class, Classify, idempotent, retry};

#[derive(Debug, PartialEq)]
enum TestError {
    Transient(u32),
    Permanent(u32),
}

impl Classify for TestError {
    fn classify(&self) -> Class {
        match self {
            TestError::Transient(_) => Class::Transient,
            TestError::Permanent(_) => Class::Permanent,
        }
    }
}

/// Fails transiently until attempt `succeed_on` (from 1), which gives its number back.
#[retry(base = "5ms", jitter = "none")]
#[idempotent]
fn flaky(calls: &AtomicU32, succeed_on: u32) -> Result<u32, TestError> {
    let attempt = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if attempt < succeed_on {
        Err(TestError::Transient(attempt))
    } else {
        Ok(attempt)
    }
}

/// A first wait long enough that returning well before it proves no wait was taken.
#[retry(base = "1s", jitter = "none")]
#[idempotent]
fn refused(calls: &AtomicU32) -> Result<u32, TestError> {
    let attempt = calls.fetch_add(1, Ordering::SeqCst) + 1;
    Err(TestError::Permanent(attempt))
}

/// Fails transiently twice, pushing onto its by-value argument, and returns what the
/// last attempt saw.
#[retry(base = "1ms", jitter = "none")]
#[idempotent]
fn push_and_fail(calls: &AtomicU32, mut items: Vec<u32>) -> Result<Vec<u32>, TestError> {
    let attempt = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if items != [1, 2] {
        return Ok(items);
    }
    items.push(attempt);
    if attempt < 3 {
        Err(TestError::Transient(attempt))
    } else {
        Ok(items)
    }
}

#[test]
fn transient_failures_are_retried_after_real_waits() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let result = flaky(&calls, 3);
    let elapsed = start.elapsed();
    assert_eq!(result, Ok(3));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Waits of 5 ms then 10 ms; a thread sleeps at least as long as asked.
    assert!(elapsed >= Duration::from_millis(15), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[test]
fn permanent_failure_returns_at_once() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let result = refused(&calls);
    let elapsed = start.elapsed();
    assert_eq!(result, Err(TestError::Permanent(1)));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(elapsed < Duration::from_millis(500), "{elapsed:?}");
}

#[test]
fn by_value_arguments_are_fresh_for_each_attempt() {
    let calls = AtomicU32::new(0);
    // An attempt that saw the previous attempt's push would return early with it.
    assert_eq!(push_and_fail(&calls, vec![1, 2]), Ok(vec![1, 2, 3]));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
