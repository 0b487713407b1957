//! The circuit breaker: during a long outage, stop calling the dependency at all.

use std::fmt;
use std::num::NonZeroU8;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::fleet::window::{Epochs, RollingCount};

mod open;
mod word;

pub use open::CircuitOpen;
use word::{
    CLOSED, COUNT_MASK, HALF_OPEN, OPEN, SPELLS, count_of, in_spell, spell_of, state_of, word,
};

const PPM: u64 = 1_000_000;

/// Where a [`CircuitBreaker`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through; failures are counted.
    Closed,
    /// Calls fail at once, without running, until the open time has passed.
    Open,
    /// A limited number of probe calls go through; the first to succeed closes the
    /// breaker, a failed one opens it again (a probe let through in an earlier half-open
    /// spell decides nothing).
    HalfOpen,
}

/// A circuit breaker shared by the functions that call one dependency.
///
/// Retries and their budget handle blips; when a dependency is down for minutes, the
/// breaker stops calling it altogether, so that it gets a quiet moment to recover and
/// callers get an answer at once instead of after a deadline's worth of attempts.
///
/// - **Closed**: calls go through. It opens after `consecutive_failures` failed attempts
///   in a row, or, if set, when the failure rate over a window reaches a threshold once
///   a minimum number of calls has been seen.
/// - **Open**: for `open_for`, calls fail at once with [`CircuitOpen`], converted into
///   the function's own error type, without running the function.
/// - **Half-open**: then up to `probes` calls go through at a time. The first probe
///   that succeeds closes the breaker; a probe that fails opens it again. A probe that
///   comes back after its half-open spell has ended decides nothing.
///
/// Failures are attempts whose error is retryable (transient, unsent, uncertain, or with
/// a `Retry-After`) or that timed out; a permanent error such as a 404 shows the
/// dependency answering, so it counts as a success.
///
/// ```
/// use std::time::Duration;
/// use persevere::CircuitBreaker;
///
/// static INVENTORY: CircuitBreaker = CircuitBreaker::new()
///     .with_consecutive_failures(5)
///     .with_failure_rate(0.5, 20, Duration::from_secs(30))
///     .with_open_for(Duration::from_secs(10))
///     .with_probes(2);
/// ```
///
/// Used with `#[retry(breaker = INVENTORY)]`; the function's error type must implement
/// `From<CircuitOpen>`.
#[derive(Debug)]
pub struct CircuitBreaker {
    consecutive_failures: u32,
    rate_ppm: u64,
    min_calls: u32,
    open_for: Duration,
    probes: u32,
    epochs: Epochs,
    /// The state in the top two bits; below them the number of the breaker's latest
    /// half-open spell, so that a probe from an earlier spell is known as stale; in the
    /// low 32 bits, in `Closed` the consecutive failures, in `HalfOpen` the probes in
    /// flight.
    state: AtomicU64,
    /// When the breaker last opened, in nanoseconds since `epochs`' origin.
    opened_at: AtomicU64,
    calls: RollingCount,
    failures: RollingCount,
    opened: AtomicU64,
    half_opened: AtomicU64,
    closed: AtomicU64,
    rejected: AtomicU64,
}

/// The right to make one attempt, from [`CircuitBreaker::admit`]: an ordinary call
/// through a closed breaker, or one of a half-open breaker's probes. Give each permit
/// back once, to [`CircuitBreaker::record`] or [`CircuitBreaker::abandon`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Permit {
    /// 1 for a call through a closed breaker; for a probe, 2 more than the number of
    /// the half-open spell it was let through in. A byte, so that it adds nothing to a
    /// call's state.
    of: NonZeroU8,
}

impl Permit {
    /// A call through a closed breaker, as [`CircuitBreaker::admit`] gives while the
    /// breaker is closed: recorded, its result counts toward opening the breaker (an
    /// attempt that did not ask first, such as a copy of a hedged attempt).
    pub const CLOSED: Self = Self { of: NonZeroU8::MIN };

    /// A probe of half-open spell `spell` (taken modulo [`SPELLS`]).
    const fn probe(spell: u64) -> Self {
        Self {
            of: NonZeroU8::MIN.saturating_add((spell % SPELLS) as u8 + 1),
        }
    }

    /// The half-open spell the probe was let through in; `None` for a call through a
    /// closed breaker.
    const fn spell(self) -> Option<u64> {
        match self.of.get() {
            1 => None,
            of => Some(of as u64 - 2),
        }
    }

    /// Whether this is one of a half-open breaker's probes, whose result closes or
    /// reopens the breaker while it is half-open in the spell the probe was let
    /// through in.
    pub const fn is_probe(&self) -> bool {
        self.spell().is_some()
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spell() {
            None => f.write_str("Permit::CLOSED"),
            Some(spell) => f
                .debug_struct("Permit")
                .field("probe_of_spell", &spell)
                .finish(),
        }
    }
}

