//! Hedged attempts (`hedge = ...`), in virtual time: when a copy is sent, which wins,
//! what is cancelled, what is counted, and what the budget allows.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{CircuitBreaker, IdempotencyKey, RetryBudget, idempotent, retry};
use tokio::time::Instant;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How each attempt goes, by the order it starts in: it takes `.0`, then succeeds with
/// its number or fails with `.1`. The last step is repeated.
struct Script {
    steps: Vec<(Duration, Option<io::ErrorKind>)>,
    started: AtomicU32,
    finished: AtomicU32,
}

impl Script {
    fn new(steps: &[(u64, Option<io::ErrorKind>)]) -> Self {
        Self {
            steps: steps.iter().map(|&(t, e)| (ms(t), e)).collect(),
            started: AtomicU32::new(0),
            finished: AtomicU32::new(0),
        }
    }

    async fn attempt(&self) -> io::Result<u32> {
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        let (takes, fails) = self.steps[(n as usize).min(self.steps.len() - 1)];
        tokio::time::sleep(takes).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
        match fails {
            None => Ok(n + 1),
            Some(kind) => Err(io::Error::from(kind)),
        }
    }

    /// Attempts started, and those that ran to their end (not cancelled).
    fn counts(&self) -> (u32, u32) {
        (
            self.started.load(Ordering::SeqCst),
            self.finished.load(Ordering::SeqCst),
        )
    }
}

const FAIL: Option<io::ErrorKind> = Some(io::ErrorKind::ConnectionReset);
const OK: Option<io::ErrorKind> = None;

fn stats(name: &str) -> persevere::StatsSnapshot {
    persevere::stats::get(name).expect("called")
}

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// A slow first attempt gets a copy at 50 ms; the copy answers in 10 ms and wins, and the
// first is dropped at once.
// Can fail: no hedge (the call takes 1 s), a hedge sent at the wrong time, or a loser left
// running.
#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_and_the_first_success_wins() {
    let script = Script::new(&[(1000, OK), (10, OK)]);
    let start = Instant::now();
    assert_eq!(hedged(&script).await.unwrap(), 2);
    assert_eq!(start.elapsed(), ms(60));
    assert_eq!(script.counts(), (2, 1));
    let s = stats("hedged");
    assert_eq!((s.requests, s.attempts, s.retries), (1, 2, 0));
    assert_eq!((s.hedges, s.hedges_won), (1, 1));
    assert_eq!(s.attempts_to_success[0], 1);
}

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_fast(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// An attempt that finishes before the delay is never hedged.
#[tokio::test(start_paused = true)]
async fn an_attempt_faster_than_the_delay_is_not_hedged() {
    let script = Script::new(&[(49, OK)]);
    for _ in 0..3 {
        let start = Instant::now();
        hedged_fast(&script).await.unwrap();
        assert_eq!(start.elapsed(), ms(49));
    }
    assert_eq!(script.counts(), (3, 3));
    let s = stats("hedged_fast");
    assert_eq!((s.requests, s.attempts, s.hedges), (3, 3, 0));
}

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_first_fails(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// The first attempt fails at 100 ms while its copy (sent at 50 ms) is in flight: the call
// waits for the copy, which succeeds at 200 ms, with no retry and no wait.
// Can fail: a failure that ends the group (the call would retry and wait, or return the
// error).
#[tokio::test(start_paused = true)]
async fn a_failure_while_a_copy_is_in_flight_does_not_end_the_call() {
    let script = Script::new(&[(100, FAIL), (150, OK)]);
    let start = Instant::now();
    assert_eq!(hedged_first_fails(&script).await.unwrap(), 2);
    assert_eq!(start.elapsed(), ms(200));
    assert_eq!(script.counts(), (2, 2));
    let s = stats("hedged_first_fails");
    assert_eq!(
        (s.attempts, s.retries, s.hedges, s.hedges_won),
        (2, 0, 1, 1)
    );
    assert_eq!(s.waited, Duration::ZERO);
}

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_copy_fails(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// The copy fails first (at 60 ms) and the first attempt succeeds at 100 ms: its success
// is the call's, and the copy did not win.
#[tokio::test(start_paused = true)]
async fn a_copy_that_fails_leaves_the_first_attempt_running() {
    let script = Script::new(&[(100, OK), (10, FAIL)]);
    let start = Instant::now();
    assert_eq!(hedged_copy_fails(&script).await.unwrap(), 1);
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(script.counts(), (2, 2));
    let s = stats("hedged_copy_fails");
    assert_eq!((s.attempts, s.hedges, s.hedges_won), (2, 1, 0));
}

#[retry(hedge = "50ms", attempts = 2, base = "1s", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn hedged_all_fail(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// Every copy fails: the group ends with the last failure (at 150 ms, the copy's), and the
// call retries by its policy: a wait of 1 s, then a second hedged attempt, which fails
// the same way, and the call gives up with the last error.
#[tokio::test(start_paused = true)]
async fn when_every_copy_fails_the_call_retries_by_its_policy() {
    let script = Script::new(&[(100, FAIL)]);
    let start = Instant::now();
    let error = hedged_all_fail(&script).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    // 150 ms (the copy sent at 50 ms fails at 150), 1 s of wait, 150 ms again.
    assert_eq!(start.elapsed(), ms(1300));
    assert_eq!(script.counts(), (4, 4));
    let s = stats("hedged_all_fail");
    assert_eq!((s.requests, s.attempts, s.retries, s.hedges), (1, 4, 1, 2));
    assert_eq!(s.failed.attempts_exhausted, 1);
}

#[retry(hedge = "50ms", hedges = 2, deadline = "300ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_hangs(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// A dependency that hangs: two copies, at 50 and 100 ms, hang too, and the deadline cuts
// all three at 300 ms.
// Can fail: a third copy (`hedges = 2` caps them), or a copy that outlives the deadline.
#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_every_copy() {
    let script = Script::new(&[(3_600_000, OK)]);
    let start = Instant::now();
    let error = hedged_hangs(&script).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), ms(300));
    assert_eq!(script.counts(), (3, 0));
    assert_eq!(stats("hedged_hangs").hedges, 2);
}

