//! The retry budget: retries capped at a ratio of requests, plus a small reserve, for each
//! budget (a process's function, or a shared `static`).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::clock::CompactInstant;
use crate::rng::with_thread_rng;
use crate::window::{Epochs, RollingCount};

/// Tokens are counted in millionths, so that a request's share of a retry is exact.
const PPM: i64 = 1_000_000;

/// What a retried call that succeeds gives back: half a retry.
const REFUND: i64 = PPM / 2;

/// A token bucket that keeps retries to a share of requests, with a small reserve so
/// that a quiet client can still retry.
///
/// - Every request (a call's first attempt) earns `ratio` of a token: 0.1 by default.
/// - Every retry spends one token, and so does every hedge (`#[retry(hedge = ...)]`, a
///   copy of a slow attempt sent beside it). With less than one, a retry is granted with
///   the probability of what is left, and the balance goes below zero, down to one token
///   of debt; with nothing left it is refused, and the call gives up (a refused hedge is
///   simply not sent).
/// - A call that succeeds after retrying gives half a token back: its retry reached a
///   dependency that answers.
/// - Requests and refunds fill the balance up to the floor (2 tokens by default, at
///   least 1), which the budget starts with, or, if more, up to what the requests of the
///   last `window` (1 s by default) earned: a busy budget can absorb a second's worth of
///   failures at once.
///
/// So, exactly: **retries + hedges <= floor + ratio x requests + 1/2 x calls that
/// succeeded after retrying (+ 1 for the last retry's debt)**. When every request fails, retries are
/// 10 % of requests plus the floor; while the dependency answers, a retry that works
/// costs half.
///
/// The budget refills as requests arrive, not by window, so it never lets an allowance
/// out in a burst when a window turns; the probabilistic grant of the last fraction of a
/// token keeps a fleet of small budgets, which earn their tokens in step, from spending
/// them in step. The reserve is two retries, not ten per window: in a fleet of small
/// clients (a budget per process, each making a call a second) a reserve that refilled
/// with time would be most of the load in an outage.
///
/// A budget is built in `const` context so it can be a `static` shared by every function
/// that calls one dependency, and it is lock-free: a retry takes two atomic updates (the
/// balance and the count of retries), and nothing is allocated. A `#[retry]` call that succeeds at once does not
/// touch the budget: each thread counts those and deposits them 64 at a time, or sooner
/// when one of its calls fails (see [`crate::stats`]).
///
/// ```
/// use persevere_runtime::RetryBudget;
///
/// // Retries up to 20 % of requests, and a reserve of 5.
/// static PAYMENTS_API: RetryBudget = RetryBudget::new().with_ratio(0.2).with_floor(5);
/// ```
///
/// With `#[retry(budget = PAYMENTS_API)]` the function shares it; without `budget = ...`
/// each function gets its own [`RetryBudget::new`] default.
#[derive(Debug)]
pub struct RetryBudget {
    /// Millionths of a token per request.
    ratio_ppm: i64,
    /// The reserve, in millionths: what the budget starts with, and what requests fill
    /// it back to however few they are; `None` for a budget without limit.
    floor: Option<i64>,
    /// The requests of the last window, which set how much more than the floor the
    /// balance may hold.
    epochs: Epochs,
    recent: RollingCount,
    /// Millionths of a token, from `-PPM` up.
    balance: AtomicI64,
    requests: AtomicU64,
    retries: AtomicU64,
    refusals: AtomicU64,
}

/// What a budget has done since it was created, and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct BudgetSnapshot {
    /// Requests deposited.
    pub requests: u64,
    /// Retries granted, hedges included.
    pub retries: u64,
    /// Retries refused, hedges included.
    pub refusals: u64,
    /// The tokens the budget holds: a retry spends one. Below zero after a retry granted
    /// on a fraction of a token, until requests pay the debt back.
    pub tokens: f64,
}

