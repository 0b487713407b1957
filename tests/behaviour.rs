//! The behaviour of `#[retry]` on async functions, in virtual time.
//!
//! Every test runs under tokio's paused clock (`start_paused = true`): a sleep advances
//! the clock at once, and an attempt that does not sleep takes zero virtual time, so the
//! gaps between attempt starts are exactly the waits the retry loop chose.
//!
//! Timer granularity: tokio's timer counts whole milliseconds from the moment the
//! runtime started. A sleep that ends at `t` fires at the first whole millisecond at or
//! after `t` (`deadline_to_tick` adds 999 999 ns and truncates), and under the paused
//! clock the runtime advances the clock to exactly that millisecond. The clock therefore
//! always sits on whole milliseconds, and a wait of `w` shows up as a gap of exactly `w`
//! rounded up to the next whole millisecond. Every bound checked below is itself a whole
//! number of milliseconds, so rounding up can never carry a wait that was within a bound
//! out of it: the bounds are compared exactly, with no tolerance. Where a bound comes
//! from a float computation (`Retry-After` times a factor in `[0.8, 1.2]`), 1 ms of slack
//! is allowed above it.

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use persevere::{
    AttemptTimedOut, CircuitOpen, Class, Classify, Decision, GiveUp, Jitter, Policy, RetryBudget,
    RetryState, idempotent, retry, seed_thread_rng,
};
use rand::{SeedableRng, rngs::SmallRng};
use tokio::time::Instant;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The error of the test functions: each variant carries the attempt it came from, so a
/// test can tell which attempt's error the caller got back.
#[derive(Clone, Debug, PartialEq)]
enum TestError {
    Transient(u32),
    Permanent(u32),
    RetryAfter(Duration),
    TimedOut(AttemptTimedOut),
    /// Never produced here (no test names a breaker); `persevere::retry` requires it.
    CircuitOpen(CircuitOpen),
}

impl Classify for TestError {
    fn classify(&self) -> Class {
        match self {
            TestError::Transient(_) | TestError::TimedOut(_) => Class::Transient,
            TestError::Permanent(_) | TestError::CircuitOpen(_) => Class::Permanent,
            TestError::RetryAfter(wait) => Class::RetryAfter(*wait),
        }
    }
}

impl From<AttemptTimedOut> for TestError {
    fn from(e: AttemptTimedOut) -> Self {
        TestError::TimedOut(e)
    }
}

impl From<CircuitOpen> for TestError {
    fn from(e: CircuitOpen) -> Self {
        TestError::CircuitOpen(e)
    }
}

/// What attempt `n` (from 1) of a scripted function returns.
type Script<'a> = &'a dyn Fn(u32) -> Result<u32, TestError>;

/// Records every attempt of one call: how many, and the virtual instant each started.
struct Probe {
    origin: Instant,
    starts: Mutex<Vec<Instant>>,
}

impl Probe {
    /// A probe whose time origin is now.
    fn new() -> Self {
        Self {
            origin: Instant::now(),
            starts: Mutex::new(Vec::new()),
        }
    }

    /// Records the start of an attempt; its number, from 1.
    fn enter(&self) -> u32 {
        let mut starts = self.starts.lock().unwrap();
        starts.push(Instant::now());
        u32::try_from(starts.len()).unwrap()
    }

    fn calls(&self) -> u32 {
        u32::try_from(self.starts.lock().unwrap().len()).unwrap()
    }

    /// When each attempt started, from the origin.
    fn offsets(&self) -> Vec<Duration> {
        let starts = self.starts.lock().unwrap();
        starts.iter().map(|s| *s - self.origin).collect()
    }

    /// The time between the starts of consecutive attempts.
    fn gaps(&self) -> Vec<Duration> {
        let starts = self.starts.lock().unwrap();
        starts.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The virtual time since the origin.
    fn elapsed(&self) -> Duration {
        Instant::now() - self.origin
    }
}

#[retry(base = "100ms", jitter = "none")]
#[idempotent]
async fn scripted(probe: &Probe, script: Script<'_>) -> Result<u32, TestError> {
    let n = probe.enter();
    script(n)
}

// A permanent failure is returned at once, after one call.
#[tokio::test(start_paused = true)]
async fn permanent_error_is_not_retried() {
    let probe = Probe::new();
    let result = scripted(&probe, &|n| Err(TestError::Permanent(n))).await;
    assert_eq!(result, Err(TestError::Permanent(1)));
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), Duration::ZERO);
}

