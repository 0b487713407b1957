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
//! Statistics read on a thread ([`crate::fleet::stats::get`], [`crate::fleet::stats::all`],
//! [`crate::RetryStats::snapshot`]) first add that thread's pending successes to them,
//! so a program that calls and reads on one thread sees exact counts. Read from another
//! thread, a function's first-try successes can be up to `BATCH - 1` behind per thread
//! that calls it.
//!
//! What this costs the budget: requests are counted up to `BATCH - 1` calls late per
//! thread and function, and are taken as spread evenly over the time since the slot's
//! previous batch (or its first count), the one clock read of a batch. So a thread that
//! made a few calls long ago and then fails adds them as requests of that long stretch,
//! not of the last second: they lift what a busy budget may hold by their share of its
//! window only.
//!
//! A function has a slot once its policy has statistics (every `#[retry]` function's
//! does; a `Policy` of your own for `retry_fn` has them if you give it a
//! [`crate::RetryStats`]). The functions of a process past the first [`SLOTS`] to be
//! called, and policies without statistics, count each call at once instead: a clock
//! read and an atomic update of the budget.
//!
//! The table is 9 KiB of thread-local memory (256 slots of 32 bytes and their 4-byte
//! counts), in every thread of a process that links persevere.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::fleet::budget::RetryBudget;
use crate::time::clock::CompactInstant;

/// How many first-try successes a thread counts before adding them to the shared
/// counters.
pub const BATCH: u32 = 64;

/// How many functions a thread can count for: the first this many `#[retry]` functions
/// of the process to be called.
pub const SLOTS: usize = 256;

/// What one thread keeps of one function's first-try successes not yet added to its
/// budget and statistics; how many there are is in [`LEFT`].
struct Slot {
    /// The function's budget and statistics, set when the slot starts its first batch.
    budget: Cell<Option<&'static RetryBudget>>,
    successes: Cell<Option<&'static AtomicU64>>,
    /// Of the pending successes, how many the statistics already count (added by a read
    /// on this thread).
    counted: Cell<u32>,
    /// Since when the pending successes were made: the slot's last flush, or its first
    /// count. The budget takes them as spread over the time since.
    since: Cell<Option<CompactInstant>>,
}

impl Slot {
    const fn new() -> Self {
        Self {
            budget: Cell::new(None),
            successes: Cell::new(None),
            counted: Cell::new(0),
            since: Cell::new(None),
        }
    }

    /// Adds `pending` successes to the budget, as requests made since the last flush
    /// (or the first count) and up to `now`, and to the statistics.
    #[cold]
    fn flush(&self, pending: u32, now: CompactInstant) {
        let counted = self.counted.replace(0);
        let since = self.since.replace(Some(now)).unwrap_or(now);
        if pending == 0 {
            return;
        }
        if let Some(budget) = self.budget.get() {
            budget.deposit_many(now, pending, since);
        }
        add_to(self.successes.get(), pending - counted);
    }

    /// Adds the `pending` successes to the statistics only, for a read on this thread.
    fn count(&self, pending: u32) {
        let counted = self.counted.replace(pending);
        add_to(self.successes.get(), pending - counted);
    }
}

/// The successes pending in a slot whose count in [`LEFT`] is `left`.
fn pending(left: u32) -> u32 {
    if left == 0 { 0 } else { BATCH - left }
}

/// Takes a slot's pending successes, whose count in [`LEFT`] is `left`, to add them: a
/// slot that has started a batch starts a new, empty one.
fn take_pending(left: &Cell<u32>) -> u32 {
    let n = pending(left.get());
    if left.get() != 0 {
        left.set(BATCH);
    }
    n
}