impl RetryBudget {
    /// The default budget: retries up to 10 % of requests, plus a reserve of 2.
    pub const fn new() -> Self {
        Self {
            ratio_ppm: PPM / 10,
            floor: Some(2 * PPM),
            epochs: Epochs::new(Duration::from_secs(1)),
            recent: RollingCount::new(),
            balance: AtomicI64::new(2 * PPM),
            requests: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    /// A budget that never refuses a retry: each call is bounded only by its own
    /// policy. Use it where retries cannot add load to a shared dependency (a local
    /// file, an in-process lock), or in tests of the backoff itself.
    pub const fn unlimited() -> Self {
        let mut budget = Self::new();
        budget.floor = None;
        budget
    }

    /// Sets the share of requests that may be retries, e.g. `0.1` for 10 %: each request
    /// earns that much of a token.
    ///
    /// # Panics
    ///
    /// If `ratio` is negative or not finite.
    pub const fn with_ratio(mut self, ratio: f64) -> Self {
        assert!(
            ratio.is_finite() && ratio >= 0.0,
            "the retry ratio must be a finite number of at least 0"
        );
        let ppm = ratio * PPM as f64;
        self.ratio_ppm = if ppm >= i64::MAX as f64 {
            i64::MAX
        } else {
            ppm as i64
        };
        self
    }

    /// Sets how far back requests count toward what the balance may hold beyond the
    /// floor: at most `ratio` times the requests of the last `window` (1 s by default).
    /// A longer window lets a busy budget absorb a longer burst of failures, and spend
    /// it at once when a dependency goes down. The window moves in tenths.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.epochs.set_window(window);
        self
    }

    /// Sets the reserve: the retries the budget allows however few its requests, which
    /// it starts with and may always hold again (at least 1).
    pub const fn with_floor(mut self, floor: u32) -> Self {
        if self.floor.is_some() {
            let tokens = if floor == 0 { 1 } else { floor as i64 };
            self.floor = Some(tokens * PPM);
            self.balance = AtomicI64::new(tokens * PPM);
        }
        self
    }

    /// Records a request (a call's first attempt) at `now`.
    #[inline]
    pub fn deposit(&self, now: Instant) {
        self.deposit_compact(CompactInstant::new(now));
    }

    #[inline]
    pub(crate) fn deposit_compact(&self, now: CompactInstant) {
        self.deposit_many(now, 1);
    }

    /// Records `n` requests at `now`.
    pub(crate) fn deposit_many(&self, now: CompactInstant, n: u32) {
        self.requests.fetch_add(u64::from(n), Ordering::Relaxed);
        if self.floor.is_some() {
            let epoch = self.epochs.epoch_of(now);
            self.recent.add(epoch, n);
            self.earn(self.ratio_ppm.saturating_mul(i64::from(n)), epoch);
        }
    }

    /// Records that a call which retried succeeded at `now`: it gives back half a retry.
    /// Gives back the token of a retry that was granted but not made: the deadline
    /// passed, or the breaker opened, during its wait.
    pub(crate) fn retry_not_made(&self, now: Instant) {
        if self.floor.is_some() {
            self.earn(PPM, self.epochs.epoch(now));
        }
        self.retries.fetch_sub(1, Ordering::Relaxed);
    }

    /// Forgets every request and retry, and refills the reserve: the budget as made.
    pub(crate) fn reset(&self) {
        self.recent.clear();
        if let Some(floor) = self.floor {
            self.balance.store(floor, Ordering::Release);
        }
        self.requests.store(0, Ordering::Relaxed);
        self.retries.store(0, Ordering::Relaxed);
        self.refusals.store(0, Ordering::Relaxed);
    }

    pub(crate) fn retry_succeeded(&self, now: Instant) {
        self.earn(REFUND, self.epochs.epoch(now));
    }

    /// Adds `ppm` to the balance, up to what it may hold in `epoch`.
    fn earn(&self, ppm: i64, epoch: u32) {
        let Some(floor) = self.floor else {
            return;
        };
        let recent = i64::try_from(self.recent.sum(epoch)).unwrap_or(i64::MAX);
        let capacity = floor.max(self.ratio_ppm.saturating_mul(recent));
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                (balance < capacity).then(|| balance.saturating_add(ppm).min(capacity))
            });
    }

    /// Asks for a retry at `now`: `true` if granted (and counted), `false` if the budget
    /// is spent (and the refusal counted).
    pub fn withdraw(&self, _now: Instant) -> bool {
        self.counted(self.floor.is_none() || self.spend_one())
    }

    /// Asks for a hedge (a copy of a slow attempt) at `now`: as [`RetryBudget::withdraw`],
    /// but granted only while a whole token would be left for a retry, since a hedge
    /// only speeds a call up and a retry may be what saves one.
    pub(crate) fn withdraw_hedge(&self, _now: Instant) -> bool {
        self.counted(self.floor.is_none() || self.spend_leaving_one())
    }

    /// Counts a retry `granted`, or refused: `granted`.
    fn counted(&self, granted: bool) -> bool {
        let count = if granted {
            &self.retries
        } else {
            &self.refusals
        };
        count.fetch_add(1, Ordering::Relaxed);
        granted
    }

    /// Spends one token if two are there: one stays.
    fn spend_leaving_one(&self) -> bool {
        self.balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                (balance >= 2 * PPM).then_some(balance - PPM)
            })
            .is_ok()
    }

    /// Spends one token: at once if the balance holds one; with the probability of the
    /// fraction it holds otherwise, going into debt.
    fn spend_one(&self) -> bool {
        let mut balance = self.balance.load(Ordering::Acquire);
        // Drawn at most once per ask, and only when a fraction is left.
        let mut draw: Option<i64> = None;
        loop {
            if balance <= 0 {
                return false;
            }
            if balance < PPM {
                let draw =
                    *draw.get_or_insert_with(|| with_thread_rng(|rng| rng.random_range(0..PPM)));
                if draw >= balance {
                    return false;
                }
            }
            match self.balance.compare_exchange_weak(
                balance,
                balance - PPM,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => balance = now,
            }
        }
    }

    /// What the budget has done, and holds, at `now`.
    pub fn snapshot(&self, _now: Instant) -> BudgetSnapshot {
        let tokens = match self.floor {
            Some(_) => self.balance.load(Ordering::Acquire) as f64 / PPM as f64,
            None => f64::INFINITY,
        };
        BudgetSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            refusals: self.refusals.load(Ordering::Relaxed),
            tokens,
        }
    }
}