// A transient failure that clears is retried until it does.
#[tokio::test(start_paused = true)]
async fn transient_error_that_clears_is_retried() {
    let probe = Probe::new();
    let result = scripted(&probe, &|n| {
        if n <= 2 {
            Err(TestError::Transient(n))
        } else {
            Ok(n * 10)
        }
    })
    .await;
    assert_eq!(result, Ok(30));
    assert_eq!(probe.calls(), 3);
    assert_eq!(probe.offsets(), [ms(0), ms(100), ms(300)]);
    assert_eq!(probe.elapsed(), ms(300));
}

#[retry(deadline = "1h", attempts = 4, base = "100ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn four_attempts(probe: &Probe) -> Result<u32, TestError> {
    Err(TestError::Transient(probe.enter()))
}

// The attempt backstop ends a persistent failure, with the function's last error.
#[tokio::test(start_paused = true)]
async fn attempts_backstop_returns_the_last_error() {
    let probe = Probe::new();
    let result = four_attempts(&probe).await;
    assert_eq!(result, Err(TestError::Transient(4)));
    assert_eq!(probe.calls(), 4);
    assert_eq!(probe.offsets(), [ms(0), ms(100), ms(300), ms(700)]);
    // No wait after the last attempt.
    assert_eq!(probe.elapsed(), ms(700));
}

#[retry(deadline = "1s", base = "300ms", jitter = "none", attempts = 100)]
#[idempotent]
async fn short_deadline(probe: &Probe) -> Result<u32, TestError> {
    Err(TestError::Transient(probe.enter()))
}

// The deadline ends a persistent failure: waits of 300 ms (ends at 300) and 600 ms
// (ends at 900) fit in 1 s; the next, 1200 ms from 900 ms, would end after the deadline,
// so it is not taken and the call returns at 900 ms with the third attempt's error.
#[tokio::test(start_paused = true)]
async fn deadline_stops_before_a_wait_that_cannot_fit() {
    let deadline = ms(1000);
    let probe = Probe::new();
    let result = short_deadline(&probe).await;
    assert_eq!(result, Err(TestError::Transient(3)));
    assert_eq!(probe.calls(), 3);
    assert_eq!(probe.offsets(), [ms(0), ms(300), ms(900)]);
    for offset in probe.offsets() {
        assert!(offset < deadline, "an attempt started at {offset:?}");
    }
    assert_eq!(probe.elapsed(), ms(900));
    assert!(probe.elapsed() < deadline);
}

#[retry(deadline = "900ms", base = "300ms", jitter = "none", attempts = 100)]
#[idempotent]
async fn wait_ends_at_the_deadline(probe: &Probe) -> Result<u32, TestError> {
    Err(TestError::Transient(probe.enter()))
}

// A wait that would end exactly at the deadline is not taken either: after the
// 300 ms wait, the 600 ms one would end at 900 ms, the deadline itself.
#[tokio::test(start_paused = true)]
async fn deadline_stops_before_a_wait_that_ends_at_it() {
    let probe = Probe::new();
    let result = wait_ends_at_the_deadline(&probe).await;
    assert_eq!(result, Err(TestError::Transient(2)));
    assert_eq!(probe.calls(), 2);
    assert_eq!(probe.offsets(), [ms(0), ms(300)]);
    assert_eq!(probe.elapsed(), ms(300));
}

#[retry(deadline = "30ms", base = "29ms", jitter = "none", attempts = 5)]
#[idempotent]
async fn wakes_late(probe: &Probe) -> Result<u32, TestError> {
    let attempt = probe.enter();
    // The attempt takes 0.9 ms, so the 29 ms wait is granted (it ends at 30.2 ms, before
    // the 30.3 ms deadline), but tokio's timer fires on whole milliseconds: at 31.2 ms.
    tokio::time::advance(Duration::from_micros(900)).await;
    Err(TestError::Transient(attempt))
}

// No attempt starts once the deadline has passed, even when the timer wakes the call
// after it: the call returns its last failure instead.
#[tokio::test(start_paused = true)]
async fn no_attempt_starts_after_the_deadline_when_the_timer_is_late() {
    tokio::time::advance(Duration::from_micros(300)).await;
    let probe = Probe::new();
    let result = wakes_late(&probe).await;
    assert_eq!(result, Err(TestError::Transient(1)));
    assert_eq!(probe.calls(), 1);
    assert!(probe.elapsed() > ms(30), "{:?}", probe.elapsed());
}

#[retry(jitter = "none", base = "100ms", cap = "1s", attempts = 6, budget = UNLIMITED)]
#[idempotent]
async fn no_jitter(probe: &Probe) -> Result<u32, TestError> {
    Err(TestError::Transient(probe.enter()))
}

// Without jitter the waits double from `base` up to `cap`.
#[tokio::test(start_paused = true)]
async fn no_jitter_waits_double_up_to_the_cap() {
    let probe = Probe::new();
    let result = no_jitter(&probe).await;
    assert_eq!(result, Err(TestError::Transient(6)));
    assert_eq!(probe.calls(), 6);
    assert_eq!(probe.gaps(), [ms(100), ms(200), ms(400), ms(800), ms(1000)]);
    assert_eq!(probe.elapsed(), ms(2500));
}

