//! The lazy deadline clock of async `#[retry]` calls, in virtual time.
//!
//! An async call does not read the clock when it starts. Its deadline starts counting
//! when its first attempt first yields, when it fails, or when a nested `#[retry]` call
//! or `deadline::remaining()` asks for the deadline; inside an enclosing deadline, or
//! with `attempt_timeout`, at once. Each test runs under tokio's paused clock and
//! asserts exact attempt counts, attempt start times and elapsed times, chosen so that
//! they would differ if the clock started at the call's start or at its first failure
//! instead of where it should.
//!
//! Under the paused clock an attempt that does not await takes no virtual time. To stand
//! for work that holds the thread for a while, `work` moves the clock forward without
//! yielding. Sleeps start and end on whole milliseconds (see `tests/behaviour.rs`), so
//! every attempt time below is exact; only what `deadline::remaining()` reads is allowed
//! to come up to 7 ns short (see `assert_remaining`).

use std::future::Future;
use std::io;
use std::sync::Mutex;
use std::task::{Context, Waker};
use std::time::Duration;

use persevere::{RetryBudget, deadline, idempotent, retry};
use tokio::time::Instant;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

/// The tests here make more retries than a default budget's floor of 10 allows; the
/// budget is not what they test.
static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// Moves the paused clock `d` forward without yielding: work that holds the thread for
/// `d`. `tokio::time::advance` moves the clock on its first poll, then yields; that poll
/// is made here, with a waker that does nothing, and the rest of it dropped.
fn work(d: Duration) {
    let before = Instant::now();
    let mut advance = std::pin::pin!(tokio::time::advance(d));
    let pending = advance
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending();
    assert!(
        pending,
        "tokio::time::advance no longer yields after advancing"
    );
    assert_eq!(Instant::now() - before, d, "the clock did not move");
}

/// Records the attempts of one call: when each started, and what else a test wants to
/// see from inside them.
struct Probe {
    origin: Instant,
    starts: Mutex<Vec<Duration>>,
    seen: Mutex<Vec<Option<Duration>>>,
}

