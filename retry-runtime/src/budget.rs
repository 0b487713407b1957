//! The retry budget: retries capped at a ratio of requests, fleet-wide per process.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many slots the window is cut into: tokens expire one slot at a time.
const SLOTS: usize = 10;
const PPM: u64 = 1_000_000;

/// A token bucket that lets retries be at most a ratio of requests over a rolling
/// window, plus a floor so that a client with little traffic can still retry.
///
/// Every call deposits one request; every retry must withdraw one token, and is refused
/// when the retries granted in the window would exceed `floor + ratio * requests`. In a
/// total outage, when every call fails, this keeps the extra load near `ratio` (10 % by
/// default) instead of multiplying it by the number of attempts.
///
/// A budget is built in `const` context so it can be a `static` shared by every function
/// that calls one dependency, and it is lock-free: a call takes one atomic update to
/// deposit and, on a retry, one to withdraw; nothing is allocated.
///
/// ```
/// use std::time::Duration;
/// use persevere_runtime::RetryBudget;
///
/// // 20 % of requests, over 30 s, and always at least 5 retries in that window.
/// static PAYMENTS_API: RetryBudget = RetryBudget::new()
///     .with_ratio(0.2)
///     .with_window(Duration::from_secs(30))
///     .with_floor(5);
/// ```
///
/// With `#[retry(budget = PAYMENTS_API)]` the function shares it; without `budget = ...`
/// each function gets its own [`RetryBudget::new`] default.
#[derive(Debug)]
pub struct RetryBudget {
    ratio_ppm: u64,
    floor: u64,
    slot_nanos: u64,
    origin: OnceLock<Instant>,
    /// Per slot: the slot's epoch in the high 32 bits, its count in the low 32.
    requests: [AtomicU64; SLOTS],
    retries: [AtomicU64; SLOTS],
    refusals: AtomicU64,
}

/// What a budget has seen in its current window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BudgetSnapshot {
    /// Requests deposited in the window.
    pub requests: u64,
    /// Retries granted in the window.
    pub retries: u64,
    /// Retries refused since the budget was created.
    pub refusals: u64,
}

impl RetryBudget {
    /// The default budget: retries up to 10 % of requests over a 10 s window, with a
    /// floor of 10 retries per window.
    pub const fn new() -> Self {
        Self {
            ratio_ppm: PPM / 10,
            floor: 10,
            slot_nanos: 10_000_000_000 / SLOTS as u64,
            origin: OnceLock::new(),
            requests: [const { AtomicU64::new(0) }; SLOTS],
            retries: [const { AtomicU64::new(0) }; SLOTS],
            refusals: AtomicU64::new(0),
        }
    }

    /// A budget that never refuses a retry: each call is bounded only by its own
    /// policy. Use it where retries cannot add load to a shared dependency (a local
    /// file, an in-process lock), or in tests of the backoff itself.
    pub const fn unlimited() -> Self {
        Self::new().with_floor(u32::MAX)
    }

    /// Sets the share of requests that may be retries, e.g. `0.1` for 10 %.
    ///
    /// # Panics
    ///
    /// If `ratio` is negative or not finite.
    pub const fn with_ratio(mut self, ratio: f64) -> Self {
        assert!(
            ratio.is_finite() && ratio >= 0.0,
            "the retry ratio must be a finite number of at least 0"
        );
        self.ratio_ppm = (ratio * PPM as f64) as u64;
        self
    }