/// For the tests that make many calls to one function, or more than two retries in one
/// call: each `#[retry]` function otherwise has a retry budget of its own (10 % of
/// requests plus a floor of 2 once busy), which those calls would spend, ending calls
/// early for a reason that is not the one under test. The other functions keep their
/// default budget: none of them makes more than 2 retries, over this whole file.
static UNLIMITED: RetryBudget = RetryBudget::unlimited();

const JITTER_BASE: Duration = ms(100);
const JITTER_CAP: Duration = ms(2000);
const JITTER_ATTEMPTS: u32 = 8;
const SEEDS: u64 = 200;

/// A function that always fails transiently, under the policy the jitter tests assume
/// (`JITTER_BASE`, `JITTER_CAP`, `JITTER_ATTEMPTS`) with jitter `$jitter`.
macro_rules! always_fails_with_jitter {
    ($name:ident, $jitter:literal) => {
        #[retry(deadline = "1h", attempts = 8, base = "100ms", cap = "2s", jitter = $jitter, budget = UNLIMITED)]
        #[idempotent]
        async fn $name(probe: &Probe) -> Result<u32, TestError> {
            Err(TestError::Transient(probe.enter()))
        }
    };
}

always_fails_with_jitter!(full_jitter, "full");
always_fails_with_jitter!(equal_jitter, "equal");
always_fails_with_jitter!(decorrelated_jitter, "decorrelated");

/// `d = min(cap, base * 2^n)`, the wait before retry `n` before jitter.
fn ceiling(n: usize) -> Duration {
    JITTER_CAP.min(JITTER_BASE * 2u32.pow(u32::try_from(n).unwrap()))
}

/// The gaps of one whole call under `seed`, after checking that it made every attempt.
async fn gaps_of(
    seed: u64,
    call: impl AsyncFnOnce(&Probe) -> Result<u32, TestError>,
) -> Vec<Duration> {
    seed_thread_rng(seed);
    let probe = Probe::new();
    let result = call(&probe).await;
    assert_eq!(
        result,
        Err(TestError::Transient(JITTER_ATTEMPTS)),
        "seed {seed}"
    );
    assert_eq!(probe.calls(), JITTER_ATTEMPTS, "seed {seed}");
    probe.gaps()
}

// Full jitter: every wait in [0, d], and spread over the whole range.
#[tokio::test(start_paused = true)]
async fn full_jitter_stays_within_zero_and_d() {
    let (mut low, mut high) = (false, false);
    for seed in 0..SEEDS {
        let gaps = gaps_of(seed, full_jitter).await;
        for (n, gap) in gaps.iter().copied().enumerate() {
            let d = ceiling(n);
            assert!(gap <= d, "seed {seed}, retry {n}: {gap:?} > {d:?}");
            low |= gap < d / 4;
            high |= gap > d * 3 / 4;
        }
    }
    assert!(low && high, "full jitter does not spread over [0, d]");
}

// Equal jitter: every wait in [d/2, d], and spread over that range.
#[tokio::test(start_paused = true)]
async fn equal_jitter_stays_within_half_d_and_d() {
    let (mut low, mut high) = (false, false);
    for seed in 0..SEEDS {
        let gaps = gaps_of(seed, equal_jitter).await;
        for (n, gap) in gaps.iter().copied().enumerate() {
            let d = ceiling(n);
            assert!(
                d / 2 <= gap && gap <= d,
                "seed {seed}, retry {n}: {gap:?} not in [{:?}, {d:?}]",
                d / 2
            );
            low |= gap < d * 6 / 10;
            high |= gap > d * 9 / 10;
        }
    }
    assert!(low && high, "equal jitter does not spread over [d/2, d]");
}

// Decorrelated jitter: every wait in [base, min(cap, previous * 3)], `previous`
// starting at `base`. The previous wait is known only rounded up to the millisecond
// (as a gap), which can only raise the upper bound, so the check stays sound.
#[tokio::test(start_paused = true)]
async fn decorrelated_jitter_stays_within_base_and_three_times_previous() {
    let (mut grew, mut reached_cap) = (false, false);
    for seed in 0..SEEDS {
        let gaps = gaps_of(seed, decorrelated_jitter).await;
        let mut previous = JITTER_BASE;
        for (n, gap) in gaps.iter().copied().enumerate() {
            let top = JITTER_CAP.min(previous * 3);
            assert!(
                JITTER_BASE <= gap && gap <= top,
                "seed {seed}, retry {n}: {gap:?} not in [{JITTER_BASE:?}, {top:?}]"
            );
            grew |= gap > JITTER_BASE * 2;
            reached_cap |= gap == JITTER_CAP;
            previous = gap;
        }
    }
    assert!(grew, "decorrelated jitter never grew past 2 * base");
    assert!(reached_cap, "decorrelated jitter never reached the cap");
}