/// What a breaker has seen: its state and its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSnapshot {
    /// The state at the time of the snapshot.
    pub state: BreakerState,
    /// Attempts recorded in the failure-rate window.
    pub calls: u64,
    /// Failed attempts recorded in the failure-rate window.
    pub failures: u64,
    /// How many times the breaker has opened (from closed, or from half-open after a
    /// failed probe).
    pub opened: u64,
    /// How many times it has gone from open to half-open.
    pub half_opened: u64,
    /// How many times a probe has closed it.
    pub closed: u64,
    /// Attempts refused while it was open or its probes were taken: first attempts (the
    /// call returned `CircuitOpen`) and retries (the call returned its last failure).
    /// A function's statistics tell the two apart (`failed.circuit_open`,
    /// `failed.breaker_opened`).
    pub rejected: u64,
}

impl CircuitBreaker {
    /// A breaker that opens after 5 consecutive failures, stays open for 30 s, then lets
    /// 1 probe through; the failure-rate rule is off until set.
    pub const fn new() -> Self {
        Self {
            consecutive_failures: 5,
            rate_ppm: 0,
            min_calls: 0,
            open_for: Duration::from_secs(30),
            probes: 1,
            epochs: Epochs::new(Duration::from_secs(60)),
            state: AtomicU64::new(word(CLOSED, 0, 0)),
            opened_at: AtomicU64::new(0),
            calls: RollingCount::new(),
            failures: RollingCount::new(),
            opened: AtomicU64::new(0),
            half_opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// Opens after `n` failed attempts in a row; `0` turns the rule off.
    pub const fn with_consecutive_failures(mut self, n: u32) -> Self {
        self.consecutive_failures = n;
        self
    }

    /// Also opens when at least `rate` (e.g. `0.5`) of the attempts in the last `window`
    /// failed, once that window holds at least `min_calls` attempts.
    ///
    /// # Panics
    ///
    /// If `rate` is not in `(0, 1]`, or `window` is shorter than 10 ns.
    pub const fn with_failure_rate(mut self, rate: f64, min_calls: u32, window: Duration) -> Self {
        assert!(
            rate > 0.0 && rate <= 1.0,
            "the failure rate must be above 0 and at most 1"
        );
        self.rate_ppm = (rate * PPM as f64) as u64;
        self.min_calls = min_calls;
        self.epochs.set_window(window);
        self
    }

    /// Stays open this long before letting probes through.
    pub const fn with_open_for(mut self, open_for: Duration) -> Self {
        self.open_for = open_for;
        self
    }

    /// Lets this many probes through at a time when half-open.
    ///
    /// # Panics
    ///
    /// If `probes` is zero: a breaker that never probes never closes.
    pub const fn with_probes(mut self, probes: u32) -> Self {
        assert!(probes > 0, "a breaker needs at least 1 probe");
        self.probes = probes;
        self
    }

    /// Asks to make an attempt at `now`: a permit, or [`CircuitOpen`] if the breaker is
    /// open or its probes are all taken. A permit must be returned with
    /// [`CircuitBreaker::record`] or [`CircuitBreaker::abandon`].
    pub fn admit(&self, now: Instant) -> Result<Permit, CircuitOpen> {
        loop {
            let current = self.state.load(Ordering::Acquire);
            let next = match state_of(current) {
                CLOSED => return Ok(Permit::CLOSED),
                OPEN => {
                    let since = self
                        .epochs
                        .nanos_since_origin(now)
                        .saturating_sub(self.opened_at.load(Ordering::Acquire));
                    let since = Duration::from_nanos(since);
                    if since < self.open_for {
                        return Err(self.reject(self.open_for - since));
                    }
                    word(HALF_OPEN, (spell_of(current) + 1) % SPELLS, 1)
                }
                _ => {
                    if count_of(current) >= u64::from(self.probes) {
                        return Err(self.reject(Duration::ZERO));
                    }
                    current + 1
                }
            };
            if self
                .state
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if state_of(current) == OPEN {
                    self.half_opened.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(Permit::probe(spell_of(next)));
            }
        }
    }

    /// Records the result of a permitted attempt at `now`: `healthy` unless it failed in
    /// a way that a retry could fix (see the type's documentation). Returns the new state
    /// if this result moved the breaker.
    ///
    /// A probe's result decides only the half-open spell it was let through in: one
    /// that comes back after the breaker has closed, or opened and gone half-open again,
    /// is older than what the breaker has seen since, and changes nothing, not even the
    /// failure counts of a closed breaker. (Spells are told apart modulo 254: a probe
    /// out for 254 spells is taken for one of the spell it comes back in.)
    pub fn record(&self, permit: Permit, healthy: bool, now: Instant) -> Option<BreakerState> {
        match permit.spell() {
            Some(spell) => {
                let to = if healthy { CLOSED } else { OPEN };
                self.state
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                        in_spell(current, spell).then_some(word(to, spell_of(current), 0))
                    })
                    .ok()?;
                if healthy {
                    self.calls.clear();
                    self.failures.clear();
                    self.closed.fetch_add(1, Ordering::Relaxed);
                    Some(BreakerState::Closed)
                } else {
                    self.mark_opened(now);
                    Some(BreakerState::Open)
                }
            }
            None => {
                let epoch = self.epochs.epoch(now);
                self.calls.increment(epoch);
                if healthy {
                    let _ =
                        self.state
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                                (state_of(current) == CLOSED && count_of(current) != 0)
                                    .then_some(word(CLOSED, spell_of(current), 0))
                            });
                    return None;
                }
                self.failures.increment(epoch);
                let previous = self
                    .state
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                        // Counted up to the low bits' top (a breaker without the rule
                        // of consecutive failures counts them without end).
                        (state_of(current) == CLOSED)
                            .then_some(current + u64::from(count_of(current) < COUNT_MASK))
                    })
                    .ok()?;
                let in_a_row = count_of(previous) + 1;
                let tripped = (self.consecutive_failures > 0
                    && in_a_row >= u64::from(self.consecutive_failures))
                    || self.rate_tripped(epoch);
                (tripped && self.trip(now)).then_some(BreakerState::Open)
            }
        }
    }

    /// Returns a permit whose attempt never finished (it was cancelled), so that a
    /// cancelled probe does not hold the half-open breaker's place forever. A probe of
    /// an earlier half-open spell holds no place in the current one, and changes nothing.
    pub fn abandon(&self, permit: Permit) {
        if let Some(spell) = permit.spell() {
            let _ = self
                .state
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                    (in_spell(current, spell) && count_of(current) > 0).then_some(current - 1)
                });
        }
    }

    /// The state at `now`: an open breaker whose open time has passed reads as
    /// half-open, as the next call would find it.
    pub fn state(&self, now: Instant) -> BreakerState {
        let current = self.state.load(Ordering::Acquire);
        match state_of(current) {
            CLOSED => BreakerState::Closed,
            OPEN => {
                let since = self
                    .epochs
                    .nanos_since_origin(now)
                    .saturating_sub(self.opened_at.load(Ordering::Acquire));
                if Duration::from_nanos(since) < self.open_for {
                    BreakerState::Open
                } else {
                    BreakerState::HalfOpen
                }
            }
            _ => BreakerState::HalfOpen,
        }
    }

    /// The breaker's state and counters at `now`.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        let epoch = self.epochs.epoch(now);
        BreakerSnapshot {
            state: self.state(now),
            calls: self.calls.sum(epoch),
            failures: self.failures.sum(epoch),
            opened: self.opened.load(Ordering::Relaxed),
            half_opened: self.half_opened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }

    fn rate_tripped(&self, epoch: u32) -> bool {
        if self.rate_ppm == 0 {
            return false;
        }
        let calls = self.calls.sum(epoch);
        calls >= u64::from(self.min_calls.max(1))
            && self.failures.sum(epoch).saturating_mul(PPM) >= self.rate_ppm.saturating_mul(calls)
    }

    /// Opens a closed breaker: `true` if this call did it.
    fn trip(&self, now: Instant) -> bool {
        let tripped = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (state_of(current) == CLOSED).then_some(word(OPEN, spell_of(current), 0))
            })
            .is_ok();
        if tripped {
            self.mark_opened(now);
        }
        tripped
    }

    fn mark_opened(&self, now: Instant) {
        // Written after the state: a caller that sees `Open` with the previous opening's
        // time may let a probe through early, once; it finds the dependency still down
        // and opens the breaker again.
        self.opened_at
            .store(self.epochs.nanos_since_origin(now), Ordering::Release);
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    fn reject(&self, retry_in: Duration) -> CircuitOpen {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        CircuitOpen { retry_in }
    }
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::new()
    }
}

