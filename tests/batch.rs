//! Calls that succeed at their first attempt are counted per thread and function, and
//! added to the retry budget and the statistics `BATCH` at a time: when a thread has
//! counted a full batch, when a call of the function fails on that thread (before it asks
//! the budget for a retry), and when the thread exits. A statistics read on a thread
//! first adds that thread's pending count to the statistics, not to the budget.
//!
//! The expectations are written in terms of `BATCH` (32 when these tests were written,
//! 64 since), and hold for any batch of more than 5 that does not divide 100.
//!
//! Every test has functions and a budget of its own, so that its counts are exact while
//! the tests run in parallel. No function here waits between attempts.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;

use persevere::__private::BATCH;
use persevere::{
    BudgetSnapshot, RetryBudget, StatsSnapshot, idempotent, retry, seed_thread_rng, stats,
};

/// Calls a thread makes in the tests below: one full batch, and 8 left pending.
const CALLS: u32 = BATCH + 8;

/// `n` as the statistics and the budget count it.
fn n(n: u32) -> u64 {
    u64::from(n)
}

/// The statistics of the function `name`, read on this thread.
fn stats_of(name: &str) -> StatsSnapshot {
    stats::get(name).expect("called, so registered")
}

/// Requests and successes of the function `name`, read on this thread.
fn counts_of(name: &str) -> (u64, u64) {
    let s = stats_of(name);
    (s.requests, s.succeeded)
}

/// The requests `budget` holds now, by the clock of blocking calls.
fn requests_in(budget: &RetryBudget) -> u64 {
    budget.snapshot(std::time::Instant::now()).requests
}

/// A thread that has made its calls and stays alive until told to exit: a test reads
/// while the thread's successes are still pending, then again after it has exited.
struct LiveThread {
    exit: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl LiveThread {
    /// Starts a thread that makes `calls`; returns once it has made them.
    fn after(calls: impl FnOnce() + Send + 'static) -> Self {
        let (done, calls_made) = mpsc::channel();
        let (exit, may_exit) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            calls();
            done.send(()).unwrap();
            may_exit.recv().unwrap();
        });
        calls_made.recv().unwrap();
        Self { exit, thread }
    }

    /// Lets the thread exit, and waits for it (and so for its thread-local destructors).
    fn exit(self) {
        self.exit.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// `$name`, a function that always succeeds at once, and `$budget`, a budget of its own.
macro_rules! succeeds_with_own_budget {
    ($name:ident, $budget:ident) => {
        static $budget: RetryBudget = RetryBudget::new();

        #[retry(budget = $budget)]
        #[idempotent]
        fn $name() -> io::Result<()> {
            Ok(())
        }
    };
}

// ---- Reads on the calling thread ------------------------------------------------------

succeeds_with_own_budget!(counted_here, HERE);

// Five successes, fewer than a batch, are all pending; a read on the same thread adds
// them to the statistics, once however often it reads, and leaves the budget alone.
// Can fail: a read that did not add its thread's pending count would see 0 requests; one
// that added it on every read would see 10 the second time.
#[test]
fn a_read_on_the_calling_thread_sees_its_pending_successes() {
    for _ in 0..5 {
        counted_here().unwrap();
    }
    let s = stats_of("counted_here");
    assert_eq!(
        (s.requests, s.succeeded, s.attempts, s.retries),
        (5, 5, 5, 0)
    );
    assert_eq!(s.attempts_to_success, [5, 0, 0, 0, 0, 0, 0]);
    assert_eq!(stats_of("counted_here"), s);
    assert_eq!(requests_in(&HERE), 0);
}

succeeds_with_own_budget!(counted_across, ACROSS);

// Successes a read has already added to the statistics are not added again when their
// batch fills: 5 read, then the rest of a batch and 8 more, is `BATCH + 8`. The budget
// holds the full batch only.
// Can fail: a full batch that added all of itself to the statistics would make it 5 more.
#[test]
fn successes_read_before_their_batch_fills_are_counted_once() {
    for _ in 0..5 {
        counted_across().unwrap();
    }
    assert_eq!(counts_of("counted_across"), (5, 5));
    for _ in 5..CALLS {
        counted_across().unwrap();
    }
    assert_eq!(counts_of("counted_across"), (n(CALLS), n(CALLS)));
    assert_eq!(requests_in(&ACROSS), n(BATCH));
}

succeeds_with_own_budget!(counted_in_all, IN_ALL);

// `stats::all` adds the reading thread's pending successes as `stats::get` does.
// Can fail: without that, the 3 successes would be missing from the report.
#[test]
fn all_sees_the_pending_successes_of_the_reading_thread() {
    for _ in 0..3 {
        counted_in_all().unwrap();
    }
    let report = stats::all();
    let s = report
        .0
        .iter()
        .find(|s| s.function.ends_with("::counted_in_all"))
        .expect("called, so registered");
    assert_eq!((s.requests, s.succeeded, s.attempts), (3, 3, 3));
}

// ---- Successes on another thread ------------------------------------------------------

succeeds_with_own_budget!(counted_on_exit, ON_EXIT);

// A batch and 8 successes on a thread that has exited by the time of the read (joining
// waits for its thread-local destructors): the full batch, and 8 added at its exit.
// Can fail: without the exit flush the read would see the full batch only, in statistics
// and budget.
#[test]
fn a_thread_adds_its_pending_successes_when_it_exits() {
    thread::spawn(|| {
        for _ in 0..CALLS {
            counted_on_exit().unwrap();
        }
    })
    .join()
    .unwrap();
    assert_eq!(counts_of("counted_on_exit"), (n(CALLS), n(CALLS)));
    assert_eq!(requests_in(&ON_EXIT), n(CALLS));
}

succeeds_with_own_budget!(counted_while_alive, ALIVE);

// While the calling thread lives, a read on another thread sees its full batches only:
// of its `BATCH + 8` successes, the batch. The other 8 come when it exits.
// Can fail: counting every success at once would show the 8 too early; never adding a
// full batch would show 0.
#[test]
fn a_live_threads_successes_are_seen_a_batch_at_a_time() {
    let worker = LiveThread::after(|| {
        for _ in 0..CALLS {
            counted_while_alive().unwrap();
        }
    });
    assert_eq!(counts_of("counted_while_alive"), (n(BATCH), n(BATCH)));
    assert_eq!(requests_in(&ALIVE), n(BATCH));
    worker.exit();
    assert_eq!(counts_of("counted_while_alive"), (n(CALLS), n(CALLS)));
    assert_eq!(requests_in(&ALIVE), n(CALLS));
}

static FAILING: RetryBudget = RetryBudget::new();

#[retry(budget = FAILING)]
#[idempotent]
fn succeeds_unless(fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    Ok(())
}

// A failed call adds its thread's pending successes: after a batch and 8 successes and
// a permanent failure on a live thread, the statistics have every call and the budget
// every request.
// Can fail: without that flush the read would see 8 successes fewer, and so would the
// requests until the thread exits.
#[test]
fn a_failure_adds_its_threads_pending_successes() {
    let worker = LiveThread::after(|| {
        for _ in 0..CALLS {
            succeeds_unless(false).unwrap();
        }
        succeeds_unless(true).unwrap_err();
    });
    let s = stats_of("succeeds_unless");
    let all = n(CALLS + 1);
    assert_eq!((s.requests, s.succeeded, s.attempts), (all, n(CALLS), all));
    assert_eq!(s.failed.permanent, 1);
    assert_eq!(requests_in(&FAILING), all);
    worker.exit();
    assert_eq!(stats_of("succeeds_unless"), s);
    assert_eq!(requests_in(&FAILING), all);
}

// ---- The budget -----------------------------------------------------------------------

static OUTAGE: RetryBudget = RetryBudget::new();
static OUTAGE_ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(deadline = "1h", attempts = 100, base = "0s", budget = OUTAGE)]
#[idempotent]
async fn behind_outage(down: bool) -> io::Result<()> {
    OUTAGE_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    if down {
        return Err(io::ErrorKind::ConnectionReset.into());
    }
    Ok(())
}

