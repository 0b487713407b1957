//! Retry statistics per function: the numbers to alert on are ratios, not single
//! retries.
//!
//! Every `#[retry]` function keeps a [`RetryStats`] of its own, registered on its first
//! call; [`all`] and [`get`] read them, and [`Report`] prints them as a table.
//!
//! # Calls that succeed at once are counted in batches
//!
//! Such a call is most calls, and it must cost next to nothing: it must not read the
//! clock and must not write a word that other cores write. So each thread counts the
//! first-try successes of each function (of the first 256 functions a process calls)
//! on its own, and adds them to the function's statistics and to its retry budget (as
//! requests) 64 at a time, when a call of the function fails on the thread (before the
//! failure asks the budget for a retry), and when the thread exits.
//!
//! Statistics read on a thread ([`get`], [`all`], [`RetryStats::snapshot`]) first add
//! that thread's pending successes, so a program that calls and reads on one thread sees
//! exact counts. Read from another thread, a function's first-try successes can be up to
//! 63 behind per thread that calls it; its budget likewise counts up to 63 requests per
//! thread late, which at the default 10 % is at most 6 retries.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::classify::give_up::GiveUp;
use crate::fleet::batch;
use crate::fleet::budget::RetryBudget;

#[cfg(feature = "metrics")]
mod labels;
mod report;

#[cfg(feature = "metrics")]
pub(crate) use labels::MetricLabels;
pub use report::Report;

/// Buckets of the attempts-to-success distribution: 1, 2, 3, 4, 5, 6-10, 11 or more.
const BUCKETS: usize = 7;

/// The upper bounds of the buckets, inclusive; the last is open.
const BUCKET_TOPS: [u32; BUCKETS] = [1, 2, 3, 4, 5, 10, u32::MAX];

const REASONS: usize = GiveUp::COUNT;

/// The slot of a function that has none: beyond every table of [`batch::SLOTS`].
const NO_SLOT: u32 = u32::MAX;

/// The counters of one retried function. Lock-free; a `#[retry]` call that succeeds at
/// once does not touch them: each thread counts those and adds them 64 at a time (see
/// [`crate::fleet::stats`]), and a read on a thread first adds what that thread has pending.
#[derive(Debug)]
pub struct RetryStats {
    name: &'static str,
    registered: AtomicBool,
    /// The function's slot in each thread's count of first-try successes; `NO_SLOT`
    /// before its first call, and for a function past the first [`batch::SLOTS`].
    slot: AtomicU32,
    /// Successful calls by the number of attempts they took.
    succeeded: [AtomicU64; BUCKETS],
    /// Attempts made by successful calls that took more than one.
    retried_success_attempts: AtomicU64,
    /// Failed calls by why they gave up.
    failed: [AtomicU64; REASONS],
    /// Attempts made by failed calls.
    failed_attempts: AtomicU64,
    /// Time spent waiting between attempts, in nanoseconds.
    waited_nanos: AtomicU64,
    /// Attempts made after a call's first: counted as they start.
    retries: AtomicU64,
    /// Copies of slow attempts sent beside them (`hedge = ...`).
    hedges: AtomicU64,
    /// Copies that succeeded before the attempt they hedged.
    hedges_won: AtomicU64,
    /// Copies not sent because the budget refused them.
    hedges_refused: AtomicU64,
    /// Calls dropped by their caller while they retried, and the attempts they made.
    abandoned: AtomicU64,
    abandoned_attempts: AtomicU64,
    /// The function's retry budget, refilled by [`reset`].
    budget: Option<&'static RetryBudget>,
    #[cfg(feature = "metrics")]
    labels: MetricLabels,
}

/// A copy of a function's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// The function's path, e.g. `my_crate::api::fetch_user`.
    pub function: &'static str,
    /// Calls made.
    pub requests: u64,
    /// Attempts made: first attempts, retries and hedges.
    pub attempts: u64,
    /// Attempts made after a call's first, counted as they start: `attempts` less the
    /// hedges and the calls that made an attempt at all (a call the breaker refused made
    /// none).
    pub retries: u64,
    /// Calls that returned `Ok`.
    pub succeeded: u64,
    /// Successful calls by attempts taken: 1, 2, 3, 4, 5, 6 to 10, 11 or more.
    pub attempts_to_success: [u64; BUCKETS],
    /// Calls that returned an error, by why they stopped retrying.
    pub failed: FailureCounts,
    /// Time spent waiting between attempts.
    pub waited: Duration,
    /// Copies of slow attempts sent beside them (`hedge = ...`), each an attempt.
    pub hedges: u64,
    /// Hedges that succeeded before the attempt they hedged: the calls hedging sped up.
    pub hedges_won: u64,
    /// Hedges not sent because the retry budget refused them.
    pub hedges_refused: u64,
    /// Calls their caller dropped (cancelled) while they retried, after a failed
    /// attempt and before they returned: a caller's own timeout shorter than the
    /// deadline, say. Counted in `requests`, their attempts in `attempts`; they neither
    /// succeeded nor failed. A call dropped during its first attempt is not seen unless
    /// it had sent a hedged copy, nor is one a panic unwinds through.
    pub abandoned: u64,
}

