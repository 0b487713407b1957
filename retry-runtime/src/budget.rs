//! The retry budget: retries capped at a ratio of requests, fleet-wide per process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::clock::CompactInstant;
use crate::window::{Epochs, RollingCount};

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
/// that calls one dependency, and it is lock-free: a retry takes one atomic update to
/// withdraw, and nothing is allocated. A `#[retry]` call that succeeds at once does not
/// touch the budget: each thread counts those and deposits them 64 at a time, or sooner
/// when one of its calls fails (see [`crate::batch`]).
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
    epochs: Epochs,
    requests: RollingCount,
    retries: RollingCount,
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
            epochs: Epochs::new(Duration::from_secs(10)),
            requests: RollingCount::new(),
            retries: RollingCount::new(),
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

    /// Sets how long a deposited request counts. The window moves in tenths: a request
    /// counts for between nine tenths of the window and the whole of it.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.epochs.set_window(window);
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
        self.deposit_compact(CompactInstant::new(now));
    }

    #[inline]
    pub(crate) fn deposit_compact(&self, now: CompactInstant) {
        self.requests.increment(self.epochs.epoch_of(now));
    }

    /// Records `n` requests at `now`.
    pub(crate) fn deposit_many(&self, now: CompactInstant, n: u32) {
        self.requests.add(self.epochs.epoch_of(now), n);
    }

    /// Asks for a retry at `now`: `true` if granted (and counted), `false` if the budget
    /// is spent (and the refusal counted).
    pub fn withdraw(&self, now: Instant) -> bool {
        let epoch = self.epochs.epoch(now);
        let requests = self.requests.sum(epoch);
        let allowed = self
            .floor
            .saturating_mul(PPM)
            .saturating_add(self.ratio_ppm.saturating_mul(requests));
        // The count is re-checked against the slot it lands in: two callers racing for
        // the last token cannot both win.
        let granted = self.retries.increment_if(epoch, |retries| {
            (retries + 1).saturating_mul(PPM) <= allowed
        });
        if !granted {
            self.refusals.fetch_add(1, Ordering::Relaxed);
        }
        granted
    }

    /// What the budget has seen in the window that ends at `now`.
    pub fn snapshot(&self, now: Instant) -> BudgetSnapshot {
        let epoch = self.epochs.epoch(now);
        BudgetSnapshot {
            requests: self.requests.sum(epoch),
            retries: self.retries.sum(epoch),
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
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
        // Within the window (which starts at the budget's first use): still spent.
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