impl CircuitBreaker {
    /// Closes the breaker and forgets what it has seen, as if just made: for tests that
    /// share a `static` breaker, each of which may open it, some under a paused clock
    /// whose time the next test's runtime does not continue. (`stats::reset` does not
    /// reach breakers, which are not registered anywhere.)
    ///
    /// A permit taken before the reset is given back to no effect: a probe's belongs to a
    /// spell that has ended, and a closed breaker's counts as one failure or success.
    ///
    /// ```
    /// use std::time::Instant;
    /// use persevere::{BreakerState, CircuitBreaker, Permit};
    ///
    /// static BREAKER: CircuitBreaker = CircuitBreaker::new().with_consecutive_failures(1);
    /// BREAKER.record(Permit::CLOSED, false, Instant::now());
    /// assert_eq!(BREAKER.state(Instant::now()), BreakerState::Open);
    /// BREAKER.reset();
    /// assert_eq!(BREAKER.state(Instant::now()), BreakerState::Closed);
    /// assert_eq!(BREAKER.snapshot(Instant::now()).opened, 0);
    /// ```
    pub fn reset(&self) {
        // The spell number stays: the next spell's is still new to the probes out now.
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                Some(word(CLOSED, spell_of(current), 0))
            });
        self.calls.clear();
        self.failures.clear();
        for count in [
            &self.opened,
            &self.half_opened,
            &self.closed,
            &self.rejected,
        ] {
            count.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