    /// Sets how long a deposited request counts; it expires in tenths of this.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub const fn with_window(mut self, window: Duration) -> Self {
        let nanos = window.as_nanos() / SLOTS as u128;
        assert!(nanos > 0, "the budget window must be at least 10 ns");
        self.slot_nanos = if nanos > u64::MAX as u128 {
            u64::MAX
        } else {
            nanos as u64
        };
        self
    }

    /// Sets how many retries the window allows however few the requests.
    pub const fn with_floor(mut self, floor: u32) -> Self {
        self.floor = floor as u64;
        self
    }

    /// Records a request (a call's first attempt) at `now`.
    #[inline]
    pub fn deposit(&self, now: Instant) {
        let epoch = self.epoch(now);
        let slot = &self.requests[epoch as usize % SLOTS];
        let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
            let (slot_epoch, count) = unpack(word);
            Some(if slot_epoch == epoch {
                pack(epoch, count.saturating_add(1))
            } else {
                pack(epoch, 1)
            })
        });
    }

    /// Asks for a retry at `now`: `true` if granted (and counted), `false` if the budget
    /// is spent (and the refusal counted).
    pub fn withdraw(&self, now: Instant) -> bool {
        let epoch = self.epoch(now);
        let index = epoch as usize % SLOTS;
        let slot = &self.retries[index];
        loop {
            let requests = self.sum(&self.requests, epoch, None);
            let earlier = self.sum(&self.retries, epoch, Some(index));
            let word = slot.load(Ordering::Acquire);
            let (slot_epoch, count) = unpack(word);
            let current = if slot_epoch == epoch { count } else { 0 };
            let allowed = self
                .floor
                .saturating_mul(PPM)
                .saturating_add(self.ratio_ppm.saturating_mul(requests));
            if (earlier + current as u64 + 1).saturating_mul(PPM) > allowed {
                self.refusals.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            // Granting re-checks the slot it counts in: two callers racing for the last
            // token cannot both win.
            let next = pack(epoch, current.saturating_add(1));
            if slot
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// What the budget has seen in the window that ends at `now`.
    pub fn snapshot(&self, now: Instant) -> BudgetSnapshot {
        let epoch = self.epoch(now);
        BudgetSnapshot {
            requests: self.sum(&self.requests, epoch, None),
            retries: self.sum(&self.retries, epoch, None),
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }

    /// The number of the slot-long period `now` falls in, counted from the budget's
    /// first use.
    fn epoch(&self, now: Instant) -> u32 {
        let origin = *self.origin.get_or_init(|| now);
        let elapsed = now.saturating_duration_since(origin).as_nanos();
        // Wraps after 2^32 slots (136 years at the default window): only equality and
        // short distances between epochs are ever compared.
        (elapsed / self.slot_nanos as u128) as u32
    }

    /// The counts of the slots still inside the window at `epoch`, `skip` left out.
    fn sum(&self, slots: &[AtomicU64; SLOTS], epoch: u32, skip: Option<usize>) -> u64 {
        slots
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, slot)| {
                let (slot_epoch, count) = unpack(slot.load(Ordering::Acquire));
                if epoch.wrapping_sub(slot_epoch) < SLOTS as u32 {
                    count as u64
                } else {
                    0
                }
            })
            .sum()
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
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
    fn floor_alone_then_ratio() {
        let budget = RetryBudget::new();
        let now = Instant::now();
        // Without requests, only the floor.
        let granted = (0..100).filter(|_| budget.withdraw(now)).count();
        assert_eq!(granted, 10);
        for _ in 0..100 {
            budget.deposit(now);
        }
        // 100 requests at 10 % allow 10 more.
        let granted = (0..100).filter(|_| budget.withdraw(now)).count();
        assert_eq!(granted, 10);
        let snap = budget.snapshot(now);
        assert_eq!(snap.requests, 100);
        assert_eq!(snap.retries, 20);
        assert_eq!(snap.refusals, 180);
    }

    #[test]
    fn tokens_expire_after_the_window() {
        let budget = RetryBudget::new().with_window(Duration::from_secs(10));
        let start = Instant::now();
        for _ in 0..1000 {
            budget.deposit(start);
        }
        assert_eq!((0..200).filter(|_| budget.withdraw(start)).count(), 110);
        // Within the window: still spent.
        let later = start + Duration::from_millis(9_500);
        assert!(!budget.withdraw(later));
        // After the window: requests and retries have expired; only the floor is left.
        let after = start + Duration::from_secs(11);
        assert_eq!(budget.snapshot(after).requests, 0);
        assert_eq!((0..100).filter(|_| budget.withdraw(after)).count(), 10);
    }

    #[test]
    fn unlimited_never_refuses() {
        let budget = RetryBudget::unlimited();
        let now = Instant::now();
        assert!((0..100_000).all(|_| budget.withdraw(now)));
    }
}
