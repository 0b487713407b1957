//! An attempt's scope (its number, its deadline, the nested-call rule) belongs to the
//! attempt's own task: a task that an executor polls inside the attempt's poll, as
//! `LocalSet::run_until` polls the tasks of `spawn_local`, runs outside it. A future the
//! attempt's own task blocks on is part of the attempt.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use persevere::{RetryBudget, attempt, deadline, idempotent, retry};
use tokio::task::LocalSet;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// What code saw of the attempt around it: its number, whether a retry, the time left.
type Seen = Mutex<Vec<(u32, bool, Option<Duration>)>>;

fn look(seen: &Seen) {
    let remaining = deadline::remaining();
    seen.lock()
        .unwrap()
        .push((attempt::number(), attempt::is_retry(), remaining));
}

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

static IN_ATTEMPT: AtomicU32 = AtomicU32::new(0);

// Fails its first attempt; in its second, runs a local task to the end and looks from
// both the attempt and the task.
#[retry(attempts = 2, base = "10ms", deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn spawns_locally(attempt_saw: Arc<Seen>, task_saw: Arc<Seen>) -> io::Result<()> {
    if IN_ATTEMPT.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(reset());
    }
    look(&attempt_saw);
    let local = LocalSet::new();
    let seen = Arc::clone(&task_saw);
    local
        .run_until(async move {
            tokio::task::spawn_local(async move { look(&seen) })
                .await
                .unwrap();
        })
        .await;
    Ok(())
}

// Can fail: a `spawn_local` task polled inside attempt 2 reads number 2 and the call's
// deadline, as the frame's thread-local told every poll on the thread.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_local_task_polled_inside_an_attempt_runs_outside_it() {
    let (attempt_saw, task_saw) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    spawns_locally(Arc::clone(&attempt_saw), Arc::clone(&task_saw))
        .await
        .unwrap();
    let attempt_saw = attempt_saw.lock().unwrap();
    let (number, retry, remaining) = attempt_saw[0];
    assert_eq!((number, retry), (2, true));
    assert!(remaining.is_some_and(|left| left <= Duration::from_secs(5)));
    assert_eq!(*task_saw.lock().unwrap(), [(1, false, None)]);
}

static OUTER: AtomicU32 = AtomicU32::new(0);
static INNER: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn inner() -> io::Result<()> {
    INNER.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

// Each attempt runs `inner` to the end in a local task, and fails on its own after it.
#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn outer_spawning_inner() -> io::Result<()> {
    OUTER.fetch_add(1, Ordering::SeqCst);
    let local = LocalSet::new();
    let inner_result = local
        .run_until(async { tokio::task::spawn_local(inner()).await.unwrap() })
        .await;
    assert!(inner_result.is_err());
    Err(reset())
}

// Can fail: the local task's `#[retry]` call taken as nested in the attempt, so that
// its giving up marked the attempt's failure as retried inside, and the outer call gave
// up after one attempt.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_in_a_local_task_is_not_nested_in_the_attempt() {
    assert!(outer_spawning_inner().await.is_err());
    assert_eq!(OUTER.load(Ordering::SeqCst), 3);
    assert_eq!(INNER.load(Ordering::SeqCst), 9);
}

/// Polls `future` to its end on this thread, as any `block_on` does.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

static BLOCKING: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 2, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn blocks_on(saw: &Seen) -> io::Result<()> {
    if BLOCKING.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(reset());
    }
    block_on(async { look(saw) });
    Ok(())
}

// Pins what cannot be told apart: a future the attempt's own task blocks on runs in the
// attempt's task, and sees the attempt (tokio gives it no task of its own).
// Can fail: the attempt's scope hidden from the code it runs itself.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_future_the_attempt_blocks_on_is_part_of_the_attempt() {
    let saw = Seen::default();
    blocks_on(&saw).await.unwrap();
    let saw = saw.lock().unwrap();
    assert_eq!((saw[0].0, saw[0].1), (2, true));
    assert!(saw[0].2.is_some());
}
