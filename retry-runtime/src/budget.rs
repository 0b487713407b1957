//! The retry budget: retries capped at a ratio of requests, plus a small reserve, for each
//! budget (a process's function, or a shared `static`), in every window of time.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::clock::CompactInstant;
use crate::rng::with_thread_rng;
use crate::window::{Epochs, RollingCount};

/// Tokens are counted in millionths, so that a request's share of a retry is exact.
const PPM: i64 = 1_000_000;

/// What a retried call that succeeds gives back: half a retry.
const REFUND: i64 = PPM / 2;

/// How long a budget goes without requests before it counts as quiet and its reserve
/// starts to refill: a function called every few seconds is busy.
pub(crate) const QUIET_AFTER: Duration = Duration::from_secs(10);

/// How long the reserve takes to refill once the budget is quiet: from empty, it is full
/// again three minutes after the last request.
pub(crate) const REFILL: Duration = Duration::from_secs(170);

/// A token bucket that keeps retries to a share of requests in every window of time,
/// with a reserve so that a quiet function's call gets every attempt it is allowed.
///
/// - Every request (a call's first attempt) earns `ratio` of a token: 0.1 by default.
/// - Every retry spends one token, and so does every hedge (`#[retry(hedge = ...)]`, a
///   copy of a slow attempt sent beside it). With less than one, a retry is granted with
///   the probability of what is left, and the balance goes below zero, down to one token
///   of debt; with nothing left it is refused, and the call gives up (a refused hedge is
///   simply not sent).
/// - A call that succeeds after retrying gives half a token back: its retry reached a
///   dependency that answers.
/// - **While busy**, the balance holds at most the floor (2 tokens by default), or what
///   the requests of the last `window` (1 s by default) earned if that is more: a busy
///   budget can absorb a second's worth of failures at once, and the tokens of calls no
///   longer made are gone a window after they stop.
/// - **While quiet** (no request for 10 s), the budget refills towards
///   its reserve: one whole call's retries (5 by default, `attempts - 1` for a
///   function's own budget), full three minutes after the last request. The first call
///   after quiet may spend it all; the next request that finds the budget busy again
///   cuts what is left of it back to the busy ceiling.
///
/// So, exactly, over any stretch of time in which the budget stays busy: **retries +
/// hedges <= what it held at the start + ratio x requests + 1/2 x calls that succeeded
/// after retrying (+ 1 for the last retry's debt)**, and what it held is at most the
/// reserve, the floor, or a window's share of requests. When every request fails,
/// retries are 10 % of requests plus that: a total outage costs a dependency 1.1x its
/// load, not 6x, whatever traffic came before.
///
/// The budget refills from requests, and from time only while quiet, so a busy budget
/// never lets an allowance out in a burst when a window turns; the probabilistic grant
/// of the last fraction of a token keeps a fleet of small budgets, which earn their
/// tokens in step, from spending them in step.
///
/// A budget is built in `const` context so it can be a `static` shared by every function
/// that calls one dependency, and it is lock-free: a retry takes two atomic updates (the
/// balance and the count of retries), and nothing is allocated. A `#[retry]` call that
/// succeeds at once does not touch the budget: each thread counts those and deposits them
/// 64 at a time, or sooner when one of its calls fails (see [`crate::stats`]), as
/// requests spread over the time since its last deposit.
///
/// ```
/// use persevere_runtime::RetryBudget;
///
/// // Retries up to 20 % of requests, a busy floor of 5, and a quiet reserve of 8 (the
/// // functions that share it make at most 9 attempts).
/// static PAYMENTS_API: RetryBudget = RetryBudget::new()
///     .with_ratio(0.2)
///     .with_floor(5)
///     .with_reserve(8);
/// ```
///
/// With `#[retry(budget = PAYMENTS_API)]` the function shares it; without `budget = ...`
/// each function gets its own [`RetryBudget::new`] default, its reserve set to one call's
/// retries (`attempts - 1`).
#[derive(Debug)]
pub struct RetryBudget {
    /// Millionths of a token per request.
    ratio_ppm: i64,
    /// What a busy budget may hold however few its recent requests, in millionths;
    /// `None` for a budget without limit.
    floor: Option<i64>,
    /// What a quiet budget refills to, in millionths.
    reserve: i64,
    /// The requests of the last window, which set how much more than the floor a busy
    /// budget may hold.
    epochs: Epochs,
    recent: RollingCount,
    /// Millionths of a token, from `-PPM` up.
    balance: AtomicI64,
    /// When the latest request was deposited, in nanoseconds after the epochs' origin,
    /// plus one; 0 before the first.
    last_request: AtomicU64,
    /// Whether the latest request came after quiet: the balance may then hold the
    /// reserve.
    after_quiet: AtomicBool,
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
    /// The default budget: retries up to 10 % of requests, a busy floor of 2, and a
    /// quiet reserve of 5 (the retries of one call under the default 6 attempts).
    pub const fn new() -> Self {
        Self {
            ratio_ppm: PPM / 10,
            floor: Some(2 * PPM),
            reserve: 5 * PPM,
            epochs: Epochs::new(Duration::from_secs(1)),
            recent: RollingCount::new(),
            balance: AtomicI64::new(5 * PPM),
            last_request: AtomicU64::new(0),
            after_quiet: AtomicBool::new(true),
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

    /// Sets how far back requests count toward what a busy balance may hold above the
    /// floor: `ratio` times the requests of the last `window` (1 s by default). A longer
    /// window lets a busy budget absorb a longer burst of failures, and spend it at once
    /// when a dependency goes down. The window moves in tenths.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.epochs.set_window(window);
        self
    }

    /// Sets the floor: the retries a busy budget allows however few its recent requests
    /// (at least 1; 2 by default). Every client of a
    /// fleet spends it in the first seconds of an outage, so keep it small.
    pub const fn with_floor(mut self, floor: u32) -> Self {
        if self.floor.is_some() {
            let tokens = if floor == 0 { 1 } else { floor as i64 };
            self.floor = Some(tokens * PPM);
        }
        self.full()
    }

    /// Sets the reserve: what a quiet budget refills to, and a fresh one holds (5 by
    /// default). Make it the retries of one call of the functions that share the budget
    /// (their `attempts - 1`), so that a call after quiet makes every attempt its
    /// function allows. Below the floor, the floor holds.
    pub const fn with_reserve(mut self, reserve: u32) -> Self {
        self.reserve = reserve as i64 * PPM;
        self.full()
    }

    /// The same budget, holding what a fresh one does.
    const fn full(mut self) -> Self {
        self.balance = AtomicI64::new(self.quiet_ceiling());
        self
    }

    /// What a quiet budget may hold: its reserve, or its floor if that is more.
    const fn quiet_ceiling(&self) -> i64 {
        match self.floor {
            Some(floor) if floor > self.reserve => floor,
            _ => self.reserve,
        }
    }

    /// Records a request (a call's first attempt) at `now`.
    #[inline]
    pub fn deposit(&self, now: Instant) {
        self.deposit_compact(CompactInstant::new(now));
    }

    #[inline]
    pub(crate) fn deposit_compact(&self, now: CompactInstant) {
        self.deposit_many(now, 1, now);
    }

    /// Records `n` requests made since `since`, deposited at `now`: a batch of first-try
    /// successes, taken as spread evenly over that time (`since` = `now` for requests
    /// made now).
    pub(crate) fn deposit_many(&self, now: CompactInstant, n: u32, since: CompactInstant) {
        self.requests.fetch_add(u64::from(n), Ordering::Relaxed);
        let Some(_) = self.floor else {
            return;
        };
        let at = self.epochs.nanos_of(now);
        // From the instants themselves: a batch begun before the budget's first deposit
        // (its epochs' origin) keeps its length.
        let span = now.ticks().saturating_sub(since.ticks());
        let epoch = self.epochs.epoch_of(now);
        self.recent
            .add(epoch, in_window(n, span, self.epochs.window_nanos()));
        // Quiet: the time since the last request, less what each of these requests
        // would have taken to keep the budget busy. The latest of requests spread over a
        // span is taken to be as far from its end as they are apart, so that a request
        // made now, after a batch of old ones, finds the quiet they left.
        let latest = at
            .saturating_sub(span / (u64::from(n) + 1))
            .saturating_add(1);
        let previous = self.last_request.fetch_max(latest, Ordering::AcqRel);
        let quiet = match previous {
            0 => u64::MAX,
            previous => latest
                .saturating_sub(previous)
                .saturating_sub(nanos(QUIET_AFTER).saturating_mul(u64::from(n))),
        };
        // Requests older than the latest one known say nothing of whether the budget is
        // quiet now.
        if latest > previous {
            self.after_quiet.store(quiet > 0, Ordering::Release);
        }
        let refill = self.refill(quiet);
        self.earn(
            self.ratio_ppm
                .saturating_mul(i64::from(n))
                .saturating_add(refill),
            epoch,
        );
    }

    /// What `quiet` nanoseconds of quiet give back: the reserve over [`REFILL`]; after
    /// all of it, whatever brings the balance to the reserve, debt included.
    fn refill(&self, quiet: u64) -> i64 {
        let reserve = self.quiet_ceiling();
        if quiet >= nanos(REFILL) {
            return reserve.saturating_add(PPM);
        }
        let share = u128::from(quiet) * reserve as u128 / u128::from(nanos(REFILL));
        i64::try_from(share).map_or(reserve, |share| share.min(reserve))
    }

    /// Gives back the token of a retry that was granted but not made: the deadline
    /// passed, or the breaker opened, during its wait.
    pub(crate) fn retry_not_made(&self, now: Instant) {
        if self.floor.is_some() {
            self.earn(PPM, self.epochs.epoch(now));
        }
        // A reset while the retry waited zeroed the count it was in.
        let _ = self
            .retries
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Forgets every request and retry, and refills the reserve: the budget as made.
    pub(crate) fn reset(&self) {
        self.recent.clear();
        self.balance.store(self.quiet_ceiling(), Ordering::Release);
        self.last_request.store(0, Ordering::Release);
        self.after_quiet.store(true, Ordering::Release);
        self.requests.store(0, Ordering::Relaxed);
        self.retries.store(0, Ordering::Relaxed);
        self.refusals.store(0, Ordering::Relaxed);
    }

    /// Records that a call which retried succeeded at `now`: it gives back half a retry.
    pub(crate) fn retry_succeeded(&self, now: Instant) {
        self.earn(REFUND, self.epochs.epoch(now));
    }

    /// The most the balance may hold in `epoch`: the floor or the window's share of
    /// requests, whichever is more, or the reserve after quiet if that is more still.
    /// `None` without a limit.
    fn ceiling(&self, epoch: u32) -> Option<i64> {
        let floor = self.floor?;
        let recent = i64::try_from(self.recent.sum(epoch)).unwrap_or(i64::MAX);
        let busy = floor.max(self.ratio_ppm.saturating_mul(recent));
        Some(if self.after_quiet.load(Ordering::Acquire) {
            busy.max(self.quiet_ceiling())
        } else {
            busy
        })
    }

    /// Adds `ppm` to the balance, and holds it to what it may hold in `epoch`: a
    /// balance above that (earned by requests no longer in the window) is cut to it.
    fn earn(&self, ppm: i64, epoch: u32) {
        let Some(ceiling) = self.ceiling(epoch) else {
            return;
        };
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                Some(balance.saturating_add(ppm).min(ceiling))
            });
    }