/// What `OUTAGE` holds now, by tokio's (paused) clock.
fn outage_budget() -> BudgetSnapshot {
    OUTAGE.snapshot(tokio::time::Instant::now().into_std())
}

/// Calls `behind_outage` once with `down`; how many attempts the call made.
async fn attempts_of_one_call(down: bool) -> (io::Result<()>, u32) {
    let before = OUTAGE_ATTEMPTS.load(Ordering::SeqCst);
    let result = behind_outage(down).await;
    (result, OUTAGE_ATTEMPTS.load(Ordering::SeqCst) - before)
}

// 100 successes put their full batch in the budget and leave the rest pending. The first
// failure deposits its own request and the pending ones before asking for a retry. No
// time passes (no waits, paused clock), so the 101 requests are all in the budget's last
// second, and it may hold 10 % of them: 10.1 tokens, which it does (its floor of 2 and
// the 10.1 the requests earned, less what did not fit while they came in). The call makes
// 10 retries on whole tokens, and asks for an 11th on the last tenth, which is granted
// with a chance of one in ten (seeded here: refused). A second failing call, the 102nd
// request, adds a tenth: refused at once, by the same chance.
// Can fail: without the flush the first failure would find only the full batch and
// itself, 6.5 tokens, for 6 or 7 retries; without batches the budget would hold the 100
// requests before the outage.
#[tokio::test(start_paused = true)]
async fn a_first_failure_adds_the_pending_successes_before_asking_for_a_retry() {
    seed_thread_rng(5);
    for _ in 0..100 {
        behind_outage(false).await.unwrap();
    }
    // Some successes must be pending for the flush to show.
    assert_ne!(100 % BATCH, 0);
    let full = n(100 / BATCH * BATCH);
    let snapshot = outage_budget();
    assert_eq!(
        (snapshot.requests, snapshot.retries, snapshot.refusals),
        (full, 0, 0)
    );
    assert_eq!(snapshot.tokens, full as f64 / 10.0);

    let (result, attempts) = attempts_of_one_call(true).await;
    assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(attempts, 11);
    assert_budget(101, 10, 1, 0.1);

    let (result, attempts) = attempts_of_one_call(true).await;
    result.unwrap_err();
    assert_eq!(attempts, 1);
    assert_budget(102, 10, 2, 0.2);

    let s = stats_of("behind_outage");
    assert_eq!((s.requests, s.succeeded), (102, 100));
    assert_eq!((s.attempts, s.retries), (100 + 11 + 1, 10));
    assert_eq!(s.failed.budget_refused, 2);
}

/// Checks what `OUTAGE` has counted and holds (to a millionth of a token).
fn assert_budget(requests: u64, retries: u64, refusals: u64, tokens: f64) {
    let snapshot: BudgetSnapshot = outage_budget();
    assert_eq!(
        (snapshot.requests, snapshot.retries, snapshot.refusals),
        (requests, retries, refusals),
        "{snapshot:?}"
    );
    assert!((snapshot.tokens - tokens).abs() < 1e-6, "{snapshot:?}");
}
