//! Fleet protection: the retry budget, retries at one layer, deadline propagation.
//! Time-based cases run under tokio's paused clock.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use persevere::{RetryBudget, deadline, idempotent, retry};
use tokio::time::Instant;

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

// ---- Retries at one layer -------------------------------------------------------------

static BOTTOM: AtomicU32 = AtomicU32::new(0);
static NESTED_BUDGET: RetryBudget = RetryBudget::unlimited();

async fn always_fails() -> io::Result<()> {
    BOTTOM.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

/// A retried layer of the stack below: `$name` calls `$below`, under one policy for all.
macro_rules! layer {
    ($name:ident calls $below:ident) => {
        #[retry(attempts = 3, base = "10ms", jitter = "none", budget = NESTED_BUDGET)]
        #[idempotent]
        async fn $name() -> io::Result<()> {
            $below().await
        }
    };
}

layer!(level5 calls always_fails);
layer!(level4 calls level5);
layer!(level3 calls level4);
layer!(level2 calls level3);
layer!(level1 calls level2);

#[tokio::test(start_paused = true)]
async fn five_nested_layers_make_one_layers_attempts() {
    BOTTOM.store(0, Ordering::SeqCst);
    let err = level1().await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    // 3^5 = 243 without the rule; the innermost layer retries, the others pass it on.
    assert_eq!(BOTTOM.load(Ordering::SeqCst), 3);
}

static EVERY_BOTTOM: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
async fn inner_every() -> io::Result<()> {
    EVERY_BOTTOM.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

#[retry(attempts = 3, base = "1ms", jitter = "none", layers = "every", budget = NESTED_BUDGET)]
#[idempotent]
async fn outer_every() -> io::Result<()> {
    inner_every().await
}

#[tokio::test(start_paused = true)]
async fn layers_every_opts_into_multiplying() {
    EVERY_BOTTOM.store(0, Ordering::SeqCst);
    outer_every().await.unwrap_err();
    assert_eq!(EVERY_BOTTOM.load(Ordering::SeqCst), 9);
}

static SUCCEEDS: AtomicU32 = AtomicU32::new(0);
static THEN_FAILS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 3, base = "1ms", budget = NESTED_BUDGET)]
#[idempotent]
async fn inner_ok() -> io::Result<()> {
    SUCCEEDS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[retry(attempts = 3, base = "1ms", budget = NESTED_BUDGET)]
#[idempotent]
async fn outer_fails_itself() -> io::Result<()> {
    inner_ok().await?;
    THEN_FAILS.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

#[tokio::test(start_paused = true)]
async fn an_outer_failure_of_its_own_is_still_retried() {
    // The inner call succeeded; the failure is the outer layer's own, which no layer has
    // retried yet.
    outer_fails_itself().await.unwrap_err();
    assert_eq!(THEN_FAILS.load(Ordering::SeqCst), 3);
    assert_eq!(SUCCEEDS.load(Ordering::SeqCst), 3);
}

thread_local! {
    /// Per thread: the two tests below both call `sync_inner`, in parallel, each on its
    /// own thread (a `#[tokio::test]` runs its current-thread runtime on the test's), so a
    /// shared counter would let one test's attempts into the other's count.
    static SYNC_BOTTOM: Cell<u32> = const { Cell::new(0) };
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
fn sync_inner() -> io::Result<()> {
    SYNC_BOTTOM.set(SYNC_BOTTOM.get() + 1);
    Err(reset())
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
fn sync_outer() -> io::Result<()> {
    sync_inner()
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
async fn async_over_sync() -> io::Result<()> {
    sync_inner()
}

#[test]
fn nested_blocking_layers_do_not_multiply() {
    SYNC_BOTTOM.set(0);
    sync_outer().unwrap_err();
    assert_eq!(SYNC_BOTTOM.get(), 3);
}

#[tokio::test]
async fn a_blocking_layer_inside_an_async_layer_is_seen() {
    SYNC_BOTTOM.set(0);
    async_over_sync().await.unwrap_err();
    assert_eq!(SYNC_BOTTOM.get(), 3);
}

// ---- Deadline propagation -------------------------------------------------------------

static INNER_CALLS: AtomicU32 = AtomicU32::new(0);
static SEEN_REMAINING: AtomicU64 = AtomicU64::new(0);

#[retry(deadline = "30s", attempts = 1000, base = "100ms", cap = "100ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
async fn patient_inner() -> io::Result<()> {
    INNER_CALLS.fetch_add(1, Ordering::SeqCst);
    let left = deadline::remaining().expect("inside a retried call");
    SEEN_REMAINING.store(left.as_millis() as u64, Ordering::SeqCst);
    Err(reset())
}

#[retry(deadline = "1s", budget = NESTED_BUDGET)]
#[idempotent]
async fn hurried_outer() -> io::Result<()> {
    patient_inner().await
}

#[tokio::test(start_paused = true)]
async fn a_nested_call_never_outlives_the_outer_deadline() {
    let start = Instant::now();
    hurried_outer().await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    // Waits of 100 ms within the outer 1 s: attempts at 0, 100, ..., 900 ms; the wait
    // after the tenth would end at the deadline.
    assert_eq!(INNER_CALLS.load(Ordering::SeqCst), 10);
    assert_eq!(SEEN_REMAINING.load(Ordering::SeqCst), 100);
}

static SCOPED_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(deadline = "30s", attempts = 1000, base = "100ms", cap = "100ms", jitter = "none", budget = NESTED_BUDGET)]
#[idempotent]
async fn scoped() -> io::Result<()> {
    SCOPED_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

#[tokio::test(start_paused = true)]
async fn a_deadline_scope_bounds_the_retries_inside() {
    assert_eq!(deadline::remaining(), None);
    let start = Instant::now();
    deadline::scope(Duration::from_millis(450), scoped())
        .await
        .unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(450));
    assert_eq!(SCOPED_CALLS.load(Ordering::SeqCst), 5);
}

// ---- The retry budget -----------------------------------------------------------------

static OUTAGE_BUDGET: RetryBudget = RetryBudget::new();
static OUTAGE_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 3, base = "0s", budget = OUTAGE_BUDGET)]
#[idempotent]
async fn during_outage() -> io::Result<()> {
    OUTAGE_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

#[tokio::test(start_paused = true)]
async fn in_a_total_outage_retries_stay_at_the_ratio_plus_floor() {
    const N: u32 = 10_000;
    for _ in 0..N {
        during_outage().await.unwrap_err();
    }
    let retries = OUTAGE_CALLS.load(Ordering::SeqCst) - N;
    // n x 10 % + 10, within 1; 2 x n = 20,000 without a budget.
    let bound = N / 10 + 10;
    assert!(
        retries.abs_diff(bound) <= 1,
        "{retries} retries for {N} calls"
    );
    let snapshot = OUTAGE_BUDGET.snapshot(Instant::now().into_std());
    assert_eq!(snapshot.requests, u64::from(N));
    assert_eq!(snapshot.retries, u64::from(retries));
    // Each call ends on a refusal, or on its third attempt after two granted retries.
    let refusals = snapshot.refusals;
    assert!(refusals <= u64::from(N), "{refusals}");
    assert!(refusals >= u64::from(N - retries / 2), "{refusals}");
}

static DEFAULT_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 6, base = "0s")]
#[idempotent]
async fn with_default_budget() -> io::Result<()> {
    DEFAULT_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(reset())
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_on_by_default() {
    for _ in 0..100 {
        with_default_budget().await.unwrap_err();
    }
    // Without a budget: 600 calls. With the default one: 100 + 10 % of 100 + 10.
    assert_eq!(DEFAULT_CALLS.load(Ordering::SeqCst), 100 + 10 + 10);
}

#[test]
fn budget_expires_with_its_window() {
    let budget = RetryBudget::new().with_window(Duration::from_secs(10));
    let start = std::time::Instant::now();
    for _ in 0..1000 {
        budget.deposit(start);
    }
    let granted = (0..1000).filter(|_| budget.withdraw(start)).count();
    assert_eq!(granted, 110);
    let later = start + Duration::from_secs(10);
    assert_eq!(budget.snapshot(later).requests, 0);
    assert_eq!((0..1000).filter(|_| budget.withdraw(later)).count(), 10);
}

#[test]
fn concurrent_withdrawals_never_exceed_the_bound() {
    static SHARED: RetryBudget = RetryBudget::new();
    let now = std::time::Instant::now();
    for _ in 0..5000 {
        SHARED.deposit(now);
    }
    let granted = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..10_000 {
                    if SHARED.withdraw(now) {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    SHARED.deposit(now);
                }
            });
        }
    });
    let requests = 5000 + 8 * 10_000;
    let bound = requests / 10 + 10;
    let granted = granted.load(Ordering::Relaxed);
    assert!(granted <= bound, "{granted} > {bound}");
    assert_eq!(SHARED.snapshot(now).retries, u64::from(granted));
}