// The thread's seed makes the waits reproducible.
#[tokio::test(start_paused = true)]
async fn same_seed_same_waits() {
    let first = gaps_of(7, full_jitter).await;
    let second = gaps_of(7, full_jitter).await;
    let other = gaps_of(8, full_jitter).await;
    assert_eq!(first.len(), 7);
    assert_eq!(first, second);
    assert_ne!(first, other);
}

#[retry(base = "100ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn retry_after_default(probe: &Probe, script: Script<'_>) -> Result<u32, TestError> {
    script(probe.enter())
}

#[retry(base = "100ms", jitter = "none", max_retry_after = "5s")]
#[idempotent]
async fn retry_after_at_most_5s(probe: &Probe, script: Script<'_>) -> Result<u32, TestError> {
    script(probe.enter())
}

/// Fails the first attempt with `Retry-After: wait`, succeeds after.
fn once_retry_after(wait: Duration) -> impl Fn(u32) -> Result<u32, TestError> {
    move |n| {
        if n == 1 {
            Err(TestError::RetryAfter(wait))
        } else {
            Ok(n)
        }
    }
}

// A server's Retry-After replaces the computed wait, with jitter of 0.8 to 1.2.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let script = once_retry_after(ms(2000));
    let mut gaps = Vec::new();
    for seed in 0..50 {
        seed_thread_rng(seed);
        let probe = Probe::new();
        assert_eq!(retry_after_default(&probe, &script).await, Ok(2));
        assert_eq!(probe.calls(), 2);
        let gap = probe.gaps()[0];
        // Never before the server's time; spread by up to a fifth after it.
        // Can fail: the former factor in [0.8, 1.2] came back up to 400 ms early.
        assert!(
            ms(2000) <= gap && gap <= ms(2401),
            "seed {seed}: {gap:?} not in [2 s, 2.4 s]"
        );
        gaps.push(gap);
    }
    // The server's wait replaced the 100 ms backoff, and it is spread.
    assert!(gaps.iter().any(|g| *g != gaps[0]), "{gaps:?}");

    // Exactly `max_retry_after` is still honoured.
    let probe = Probe::new();
    let result = retry_after_at_most_5s(&probe, &once_retry_after(ms(5000))).await;
    assert_eq!(result, Ok(2));
    assert!((ms(5000)..=ms(6001)).contains(&probe.gaps()[0]));
}

// A Retry-After beyond `max_retry_after`, or beyond the deadline, fails the call at
// once, without waiting.
#[tokio::test(start_paused = true)]
async fn retry_after_too_long_returns_at_once() {
    let probe = Probe::new();
    let result = retry_after_at_most_5s(&probe, &once_retry_after(ms(5001))).await;
    assert_eq!(result, Err(TestError::RetryAfter(ms(5001))));
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), Duration::ZERO);
    // The statistics count it as a failed call, for that reason (no other test fails
    // this function).
    let s = persevere::stats::get("retry_after_at_most_5s").expect("called");
    assert_eq!(
        (s.failed.retry_after_too_long, s.failed.total()),
        (1, 1),
        "{s:?}"
    );

    // 40 s times at least 0.8 is beyond the default 30 s deadline.
    let probe = Probe::new();
    let result = retry_after_default(&probe, &once_retry_after(ms(40_000))).await;
    assert_eq!(result, Err(TestError::RetryAfter(ms(40_000))));
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), Duration::ZERO);
}

/// An error with no `Classify` impl: only the predicate can say whether to retry.
#[derive(Debug, PartialEq)]
struct Unclassified {
    retry: bool,
    attempt: u32,
}

/// An attempt cut at the deadline: retryable, from no attempt in particular.
impl From<AttemptTimedOut> for Unclassified {
    fn from(_: AttemptTimedOut) -> Self {
        Unclassified {
            retry: true,
            attempt: 0,
        }
    }
}

mod predicates {
    pub fn wants_retry(error: &super::Unclassified) -> bool {
        error.retry
    }
}

#[retry(on = predicates::wants_retry, base = "100ms", jitter = "none")]
#[idempotent]
async fn by_predicate(probe: &Probe, retry_first: bool) -> Result<u32, Unclassified> {
    let attempt = probe.enter();
    if attempt == 1 {
        Err(Unclassified {
            retry: retry_first,
            attempt,
        })
    } else {
        Ok(attempt)
    }
}