/// Failed calls by why they stopped retrying; see [`GiveUp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FailureCounts {
    /// The failure was permanent.
    pub permanent: u64,
    /// The attempts were exhausted (including the limit on uncertain failures).
    pub attempts_exhausted: u64,
    /// No time was left before the deadline.
    pub deadline: u64,
    /// The server asked for a wait beyond `max_retry_after`.
    pub retry_after_too_long: u64,
    /// The retry budget refused the retry.
    pub budget_refused: u64,
    /// A nested `#[retry]` call had already retried the failure.
    pub retried_inside: u64,
    /// The circuit breaker was open when the call began: refused, with no attempt made.
    pub circuit_open: u64,
    /// The circuit breaker opened during the call, which returned its last failure.
    pub breaker_opened: u64,
    /// The last attempt may have taken effect, and the function repeats only attempts
    /// that provably did not (`on = unsent`, `on = not_applied`).
    pub may_have_taken_effect: u64,
    /// The function was called inside an open transaction, through a connection that
    /// says so, and returned its first failure: the transaction is retried whole, where
    /// it began.
    pub inside_transaction: u64,
}

impl FailureCounts {
    /// All failed calls.
    pub fn total(&self) -> u64 {
        self.permanent
            + self.attempts_exhausted
            + self.deadline
            + self.retry_after_too_long
            + self.budget_refused
            + self.retried_inside
            + self.circuit_open
            + self.breaker_opened
            + self.may_have_taken_effect
            + self.inside_transaction
    }
}

impl StatsSnapshot {
    /// Retries per call: 0.0 when nothing fails; a rise is the signal to alert on.
    pub fn retry_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.retries as f64 / self.requests as f64
        }
    }
}

static REGISTRY: Mutex<Vec<&'static RetryStats>> = Mutex::new(Vec::new());