/// The retry budget of the policies that name none, such as `Policy::new()` given to
/// `retry_fn` or `retry_blocking`: one for the whole process (`#[retry]` gives each
/// function its own instead). [`crate::stats::reset`] refills it with the others.
pub(crate) static SHARED: RetryBudget = RetryBudget::new();

impl RetryBudget {
    /// The budget of policies that name none: see [`SHARED`].
    pub(crate) const SHARED_BY_DEFAULT: &'static RetryBudget = &SHARED;
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::rng::seed_thread_rng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A call against a dependency that fails each attempt with probability `fail`: one
    /// request, then retries while the budget grants them (up to 5, as the default
    /// policy's 6 attempts); the retries it made if it succeeded.
    fn call(
        budget: &RetryBudget,
        now: Instant,
        fail: f64,
        dependency: &mut SmallRng,
    ) -> Option<u32> {
        budget.deposit(now);
        for retries in 0..=5 {
            if !dependency.random_bool(fail) {
                if retries > 0 {
                    budget.retry_succeeded(now);
                }
                return Some(retries);
            }
            if retries == 5 || !budget.withdraw(now) {
                return None;
            }
        }
        None
    }

    // Finagle's check of its budget: after n requests that all fail, retries are n x the
    // ratio plus the floor, within one (the last retry may be granted on a fraction of a
    // token). 10,000 calls that each ask until refused: 1,000 + 2.
    // Can fail: any reserve that refills with time or with windows (the budget this one
    // replaced allowed 10 more per 10 s), a ratio applied to retries as well as requests,
    // or grants on a fraction that do not pay it back.
    #[test]
    fn when_every_request_fails_retries_are_the_ratio_plus_the_floor_within_one() {
        seed_thread_rng(1);
        let budget = RetryBudget::new();
        let mut dependency = SmallRng::seed_from_u64(1);
        let start = Instant::now();
        let n: u32 = 10_000;
        for i in 0..n {
            // One request a millisecond: ten seconds of them.
            let now = start + ms(u64::from(i));
            assert_eq!(call(&budget, now, 1.0, &mut dependency), None);
        }
        let snapshot = budget.snapshot(start);
        let bound = f64::from(n) * 0.1 + 2.0;
        assert!(
            (snapshot.retries as f64 - bound).abs() <= 1.0,
            "{snapshot:?}"
        );
        assert_eq!(snapshot.requests, u64::from(n));
        // Every call ends on a refusal.
        assert_eq!(snapshot.refusals, u64::from(n));
        assert!((-1.0..1.0).contains(&snapshot.tokens), "{snapshot:?}");
    }