// `on = path::to::predicate`: true retries, false stops.
#[tokio::test(start_paused = true)]
async fn predicate_decides() {
    let probe = Probe::new();
    assert_eq!(by_predicate(&probe, true).await, Ok(2));
    assert_eq!(probe.calls(), 2);
    assert_eq!(probe.gaps(), [ms(100)]);

    let probe = Probe::new();
    let result = by_predicate(&probe, false).await;
    assert_eq!(
        result,
        Err(Unclassified {
            retry: false,
            attempt: 1
        })
    );
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), Duration::ZERO);
}

/// A predicate whose name is the one the generated classifier gives its parameter.
fn error(error: &Unclassified) -> bool {
    error.retry
}

#[retry(on = error, base = "100ms", jitter = "none")]
#[idempotent]
async fn by_predicate_named_error(probe: &Probe) -> Result<u32, Unclassified> {
    let attempt = probe.enter();
    if attempt == 1 {
        Err(Unclassified {
            retry: true,
            attempt,
        })
    } else {
        Ok(attempt)
    }
}

// `on = error` names the user's function, not a name of the generated code's.
// Can fail: it did not compile when the classifier's parameter was not hygienic.
#[tokio::test(start_paused = true)]
async fn a_predicate_named_error_is_the_users() {
    let probe = Probe::new();
    assert_eq!(by_predicate_named_error(&probe).await, Ok(2));
    assert_eq!(probe.calls(), 2);
}

// No `#[idempotent]`: `on = unsent` retries only failures where the request never left.
#[retry(on = unsent, base = "100ms", jitter = "none")]
async fn send_once(probe: &Probe, failure: io::ErrorKind) -> io::Result<u32> {
    let attempt = probe.enter();
    if attempt <= 2 {
        Err(io::Error::new(failure, format!("attempt {attempt}")))
    } else {
        Ok(attempt)
    }
}

// `on = unsent`: a refused connection is retried, a reset one is not, although its
// `Classify` impl calls it transient.
#[tokio::test(start_paused = true)]
async fn unsent_retries_only_refused_connections() {
    let probe = Probe::new();
    let result = send_once(&probe, io::ErrorKind::ConnectionRefused).await;
    assert_eq!(result.unwrap(), 3);
    assert_eq!(probe.calls(), 3);
    assert_eq!(probe.gaps(), [ms(100), ms(200)]);

    let probe = Probe::new();
    let error = send_once(&probe, io::ErrorKind::ConnectionReset)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(error.to_string(), "attempt 1");
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), Duration::ZERO);
}

#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn push_and_fail(
    probe: &Probe,
    seen: &Mutex<Vec<Vec<u32>>>,
    mut items: Vec<u32>,
) -> Result<Vec<u32>, TestError> {
    let attempt = probe.enter();
    seen.lock().unwrap().push(items.clone());
    items.push(attempt);
    if attempt < 3 {
        Err(TestError::Transient(attempt))
    } else {
        Ok(items)
    }
}

#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn add_and_fail(probe: &Probe, total: &mut u32) -> Result<u32, TestError> {
    let attempt = probe.enter();
    *total += 10;
    if attempt < 3 {
        Err(TestError::Transient(attempt))
    } else {
        Ok(*total)
    }
}

/// Fails attempt `fail_on` with `error`, otherwise gives the attempt back.
fn check(attempt: u32, fail_on: u32, error: fn(u32) -> TestError) -> Result<u32, TestError> {
    if attempt == fail_on {
        Err(error(attempt))
    } else {
        Ok(attempt)
    }
}

#[retry(base = "10ms", jitter = "none")]
#[idempotent]
async fn early_exits(probe: &Probe, first: fn(u32) -> TestError) -> Result<u32, TestError> {
    let attempt = check(probe.enter(), 1, first)?;
    if attempt == 2 {
        return Err(TestError::Transient(attempt));
    }
    Ok(attempt * 100)
}

// A by-value argument is copied afresh for every attempt.
#[tokio::test(start_paused = true)]
async fn by_value_arguments_are_fresh_for_each_attempt() {
    let probe = Probe::new();
    let seen = Mutex::new(Vec::new());
    let result = push_and_fail(&probe, &seen, vec![1, 2, 3]).await;
    assert_eq!(result, Ok(vec![1, 2, 3, 3]));
    assert_eq!(probe.calls(), 3);
    assert_eq!(
        seen.into_inner().unwrap(),
        [[1, 2, 3], [1, 2, 3], [1, 2, 3]]
    );
}

// An `&mut` argument is reborrowed, so what attempts do to it accumulates.
#[tokio::test(start_paused = true)]
async fn mut_ref_arguments_accumulate() {
    let probe = Probe::new();
    let mut total = 5;
    let result = add_and_fail(&probe, &mut total).await;
    assert_eq!(result, Ok(35));
    assert_eq!(probe.calls(), 3);
    assert_eq!(total, 35);
}