thread_local! {
    /// This thread's slots. Without a destructor, so that reaching them needs no check of
    /// whether the thread is exiting; the slots are added
    /// at the thread's exit by [`FLUSH_AT_EXIT`].
    static SLOTS_OF_THIS_THREAD: [Slot; SLOTS] = const { [const { Slot::new() }; SLOTS] };

    /// For each slot, how many more first-try successes this thread counts before it
    /// adds the slot's batch, from [`BATCH`] down; `0` for a slot that has not started
    /// one, whose next count starts it. An array of its own, so that counting a success
    /// is one decrement of the word at the slot's index, and one test of its sign for
    /// both ends of a batch.
    static LEFT: [Cell<u32>; SLOTS] = const { [const { Cell::new(0) }; SLOTS] };

    /// Adds this thread's slots when the thread exits; armed when a slot starts a batch.
    static FLUSH_AT_EXIT: FlushAtExit = const { FlushAtExit };
}

/// Adds what a thread has pending when it exits.
struct FlushAtExit;

impl Drop for FlushAtExit {
    fn drop(&mut self) {
        let now = CompactInstant::new(Instant::now());
        LEFT.with(|left| {
            SLOTS_OF_THIS_THREAD.with(|slots| {
                for (slot, left) in slots.iter().zip(left) {
                    slot.flush(take_pending(left), now);
                }
            })
        });
    }
}

/// Makes sure this thread adds its slots when it exits. A thread that is already
/// exiting cannot: what it counts from then on is not added.
#[cold]
fn arm_flush_at_exit() {
    let _ = FLUSH_AT_EXIT.try_with(|_| {});
}

/// Where a slot's batches go: its function's retry budget (as requests) and its count of
/// first-try successes.
pub(crate) struct Sink {
    pub(crate) budget: &'static RetryBudget,
    pub(crate) successes: &'static AtomicU64,
}

/// Adds `n` first-try successes to `successes`, if the slot has a counter.
fn add_to(successes: Option<&AtomicU64>, n: u32) {
    if let (Some(successes), 1..) = (successes, n) {
        successes.fetch_add(u64::from(n), Ordering::Relaxed);
    }
}

/// Counts one first-try success of a function whose slot is `slot`; adds the batch when
/// it is full, reading the time from `now`. `sink` is read only at the slot's first
/// count on this thread. `false` if `slot` is beyond [`SLOTS`] (as a function without a
/// slot has): the caller counts the call itself.
///
/// The thread-local is reached in a closure that does nothing else, so that the
/// compiler inlines it into a plain access; what is rare happens outside.
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn add(sink: impl FnOnce() -> Sink, slot: usize, now: impl FnOnce() -> Instant) -> bool {
    let left = LEFT.with(|left| {
        let left = left.get(slot)?;
        let n = left.get().wrapping_sub(1);
        left.set(n);
        Some(n)
    });
    match left {
        None => false,
        // Neither the first count of a batch nor its last.
        Some(n) if n as i32 > 0 => true,
        Some(n) => {
            edge(sink, slot, n, now);
            true
        }
    }
}

/// A count that ends a batch (`left` 0: add it) or starts the slot's first (`left`
/// wrapped below 0).
#[cold]
#[inline(never)]
fn edge(sink: impl FnOnce() -> Sink, slot: usize, left: u32, now: impl FnOnce() -> Instant) {
    if left == 0 {
        LEFT.with(|left| left[slot].set(BATCH));
        SLOTS_OF_THIS_THREAD.with(|slots| slots[slot].flush(BATCH, CompactInstant::new(now())));
    } else {
        LEFT.with(|left| left[slot].set(BATCH - 1));
        begin(sink(), slot, CompactInstant::new(now()));
    }
}

/// A slot's first count, at `now`: it learns its function's budget and statistics, and
/// the thread arms the flush at its exit.
fn begin(sink: Sink, slot: usize, now: CompactInstant) {
    SLOTS_OF_THIS_THREAD.with(|slots| {
        slots[slot].budget.set(Some(sink.budget));
        slots[slot].successes.set(Some(sink.successes));
        slots[slot].since.set(Some(now));
    });
    arm_flush_at_exit();
}

