//! A function whose result holds an `impl Trait` is retried like any other, in each
//! expansion: the driver's result defines the opaque type.

use std::fmt::Display;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use persevere::{RetryBudget, idempotent, retry};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// A reset connection for the first two calls on `calls`, then the call's number.
fn third_time_lucky(calls: &AtomicU32) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 {
        return Err(io::ErrorKind::ConnectionReset.into());
    }
    Ok(n)
}

static SHOWN: AtomicU32 = AtomicU32::new(0);

#[retry(base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn shown() -> io::Result<impl Display> {
    third_time_lucky(&SHOWN)
}

// Can fail: an `impl Trait` in the result refused at compile time, or its value lost
// between the attempts and the caller.
#[tokio::test(start_paused = true)]
async fn an_async_fn_returning_impl_display_is_retried() {
    assert_eq!(shown().await.unwrap().to_string(), "3");
    assert_eq!(SHOWN.load(Ordering::SeqCst), 3);
}

static COUNTED: AtomicU32 = AtomicU32::new(0);

#[retry(base = "1ms", budget = UNLIMITED)]
#[idempotent]
fn counted() -> io::Result<impl Iterator<Item = u32>> {
    third_time_lucky(&COUNTED).map(|n| 0..n)
}

// Can fail: the blocking expansion naming the opaque type.
#[test]
fn a_blocking_fn_returning_impl_iterator_is_retried() {
    assert_eq!(counted().unwrap().sum::<u32>(), 3);
    assert_eq!(COUNTED.load(Ordering::SeqCst), 3);
}

struct Service {
    calls: AtomicU32,
    pushed: Vec<u32>,
}

impl Service {
    #[retry(base = "1ms", budget = UNLIMITED)]
    #[idempotent]
    async fn get(&self, x: u32) -> io::Result<impl Display + '_> {
        let n = third_time_lucky(&self.calls)?;
        Ok(format!("{}", n + x))
    }

    #[retry(base = "1ms", budget = UNLIMITED)]
    #[idempotent]
    async fn push(&mut self, x: u32) -> io::Result<impl Iterator<Item = u32>> {
        let n = third_time_lucky(&self.calls)?;
        self.pushed.push(n + x);
        Ok(self.pushed.clone().into_iter())
    }
}

// Can fail: the expansion for `&self` or the one for `&mut` (a loop in the body)
// naming the opaque type.
#[tokio::test(start_paused = true)]
async fn methods_returning_impl_trait_are_retried() {
    let mut service = Service {
        calls: AtomicU32::new(0),
        pushed: Vec::new(),
    };
    assert_eq!(service.get(10).await.unwrap().to_string(), "13");
    service.calls.store(0, Ordering::SeqCst);
    let pushed: Vec<u32> = service.push(20).await.unwrap().collect();
    assert_eq!(pushed, [23]);
    assert_eq!(service.calls.load(Ordering::SeqCst), 3);
}

static HEDGED: AtomicU32 = AtomicU32::new(0);

#[retry(base = "1ms", budget = UNLIMITED, hedge = "10ms")]
#[idempotent]
async fn hedged() -> io::Result<impl Display + Send> {
    third_time_lucky(&HEDGED)
}

// Can fail: the hedged expansion naming the opaque type.
#[tokio::test(start_paused = true)]
async fn a_hedged_fn_returning_impl_display_is_retried() {
    assert_eq!(hedged().await.unwrap().to_string(), "3");
    assert_eq!(HEDGED.load(Ordering::SeqCst), 3);
}