// `?` and `return` end the attempt, not the call.
#[tokio::test(start_paused = true)]
async fn question_mark_and_return_end_only_the_attempt() {
    let probe = Probe::new();
    let result = early_exits(&probe, TestError::Transient).await;
    assert_eq!(result, Ok(300));
    assert_eq!(probe.calls(), 3);
    assert_eq!(probe.gaps(), [ms(10), ms(20)]);

    // A permanent error through `?` still ends the call.
    let probe = Probe::new();
    let result = early_exits(&probe, TestError::Permanent).await;
    assert_eq!(result, Err(TestError::Permanent(1)));
    assert_eq!(probe.calls(), 1);
}

struct Service {
    probe: Probe,
    succeed_on: u32,
}

impl Service {
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn get(&self) -> Result<u32, TestError> {
        let attempt = self.probe.enter();
        if attempt < self.succeed_on {
            Err(TestError::Transient(attempt))
        } else {
            Ok(attempt)
        }
    }
}

struct Counter {
    attempts: u32,
}

impl Counter {
    #[retry(base = "10ms", jitter = "none", budget = UNLIMITED)]
    #[idempotent]
    async fn bump(&mut self) -> Result<u32, TestError> {
        self.attempts += 1;
        if self.attempts < 4 {
            Err(TestError::Transient(self.attempts))
        } else {
            Ok(self.attempts)
        }
    }
}

#[retry(base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn generic<T: Clone + std::fmt::Debug>(probe: &Probe, value: T) -> Result<T, TestError> {
    let attempt = probe.enter();
    if attempt < 3 {
        Err(TestError::Transient(attempt))
    } else {
        Ok(value)
    }
}

// Methods and generic functions retry too.
#[tokio::test(start_paused = true)]
async fn methods_and_generic_functions_retry() {
    let service = Service {
        probe: Probe::new(),
        succeed_on: 3,
    };
    assert_eq!(service.get().await, Ok(3));
    assert_eq!(service.probe.calls(), 3);

    let mut counter = Counter { attempts: 0 };
    assert_eq!(counter.bump().await, Ok(4));
    assert_eq!(counter.attempts, 4);

    let probe = Probe::new();
    assert_eq!(
        generic(&probe, String::from("value")).await,
        Ok(String::from("value"))
    );
    assert_eq!(probe.calls(), 3);
    let probe = Probe::new();
    assert_eq!(generic(&probe, [7u8; 3]).await, Ok([7, 7, 7]));
    assert_eq!(probe.calls(), 3);
}

#[retry(
    attempt_timeout = "100ms",
    attempts = 3,
    base = "10ms",
    jitter = "none"
)]
#[idempotent]
async fn slow(probe: &Probe) -> Result<u32, TestError> {
    let attempt = probe.enter();
    tokio::time::sleep(ms(1000)).await;
    Ok(attempt)
}

#[retry(
    deadline = "250ms",
    attempt_timeout = "200ms",
    base = "10ms",
    jitter = "none"
)]
#[idempotent]
async fn slow_near_the_deadline(probe: &Probe) -> Result<u32, TestError> {
    let attempt = probe.enter();
    tokio::time::sleep(ms(1000)).await;
    Ok(attempt)
}

// An attempt cut by its timeout is a transient failure, reported as the function's
// own error.
#[tokio::test(start_paused = true)]
async fn attempt_timeout_cuts_each_attempt() {
    let probe = Probe::new();
    let result = slow(&probe).await;
    assert_eq!(
        result,
        Err(TestError::TimedOut(AttemptTimedOut::after(ms(100))))
    );
    assert_eq!(probe.calls(), 3);
    // Cut at 100, wait 10; cut at 210, wait 20; cut at 330.
    assert_eq!(probe.offsets(), [ms(0), ms(110), ms(230)]);
    assert_eq!(probe.elapsed(), ms(330));
}

// The last attempt is cut at the deadline, not at its own timeout: the first is cut
// at 200 ms, the second starts at 210 ms with 40 ms left, and is cut at 250 ms.
#[tokio::test(start_paused = true)]
async fn attempt_timeout_is_cut_at_the_deadline() {
    let probe = Probe::new();
    let result = slow_near_the_deadline(&probe).await;
    assert_eq!(
        result,
        Err(TestError::TimedOut(AttemptTimedOut::at_deadline(ms(40))))
    );
    assert_eq!(probe.calls(), 2);
    assert_eq!(probe.offsets(), [ms(0), ms(210)]);
    assert_eq!(probe.elapsed(), ms(250));
}

/// When each attempt of `holds_a_lock` was dropped, from the test's start.
static DROPPED_AT: std::sync::Mutex<Vec<Duration>> = std::sync::Mutex::new(Vec::new());