impl RetryStats {
    /// Counters for the function `name`.
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            registered: AtomicBool::new(false),
            slot: AtomicU32::new(NO_SLOT),
            succeeded: [const { AtomicU64::new(0) }; BUCKETS],
            retried_success_attempts: AtomicU64::new(0),
            failed: [const { AtomicU64::new(0) }; REASONS],
            failed_attempts: AtomicU64::new(0),
            waited_nanos: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            hedges: AtomicU64::new(0),
            hedges_won: AtomicU64::new(0),
            hedges_refused: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            abandoned_attempts: AtomicU64::new(0),
            budget: None,
            #[cfg(feature = "metrics")]
            labels: MetricLabels::new(name),
        }
    }

    /// The same statistics, of a function whose retry budget is `budget`: [`reset`]
    /// refills it with them.
    pub const fn with_budget(mut self, budget: &'static RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Zeroes the counters, refills the function's budget, and drops this thread's
    /// pending count of its first-try successes.
    fn reset(&self) {
        if let Some(slot) = self.slot() {
            batch::discard(slot);
        }
        let zero = |c: &AtomicU64| c.store(0, Ordering::Relaxed);
        self.succeeded.iter().for_each(zero);
        self.failed.iter().for_each(zero);
        for counter in [
            &self.retried_success_attempts,
            &self.failed_attempts,
            &self.waited_nanos,
            &self.retries,
            &self.hedges,
            &self.hedges_won,
            &self.hedges_refused,
            &self.abandoned,
            &self.abandoned_attempts,
        ] {
            zero(counter);
        }
        if let Some(budget) = self.budget {
            budget.reset();
        }
    }

    /// The function's slot in each thread's count of first-try successes, once it has
    /// been called, if it has one.
    #[inline]
    pub(crate) fn slot(&self) -> Option<usize> {
        match self.slot.load(Ordering::Relaxed) {
            NO_SLOT => None,
            n => Some(n as usize),
        }
    }

    /// This function's slot in each thread's batches, as [`RetryStats::slot`], but with
    /// no branch: without a slot, an index beyond every table (`NO_SLOT`), which the
    /// bounds check of the table lookup refuses, so that counting a call in its batch
    /// tests the slot once.
    #[inline]
    pub(crate) fn batch_index(&self) -> usize {
        self.slot.load(Ordering::Relaxed) as usize
    }

    /// Adds `n` calls that succeeded at their first attempt.
    pub(crate) fn first_try_successes(&self) -> &AtomicU64 {
        &self.succeeded[0]
    }

    /// The labels of this function's metrics.
    #[cfg(feature = "metrics")]
    pub(crate) fn labels(&self) -> &MetricLabels {
        &self.labels
    }

    /// The function's path.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Makes these counters visible to [`all`] and [`get`]; done on a function's first
    /// call.
    #[inline]
    pub(crate) fn register(&'static self) {
        if !self.registered.load(Ordering::Acquire) {
            self.register_slow();
        }
    }

    #[cold]
    fn register_slow(&'static self) {
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.registered.load(Ordering::Acquire) {
            // Functions take the slots in the order of their first calls.
            if registry.len() < batch::SLOTS {
                self.slot.store(registry.len() as u32, Ordering::Relaxed);
            }
            registry.push(self);
            self.registered.store(true, Ordering::Release);
        }
    }

    /// Records a call that succeeded after `attempts` attempts.
    #[inline]
    pub(crate) fn record_success(&self, attempts: u32) {
        let bucket = BUCKET_TOPS
            .iter()
            .position(|&top| attempts <= top)
            .unwrap_or(BUCKETS - 1);
        self.succeeded[bucket].fetch_add(1, Ordering::Relaxed);
        if attempts > 1 {
            self.retried_success_attempts
                .fetch_add(u64::from(attempts), Ordering::Relaxed);
        }
    }

    /// Records a call that gave up after `attempts` attempts.
    pub(crate) fn record_failure(&self, attempts: u32, reason: GiveUp) {
        self.failed[reason.index()].fetch_add(1, Ordering::Relaxed);
        self.failed_attempts
            .fetch_add(u64::from(attempts), Ordering::Relaxed);
    }

    /// Records a retry: an attempt after the first, as it starts.
    pub(crate) fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a copy of a slow attempt, sent beside it.
    pub(crate) fn record_hedge(&self) {
        self.hedges.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a copy that succeeded before the attempt it hedged.
    pub(crate) fn record_hedge_won(&self) {
        self.hedges_won.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a copy the budget refused.
    pub(crate) fn record_hedge_refused(&self) {
        self.hedges_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a call its caller dropped while it retried, after `attempts` attempts.
    pub(crate) fn record_abandoned(&self, attempts: u32) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
        self.abandoned_attempts
            .fetch_add(u64::from(attempts), Ordering::Relaxed);
    }

    /// Records a wait between attempts.
    pub(crate) fn record_wait(&self, wait: Duration) {
        let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.waited_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// A copy of the counters. Each counter is read once, without a lock, so a snapshot
    /// taken while calls run may be a few calls out between counters. First-try
    /// successes pending on this thread are added first; those pending on other threads
    /// are not (see [`crate::fleet::stats`]).
    pub fn snapshot(&self) -> StatsSnapshot {
        if let Some(slot) = self.slot() {
            batch::count(slot);
        }
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let attempts_to_success: [u64; BUCKETS] = std::array::from_fn(|i| load(&self.succeeded[i]));
        let succeeded: u64 = attempts_to_success.iter().sum();
        let f: [u64; REASONS] = std::array::from_fn(|i| load(&self.failed[i]));
        let count = |reason: GiveUp| f[reason.index()];
        let failed = FailureCounts {
            permanent: count(GiveUp::Permanent),
            attempts_exhausted: count(GiveUp::AttemptsExhausted)
                + count(GiveUp::UncertainExhausted),
            deadline: count(GiveUp::DeadlineExceeded),
            retry_after_too_long: count(GiveUp::RetryAfterTooLong),
            budget_refused: count(GiveUp::BudgetExhausted),
            retried_inside: count(GiveUp::RetriedInside),
            circuit_open: count(GiveUp::CircuitOpen),
            breaker_opened: count(GiveUp::BreakerOpened),
            may_have_taken_effect: count(GiveUp::MayHaveTakenEffect),
            inside_transaction: count(GiveUp::InsideTransaction),
        };
        let abandoned = load(&self.abandoned);
        let requests = succeeded + failed.total() + abandoned;
        let hedges = load(&self.hedges);
        let attempts = attempts_to_success[0]
            + load(&self.retried_success_attempts)
            + load(&self.failed_attempts)
            + load(&self.abandoned_attempts)
            + hedges;
        StatsSnapshot {
            function: self.name,
            requests,
            attempts,
            retries: load(&self.retries),
            succeeded,
            attempts_to_success,
            failed,
            waited: Duration::from_nanos(load(&self.waited_nanos)),
            hedges,
            hedges_won: load(&self.hedges_won),
            hedges_refused: load(&self.hedges_refused),
            abandoned,
        }
    }
}

/// Snapshots of every retried function called so far, in the order of their first
/// calls.
pub fn all() -> Report {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    Report(registry.iter().map(|s| s.snapshot()).collect())
}

/// Forgets what every retried function called so far has done: zeroes its statistics
/// and refills its retry budget (the function's own, or the one it names with
/// `budget = ...`), as at the start of the process; and refills the budget that policies
/// naming none share (`retry_fn(&Policy::new(), ...)`).
///
/// For tests: a function's default budget is shared by every call in the process, so
/// one test's outage can drain the budget of the next test that calls the same function,
/// and its statistics add up across tests. Call it at the start of a test that counts.
/// Tests run in parallel threads by default: two tests calling the same function at once
/// share its budget whatever this does, and this refills the budgets of the functions
/// other tests are calling at the moment too. Run those with `--test-threads=1`, hold
/// one lock in each, or give the function under test a budget of its own per test
/// (`budget = ...`).
///
/// Only the pending first-try successes of the calling thread are dropped; other
/// threads' are added when their batches fill.
///
/// ```
/// persevere::stats::reset();
/// assert!(persevere::stats::all().0.iter().all(|s| s.requests == 0));
/// ```
pub fn reset() {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    for stats in registry.iter() {
        stats.reset();
    }
    crate::fleet::budget::SHARED.reset();
}

/// The snapshot of the function whose path is `function` (e.g.
/// `"my_crate::api::fetch_user"`) or ends with `::function` (e.g. `"fetch_user"`), if it
/// has been called.
pub fn get(function: &str) -> Option<StatsSnapshot> {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    registry
        .iter()
        .find(|s| {
            s.name == function
                || s.name
                    .strip_suffix(function)
                    .is_some_and(|prefix| prefix.ends_with("::"))
        })
        .map(|s| s.snapshot())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        static STATS: RetryStats = RetryStats::new("tests::counts_add_up");
        STATS.register();
        STATS.register();
        for _ in 0..10 {
            STATS.record_success(1);
        }
        STATS.record_success(3);
        STATS.record_success(12);
        STATS.record_failure(4, GiveUp::AttemptsExhausted);
        STATS.record_failure(1, GiveUp::Permanent);
        STATS.record_wait(Duration::from_millis(250));
        // The retries of the calls of 3, 12 and 4 attempts, as they started.
        for _ in 0..2 + 11 + 3 {
            STATS.record_retry();
        }
        let s = STATS.snapshot();
        assert_eq!(s.requests, 14);
        assert_eq!(s.attempts, 10 + 3 + 12 + 4 + 1);
        assert_eq!(s.retries, 30 - 14);
        assert_eq!(s.succeeded, 12);
        assert_eq!(s.attempts_to_success, [10, 0, 1, 0, 0, 0, 1]);
        assert_eq!(s.failed.attempts_exhausted, 1);
        assert_eq!(s.failed.permanent, 1);
        assert_eq!(s.waited, Duration::from_millis(250));
        assert!((s.retry_ratio() - 16.0 / 14.0).abs() < 1e-9);
        assert_eq!(get("counts_add_up"), Some(s.clone()));
        assert_eq!(get("tests::counts_add_up"), Some(s.clone()));
        assert_eq!(get("add_up"), None);
        let table = Report(vec![s]).to_string();
        assert!(table.contains("tests::counts_add_up"), "{table}");
        assert!(!table.contains("abandoned"), "{table}");
        assert_eq!(table.lines().count(), 2);
    }

    #[test]
    fn an_abandoned_call_is_a_request_neither_ok_nor_failed() {
        static STATS: RetryStats = RetryStats::new("tests::abandoned");
        STATS.register();
        STATS.record_success(1);
        STATS.record_retry();
        STATS.record_abandoned(2);
        let s = STATS.snapshot();
        assert_eq!((s.requests, s.attempts, s.retries), (2, 3, 1));
        assert_eq!((s.succeeded, s.failed.total(), s.abandoned), (1, 0, 1));
        let table = Report(vec![s]).to_string();
        let mut lines = table.lines();
        assert!(lines.next().unwrap().ends_with("  abandoned"), "{table}");
        assert!(lines.next().unwrap().ends_with("          1"), "{table}");
    }
}