impl Probe {
    /// A probe whose time origin is now.
    fn new() -> Self {
        Self {
            origin: Instant::now(),
            starts: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Records the start of an attempt; its number, from 1.
    fn enter(&self) -> usize {
        let mut starts = self.starts.lock().unwrap();
        starts.push(self.elapsed());
        starts.len()
    }

    /// When each attempt started, from the origin.
    fn starts(&self) -> Vec<Duration> {
        self.starts.lock().unwrap().clone()
    }

    /// Records what `deadline::remaining()` says now.
    fn see_remaining(&self) {
        self.seen.lock().unwrap().push(deadline::remaining());
    }

    /// Everything recorded by `see_remaining`, in order.
    fn seen(&self) -> Vec<Option<Duration>> {
        self.seen.lock().unwrap().clone()
    }

    /// The virtual time since the origin.
    fn elapsed(&self) -> Duration {
        Instant::now() - self.origin
    }
}

/// Attempt start times: the first at 0, the others every whole second `from..=to`.
fn at_0_then_every_second(from: u64, to: u64) -> Vec<Duration> {
    std::iter::once(0).chain(from..=to).map(secs).collect()
}

/// Asserts that `deadline::remaining()` read `expected`, in order. A layer may hold its
/// deadline rounded down to 8 ns (to fit its frame in one word, see
/// `retry-runtime/src/layer/frame.rs`), so a read may come up to 7 ns short of the exact
/// value, never over it.
#[track_caller]
fn assert_remaining(seen: &[Option<Duration>], expected: &[Duration]) {
    assert_eq!(
        seen.len(),
        expected.len(),
        "read {seen:?}, expected {expected:?}"
    );
    for (seen, expected) in seen.iter().zip(expected) {
        let close = seen.is_some_and(|seen| seen <= *expected && *expected - seen < ns(8));
        assert!(close, "read {seen:?}, expected {expected:?}");
    }
}

// ---- When the clock starts ------------------------------------------------------------

/// Fails every attempt. The first also works for `busy` without yielding, then sleeps
/// for `asleep`; a zero duration skips that part, so with `asleep` zero it never yields.
#[retry(deadline = "12s", base = "1s", cap = "1s", jitter = "none", attempts = 100, budget = UNLIMITED)]
#[idempotent]
async fn first_attempt_slow(probe: &Probe, busy: Duration, asleep: Duration) -> io::Result<()> {
    if probe.enter() == 1 {
        if !busy.is_zero() {
            work(busy);
        }
        if !asleep.is_zero() {
            tokio::time::sleep(asleep).await;
        }
    }
    Err(reset())
}

// The first attempt yields at once, which starts the clock at 0: its 10 s count. It fails
// at 10 s; a 1 s wait ends at 11 s, before the 12 s deadline, so attempt 2 runs at 11 s;
// the next wait would end at 12 s, the deadline itself, and is not taken.
// Can fail: had the clock started at the failure (10 s), attempts would run every second
// until 21 s (12 of them) and the call would end 9 s after its deadline.
#[tokio::test(start_paused = true)]
async fn the_first_attempts_wait_counts_toward_the_deadline() {
    let probe = Probe::new();
    let error = first_attempt_slow(&probe, Duration::ZERO, secs(10))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(probe.starts(), [secs(0), secs(11)]);
    assert_eq!(probe.elapsed(), secs(11));
    assert!(probe.elapsed() < secs(12));
}

// Defined behaviour: a first attempt that never yields does not start the clock, so the
// deadline counts from its failure. Here it works for 5 s without yielding and fails at
// 5 s: the 12 s deadline falls at 17 s, and with 1 s waits attempts run at 6, 7, ... 16 s;
// the wait after the one at 16 s would end at the deadline. The 5 s of work are the
// thread time that `Retry::start_lazily` documents as left out of the deadline.
// Can fail: a clock started with the call (at 0) would end the call at 11 s after 7
// attempts.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_that_never_yields_starts_the_clock_when_it_fails() {
    let probe = Probe::new();
    let error = first_attempt_slow(&probe, secs(5), Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(probe.starts(), at_0_then_every_second(6, 16));
    assert_eq!(probe.elapsed(), secs(16));
}

// The clock starts at the first yield, 3 s in, after the work and before the sleep: the
// deadline falls at 15 s. The attempt fails at 7 s; attempts follow every second from 8 s
// to 14 s, and the wait after the one at 14 s would end at the deadline.
// Can fail: a clock started with the call would stop at 11 s (5 attempts); one started
// at the failure (7 s) would go on to 18 s (12 attempts).
#[tokio::test(start_paused = true)]
async fn work_before_the_first_yield_is_left_out_and_the_wait_after_it_counts() {
    let probe = Probe::new();
    first_attempt_slow(&probe, secs(3), secs(4))
        .await
        .unwrap_err();
    assert_eq!(probe.starts(), at_0_then_every_second(8, 14));
    assert_eq!(probe.elapsed(), secs(14));
}

// ---- Nested calls ---------------------------------------------------------------------

#[retry(deadline = "60s", base = "500ms", cap = "500ms", jitter = "none", attempts = 100, budget = UNLIMITED)]
#[idempotent]
async fn patient_inner(probe: &Probe, attempt_time: Duration) -> io::Result<()> {
    probe.enter();
    probe.see_remaining();
    tokio::time::sleep(attempt_time).await;
    Err(reset())
}

#[retry(deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn hurried_outer(outer: &Probe, inner: &Probe) -> io::Result<()> {
    outer.enter();
    patient_inner(inner, secs(2)).await
}

// The inner call asks for the outer deadline before the outer call's clock has started:
// that starts it, at 0, so the inner call runs under the outer 5 s, not its own 60 s.
// Attempts of 2 s with 500 ms waits: 0-2 s, 2.5-4.5 s; the next wait would end at 5 s.
// The outer layer does not retry what the inner one already retried.
// Can fail: an inner call that ignored the lazy outer deadline would make 24 attempts
// over 60 s; the remaining times it saw would start at 60 s.
#[tokio::test(start_paused = true)]
async fn a_nested_call_inherits_a_deadline_whose_clock_has_not_started() {
    let (outer, inner) = (Probe::new(), Probe::new());
    let error = hurried_outer(&outer, &inner).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(outer.starts(), [secs(0)]);
    assert_eq!(inner.starts(), [secs(0), ms(2500)]);
    assert_remaining(&inner.seen(), &[secs(5), ms(2500)]);
    assert_eq!(inner.elapsed(), ms(4500));
}

#[retry(deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn sleeps_then_calls_inner(outer: &Probe, inner: &Probe) -> io::Result<()> {
    outer.enter();
    tokio::time::sleep(secs(1)).await;
    patient_inner(inner, secs(1)).await
}

// The outer call's clock started when its attempt first yielded (at 0, to sleep), not
// when the inner call asked for it at 1 s: the inner call has 4 s left. Attempts of 1 s
// with 500 ms waits: at 1, 2.5 and 4 s; the wait after the third would end at 5.5 s.
// Can fail: an outer clock started by the inner call would leave it 5 s, and a fourth
// attempt at 5.5 s.
#[tokio::test(start_paused = true)]
async fn a_nested_call_inherits_what_is_left_of_a_started_deadline() {
    let (outer, inner) = (Probe::new(), Probe::new());
    sleeps_then_calls_inner(&outer, &inner).await.unwrap_err();
    assert_eq!(outer.starts(), [secs(0)]);
    assert_eq!(inner.starts(), [secs(1), ms(2500), secs(4)]);
    assert_remaining(&inner.seen(), &[secs(4), ms(2500), secs(1)]);
    assert_eq!(inner.elapsed(), secs(5));
}

// ---- deadline::remaining --------------------------------------------------------------

#[retry(deadline = "7s", budget = UNLIMITED)]
#[idempotent]
async fn reads_remaining(probe: &Probe) -> io::Result<()> {
    probe.enter();
    probe.see_remaining();
    tokio::time::sleep(secs(1)).await;
    probe.see_remaining();
    Ok(())
}