/// Records when it is dropped, as a lock or a connection held by an attempt would be
/// given back.
struct Held(tokio::time::Instant);

impl Drop for Held {
    fn drop(&mut self) {
        DROPPED_AT.lock().unwrap().push(self.0.elapsed());
    }
}

#[retry(attempt_timeout = "100ms", attempts = 2, base = "1s", jitter = "none")]
#[idempotent]
async fn holds_a_lock(start: tokio::time::Instant) -> Result<u32, TestError> {
    let _held = Held(start);
    tokio::time::sleep(ms(1000)).await;
    Ok(1)
}

// An attempt cut by its time limit is dropped when it is cut, not when the wait after it
// ends: what it holds (a connection, a lock) is given back for the wait.
// Can fail: the cut attempt kept through the wait (dropped at 1.1 s).
#[tokio::test(start_paused = true)]
async fn a_cut_attempt_is_dropped_before_the_wait() {
    let start = tokio::time::Instant::now();
    let result = holds_a_lock(start).await;
    assert_eq!(
        result,
        Err(TestError::TimedOut(AttemptTimedOut::after(ms(100))))
    );
    // Cut at 100 ms and dropped then; the second, started at 1.1 s, cut at 1.2 s.
    assert_eq!(*DROPPED_AT.lock().unwrap(), [ms(100), ms(1200)]);
}

static POLICY: Policy = Policy::new()
    .with_deadline(Duration::from_secs(3600))
    .with_attempts(4)
    .with_base(ms(100))
    .with_jitter(Jitter::None)
    .with_budget(&UNLIMITED);

/// The same policy as `POLICY`, through the macro.
#[retry(
    deadline = "1h",
    attempts = 4,
    base = "100ms",
    jitter = "none",
    budget = UNLIMITED
)]
#[idempotent]
async fn by_macro(probe: &Probe, script: Script<'_>) -> Result<u32, TestError> {
    script(probe.enter())
}

/// `script` under `POLICY` through `persevere::retry`: the result, the calls, the gaps.
async fn by_runtime(script: Script<'_>) -> (Result<u32, TestError>, u32, Vec<Duration>) {
    let probe = Probe::new();
    let result = persevere::retry_fn(&POLICY, || {
        let outcome = script(probe.enter());
        async move { outcome }
    })
    .await;
    (result, probe.calls(), probe.gaps())
}

/// `script` under `POLICY` with a `RetryState` driven by hand in simulated time: the
/// result, the calls, the waits and why it gave up (if it did).
fn by_hand(script: Script<'_>) -> (Result<u32, TestError>, u32, Vec<Duration>, Option<GiveUp>) {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut now = std::time::Instant::now();
    let mut state = RetryState::new(&POLICY, now);
    let mut waits = Vec::new();
    let mut calls = 0;
    loop {
        calls += 1;
        assert_eq!(state.attempts(), calls);
        let error = match script(calls) {
            Ok(value) => return (Ok(value), calls, waits, None),
            Err(error) => error,
        };
        match state.on_failure(error.classify(), now, &mut rng) {
            Decision::Retry(wait) => {
                waits.push(wait);
                now += wait;
            }
            Decision::GiveUp(why) => return (Err(error), calls, waits, Some(why)),
        }
    }
}

// The macro, the runtime's `retry` function and a hand-driven `RetryState` agree.
#[tokio::test(start_paused = true)]
async fn macro_runtime_and_state_machine_agree() {
    let clears: Script<'_> = &|n| {
        if n <= 2 {
            Err(TestError::Transient(n))
        } else {
            Ok(n)
        }
    };
    let persists: Script<'_> = &|n| Err(TestError::Transient(n));
    let permanent: Script<'_> = &|n| Err(TestError::Permanent(n));
    let cases = [
        (clears, Ok(3), 3, vec![ms(100), ms(200)], None),
        (
            persists,
            Err(TestError::Transient(4)),
            4,
            vec![ms(100), ms(200), ms(400)],
            Some(GiveUp::AttemptsExhausted),
        ),
        (
            permanent,
            Err(TestError::Permanent(1)),
            1,
            vec![],
            Some(GiveUp::Permanent),
        ),
    ];
    for (script, result, calls, waits, why) in cases {
        let probe = Probe::new();
        assert_eq!(by_macro(&probe, script).await, result);
        assert_eq!(probe.calls(), calls);
        assert_eq!(probe.gaps(), waits);

        assert_eq!(
            by_runtime(script).await,
            (result.clone(), calls, waits.clone())
        );
        assert_eq!(by_hand(script), (result, calls, waits, why));
    }
}

