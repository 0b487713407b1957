//! `#[retry]` on functions that return `Box<dyn Error + Send + Sync>` or `Box<dyn Error>`:
//! the box is classified by the first error in its chain that persevere knows (unsent only
//! from its own error), and an error it does not know is permanent.

use std::error::Error;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use persevere::{idempotent, retry};

type BoxError = Box<dyn Error + Send + Sync>;

/// An error of the application's, which persevere does not know, wrapping one it may.
#[derive(Debug)]
struct Loading(Option<io::Error>);

impl fmt::Display for Loading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("while loading the user")
    }
}

impl Error for Loading {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.as_ref().map(|e| e as &(dyn Error + 'static))
    }
}

/// Fails with `fail(attempt)` until it returns `None`, counting the attempts in `calls`.
#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn load(calls: &AtomicU32, fail: fn(u32) -> Option<BoxError>) -> Result<u32, BoxError> {
    let attempt = calls.fetch_add(1, Ordering::SeqCst) + 1;
    match fail(attempt) {
        Some(e) => Err(e),
        None => Ok(attempt),
    }
}

#[tokio::test(start_paused = true)]
async fn a_transient_error_deep_in_the_chain_is_retried() {
    let calls = AtomicU32::new(0);
    let fail = |attempt| {
        (attempt < 3).then(|| Loading(Some(io::ErrorKind::ConnectionReset.into())).into())
    };
    assert_eq!(load(&calls, fail).await.unwrap(), 3);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_error_is_permanent() {
    let calls = AtomicU32::new(0);
    let error = load(&calls, |_| Some("no such user".into()))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "no such user");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let calls = AtomicU32::new(0);
    load(&calls, |_| Some(Loading(None).into()))
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_io_error_in_the_chain_is_not_retried() {
    let calls = AtomicU32::new(0);
    let fail = |_| Some(Loading(Some(io::ErrorKind::NotFound.into())).into());
    load(&calls, fail).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// `Box<dyn Error>`, neither `Send` nor `Sync`, on a plain function.
#[retry(base = "1ms", jitter = "none", attempts = 3)]
#[idempotent]
fn read(calls: &AtomicU32) -> Result<(), Box<dyn Error>> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(Box::new(io::Error::from(io::ErrorKind::TimedOut)))
}

#[test]
fn a_box_dyn_error_is_classified_too() {
    let calls = AtomicU32::new(0);
    read(&calls).unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Fails with a refused connection, bare or beneath `Loading`, counting the attempts.
#[retry(on = unsent, attempts = 3, base = "10ms", jitter = "none")]
async fn create(calls: &AtomicU32, beneath_loading: bool) -> Result<(), BoxError> {
    calls.fetch_add(1, Ordering::SeqCst);
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    if beneath_loading {
        return Err(Loading(Some(refused)).into());
    }
    Err(refused.into())
}

// Can fail: if a refused connection beneath an error persevere does not know is taken as
// unsent (that error's library may have sent the request first), so that an `on = unsent`
// function repeats it; or if a bare refused connection in a box is no longer unsent.
#[tokio::test(start_paused = true)]
async fn unsent_counts_only_from_the_boxed_error_itself() {
    let calls = AtomicU32::new(0);
    let error = create(&calls, true).await.unwrap_err();
    assert_eq!(error.to_string(), "while loading the user");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let calls = AtomicU32::new(0);
    create(&calls, false).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
