//! The retry budget: retries held to a ratio of requests, plus what the budget may hold
//! (its floor, a window's share of requests, or its reserve after quiet), for each budget
//! (a process's function, or a shared `static`).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::fleet::window::{Epochs, RollingCount};
use crate::rng::with_thread_rng;
use crate::time::clock::CompactInstant;

/// Tokens are counted in millionths, so that a request's share of a retry is exact.
const PPM: i64 = 1_000_000;

/// What a retried call that succeeds gives back: half a retry.
const REFUND: i64 = PPM / 2;

/// How long a budget goes without requests before it counts as quiet and its reserve
/// starts to refill: a function called every few seconds is busy.
const QUIET_AFTER: Duration = Duration::from_secs(10);

/// How long the reserve takes to refill once the budget is quiet: from empty, it is full
/// again three minutes after the last request.
const REFILL: Duration = Duration::from_secs(170);

/// A token bucket that holds retries to a share of requests, what a busy budget holds to
/// a window's share, and keeps a reserve so that a quiet function's call gets every
/// attempt it is allowed.
///
/// - Every request (a call's first attempt) earns `ratio` of a token: 0.1 by default.
/// - Every retry spends one token, and so does every hedge (`#[retry(hedge = ...)]`, a
///   copy of a slow attempt sent beside it). With less than one, a retry is granted with
///   the probability of what is left, and the balance goes below zero, down to one token
///   of debt; with nothing left it is refused, and the call gives up (a refused hedge is
///   simply not sent).
/// - A call that succeeds after retrying gives half a token back: its retry reached a
///   dependency that answers.
/// - **While busy** (each request less than 10 s after the one before), the balance
///   holds at most the floor (2 tokens by default), or what the requests of the last
///   `window` (1 s by default) earned if that is more: a busy budget can absorb a
///   window's worth of failures at once, and the tokens of calls no longer made are gone
///   a window after they stop. The floor is a ceiling, not a promise: a function whose
///   calls fail one after another gets the floor's retries, then a tenth of a retry per
///   call, and a call it cannot pay a retry for returns the failure it has.
/// - **While quiet** (no request for 10 s), the budget refills towards
///   its reserve: one whole call's retries (5 by default, `attempts - 1` for a
///   function's own budget), full three minutes after the last request. The first call
///   after quiet may spend it all; the next request that finds the budget busy again
///   cuts what is left of it back to the busy ceiling.
///
/// So, exactly, over any stretch of time in which no request finds the budget quiet:
/// **retries + hedges <= what it held at the start + ratio x requests + 1/2 x calls that
/// succeeded after retrying (+ 1 for the last retry's debt)**, and what it held is at
/// most the reserve, the floor, or ratio x the requests of the window before the
/// stretch, whichever is most. In any one window of such a stretch (any second, by
/// default), retries and hedges are then at most ratio x the requests of that window and
/// the one before, plus the reserve (or the floor, if more), plus those halves, plus one.
///
/// That bounds each window, not each hundred calls: what a burst earned is there for
/// the window after it. 10,000 requests that succeed in one second, then 100 that fail
/// in the next 100 ms, get 500 retries (all 6 attempts each: 6.00x their load, within
/// the bound of 1,016); an outage of 1,000 calls a second right after that burst gets
/// 1,004 retries in its first second and 100 in each second after it (1.10x). Over a long
/// outage, retries are the ratio of requests, plus what the budget held when it began:
/// 1.1x. A request that finds the budget quiet refills it towards its reserve, which is
/// why these bounds are stated over stretches without one.
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
/// 64 at a time, or sooner when one of its calls fails (see [`crate::fleet::stats`]), as
/// requests spread over the time since its last deposit.
///
/// ```
/// use persevere::RetryBudget;
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
    /// The default budget: each request earns a tenth of a retry; while busy it holds at
    /// most 2 (the floor) or 10 % of the last second's requests, whichever is more; after
    /// quiet, a reserve of 5 (the retries of one call under the default 6 attempts).
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

    /// Sets the ratio, e.g. `0.1` for 10 %: each request earns that much of a token, so
    /// over a long outage retries are that share of requests (per window, the bound adds
    /// what the budget held; see [`RetryBudget`]).
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
    /// floor: `ratio` times the requests of the last `window` (1 s by default). The
    /// budget's bounds are per window: a longer window lets a busy budget absorb a longer
    /// burst of failures, and spend it at once when a dependency goes down. The window
    /// moves in tenths.
    ///
    /// # Panics
    ///
    /// If `window` is shorter than 10 ns.
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.epochs.set_window(window);
        self
    }

    /// Sets the floor: the most a busy budget holds when its last window's requests
    /// earned less (at least 1; 2 by default). It is a ceiling, not a promise: a busy
    /// function whose calls keep failing gets at most this many retries beyond its ratio.
    /// Every client of a fleet spends it in the first seconds of an outage, so keep it
    /// small.
    pub const fn with_floor(mut self, floor: u32) -> Self {
        if self.floor.is_some() {
            let tokens = if floor == 0 { 1 } else { floor as i64 };
            self.floor = Some(tokens * PPM);
        }
        self.full()
    }

    /// Sets the reserve: what a quiet budget refills to (from 10 s without requests,
    /// full 3 minutes after the last), and a fresh one holds (5 by default). Make it the retries of one call of the functions that share the budget
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
        if self.floor.is_none() {
            return;
        }
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
/// function its own instead). [`crate::fleet::stats::reset`] refills it with the others.
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
mod tests;

#[cfg(test)]
mod history_tests;