// Asked before the attempt has awaited anything, `remaining()` starts the clock and
// reports the whole deadline; after a 1 s sleep in the same attempt, 1 s less.
// Can fail: a lazy frame that `remaining()` did not start would report `None`, and one
// whose clock restarted at the yield would report 7 s twice.
#[tokio::test(start_paused = true)]
async fn remaining_in_the_first_attempt_starts_the_clock() {
    assert_eq!(deadline::remaining(), None);
    let probe = Probe::new();
    reads_remaining(&probe).await.unwrap();
    assert_remaining(&probe.seen(), &[secs(7), secs(6)]);
    assert_eq!(probe.starts(), [secs(0)]);
    assert_eq!(deadline::remaining(), None);
}

#[retry(deadline = "7s", budget = UNLIMITED)]
#[idempotent]
async fn reads_remaining_while_busy(probe: &Probe) -> io::Result<()> {
    probe.see_remaining();
    work(secs(2));
    probe.see_remaining();
    tokio::time::sleep(secs(1)).await;
    probe.see_remaining();
    Ok(())
}

// The clock that `remaining()` started stays started: 2 s of work without yielding and
// a 1 s sleep both count.
// Can fail: had the start not been kept, the second read would start the clock again
// (7 s), and the third would count from the yield after the work (6 s).
#[tokio::test(start_paused = true)]
async fn the_clock_remaining_started_stays_started() {
    let probe = Probe::new();
    reads_remaining_while_busy(&probe).await.unwrap();
    assert_remaining(&probe.seen(), &[secs(7), secs(5), secs(4)]);
}

// ---- attempt_timeout ------------------------------------------------------------------

#[retry(
    deadline = "10s",
    attempt_timeout = "1s",
    base = "100ms",
    cap = "100ms",
    jitter = "none",
    budget = UNLIMITED
)]
#[idempotent]
async fn hangs_once(probe: &Probe) -> io::Result<u32> {
    if probe.enter() == 1 {
        std::future::pending::<()>().await;
    }
    Ok(7)
}

// An attempt that never finishes is cut at its 1 s timeout and retried after the 100 ms
// wait; the second attempt succeeds.
// Can fail: without the cut the call would never return (the test would hang), and any
// other timeout or wait would move the second start off 1.1 s.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_hangs_is_cut_at_its_timeout_and_retried() {
    let probe = Probe::new();
    assert_eq!(hangs_once(&probe).await.unwrap(), 7);
    assert_eq!(probe.starts(), [secs(0), ms(1100)]);
    assert_eq!(probe.elapsed(), ms(1100));
}

#[retry(
    deadline = "2500ms",
    attempt_timeout = "1s",
    base = "100ms",
    cap = "100ms",
    jitter = "none",
    budget = UNLIMITED
)]
#[idempotent]
async fn always_hangs(probe: &Probe) -> io::Result<u32> {
    probe.enter();
    std::future::pending().await
}

// With an attempt timeout the clock starts at once, with the call. Attempts start at 0,
// 1.1 and 2.2 s; the third is cut at the 2.5 s deadline rather than at its own 1 s, and
// the wait after it would end past the deadline.
// Can fail: a clock started lazily here would be lost with the first attempt (a
// timed-out attempt is dropped, with the frame that started its clock) and would start
// at its failure, 1 s late: a fourth attempt at 3.3 s, and the call ending at 3.5 s.
#[tokio::test(start_paused = true)]
async fn with_an_attempt_timeout_the_clock_starts_at_once() {
    let probe = Probe::new();
    let error = always_hangs(&probe).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(probe.starts(), [secs(0), ms(1100), ms(2200)]);
    assert_eq!(probe.elapsed(), ms(2500));
}

// ---- A blocking call inside a lazy async call -----------------------------------------

#[retry(budget = UNLIMITED)]
#[idempotent]
fn blocking_inner() -> io::Result<()> {
    Ok(())
}

#[retry(deadline = "30s", base = "1s", cap = "1s", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn async_over_blocking(probe: &Probe) -> io::Result<()> {
    let attempt = probe.enter();
    blocking_inner()?;
    probe.see_remaining();
    if attempt == 1 {
        return Err(reset());
    }
    Ok(())
}

// A blocking `#[retry]` call inside a lazy async call asks for its deadline before the
// async call's clock has started; it should start it on the async call's clock, at the
// same virtual instant as an eager start would, and leave it the whole 30 s.
// Can fail: it did, when the blocking call started the async call's clock on the
// system clock, which under tokio's paused clock is an hour behind.
#[tokio::test(start_paused = true)]
async fn a_blocking_inner_call_starts_the_outer_clock_on_the_outer_clock() {
    // An hour of virtual time: tokio's paused clock is now an hour ahead of the system's.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let probe = Probe::new();
    let result = async_over_blocking(&probe).await;
    // Where it failed: the outer call saw `Some(0ns)` left, so it gave up at its first
    // failure instead of retrying after 1 s.
    assert_remaining(&probe.seen(), &[secs(30), secs(29)]);
    assert_eq!(probe.starts(), [secs(0), secs(1)]);
    result.unwrap();
}
