//! `#[retry]` on a function that returns `anyhow::Result` (feature `anyhow`): the error is
//! classified by the first error in its chain that persevere knows, contexts included;
//! unsent only where no error persevere cannot see through lies above it.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context;
use persevere::{idempotent, retry};

#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn stock(calls: &AtomicU32, kind: io::ErrorKind, failures: u32) -> anyhow::Result<u32> {
    let attempt = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if attempt <= failures {
        return Err(io::Error::from(kind)).context("reading the stock");
    }
    Ok(attempt)
}

#[tokio::test(start_paused = true)]
async fn a_transient_io_error_under_a_context_is_retried() {
    let calls = AtomicU32::new(0);
    assert_eq!(
        stock(&calls, io::ErrorKind::ConnectionReset, 2)
            .await
            .unwrap(),
        3
    );
}

#[tokio::test(start_paused = true)]
async fn a_permanent_io_error_under_a_context_is_not() {
    let calls = AtomicU32::new(0);
    let error = stock(&calls, io::ErrorKind::PermissionDenied, 9)
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "reading the stock");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn validate(calls: &AtomicU32) -> anyhow::Result<()> {
    calls.fetch_add(1, Ordering::SeqCst);
    anyhow::bail!("the order has no lines")
}

#[tokio::test(start_paused = true)]
async fn an_error_persevere_does_not_know_is_permanent() {
    let calls = AtomicU32::new(0);
    validate(&calls).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A library's error that persevere does not know, over the I/O error of its last step,
/// as `reqwest::Error` is without persevere's `reqwest` feature: the library may have
/// sent the request (and followed a redirect) before that step failed.
#[derive(Debug)]
struct Sending(io::Error);

impl std::fmt::Display for Sending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sending the order")
    }
}

impl std::error::Error for Sending {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

fn refused() -> io::Error {
    io::Error::from(io::ErrorKind::ConnectionRefused)
}

#[retry(on = unsent, attempts = 3, base = "10ms", jitter = "none")]
async fn place_once(calls: &AtomicU32, beneath_a_library: bool) -> anyhow::Result<()> {
    calls.fetch_add(1, Ordering::SeqCst);
    if beneath_a_library {
        return Err(Sending(refused())).context("placing the order");
    }
    Err(refused()).context("placing the order")
}

#[retry(attempts = 3, base = "10ms", jitter = "none")]
#[idempotent]
async fn place_idempotently(calls: &AtomicU32) -> anyhow::Result<()> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Sending(refused())).context("placing the order")
}

// Can fail: if a refused connection beneath an error persevere cannot see through is
// taken as unsent, so an `on = unsent` function repeats a request that may have been
// processed; if it is no longer retried for an idempotent function; or if one under
// anyhow's contexts alone is no longer unsent.
#[tokio::test(start_paused = true)]
async fn a_refused_connection_beneath_a_library_error_is_retried_only_if_idempotent() {
    let calls = AtomicU32::new(0);
    let error = place_once(&calls, true).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(error.downcast_ref::<Sending>().is_some(), "{error:?}");

    let calls = AtomicU32::new(0);
    let error = place_idempotently(&calls).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(error.downcast_ref::<Sending>().is_some(), "{error:?}");

    let calls = AtomicU32::new(0);
    let error = place_once(&calls, false).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(error.downcast_ref::<io::Error>().is_some(), "{error:?}");
}