    /// Asks for a retry at `now`: `true` if granted (and counted), `false` if the budget
    /// is spent (and the refusal counted).
    pub fn withdraw(&self, now: Instant) -> bool {
        let granted = match self.ceiling(self.epochs.epoch(now)) {
            None => true,
            Some(ceiling) => self.spend_one(ceiling),
        };
        self.counted(granted)
    }

    /// Asks for a hedge (a copy of a slow attempt) at `now`: as [`RetryBudget::withdraw`],
    /// but granted only while a whole token would be left for a retry, since a hedge
    /// only speeds a call up and a retry may be what saves one.
    pub(crate) fn withdraw_hedge(&self, now: Instant) -> bool {
        let granted = match self.ceiling(self.epochs.epoch(now)) {
            None => true,
            Some(ceiling) => self.spend_leaving_one(ceiling),
        };
        self.counted(granted)
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

    /// Spends one token if two are there, of a balance held to `ceiling`: one stays.
    fn spend_leaving_one(&self, ceiling: i64) -> bool {
        self.balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                let balance = balance.min(ceiling);
                (balance >= 2 * PPM).then_some(balance - PPM)
            })
            .is_ok()
    }

    /// Spends one token of a balance held to `ceiling`: at once if it holds one; with
    /// the probability of the fraction it holds otherwise, going into debt.
    fn spend_one(&self, ceiling: i64) -> bool {
        let mut seen = self.balance.load(Ordering::Acquire);
        // Drawn at most once per ask, and only when a fraction is left.
        let mut draw: Option<i64> = None;
        loop {
            let balance = seen.min(ceiling);
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
                seen,
                balance - PPM,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => seen = now,
            }
        }
    }

    /// What the budget has done, and holds, at `now`.
    pub fn snapshot(&self, now: Instant) -> BudgetSnapshot {
        let tokens = match self.ceiling(self.epochs.epoch(now)) {
            Some(ceiling) => self.balance.load(Ordering::Acquire).min(ceiling) as f64 / PPM as f64,
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

/// How many of `n` requests spread evenly over `span` nanoseconds fall in the last
/// `window`: all of them if the span fits in it, else their share, rounded up.
fn in_window(n: u32, span: u64, window: u64) -> u32 {
    if span <= window {
        return n;
    }
    let share = (u128::from(n) * u128::from(window)).div_ceil(u128::from(span));
    u32::try_from(share).unwrap_or(n)
}

/// `d` in nanoseconds, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
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

    /// The retries `budget` grants to `n` calls of a total outage, one every `gap` from
    /// `start`, each asking until refused (or 5 times): per call.
    fn outage(budget: &RetryBudget, start: Instant, gap: Duration, n: u32) -> Vec<u32> {
        (0..n)
            .map(|i| {
                let now = start + gap * i;
                budget.deposit(now);
                (0..5).take_while(|_| budget.withdraw(now)).count() as u32
            })
            .collect()
    }

    /// The most retries in any `width` consecutive calls of `per_call`.
    fn most_in_any(per_call: &[u32], width: usize) -> u32 {
        per_call
            .windows(width)
            .map(|w| w.iter().sum())
            .max()
            .unwrap_or(0)
    }

    // Finagle's check of its budget: after n requests that all fail, retries are n x the
    // ratio plus what a fresh budget holds (the reserve, 5), within one (the last retry
    // may be granted on a fraction of a token). 10,000 calls that each ask until refused:
    // 1,000 + 5.
    // Can fail: a reserve that refills with time while busy (a call every millisecond),
    // a ratio applied to retries as well as requests, or grants on a fraction that do not
    // pay it back.
    #[test]
    fn when_every_request_fails_retries_are_the_ratio_plus_the_reserve_within_one() {
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
        let snapshot = budget.snapshot(start + ms(u64::from(n)));
        let bound = f64::from(n) * 0.1 + 5.0;
        assert!(
            (snapshot.retries as f64 - bound).abs() <= 1.0,
            "{snapshot:?}"
        );
        assert_eq!(snapshot.requests, u64::from(n));
        // Every call ends on a refusal, but the first, whose 5 retries the reserve paid.
        assert_eq!(snapshot.refusals, u64::from(n) - 1);
        assert!((-1.0..1.0).contains(&snapshot.tokens), "{snapshot:?}");
    }

    // The same after a history: a burst of 20,000 calls that succeeded in one second,
    // then, 5 s later, an outage of 10,000 calls a millisecond apart: the burst's 2,000
    // tokens are gone, and retries are again 1,000 + the floor (2: the budget is still
    // busy), within one. After an hour of quiet instead, 1,000 + the reserve (5).
    // Can fail: a balance not cut back when the rate falls (3,000 retries).
    #[test]
    fn the_exact_bound_holds_after_a_burst_and_after_quiet() {
        seed_thread_rng(7);
        for (quiet, held) in [(secs(5), 2.0), (secs(3600), 5.0)] {
            let budget = RetryBudget::new();
            let start = Instant::now();
            for i in 0..20_000u64 {
                budget.deposit(start + Duration::from_micros(50 * i));
            }
            // The tokens of the burst, while it is recent.
            assert!(budget.snapshot(start + ms(999)).tokens > 1000.0);
            let outage = start + secs(1) + quiet;
            let retries: u32 = outage_sum(&budget, outage, ms(1), 10_000);
            let bound = 10_000.0 * 0.1 + held;
            assert!(
                (f64::from(retries) - bound).abs() <= 1.0,
                "after {quiet:?}: {retries} retries, bound {bound}"
            );
        }
    }

    fn outage_sum(budget: &RetryBudget, start: Instant, gap: Duration, n: u32) -> u32 {
        outage(budget, start, gap, n).iter().sum()
    }

    // Every 100 calls of an outage at one call a second get at most 10 % of them plus
    // the reserve, plus one: 16 retries, 1.16x, whatever came before. Histories: a burst
    // of 20,000 calls then an hour of quiet; a busy day at a call a second; a burst then
    // 10 s of quiet. The issue's figure on the old budget: 500 in the first 100.
    // Can fail: tokens earned by calls no longer made, kept (500 in 100 calls).
    #[test]
    fn every_hundred_calls_of_an_outage_get_at_most_a_tenth_plus_the_reserve() {
        seed_thread_rng(8);
        type History = fn(&RetryBudget, Instant) -> Instant;
        let histories: [(&str, History); 3] = [
            ("a burst, then an hour of quiet", |budget, start| {
                for i in 0..20_000u64 {
                    budget.deposit(start + Duration::from_micros(50 * i));
                }
                start + secs(3601)
            }),
            ("a busy day", |budget, start| {
                for i in 0..86_400u64 {
                    budget.deposit(start + secs(i));
                }
                start + secs(86_401)
            }),
            ("a burst, then 10 s of quiet", |budget, start| {
                for i in 0..20_000u64 {
                    budget.deposit(start + Duration::from_micros(50 * i));
                }
                start + secs(11)
            }),
        ];
        for (name, history) in histories {
            let budget = RetryBudget::new();
            let outage_at = history(&budget, Instant::now());
            let per_call = outage(&budget, outage_at, secs(1), 400);
            let most = most_in_any(&per_call, 100);
            assert!(most <= 16, "{name}: {most} retries in 100 calls");
            let total: u32 = per_call.iter().sum();
            assert!(total <= 40 + 5 + 1, "{name}: {total} retries in 400 calls");
        }
    }

    // Hedges draw on the same tokens: after a busy spell, a hedge of every call of a
    // slow dependency (one a second) is granted at most 10 % of the time, plus the
    // reserve. On the old budget: every call, three times (4.00x).
    // Can fail: a hedge granted on tokens the budget may no longer hold.
    #[test]
    fn hedges_after_a_busy_spell_are_held_to_the_same_bound() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        for i in 0..20_000u64 {
            budget.deposit(start + Duration::from_micros(50 * i));
        }
        let slow = start + secs(20);
        let hedges: Vec<u32> = (0..600)
            .map(|i| {
                let now = slow + secs(i);
                let sent = (0..3).take_while(|_| budget.withdraw_hedge(now)).count() as u32;
                // Each call succeeds (slowly) at its first attempt: a request.
                budget.deposit(now);
                sent
            })
            .collect();
        assert!(most_in_any(&hedges, 100) <= 16, "{:?}", &hedges[..20]);
    }

    // A function called once a minute whose dependency fails twice before each success:
    // every call succeeds, on what a minute of quiet gives back. On the old budget, 1 of
    // 30.
    // Can fail: no refill with time (1 of 30), or one slower than 1.4 tokens a minute.
    #[test]
    fn a_caller_once_a_minute_gets_its_two_retries_every_time() {
        seed_thread_rng(9);
        let budget = RetryBudget::new();
        let start = Instant::now();
        let mut succeeded = 0;
        for minute in 0..30 {
            let now = start + secs(60 * minute);
            budget.deposit(now);
            if budget.withdraw(now) && budget.withdraw(now) {
                budget.retry_succeeded(now);
                succeeded += 1;
            }
        }
        assert_eq!(succeeded, 30);
    }

    // A lone call after an outage drained the budget and 3 minutes of quiet gets the
    // whole reserve again; one minute in, a share of it; 10 s of quiet, nothing more.
    // Can fail: a reserve refilled only by requests (1 retry), or at once (5 after 10 s).
    #[test]
    fn the_reserve_refills_with_quiet() {
        let drained = || {
            let budget = RetryBudget::new();
            let start = Instant::now();
            outage(&budget, start, secs(1), 100);
            (budget, start + secs(99))
        };
        let granted = |budget: &RetryBudget, now: Instant| {
            budget.deposit(now);
            (0..10).take_while(|_| budget.withdraw(now)).count()
        };
        let (budget, last) = drained();
        assert_eq!(granted(&budget, last + secs(180)), 5);
        let (budget, last) = drained();
        // 50 s beyond the first 10, of 170: 1.47 tokens, and the request's 0.1.
        let minute = granted(&budget, last + secs(60));
        assert!((1..=2).contains(&minute), "{minute}");
        let (budget, last) = drained();
        assert!(granted(&budget, last + secs(10)) <= 1);
    }

    // A ratio of its own bounds retries the same way: 25 % of 1,000 failing requests,
    // plus the reserve, within one. Can fail: a ratio scaled wrongly (0.25 taken as
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
            (snapshot.retries as f64 - 255.0).abs() <= 1.0,
            "{snapshot:?}"
        );
    }

    // A hedge is granted only while a whole token stays for a retry: with one and a
    // half tokens, none is; the retry after it still is. Can fail: a hedge granted on
    // a little more than one token, leaving half a token.
    #[test]
    fn a_hedge_leaves_a_whole_token() {
        let budget = RetryBudget::new().with_reserve(1).with_floor(1);
        let t = Instant::now();
        budget.deposit(t);
        assert!(budget.withdraw(t));
        for _ in 0..15 {
            budget.deposit(t);
        }
        assert!((budget.snapshot(t).tokens - 1.5).abs() < 1e-9);
        assert!(!budget.withdraw_hedge(t));
        assert!(budget.withdraw(t));
        assert!((budget.snapshot(t).tokens - 0.5).abs() < 1e-9);
    }

    // The bound with successes: retries <= reserve + ratio x requests + 1/2 x calls that
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
        let snapshot = budget.snapshot(start + ms(u64::from(n)));
        // The reserve a fresh budget holds (5) is cut to the busy ceiling at the second
        // call if the first did not spend it: between the two.
        let earned = |held: f64| held + f64::from(n) * 0.1 + 0.5 * f64::from(retried_successes);
        let spent = snapshot.retries as f64 + snapshot.tokens;
        let earned = (earned(2.0), earned(5.0));
        assert!(
            spent <= earned.1 + 1e-9 && earned.0 - spent <= 1.0,
            "{snapshot:?}, {retried_successes} succeeded after retrying: earned {earned:?}"
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
            budget.deposit(start);
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
        // 61 requests each at 10 %: 6,100 retries, less the debt a budget may end in.
        assert!((5000..=6100).contains(&total), "{total}: {per_second:?}");
        let peak = per_second.iter().max().copied().unwrap_or(0);
        assert!(peak <= 300, "{per_second:?}");
    }

    // A budget busy at a request every 10 s (never quiet) earns its floor back from
    // requests only; the floor and the reserve are each at least what they are set to.
    #[test]
    fn a_busy_budget_holds_its_floor() {
        let budget = RetryBudget::new();
        let now = Instant::now();
        budget.deposit(now);
        assert_eq!((0..9).filter(|_| budget.withdraw(now)).count(), 5);
        // Ten requests pay for one retry; a request every 10 s never fills it beyond the
        // floor.
        for i in 1..=100 {
            budget.deposit(now + Duration::from_secs(10 * i));
        }
        // Their share of the window gone, 2 s after the last.
        let later = now + Duration::from_secs(1002);
        assert_eq!(budget.snapshot(later).tokens, 2.0);
        assert!(budget.withdraw(later));
        assert!(budget.withdraw(later));
        assert!(!budget.withdraw(later));
        let snapshot = budget.snapshot(later);
        assert_eq!((snapshot.retries, snapshot.refusals), (7, 5));
        // A floor of zero is one; a reserve below the floor is the floor.
        let low = RetryBudget::new().with_floor(0).with_reserve(0);
        assert_eq!(low.snapshot(later).tokens, 1.0);
        assert_eq!(
            RetryBudget::new().with_reserve(1).snapshot(later).tokens,
            2.0
        );
        assert_eq!(
            RetryBudget::new().with_reserve(9).snapshot(later).tokens,
            9.0
        );
    }

    // A busy budget holds what the last second's requests earned (or its floor, if
    // more): it can absorb a burst of failures. Requests spread thinner earn no more than
    // the floor, and the burst's tokens are gone a window after it.
    // Can fail: a capacity of the floor alone (2 retries out of a burst of 100 failures),
    // or one that never forgets (an outage spends a long quiet spell's tokens at once).
    #[test]
    fn a_busy_budget_holds_a_window_of_requests() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        for i in 0..1000 {
            budget.deposit(start + ms(i / 2));
        }
        assert_eq!(budget.snapshot(start + ms(500)).tokens, 100.0);
        let withdrawn = (0..200)
            .filter(|_| budget.withdraw(start + ms(500)))
            .count();
        assert_eq!(withdrawn, 100);
        let later = start + Duration::from_secs(3);
        // Ten requests a second: one token a second, at most the floor.
        for i in 0..100 {
            budget.deposit(later + ms(100 * i));
        }
        assert_eq!(budget.snapshot(later + ms(9900)).tokens, 2.0);
        // Fifty at once, 2 s on: their 5 tokens, while they are in the window.
        for _ in 0..50 {
            budget.deposit(later + ms(12_000));
        }
        assert_eq!(budget.snapshot(later + ms(12_000)).tokens, 5.0);
        assert_eq!(budget.snapshot(later + ms(13_100)).tokens, 2.0);
    }

    // A batch of requests made over a long stretch counts in the window for its share
    // of it: a thread's batches of 64 calls, one a second, hold a busy budget to its
    // floor, not to the 6.4 tokens of 64 requests in its last second.
    // Can fail: a batch counted as requests of the last second (6.4 tokens).
    #[test]
    fn a_batch_spread_over_a_minute_counts_for_its_share_of_the_window() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        budget.deposit(start);
        while budget.withdraw(start) {}
        let mut since = start;
        for k in 1..=10u64 {
            let now = start + secs(64 * k);
            budget.deposit_many(CompactInstant::new(now), 64, CompactInstant::new(since));
            since = now;
            let tokens = budget.snapshot(now).tokens;
            assert!(tokens <= 2.0 + 1e-9, "after batch {k}: {tokens}");
        }
        assert_eq!(budget.snapshot(since).requests, 641);
        assert_eq!(in_window(64, nanos(secs(64)), nanos(secs(1))), 1);
        assert_eq!(in_window(64, nanos(ms(500)), nanos(secs(1))), 64);
        assert_eq!(in_window(3, nanos(secs(2)), nanos(secs(1))), 2);
    }

    // The latest of a batch's requests is dated as far from the batch's end as its
    // requests are apart: one request over the 30 s since the last is taken to be 15 s
    // old, so the batch and the request made now after it each find 5 s of quiet beyond
    // the first 10 (0.147 tokens each, with their tenths: 0.494).
    // Can fail: the latest dated at the batch's start (no quiet for the batch, 20 s for
    // the request: 0.788).
    #[test]
    fn a_batch_is_dated_by_the_spacing_of_its_requests() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        budget.deposit(start);
        while budget.withdraw(start) {}
        let drained = budget.snapshot(start).tokens;
        let now = start + secs(30);
        budget.deposit_many(CompactInstant::new(now), 1, CompactInstant::new(start));
        budget.deposit(now);
        let gained = budget.snapshot(now).tokens - drained;
        let expected = 2.0 * (0.1 + 5.0 * 5.0 / 170.0);
        assert!((gained - expected).abs() < 1e-5, "{gained} tokens");
    }

    // Requests at the same instant as the latest known are simultaneous with it: the
    // quiet that came before holds for them too, and a fresh budget's second request at
    // its first's instant leaves it its reserve.
    // Can fail: a request at the same instant taken as one right after (the reserve cut
    // to the floor of 2).
    #[test]
    fn requests_at_one_instant_share_the_quiet_before_them() {
        let budget = RetryBudget::new();
        let now = Instant::now();
        budget.deposit(now);
        budget.deposit(now);
        assert_eq!(budget.snapshot(now).tokens, 5.0);
        budget.deposit(now + ms(1));
        assert_eq!(budget.snapshot(now + ms(1)).tokens, 2.0);
    }

    // After a whole refill's quiet, a budget in debt is back at its full reserve.
    // Can fail: a refill capped at the reserve, added to the debt (4.1 tokens).
    #[test]
    fn a_budget_in_debt_refills_to_its_whole_reserve() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        budget.deposit(start);
        while budget.withdraw(start) {}
        // Ten requests of a tenth each, then one on the last tenth: into debt.
        seed_thread_rng(21);
        let mut now = start;
        while budget.snapshot(now).tokens >= 0.0 {
            now += ms(1);
            budget.deposit(now);
            budget.withdraw(now);
        }
        assert!(budget.snapshot(now).tokens < 0.0);
        let later = now + secs(180);
        budget.deposit(later);
        assert_eq!(budget.snapshot(later).tokens, 5.0);
    }

    // A batch begun before the budget's first deposit keeps its length: 960 requests
    // over the last 12 s count in the window for their twelfth (80, 8 tokens, and the
    // request after them a tenth more), not as 960 of the last second.
    // Can fail: a batch's start clamped to the budget's first deposit (96 tokens).
    #[test]
    fn a_batch_begun_before_the_first_deposit_keeps_its_length() {
        let budget = RetryBudget::new();
        let start = Instant::now();
        let now = start + secs(12);
        budget.deposit_many(CompactInstant::new(now), 960, CompactInstant::new(start));
        budget.deposit(now + ms(1));
        let tokens = budget.snapshot(now + ms(1)).tokens;
        assert!((tokens - 8.1).abs() < 1e-9, "{tokens} tokens");
    }

    // A retry granted before a reset and not made after it leaves the count at zero,
    // not 2^64 - 1.
    // Can fail: a count that wraps (18446744073709551615 retries).
    #[test]
    fn a_retry_not_made_after_a_reset_does_not_wrap_the_count() {
        let budget = RetryBudget::new();
        let now = Instant::now();
        budget.deposit(now);
        assert!(budget.withdraw(now));
        budget.reset();
        budget.retry_not_made(now);
        let snapshot = budget.snapshot(now);
        assert_eq!((snapshot.requests, snapshot.retries), (0, 0));
        assert_eq!(snapshot.tokens, 5.0);
    }

    #[test]
    fn unlimited_never_refuses() {
        let budget = RetryBudget::unlimited();
        let now = Instant::now();
        assert!((0..100_000).all(|_| budget.withdraw(now)));
        assert_eq!(budget.snapshot(now).retries, 100_000);
    }
}