    // A ratio of its own bounds retries the same way: 25 % of 1,000 failing requests,
    // plus the floor, within one. Can fail: a ratio scaled wrongly (0.25 taken as
    // millionths of a token, or added to a whole token per request) or read as no limit.
    #[test]
    fn a_ratio_of_its_own_bounds_retries_the_same_way() {
        seed_thread_rng(4);
        let budget = RetryBudget::new().with_ratio(0.25);
        let mut dependency = SmallRng::seed_from_u64(4);
        let start = Instant::now();
        for i in 0..1000 {
            assert_eq!(call(&budget, start + ms(i), 1.0, &mut dependency), None);
        }
        let snapshot = budget.snapshot(start);
        assert!(
            (snapshot.retries as f64 - 252.0).abs() <= 1.0,
            "{snapshot:?}"
        );
    }

    // A hedge is granted only while a whole token stays for a retry: with one and a
    // half tokens, none is; the retry after it still is. Can fail: a hedge granted on
    // a little more than one token, leaving half a token.
    #[test]
    fn a_hedge_leaves_a_whole_token() {
        let budget = RetryBudget::new();
        let t = Instant::now();
        assert!(budget.withdraw(t));
        for _ in 0..5 {
            budget.deposit(t);
        }
        assert!((budget.snapshot(t).tokens - 1.5).abs() < 1e-9);
        assert!(!budget.withdraw_hedge(t));
        assert!(budget.withdraw(t));
        assert!((budget.snapshot(t).tokens - 0.5).abs() < 1e-9);
    }

    // The bound with successes: retries <= floor + ratio x requests + 1/2 x calls that
    // succeeded after retrying, + 1. With half the attempts failing, the budget is short
    // nearly always, so it spends what it earns: retries are that sum within one, less
    // what it holds at the end, and less what it could not hold when full (a few tenths,
    // in the rare runs of first-try successes that fill it).
    // Can fail: a refund that is not paid (retries near 10 %, 1,000) or paid twice, or a
    // budget that lets retries through beyond its tokens.
    #[test]
    fn retries_that_work_cost_half() {
        seed_thread_rng(2);
        let budget = RetryBudget::new();
        let mut dependency = SmallRng::seed_from_u64(2);
        let start = Instant::now();
        let n: u32 = 10_000;
        let mut retried_successes = 0u32;
        for i in 0..n {
            let outcome = call(&budget, start + ms(u64::from(i)), 0.5, &mut dependency);
            retried_successes += u32::from(outcome.is_some_and(|retries| retries > 0));
        }
        let snapshot = budget.snapshot(start);
        let earned = 2.0 + f64::from(n) * 0.1 + 0.5 * f64::from(retried_successes);
        let spent = snapshot.retries as f64 + snapshot.tokens;
        assert!(
            spent <= earned + 1e-9 && earned - spent <= 1.0,
            "{snapshot:?}, {retried_successes} succeeded after retrying: earned {earned}"
        );
        // About 1,000 / (1 - 1/2 x 1/2) retries: more than the ratio alone would allow.
        assert!((1250..=1420).contains(&snapshot.retries), "{snapshot:?}");
    }