/// Adds this thread's pending successes in `slot` to the budget, as requests made at
/// `now`, and to the statistics.
#[cold]
pub(crate) fn flush(slot: usize, now: CompactInstant) {
    LEFT.with(|left| {
        SLOTS_OF_THIS_THREAD.with(|slots| {
            if let (Some(left), Some(slot)) = (left.get(slot), slots.get(slot)) {
                slot.flush(take_pending(left), now);
            }
        })
    });
}

/// Adds this thread's pending successes in `slot` to the statistics, for a read.
/// Drops this thread's pending count of the slot's first-try successes.
pub(crate) fn discard(slot: usize) {
    LEFT.with(|left| {
        SLOTS_OF_THIS_THREAD.with(|slots| {
            if let (Some(left), Some(slot)) = (left.get(slot), slots.get(slot)) {
                take_pending(left);
                slot.counted.set(0);
            }
        })
    });
}

pub(crate) fn count(slot: usize) {
    LEFT.with(|left| {
        SLOTS_OF_THIS_THREAD.with(|slots| {
            if let (Some(left), Some(slot)) = (left.get(slot), slots.get(slot)) {
                slot.count(pending(left.get()));
            }
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::stats::RetryStats;

    fn sink(budget: &'static RetryBudget, stats: &'static RetryStats) -> impl Fn() -> Sink {
        move || Sink {
            budget,
            successes: stats.first_try_successes(),
        }
    }

    #[test]
    fn a_slot_beyond_the_table_is_refused_and_the_last_one_counts() {
        static STATS: RetryStats = RetryStats::new("batch::tests::beyond");
        static BUDGET: RetryBudget = RetryBudget::new();
        let sink = sink(&BUDGET, &STATS);
        assert!(!add(&sink, SLOTS, Instant::now));
        for _ in 0..BATCH - 1 {
            assert!(add(&sink, SLOTS - 1, Instant::now));
        }
        // Counted on this thread, not yet added.
        assert_eq!(STATS.snapshot().requests, 0);
        count(SLOTS - 1);
        assert_eq!(STATS.snapshot().requests, u64::from(BATCH - 1));
        // The batch fills: added once, the count already read not added again.
        assert!(add(&sink, SLOTS - 1, Instant::now));
        assert_eq!(STATS.snapshot().requests, u64::from(BATCH));
    }

    // After a full batch the slot counts the next from empty: the second batch is added
    // at its 64th count, not before, and a flush between batches adds what is pending
    // and starts the count again.
    // Can fail: a batch started or restarted at the wrong count (checked by starting
    // the first at `BATCH - 2`) adds the next batch early or late.
    #[test]
    fn each_batch_is_added_when_it_fills_and_a_flush_starts_a_new_one() {
        static STATS: RetryStats = RetryStats::new("batch::tests::batches");
        static BUDGET: RetryBudget = RetryBudget::new();
        let sink = sink(&BUDGET, &STATS);
        let slot = SLOTS - 2;
        let requests = || BUDGET.snapshot(Instant::now()).requests;
        for _ in 0..BATCH {
            add(&sink, slot, Instant::now);
        }
        assert_eq!(requests(), u64::from(BATCH));
        for _ in 0..BATCH - 1 {
            add(&sink, slot, Instant::now);
        }
        assert_eq!(requests(), u64::from(BATCH));
        add(&sink, slot, Instant::now);
        assert_eq!(requests(), u64::from(2 * BATCH));
        for _ in 0..5 {
            add(&sink, slot, Instant::now);
        }
        flush(slot, CompactInstant::new(Instant::now()));
        assert_eq!(requests(), u64::from(2 * BATCH + 5));
        for _ in 0..BATCH - 1 {
            add(&sink, slot, Instant::now);
        }
        assert_eq!(requests(), u64::from(2 * BATCH + 5));
        add(&sink, slot, Instant::now);
        assert_eq!(requests(), u64::from(3 * BATCH + 5));
        assert_eq!(STATS.snapshot().requests, u64::from(3 * BATCH + 5));
    }
}
