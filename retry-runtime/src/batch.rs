//! Calls that succeed at their first attempt, counted per thread and added to the shared
//! counters in batches.
//!
//! Such a call is most calls, and it must cost next to nothing: it must not read the
//! clock and must not write a word that other cores write. So each thread counts the
//! first-try successes of each `#[retry]` function in a slot of its own (one of
//! [`SLOTS`], given to a function at its first call), and adds them to the function's
//! retry budget (as requests, at the time they are added) and to its statistics:
//!
//! - when they reach [`BATCH`] calls;
//! - when a call of the function fails on this thread, before the failure asks the budget
//!   for a retry, so that the function's own requests on this thread count for its
//!   retries (the pending successes of other functions that share the budget are added
//!   by their own slots);
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
//! thread and function, and at the time they are added rather than when they were made.
//! So a thread that made a few calls long ago and then fails adds requests older than the
//! window, at most `BATCH - 1` of them: 6 more retries at the default 10 %.
//!
//! A function has a slot once its policy has statistics (every `#[retry]` function's
//! does; a [`Policy`] of your own for [`crate::retry`] has them if you give it a
//! [`crate::RetryStats`]). The functions of a process past the first [`SLOTS`] to be
//! called, and policies without statistics, count each call at once instead: a clock
//! read and an atomic update of the budget.
//!
//! The table is 6 KiB of thread-local memory (256 slots of 24 bytes), in every thread of
//! a process that links persevere.

use std::cell::Cell;
use std::time::Instant;

use crate::budget::RetryBudget;
use crate::layer::CompactInstant;
use crate::policy::Policy;
use crate::stats::RetryStats;

/// How many first-try successes a thread counts before adding them to the shared
/// counters.
pub const BATCH: u32 = 64;

/// How many functions a thread can count for: the first this many `#[retry]` functions
/// of the process to be called.
pub const SLOTS: usize = 256;

/// One function's first-try successes on one thread, not yet added to its budget and
/// statistics.
struct Slot {
    /// The function's budget and statistics, set when the slot starts a batch.
    budget: Cell<Option<&'static RetryBudget>>,
    stats: Cell<Option<&'static RetryStats>>,
    /// Successes not yet deposited in the budget.
    pending: Cell<u32>,
    /// Of those, how many the statistics already count (added by a read on this thread).
    counted: Cell<u32>,
}

impl Slot {
    const fn new() -> Self {
        Self {
            budget: Cell::new(None),
            stats: Cell::new(None),
            pending: Cell::new(0),
            counted: Cell::new(0),
        }
    }

    /// Adds the pending successes to the budget, as requests made at `now`, and to the
    /// statistics.
    #[cold]
    fn flush(&self, now: CompactInstant) {
        let pending = self.pending.replace(0);
        let counted = self.counted.replace(0);
        if pending == 0 {
            return;
        }
        if let Some(budget) = self.budget.get() {
            budget.deposit_many(now, pending);
        }
        if let Some(stats) = self.stats.get() {
            stats.add_first_try_successes(pending - counted);
        }
    }

    /// Adds the pending successes to the statistics only, for a read on this thread.
    fn count(&self) {
        let pending = self.pending.get();
        let counted = self.counted.replace(pending);
        if let Some(stats) = self.stats.get() {
            stats.add_first_try_successes(pending - counted);
        }
    }
}

thread_local! {
    /// This thread's slots. Without a destructor, so that reaching them is one
    /// instruction, with no check of whether the thread is exiting; the slots are added
    /// at the thread's exit by [`FLUSH_AT_EXIT`].
    static SLOTS_OF_THIS_THREAD: [Slot; SLOTS] = const { [const { Slot::new() }; SLOTS] };

    /// Adds this thread's slots when the thread exits; armed when a slot starts a batch.
    static FLUSH_AT_EXIT: FlushAtExit = const { FlushAtExit };
}

/// Adds what a thread has pending when it exits.
struct FlushAtExit;

impl Drop for FlushAtExit {
    fn drop(&mut self) {
        let now = CompactInstant::new(Instant::now());
        SLOTS_OF_THIS_THREAD.with(|slots| {
            for slot in slots {
                if slot.pending.get() > 0 {
                    slot.flush(now);
                }
            }
        });
    }
}

/// Makes sure this thread adds its slots when it exits. A thread that is already
/// exiting cannot: what it counts from then on is not added.
#[cold]
fn arm_flush_at_exit() {
    let _ = FLUSH_AT_EXIT.try_with(|_| {});
}

/// Counts one first-try success of the function of `policy`, whose slot is `slot`; adds
/// the batch when it is full, reading the time from `now`. `false` if `slot` is beyond
/// [`SLOTS`] (as [`RetryStats::batch_index`] is for a function without a slot): the
/// caller counts the call itself.
///
/// The thread-local is reached in a closure that does nothing else, so that the
/// compiler inlines it (and the access becomes one instruction); what is rare happens
/// outside.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn add(policy: &Policy, slot: usize, now: impl FnOnce() -> Instant) -> bool {
    let pending = SLOTS_OF_THIS_THREAD.with(|slots| {
        let slot = slots.get(slot)?;
        let pending = slot.pending.get() + 1;
        slot.pending.set(pending);
        Some(pending)
    });
    match pending {
        None => false,
        // Neither the first count of a batch nor its last: one comparison.
        Some(pending) if pending.wrapping_sub(2) < BATCH - 2 => true,
        Some(1) => {
            begin(policy, slot);
            true
        }
        Some(pending) if pending >= BATCH => {
            flush(slot, CompactInstant::new(now()));
            true
        }
        Some(_) => true,
    }
}

/// A slot's first count since it was last added: it learns its function's budget and
/// statistics, and the thread arms the flush at its exit.
#[cold]
fn begin(policy: &Policy, slot: usize) {
    SLOTS_OF_THIS_THREAD.with(|slots| {
        slots[slot].budget.set(Some(policy.budget()));
        slots[slot].stats.set(policy.stats());
    });
    arm_flush_at_exit();
}

/// Adds this thread's pending successes in `slot` to the budget, as requests made at
/// `now`, and to the statistics.
#[cold]
pub(crate) fn flush(slot: usize, now: CompactInstant) {
    SLOTS_OF_THIS_THREAD.with(|slots| {
        if let Some(slot) = slots.get(slot) {
            slot.flush(now);
        }
    });
}

/// Adds this thread's pending successes in `slot` to the statistics, for a read.
pub(crate) fn count(slot: usize) {
    SLOTS_OF_THIS_THREAD.with(|slots| {
        if let Some(slot) = slots.get(slot) {
            slot.count();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_beyond_the_table_is_refused_and_the_last_one_counts() {
        static STATS: RetryStats = RetryStats::new("batch::tests::beyond");
        static POLICY: Policy = Policy::new().with_stats(&STATS);
        assert!(!add(&POLICY, SLOTS, Instant::now));
        for _ in 0..BATCH - 1 {
            assert!(add(&POLICY, SLOTS - 1, Instant::now));
        }
        // Counted on this thread, not yet added.
        assert_eq!(STATS.snapshot().requests, 0);
        count(SLOTS - 1);
        assert_eq!(STATS.snapshot().requests, u64::from(BATCH - 1));
        // The batch fills: added once, the count already read not added again.
        assert!(add(&POLICY, SLOTS - 1, Instant::now));
        assert_eq!(STATS.snapshot().requests, u64::from(BATCH));
    }
}