// ---- Layers of concurrent tasks stay apart ---------------------------------------------

static WAITER_CALLS: AtomicU32 = AtomicU32::new(0);
static NEIGHBOUR_CALLS: AtomicU32 = AtomicU32::new(0);
static NEIGHBOUR_SAW: AtomicU64 = AtomicU64::new(0);

#[retry(attempts = 3, base = "10ms", jitter = "none", deadline = "2s", budget = NESTED_BUDGET)]
#[idempotent]
async fn waits_then_fails() -> io::Result<()> {
    WAITER_CALLS.fetch_add(1, Ordering::SeqCst);
    // Yields to the other task while this attempt's layer is in force.
    tokio::time::sleep(Duration::from_millis(5)).await;
    Err(reset())
}

#[retry(attempts = 2, base = "1ms", jitter = "none", deadline = "30s", budget = NESTED_BUDGET)]
#[idempotent]
async fn neighbour() -> io::Result<()> {
    NEIGHBOUR_CALLS.fetch_add(1, Ordering::SeqCst);
    let left = deadline::remaining().expect("inside its own call");
    NEIGHBOUR_SAW.store(left.as_secs(), Ordering::SeqCst);
    Err(reset())
}

#[tokio::test(start_paused = true)]
async fn tasks_on_one_thread_never_see_each_others_layers() {
    // The neighbour runs while the waiter's attempt is suspended on the same thread. Had
    // it seen the waiter's layer, its deadline would be the waiter's 2 s, and its failure
    // would stop the waiter's retries.
    let waiter = tokio::spawn(waits_then_fails());
    let neighbour = tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(2)).await;
        neighbour().await
    });
    waiter.await.unwrap().unwrap_err();
    neighbour.await.unwrap().unwrap_err();
    assert_eq!(WAITER_CALLS.load(Ordering::SeqCst), 3);
    assert_eq!(NEIGHBOUR_CALLS.load(Ordering::SeqCst), 2);
    assert!(NEIGHBOUR_SAW.load(Ordering::SeqCst) >= 29);
}
