//! Calls that succeed at their first attempt, counted per thread and added to the shared
//! counters in batches.
//!
//! Such a call is most calls, and it must cost next to nothing: it must not read the
//! clock and must not write a word that other cores write. So each `#[retry]` function
//! has a thread-local [`Batch`] that counts its first-try successes on this thread. The
//! batch is added to the function's retry budget (as requests, at the time the batch is
//! added) and to its statistics:
//!
//! - when it reaches [`BATCH`] calls;
//! - when a call of the function fails on this thread, before the failure asks the budget
//!   for a retry, so that the function's own requests on this thread count for its
//!   retries (the pending successes of other functions that share the budget are added
//!   by their own batches);
//! - when the thread exits (at the time of the system clock, even for an async function
//!   under tokio's paused clock).
//!
//! Statistics read on a thread ([`crate::stats::get`], [`crate::stats::all`],
//! [`crate::RetryStats::snapshot`]) first add that thread's pending successes to them,
//! so a program that calls and reads on one thread sees exact counts. Read from another
//! thread, a function's first-try successes can be up to `BATCH - 1` behind per thread
//! that calls it.
//!
//! What this costs the budget: requests are counted up to `BATCH - 1` calls late per
//! thread and function, and at the time their batch is added rather than when they were
//! made. So a thread that made a few calls long ago and then fails adds requests older
//! than the window, at most `BATCH - 1` of them: 6 more retries at the default 10 %.

use std::cell::Cell;
use std::thread::LocalKey;
use std::time::Instant;

use crate::layer::CompactInstant;
use crate::policy::Policy;

/// How many first-try successes a thread counts before adding them to the shared
/// counters.
pub const BATCH: u32 = 64;

/// One function's first-try successes on one thread, not yet added to its budget and
/// statistics. Made by `#[retry]` in a `thread_local!`; see the [module](self).
#[derive(Debug)]
pub struct Batch {
    policy: &'static Policy,
    /// Successes not yet deposited in the budget.
    pending: Cell<u32>,
    /// Of those, how many the statistics already count (added by a read on this thread).
    counted: Cell<u32>,
}

/// The thread-local batch of a function.
pub type BatchKey = LocalKey<Batch>;

impl Batch {
    /// An empty batch for the function of `policy`.
    pub const fn new(policy: &'static Policy) -> Self {
        Self {
            policy,
            pending: Cell::new(0),
            counted: Cell::new(0),
        }
    }

    /// Counts one success; adds the batch when it is full, reading the time from `now`.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn add(&self, now: impl FnOnce() -> Instant) {
        let pending = self.pending.get() + 1;
        self.pending.set(pending);
        if pending >= BATCH {
            self.flush(CompactInstant::new(now()));
        }
    }

    /// Adds the pending successes to the budget, as requests made at `now`, and to the
    /// statistics.
    #[cold]
    pub(crate) fn flush(&self, now: CompactInstant) {
        let pending = self.pending.replace(0);
        let counted = self.counted.replace(0);
        if pending == 0 {
            return;
        }
        self.policy.budget().deposit_many(now, pending);
        if let Some(stats) = self.policy.stats() {
            stats.add_first_try_successes(pending - counted);
        }
    }

    /// Adds the pending successes to the statistics only, for a read on this thread.
    pub(crate) fn count(&self) {
        let pending = self.pending.get();
        let counted = self.counted.replace(pending);
        if let Some(stats) = self.policy.stats() {
            stats.add_first_try_successes(pending - counted);
        }
    }
}

impl Drop for Batch {
    /// A thread that exits adds what it has pending.
    fn drop(&mut self) {
        if self.pending.get() > 0 {
            self.flush(CompactInstant::new(Instant::now()));
        }
    }
}