// `cap` caps every wait, the first included: a cap below the base means every wait is
// the cap, as `Policy::with_cap` says; the macro accepts what the policy accepts.
// Can fail: waits of the base (5 s) or of `base * 2^n` would give gaps of 5 s and 10 s.
#[retry(base = "5s", cap = "2s", jitter = "none", attempts = 3, budget = UNLIMITED)]
#[idempotent]
async fn cap_below_base(probe: &Probe) -> Result<u32, TestError> {
    Err(TestError::Transient(probe.enter()))
}

#[tokio::test(start_paused = true)]
async fn a_cap_below_the_base_makes_every_wait_the_cap() {
    let probe = Probe::new();
    assert_eq!(cap_below_base(&probe).await, Err(TestError::Transient(3)));
    assert_eq!(probe.gaps(), [ms(2000), ms(2000)]);
}

// An attempt timeout longer than the deadline is cut at the deadline: the attempt that
// would run for an hour is cancelled at 3 s, and the call returns its timeout at once.
// Can fail: an attempt limited by its timeout alone would end the call after 10 s.
#[retry(
    deadline = "3s",
    attempt_timeout = "10s",
    base = "100ms",
    jitter = "none"
)]
#[idempotent]
async fn timeout_beyond_the_deadline(probe: &Probe) -> Result<u32, TestError> {
    probe.enter();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_beyond_the_deadline_is_cut_at_the_deadline() {
    let probe = Probe::new();
    let result = timeout_beyond_the_deadline(&probe).await;
    assert_eq!(
        result,
        Err(TestError::TimedOut(AttemptTimedOut::at_deadline(ms(3000))))
    );
    assert_eq!(probe.calls(), 1);
    assert_eq!(probe.elapsed(), ms(3000));
}

static CUT_EACH_TIME: Policy = Policy::new()
    .with_attempts(3)
    .with_attempt_timeout(Some(Duration::from_millis(100)))
    .with_base(Duration::from_millis(10))
    .with_jitter(Jitter::None)
    .with_budget(&UNLIMITED);

// `retry_fn` calls its closure once per attempt, also when each attempt is cut by its
// time limit (then the next attempt is made as the wait begins, not again after it).
// Can fail: the timer forgetting that the next attempt was made, and making another.
#[tokio::test(start_paused = true)]
async fn the_closure_is_called_once_per_attempt_when_attempts_are_cut() {
    let mut calls = 0;
    let result: io::Result<()> = persevere::retry_fn(&CUT_EACH_TIME, || {
        calls += 1;
        std::future::pending()
    })
    .await;
    assert_eq!(result.unwrap_err().kind(), io::ErrorKind::TimedOut);
    assert_eq!(calls, 3);
}

// A call whose failures leave it unsure whether the operation happened gives up after
// `uncertain_attempts` of them (2 by default); the statistics count it with the calls
// that ran out of attempts.
#[derive(Debug)]
struct Unsure;

impl Classify for Unsure {
    fn classify(&self) -> Class {
        Class::Uncertain
    }
}

impl From<AttemptTimedOut> for Unsure {
    fn from(_: AttemptTimedOut) -> Self {
        Unsure
    }
}

#[retry(base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn always_unsure(probe: &Probe) -> Result<u32, Unsure> {
    probe.enter();
    Err(Unsure)
}

#[tokio::test(start_paused = true)]
async fn uncertain_failures_end_the_call_and_count_as_attempts_exhausted() {
    let probe = Probe::new();
    assert!(always_unsure(&probe).await.is_err());
    assert_eq!(probe.calls(), 2);
    let s = persevere::stats::get("always_unsure").expect("called");
    assert_eq!(
        (s.failed.attempts_exhausted, s.failed.total()),
        (1, 1),
        "{s:?}"
    );
}

static NO_WAIT: Policy = Policy::new()
    .with_base(Duration::ZERO)
    .with_jitter(Jitter::None)
    .with_budget(&UNLIMITED);

// A zero wait (a policy made by hand with no base) takes no time at all: the next
// attempt is made at once, in the same poll. Can fail: a zero wait that yields to the
// executor, or waits for a timer's tick.
#[tokio::test(start_paused = true)]
async fn a_zero_wait_takes_no_time() {
    let calls = std::sync::atomic::AtomicU32::new(0);
    let start = Instant::now();
    let call = persevere::retry_fn(&NO_WAIT, || {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            if n < 2 {
                Err(io::Error::from(io::ErrorKind::ConnectionReset))
            } else {
                Ok(n)
            }
        }
    });
    let mut call = std::pin::pin!(call);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let std::task::Poll::Ready(result) = call.as_mut().poll(&mut cx) else {
        panic!("a call whose waits are all zero finishes in its first poll");
    };
    assert_eq!(result.unwrap(), 2);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::ZERO);
}
