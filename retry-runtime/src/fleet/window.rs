//! Lock-free counts over a rolling window: the window is cut into slots, each an atomic
//! word holding the slot's period number (its epoch) and its count, so a stale slot is
//! recognised and restarted by whoever next counts in it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::time::clock::CompactInstant;

/// How many slots a window is cut into: counts expire one slot at a time.
pub(crate) const SLOTS: usize = 10;

/// Turns instants into slot numbers, counted from first use: slot boundaries then fall
/// at the same offsets from a simulation's start on every run, which keeps runs under a
/// paused clock deterministic.
#[derive(Debug)]
pub(crate) struct Epochs {
    slot_nanos: u64,
    /// The ticks of the first instant seen; 0 until then.
    origin: AtomicU64,
}

impl Epochs {
    /// Slots of a tenth of `window` each.
    pub(crate) const fn new(window: Duration) -> Self {
        let mut epochs = Self {
            slot_nanos: 1,
            origin: AtomicU64::new(0),
        };
        epochs.set_window(window);
        epochs
    }

    /// Makes the slots a tenth of `window` each.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub(crate) const fn set_window(&mut self, window: Duration) {
        let nanos = window.as_nanos() / SLOTS as u128;
        assert!(nanos > 0, "a window must be at least 10 ns");
        self.slot_nanos = if nanos > u64::MAX as u128 {
            u64::MAX
        } else {
            nanos as u64
        };
    }

    /// The slot number of `now`. Wraps every 2^32 slots: only equality and short
    /// distances between epochs are ever compared.
    pub(crate) fn epoch(&self, now: Instant) -> u32 {
        self.epoch_of(CompactInstant::new(now))
    }

    /// The slot number of `now`.
    #[inline]
    pub(crate) fn epoch_of(&self, now: CompactInstant) -> u32 {
        (self.nanos_of(now) / self.slot_nanos) as u32
    }

    /// Nanoseconds from the first instant seen to `now`, saturating at zero (an instant
    /// read just before the first by another thread).
    #[inline]
    pub(crate) fn nanos_of(&self, now: CompactInstant) -> u64 {
        let ticks = now.ticks();
        let origin = match self.origin.load(Ordering::Relaxed) {
            0 => match self
                .origin
                .compare_exchange(0, ticks, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => ticks,
                Err(first) => first,
            },
            first => first,
        };
        ticks.saturating_sub(origin)
    }

    /// Nanoseconds from the first instant seen to `now`, for durations between instants.
    pub(crate) fn nanos_since_origin(&self, now: Instant) -> u64 {
        self.nanos_of(CompactInstant::new(now))
    }

    /// The length of the window, in nanoseconds.
    pub(crate) fn window_nanos(&self) -> u64 {
        self.slot_nanos.saturating_mul(SLOTS as u64)
    }
}

/// A count over the last [`SLOTS`] slots.
#[derive(Debug)]
pub(crate) struct RollingCount {
    slots: [AtomicU64; SLOTS],
}

impl RollingCount {
    pub(crate) const fn new() -> Self {
        Self {
            slots: [const { AtomicU64::new(0) }; SLOTS],
        }
    }

    /// Adds one in the slot of `epoch`.
    #[inline]
    pub(crate) fn increment(&self, epoch: u32) {
        self.add(epoch, 1);
    }

    /// Adds `n` in the slot of `epoch`.
    #[inline]
    pub(crate) fn add(&self, epoch: u32, n: u32) {
        let _ = self
            .slot(epoch)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                Some(pack(epoch, current(word, epoch).saturating_add(n)))
            });
    }

    /// The count of the window that ends in the slot of `epoch`.
    pub(crate) fn sum(&self, epoch: u32) -> u64 {
        self.sum_except(epoch) + u64::from(current(self.slot(epoch).load(Ordering::Acquire), epoch))
    }

    /// Forgets every count.
    pub(crate) fn clear(&self) {
        for slot in &self.slots {
            slot.store(0, Ordering::Release);
        }
    }

    fn slot(&self, epoch: u32) -> &AtomicU64 {
        &self.slots[epoch as usize % SLOTS]
    }

    /// The counts of the window's slots other than `epoch`'s own.
    fn sum_except(&self, epoch: u32) -> u64 {
        let own = epoch as usize % SLOTS;
        self.slots
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != own)
            .map(|(_, slot)| {
                let (slot_epoch, count) = unpack(slot.load(Ordering::Acquire));
                if epoch.wrapping_sub(slot_epoch) < SLOTS as u32 {
                    u64::from(count)
                } else {
                    0
                }
            })
            .sum()
    }
}

/// The count a slot word holds for `epoch`: zero if the word is from an older period.
fn current(word: u64, epoch: u32) -> u32 {
    let (slot_epoch, count) = unpack(word);
    if slot_epoch == epoch { count } else { 0 }
}

const fn pack(epoch: u32, count: u32) -> u64 {
    ((epoch as u64) << 32) | count as u64
}

const fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_expire_slot_by_slot() {
        let count = RollingCount::new();
        for epoch in 0..15 {
            count.increment(epoch);
            count.increment(epoch);
        }
        // Epochs 5..=14 are in the window ending at 14.
        assert_eq!(count.sum(14), 20);
        assert_eq!(count.sum(20), 8);
        assert_eq!(count.sum(30), 0);
        count.increment(30);
        assert_eq!(count.sum(30), 1);
        count.clear();
        assert_eq!(count.sum(30), 0);
    }

    // Slot numbers wrap at 2^32, which 10 does not divide: a count ten slots old lands
    // in a slot other than the current one there, and is still out of the window.
    // Can fail: a slot as old as the window counted.
    #[test]
    fn a_count_as_old_as_the_window_is_out_of_it_where_slot_numbers_wrap() {
        let count = RollingCount::new();
        let old = u32::MAX - 7;
        count.increment(old);
        assert_eq!(count.sum(old.wrapping_add(9)), 1);
        let now = old.wrapping_add(10);
        assert_ne!(now as usize % SLOTS, old as usize % SLOTS);
        assert_eq!(count.sum(now), 0);
    }

    // A window whose tenth is longer than 2^64 ns (about 585 years) is held as the
    // longest slot there is, not cut short: a day later, it is still the first slot.
    // Can fail: the slot's length wrapped (to 1 ns here).
    #[test]
    fn a_window_beyond_u64_nanoseconds_keeps_its_first_slot() {
        let tenth = u128::from(u64::MAX) + 2;
        let nanos = tenth * SLOTS as u128;
        let window = Duration::new(
            (nanos / 1_000_000_000) as u64,
            (nanos % 1_000_000_000) as u32,
        );
        let epochs = Epochs::new(window);
        let start = Instant::now();
        assert_eq!(epochs.epoch(start), 0);
        assert_eq!(epochs.epoch(start + Duration::from_secs(86_400)), 0);
        assert_eq!(epochs.slot_nanos, u64::MAX);
    }
}