    // A fleet of small budgets earns its tokens in step (one request a second each); were
    // a token granted only when whole, all of them would retry in the same second, every
    // ten seconds. The last fraction is granted with its probability, so they spread.
    // Can fail: grants of whole tokens only (1,000 in one second, none in the nine
    // before), or a fraction granted always (the ratio no longer holds).
    #[test]
    fn budgets_that_earn_in_step_do_not_spend_in_step() {
        seed_thread_rng(3);
        let start = Instant::now();
        let budgets: Vec<RetryBudget> = (0..1000).map(|_| RetryBudget::new()).collect();
        for budget in &budgets {
            while budget.withdraw(start) {}
        }
        let mut per_second = Vec::new();
        for second in 1..=60 {
            let now = start + Duration::from_secs(second);
            let granted = budgets
                .iter()
                .filter(|budget| {
                    budget.deposit(now);
                    budget.withdraw(now)
                })
                .count();
            per_second.push(granted);
        }
        let total: usize = per_second.iter().sum();
        // 60 requests each at 10 %: 6,000 retries, less the debt a budget may end in.
        assert!((5000..=6000).contains(&total), "{total}: {per_second:?}");
        let peak = per_second.iter().max().copied().unwrap_or(0);
        assert!(peak <= 300, "{per_second:?}");
    }

    #[test]
    fn a_quiet_budget_holds_its_floor() {
        let budget = RetryBudget::new();
        let now = Instant::now();
        assert!(budget.withdraw(now));
        assert!(budget.withdraw(now));
        assert!(!budget.withdraw(now));
        // Ten requests pay for one retry; a request every 10 s never fills it beyond the
        // floor.
        for i in 1..=100 {
            budget.deposit(now + Duration::from_secs(10 * i));
        }
        let later = now + Duration::from_secs(1000);
        assert_eq!(budget.snapshot(later).tokens, 2.0);
        assert!(budget.withdraw(later));
        assert!(budget.withdraw(later));
        assert!(!budget.withdraw(later));
        let snapshot = budget.snapshot(later);
        assert_eq!((snapshot.retries, snapshot.refusals), (4, 2));
        // Without a floor, one still.
        assert_eq!(RetryBudget::new().with_floor(0).snapshot(later).tokens, 1.0);
    }

    // A busy budget holds what the last second's requests earned: it can absorb a burst
    // of failures. Requests spread thinner earn no more than the floor.
    // Can fail: a capacity of the floor alone (2 retries out of a burst of 100 failures),
    // or one that never forgets (an outage spends a long quiet spell's tokens at once).
    #[test]
    fn a_busy_budget_holds_a_window_of_requests() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        for i in 0..1000 {
            budget.deposit(start + ms(i / 2));
        }
        assert_eq!(budget.snapshot(start).tokens, 100.0);
        assert_eq!((0..200).filter(|_| budget.withdraw(start)).count(), 100);
        let later = start + Duration::from_secs(3);
        // Ten requests a second: one token a second, at most the floor.
        for i in 0..100 {
            budget.deposit(later + ms(100 * i));
        }
        assert_eq!(budget.snapshot(later).tokens, 2.0);
    }

    #[test]
    fn unlimited_never_refuses() {
        let budget = RetryBudget::unlimited();
        let now = Instant::now();
        assert!((0..100_000).all(|_| budget.withdraw(now)));
        assert_eq!(budget.snapshot(now).retries, 100_000);
    }
}