#[retry(hedge = "p90", budget = UNLIMITED)]
#[idempotent]
async fn hedged_p90(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// By percentile: no hedge until the function has seen 100 latencies; then a slow attempt
// is hedged just after the 90th percentile of them (10 ms, read to within 1/16).
#[tokio::test(start_paused = true)]
async fn a_percentile_hedge_waits_for_enough_latencies() {
    // 99 calls of 10 ms, then one slow call: not hedged, 99 latencies known.
    let mut steps = vec![(10, OK); 99];
    steps.push((1000, OK));
    // Then a slow first attempt (the 101st) whose copy answers in 10 ms.
    steps.push((1000, OK));
    steps.push((10, OK));
    let script = Script::new(&steps);
    for _ in 0..99 {
        hedged_p90(&script).await.unwrap();
    }
    let start = Instant::now();
    assert_eq!(hedged_p90(&script).await.unwrap(), 100);
    assert_eq!(start.elapsed(), ms(1000), "no hedge before 100 latencies");
    assert_eq!(stats("hedged_p90").hedges, 0);
    let start = Instant::now();
    assert_eq!(hedged_p90(&script).await.unwrap(), 102);
    let elapsed = start.elapsed();
    assert!(
        elapsed > ms(20) && elapsed <= ms(21),
        "hedged after the p90 of 10 ms, and won 10 ms later: {elapsed:?}"
    );
    let s = stats("hedged_p90");
    assert_eq!((s.hedges, s.hedges_won), (1, 1));
}

static EVERY_HEDGE: RetryBudget = RetryBudget::new();

#[retry(hedge = "10ms", budget = EVERY_HEDGE)]
#[idempotent]
async fn hedged_always_slow(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// Every request is slow, so every call wants a hedge: the budget pays for them as for
// retries, but a hedge never takes the last token, which stays for a retry. So hedges
// are at most the floor (2) less that one, plus 10 % of requests: 1,000 calls, 50 at a
// time, at most 101 hedges, where unbudgeted hedging sends 1,000. (Each round of 50
// calls is counted when its calls end, so the hedges of a round spend what the rounds
// before it earned: 77 in all.)
// Can fail: hedges not paid for from the budget, or allowed to take its last token.
#[tokio::test(start_paused = true)]
async fn when_every_request_is_slow_hedges_stay_within_the_budget() {
    let script = Script::new(&[(1000, OK)]);
    for _ in 0..20 {
        let calls: Vec<_> = (0..50).map(|_| hedged_always_slow(&script)).collect();
        for result in futures_join_all(calls).await {
            result.unwrap();
        }
    }
    let s = stats("hedged_always_slow");
    assert_eq!(s.requests, 1000);
    assert!(s.hedges <= 101, "{s:?}");
    // It did hedge: the budget's 10 % is spent, not withheld.
    assert!(s.hedges >= 70, "{s:?}");
    assert_eq!(s.hedges + s.hedges_refused, 1000);
    assert_eq!(u64::from(script.counts().0), 1000 + s.hedges);
    assert!(EVERY_HEDGE.snapshot(std::time::Instant::now()).tokens >= 1.0);
}

static SHARED: RetryBudget = RetryBudget::new();

#[retry(hedge = "10ms", budget = SHARED)]
#[idempotent]
async fn hedged_sharing(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

#[retry(base = "10ms", jitter = "none", budget = SHARED)]
#[idempotent]
async fn retried_sharing(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// A budget shared by a hedged function and a plain one: hedges drain it (a fresh
// budget's reserve of 5) to its last token and no further, so the plain function's next
// transient failure is still retried.
// Can fail (as a review found): hedges that spend the reserve retries are there for.
#[tokio::test(start_paused = true)]
async fn hedges_leave_the_last_token_for_a_retry() {
    let slow = Script::new(&[(1000, OK)]);
    let calls: Vec<_> = (0..30).map(|_| hedged_sharing(&slow)).collect();
    for result in futures_join_all(calls).await {
        result.unwrap();
    }
    let s = stats("hedged_sharing");
    assert_eq!((s.hedges, s.hedges_refused), (4, 26), "{s:?}");
    let flaky = Script::new(&[(1, FAIL), (1, OK)]);
    assert_eq!(retried_sharing(&flaky).await.unwrap(), 2);
    assert_eq!(stats("retried_sharing").retries, 1);
}

/// Awaits every future, concurrently, in order.
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        while set.len() < pinned.len() {
            set.push(None);
        }
        for (slot, future) in set.iter_mut().zip(pinned.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(out) => *slot = Some(out),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    set.into_iter().map(Option::unwrap).collect()
}

static SENT_KEYS: Mutex<Vec<IdempotencyKey>> = Mutex::new(Vec::new());

#[retry(hedge = "50ms", key = key, budget = UNLIMITED)]
async fn hedged_write(script: &Script, key: IdempotencyKey) -> io::Result<u32> {
    SENT_KEYS.lock().unwrap().push(key);
    script.attempt().await
}

// A write made safe by its key: every copy sends the same key.
#[tokio::test(start_paused = true)]
async fn every_copy_of_a_write_sends_its_key() {
    let script = Script::new(&[(1000, OK), (10, OK)]);
    let key = IdempotencyKey::new();
    assert_eq!(hedged_write(&script, key).await.unwrap(), 2);
    let keys = SENT_KEYS.lock().unwrap();
    assert_eq!(*keys, vec![key, key]);
}

static BREAKER: CircuitBreaker = CircuitBreaker::new().with_consecutive_failures(2);

#[retry(hedge = "50ms", attempts = 1, breaker = BREAKER, budget = UNLIMITED)]
#[idempotent]
async fn hedged_behind_breaker(script: &Script) -> Result<u32, BreakerError> {
    Ok(script.attempt().await?)
}

// The breaker sees every copy: the first fails while its copy is in flight (one failure),
// then the copy fails (the second in a row), and the breaker opens.
// Can fail: a copy's failure not told to the breaker (it would stay closed).
#[tokio::test(start_paused = true)]
async fn the_breaker_sees_every_copy() {
    let script = Script::new(&[(100, FAIL), (100, FAIL)]);
    hedged_behind_breaker(&script).await.unwrap_err();
    assert_eq!(script.counts(), (2, 2));
    assert_eq!(
        BREAKER.state(std::time::Instant::now()),
        persevere::BreakerState::Open
    );
    // Each failure told once: the first's by the attempt, the copy's by the call.
    let snapshot = BREAKER.snapshot(std::time::Instant::now());
    assert_eq!((snapshot.calls, snapshot.failures), (2, 2));
    // Open, it refuses the next call before any attempt.
    let error = hedged_behind_breaker(&script).await.unwrap_err();
    assert!(matches!(error, BreakerError::Open(_)));
    assert_eq!(script.counts(), (2, 2));
}

#[derive(Debug)]
enum BreakerError {
    Io(io::Error),
    Open(persevere::CircuitOpen),
}

impl From<io::Error> for BreakerError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<persevere::CircuitOpen> for BreakerError {
    fn from(e: persevere::CircuitOpen) -> Self {
        Self::Open(e)
    }
}

impl From<persevere::AttemptTimedOut> for BreakerError {
    fn from(e: persevere::AttemptTimedOut) -> Self {
        Self::Io(e.into())
    }
}

impl persevere::Classify for BreakerError {
    fn classify(&self) -> persevere::Class {
        match self {
            Self::Io(e) => e.classify(),
            Self::Open(e) => e.classify(),
        }
    }
}

/// Ready at its third poll (and never waking its task itself): polled at the start, when
/// the hedge's timer wakes the call, and after the copy is sent.
struct ReadyOnThirdPoll(u32);

impl std::future::Future for ReadyOnThirdPoll {
    type Output = io::Result<u32>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0 += 1;
        let _ = cx;
        if self.0 >= 3 {
            std::task::Poll::Ready(Ok(7))
        } else {
            std::task::Poll::Pending
        }
    }
}

static BODIES: AtomicU32 = AtomicU32::new(0);

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn answers_as_the_copy_is_sent() -> io::Result<u32> {
    BODIES.fetch_add(1, Ordering::SeqCst);
    ReadyOnThirdPoll(0).await
}

// A copy counted as an attempt was sent: the copy is polled (its request on its way)
// before the first attempt, answering in the same poll, can end the group.
// Can fail (as reported by a review): the first polled again before the new copy, which
// was then dropped unsent yet counted.
#[tokio::test(start_paused = true)]
async fn every_copy_counted_was_started() {
    assert_eq!(answers_as_the_copy_is_sent().await.unwrap(), 7);
    let s = stats("answers_as_the_copy_is_sent");
    assert_eq!(s.hedges, 1);
    assert_eq!(u64::from(BODIES.load(Ordering::SeqCst)), s.attempts);
}

#[retry(hedge = "50ms", deadline = "1s", budget = UNLIMITED)]
#[idempotent]
async fn hedged_not_found(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// A permanent failure is the dependency's answer: it ends the attempt at once, though a
// copy is in flight (which would only repeat it), and is returned as it is.
// Can fail (as a review found): the call waited for the hanging copy until its deadline
// and returned a timeout.
#[tokio::test(start_paused = true)]
async fn a_permanent_failure_ends_the_attempt_at_once() {
    let script = Script::new(&[(60, Some(io::ErrorKind::NotFound)), (3_600_000, OK)]);
    let start = Instant::now();
    let error = hedged_not_found(&script).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert_eq!(start.elapsed(), ms(60));
    assert_eq!(script.counts(), (2, 1));
    let s = stats("hedged_not_found");
    assert_eq!((s.attempts, s.hedges, s.failed.permanent), (2, 1, 1));
}

#[retry(hedge = "50ms", attempts = 3, base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn hedged_permanent_then_transient(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// A permanent failure is not overridden by a copy's later transient one, which would
// have the call retried.
#[tokio::test(start_paused = true)]
async fn a_later_transient_failure_does_not_override_a_permanent_one() {
    let script = Script::new(&[(60, Some(io::ErrorKind::PermissionDenied)), (20, FAIL)]);
    let error = hedged_permanent_then_transient(&script).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(script.counts(), (2, 1));
    assert_eq!(stats("hedged_permanent_then_transient").retries, 0);
}

#[retry(attempts = 2, base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn inner_fails() -> io::Result<u32> {
    Err(io::ErrorKind::ConnectionReset.into())
}

static OUTER_ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(hedge = "50ms", attempts = 3, base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn hedged_outer() -> io::Result<u32> {
    if OUTER_ATTEMPTS.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
        // The first attempt passes the nested failure on, at 200 ms.
        let error = inner_fails().await.unwrap_err();
        tokio::time::sleep(ms(200)).await;
        Err(error)
    } else {
        // The copy handles its own nested failure, then fails itself, at 60 ms.
        let _ = inner_fails().await;
        persevere::nested_failure_handled();
        tokio::time::sleep(ms(10)).await;
        Err(io::ErrorKind::ConnectionReset.into())
    }
}

// Each copy keeps its own mark of a nested call's failure: the copy that handled its
// own does not clear the first attempt's, whose failure (the nested one, passed on) is
// not retried again.
// Can fail (as a review found): the copies shared the call's mark, and the copy's
// `nested_failure_handled()` had the first attempt's failure retried: 6 attempts.
#[tokio::test(start_paused = true)]
async fn each_copy_keeps_its_own_mark_of_a_nested_failure() {
    let error = hedged_outer().await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(OUTER_ATTEMPTS.load(Ordering::SeqCst), 2);
    let s = stats("hedged_outer");
    assert_eq!((s.attempts, s.failed.retried_inside), (2, 1));
}

static CACHE_HITS: AtomicU32 = AtomicU32::new(0);

#[retry(hedge = "p90", budget = UNLIMITED)]
#[idempotent]
async fn mostly_cached(script: &Script) -> io::Result<u32> {
    // Nine calls in ten answer from a cache, without waiting.
    if CACHE_HITS.fetch_add(1, Ordering::SeqCst) % 10 != 0 {
        return Ok(0);
    }
    script.attempt().await
}

// An attempt that answers without waiting says nothing of how long a slow one takes:
// the percentile is of the attempts that waited, here a steady 20 ms, and none of them
// is hedged.
// Can fail (as a review found): cache hits learnt as 0 ms made the p90 0 ms, and every
// miss got a copy at once.
#[tokio::test(start_paused = true)]
async fn answers_without_waiting_are_not_learnt() {
    let script = Script::new(&[(20, OK)]);
    for _ in 0..3000 {
        mostly_cached(&script).await.unwrap();
    }
    let s = stats("mostly_cached");
    assert_eq!(s.requests, 3000);
    assert_eq!(s.hedges, 0, "{s:?}");
}

static OPENS: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_millis(100));

#[retry(hedge = "300ms", breaker = OPENS, budget = UNLIMITED)]
#[idempotent]
async fn hedged_while_open(script: &Script) -> Result<u32, BreakerError> {
    Ok(script.attempt().await?)
}

// A copy due while the breaker is open (its open time over) is not sent, and its ask
// does not move the breaker to half-open: only a real call's probe does.
// Can fail (as a review found): the copy's ask moved the breaker to half-open.
#[tokio::test(start_paused = true)]
async fn a_copy_due_while_the_breaker_is_open_is_not_sent() {
    let script = Script::new(&[(1000, OK)]);
    let call = tokio::spawn(async move { hedged_while_open(&script).await.map(|_| ()) });
    tokio::time::sleep(ms(10)).await;
    // Something else opens the breaker.
    let permit = OPENS.admit(std::time::Instant::now()).unwrap();
    OPENS.record(permit, false, std::time::Instant::now());
    call.await.unwrap().unwrap();
    let s = stats("hedged_while_open");
    assert_eq!(s.hedges, 0);
    assert_eq!(OPENS.snapshot(std::time::Instant::now()).half_opened, 0);
}

#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_tie(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// The first attempt and its copy answer at the same moment: the first wins, and the
// copy, which saved nothing, is not counted as won.
#[tokio::test(start_paused = true)]
async fn the_first_attempt_wins_a_tie() {
    let script = Script::new(&[(100, OK), (50, OK)]);
    assert_eq!(hedged_tie(&script).await.unwrap(), 1);
    let s = stats("hedged_tie");
    assert_eq!((s.hedges, s.hedges_won), (1, 0));
}

static STARTS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

#[retry(hedge = "50ms", hedges = 3, deadline = "1s", budget = UNLIMITED)]
#[idempotent]
async fn hedged_thrice(start: Instant) -> io::Result<u32> {
    STARTS.lock().unwrap().push(start.elapsed());
    std::future::pending::<()>().await;
    Ok(1)
}

// Each copy goes one delay after the last, up to `hedges`.
// Can fail: a copy's timer set from the wrong end (all copies at 50 ms), or a fourth.
#[tokio::test(start_paused = true)]
async fn copies_are_sent_one_delay_apart() {
    let start = Instant::now();
    hedged_thrice(start).await.unwrap_err();
    assert_eq!(*STARTS.lock().unwrap(), [ms(0), ms(50), ms(100), ms(150)]);
}

#[retry(hedge = "50ms", hedges = 2, budget = UNLIMITED)]
#[idempotent]
async fn hedged_twice(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// The first copy fails while the first attempt and the second copy are both in flight:
// the attempt goes on, and the first attempt wins at 300 ms.
// Can fail: in-flight copies miscounted, so that the failure ended the attempt at 150 ms.
#[tokio::test(start_paused = true)]
async fn a_copy_failing_beside_two_others_in_flight_does_not_end_the_attempt() {
    // First: 300 ms, success. Copy 1 (at 50 ms): fails at 150 ms. Copy 2 (at 100 ms):
    // would succeed at 500 ms.
    let script = Script::new(&[(300, OK), (100, FAIL), (400, OK)]);
    let start = Instant::now();
    assert_eq!(hedged_twice(&script).await.unwrap(), 1);
    assert_eq!(start.elapsed(), ms(300));
    assert_eq!(script.counts(), (3, 2));
}

// A hedged call its caller drops during its first attempt, after a copy was sent, is
// abandoned: a request, with its first attempt and its copy (in `hedges`). Dropped
// before any copy, it is not seen, as an unhedged call is not. Can fail: before, its
// copies were counted against no request (a hostile review's finding).
#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn dropped_while_hedged(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

#[tokio::test(start_paused = true)]
async fn a_hedged_call_dropped_after_sending_a_copy_is_abandoned() {
    let script = Script::new(&[(1000, OK)]);
    let cut = tokio::time::timeout(ms(30), dropped_while_hedged(&script)).await;
    assert!(cut.is_err());
    assert_eq!(persevere::stats::get("dropped_while_hedged"), None);
    let cut = tokio::time::timeout(ms(100), dropped_while_hedged(&script)).await;
    assert!(cut.is_err());
    assert_eq!(script.counts(), (3, 0));
    let s = stats("dropped_while_hedged");
    assert_eq!(
        (s.requests, s.attempts, s.hedges, s.abandoned),
        (1, 2, 1, 1),
        "{s:?}"
    );
    assert_eq!(
        (s.retries, s.succeeded, s.failed.total()),
        (0, 0, 0),
        "{s:?}"
    );
    // Its first attempt ended with a failure, and the call was dropped in its wait: the
    // call's state counts it, once.
    let script = Script::new(&[(60, FAIL), (1000, OK)]);
    let cut = tokio::time::timeout(ms(100), dropped_while_hedged(&script)).await;
    assert!(cut.is_err());
    let s = stats("dropped_while_hedged");
    assert_eq!(s.abandoned, 2, "{s:?}");
}

// A hedged call whose first attempt is cut at its deadline, copies and all, has failed:
// not abandoned as well. Can fail: it was counted twice, failed and abandoned.
#[retry(hedge = "50ms", deadline = "300ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_until_the_deadline(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

#[tokio::test(start_paused = true)]
async fn a_hedged_call_cut_at_its_deadline_has_failed_not_been_abandoned() {
    let script = Script::new(&[(1000, OK)]);
    let error = hedged_until_the_deadline(&script).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    let s = stats("hedged_until_the_deadline");
    assert_eq!(
        (s.requests, s.failed.deadline, s.abandoned, s.hedges),
        (1, 1, 0, 1),
        "{s:?}"
    );
}

#[retry(hedge = "50ms", base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn hedged_fails_fast(script: &Script) -> io::Result<u32> {
    script.attempt().await
}

// Attempts that fail before the hedge's delay send no copy, and are retried as any
// attempt is: 10 ms, a wait of 10, 10 ms, a wait of 20, and a success at 10 ms.
// Can fail: a failure before the delay that ends the call, or sends a copy; the waits
// of a hedged call not its policy's.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_fails_before_its_hedge_is_retried() {
    let script = Script::new(&[(10, FAIL), (10, FAIL), (10, OK)]);
    let start = Instant::now();
    assert_eq!(hedged_fails_fast(&script).await.unwrap(), 3);
    assert_eq!(start.elapsed(), ms(60));
    assert_eq!(script.counts(), (3, 3));
    let s = stats("hedged_fails_fast");
    assert_eq!((s.attempts, s.retries, s.hedges), (3, 2, 0));
}

static NESTED: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 2, base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn nested_under_hedge() -> io::Result<u32> {
    NESTED.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

#[retry(hedge = "50ms", base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_over_nested() -> io::Result<u32> {
    nested_under_hedge().await
}

// A hedged attempt that passes on the failure of a nested call, which retried it: the
// hedged call does not retry it again (1 attempt over the nested call's 2).
// Can fail: the nested-call rule lost in the hedged driver, so that the layers multiply
// (6 attempts of the nested function, not 2).
#[tokio::test(start_paused = true)]
async fn a_nested_failure_inside_a_hedged_attempt_is_not_retried_again() {
    assert!(hedged_over_nested().await.is_err());
    assert_eq!(NESTED.load(Ordering::SeqCst), 2);
    let s = stats("hedged_over_nested");
    assert_eq!((s.attempts, s.failed.retried_inside), (1, 1));
}

static LAST_COPY_CALLS: AtomicU32 = AtomicU32::new(0);
static LAST_COPY_NESTED: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 2, base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn nested_in_the_copy() -> io::Result<u32> {
    LAST_COPY_NESTED.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

// The first attempt fails on its own at 70 ms; its copy, sent at 50 ms, passes on a
// nested call's failure at 81 ms, the last in flight.
#[retry(hedge = "50ms", base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged_copy_passes_on_nested() -> io::Result<u32> {
    if LAST_COPY_CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
        tokio::time::sleep(ms(70)).await;
        return Err(io::ErrorKind::ConnectionReset.into());
    }
    tokio::time::sleep(ms(30)).await;
    nested_in_the_copy().await
}

// The attempt ends with the copy's outcome, and so with the copy's mark of a nested
// failure, not the first's: the call gives up as retried inside.
// Can fail: the marks of the first attempt and of its copies not kept apart, so that
// the copy's failure, which a nested call retried, is retried again.
#[tokio::test(start_paused = true)]
async fn the_copy_whose_outcome_ends_the_attempt_gives_its_nested_mark() {
    assert!(hedged_copy_passes_on_nested().await.is_err());
    assert_eq!(LAST_COPY_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(LAST_COPY_NESTED.load(Ordering::SeqCst), 2);
    let s = stats("hedged_copy_passes_on_nested");
    assert_eq!((s.attempts, s.hedges, s.failed.retried_inside), (2, 1, 1));
}
