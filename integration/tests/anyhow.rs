//! `#[retry]` on a function that returns `anyhow::Result` (feature `anyhow`): the error is
//! classified by the first error in its chain that persevere knows, contexts included.

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
