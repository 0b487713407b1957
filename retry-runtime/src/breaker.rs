//! The circuit breaker: during a long outage, stop calling the dependency at all.

use std::fmt;
use std::num::NonZeroU8;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::classify::{Class, Classify};
use crate::window::{Epochs, RollingCount};

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
/// use persevere_runtime::CircuitBreaker;
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
    /// the half-open spell it was let through in. A byte, so that a call's state holds
    /// its permit in its padding.
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

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const SHIFT: u32 = 62;
const SPELL_SHIFT: u32 = 32;
const COUNT_MASK: u64 = (1 << SPELL_SHIFT) - 1;
/// Half-open spells are numbered modulo this, so that a probe's number fits in a byte
/// beside the closed breaker's permit. A probe still out 254 spells later (each lasts an
/// open time and a probe's answer) is taken for a probe of the spell it comes back in,
/// the one case where a stale probe decides.
const SPELLS: u64 = 254;

const fn word(state: u64, spell: u64, count: u64) -> u64 {
    (state << SHIFT) | (spell << SPELL_SHIFT) | count
}

const fn state_of(word: u64) -> u64 {
    word >> SHIFT
}

/// The number of the latest half-open spell, below [`SPELLS`].
const fn spell_of(word: u64) -> u64 {
    (word >> SPELL_SHIFT) & ((1 << (SHIFT - SPELL_SHIFT)) - 1)
}

/// Whether the breaker whose state word is `current` is half-open in spell `spell`.
const fn in_spell(current: u64, spell: u64) -> bool {
    state_of(current) == HALF_OPEN && spell_of(current) == spell
}

const fn count_of(word: u64) -> u64 {
    word & COUNT_MASK
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

/// A call refused by an open circuit breaker, without running.
///
/// A function with `breaker = ...` must be able to return it as its own error, through
/// `From<CircuitOpen>`; `std::io::Error` converts from it already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitOpen {
    retry_in: Duration,
}

impl CircuitOpen {
    /// How long until the breaker lets a probe through; zero when it is half-open and
    /// its probes are taken.
    pub const fn retry_in(&self) -> Duration {
        self.retry_in
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the circuit breaker is open; the next probe in {:?}",
            self.retry_in
        )
    }
}

impl std::error::Error for CircuitOpen {}

/// Never retried: the breaker has already decided the dependency needs a rest.
impl Classify for CircuitOpen {
    fn classify(&self) -> Class {
        Class::Permanent
    }
}

impl From<CircuitOpen> for std::io::Error {
    fn from(e: CircuitOpen) -> Self {
        std::io::Error::other(e)
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
    /// use persevere_runtime::{BreakerState, CircuitBreaker, Permit};
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
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn consecutive_failures_open_it_and_a_probe_closes_it() {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(3)
            .with_open_for(ms(1000));
        let t = Instant::now();
        for _ in 0..2 {
            let permit = b.admit(t).unwrap();
            assert_eq!(permit, Permit::CLOSED);
            assert!(!permit.is_probe());
            b.record(permit, false, t);
        }
        // A success resets the run.
        b.record(Permit::CLOSED, true, t);
        for _ in 0..2 {
            b.record(Permit::CLOSED, false, t);
        }
        assert_eq!(b.state(t), BreakerState::Closed);
        b.record(Permit::CLOSED, false, t);
        assert_eq!(b.state(t), BreakerState::Open);
        assert_eq!(b.admit(t + ms(400)).unwrap_err().retry_in(), ms(600));
        // After the open time: one probe.
        let later = t + ms(1000);
        assert_eq!(b.state(later), BreakerState::HalfOpen);
        let probe = b.admit(later).unwrap();
        assert!(probe.is_probe());
        assert!(b.admit(later).is_err());
        b.record(probe, true, later);
        assert_eq!(b.state(later), BreakerState::Closed);
        let snap = b.snapshot(later);
        assert_eq!(
            (snap.opened, snap.half_opened, snap.closed, snap.rejected),
            (1, 1, 1, 2)
        );
    }

    /// A breaker of one probe, opened by a failure now, for `open_for`; with the instant
    /// it goes half-open.
    fn opened_until(open_for: Duration) -> (CircuitBreaker, Instant) {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(1)
            .with_open_for(open_for);
        let t = Instant::now();
        b.record(Permit::CLOSED, false, t);
        (b, t + open_for)
    }

    #[test]
    fn a_failed_probe_reopens_it() {
        let (b, t1) = opened_until(ms(100));
        let probe = b.admit(t1).unwrap();
        assert!(probe.is_probe());
        b.record(probe, false, t1);
        assert_eq!(b.state(t1 + ms(99)), BreakerState::Open);
        assert_eq!(b.state(t1 + ms(100)), BreakerState::HalfOpen);
    }

    #[test]
    fn an_abandoned_probe_frees_its_place() {
        let (b, t1) = opened_until(ms(10));
        let permit = b.admit(t1).unwrap();
        assert!(b.admit(t1).is_err());
        b.abandon(permit);
        assert!(b.admit(t1).unwrap().is_probe());
    }

    #[test]
    fn failure_rate_needs_its_minimum_of_calls() {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(0)
            .with_failure_rate(0.5, 10, Duration::from_secs(10));
        let t = Instant::now();
        for i in 0..9 {
            b.record(Permit::CLOSED, i % 2 == 0, t);
        }
        // 9 calls, 4 failed: below the minimum.
        assert_eq!(b.state(t), BreakerState::Closed);
        b.record(Permit::CLOSED, false, t);
        // 10 calls, 5 failed: 50 %.
        assert_eq!(b.state(t), BreakerState::Open);
    }

    // A success counted with a permit taken while the breaker was closed, reported after
    // it opened, does not close it: only a probe decides, in half-open.
    // Can fail: an `||` for the `&&` in `record` lets such a success close a half-open
    // breaker while its probe is out.
    #[test]
    fn a_stale_success_does_not_close_an_open_or_half_open_breaker() {
        let breaker = CircuitBreaker::new()
            .with_consecutive_failures(2)
            .with_open_for(ms(10_000))
            .with_probes(1);
        let t0 = Instant::now();
        let stale = breaker.admit(t0).unwrap();
        let stale_too = breaker.admit(t0).unwrap();
        for _ in 0..2 {
            let permit = breaker.admit(t0).unwrap();
            breaker.record(permit, false, t0);
        }
        assert_eq!(breaker.state(t0), BreakerState::Open);
        assert_eq!(breaker.record(stale, true, t0), None);
        assert_eq!(breaker.state(t0), BreakerState::Open);
        let t1 = t0 + ms(10_000);
        let probe = breaker.admit(t1).unwrap();
        assert!(probe.is_probe());
        assert_eq!(breaker.record(stale_too, true, t1), None);
        assert_eq!(breaker.state(t1), BreakerState::HalfOpen);
        assert!(breaker.admit(t1).is_err(), "the one probe is still out");
        assert_eq!(breaker.record(probe, true, t1), Some(BreakerState::Closed));
    }

    // A probe given back after another probe closed the breaker leaves the closed
    // breaker as it is: its run of failures still counts toward opening it again.
    // Can fail: an `||` for the `&&` in `abandon`, which took one failure off the run.
    #[test]
    fn a_probe_abandoned_after_the_breaker_closed_leaves_it_alone() {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(3)
            .with_open_for(ms(100))
            .with_probes(2);
        let t = Instant::now();
        for _ in 0..3 {
            b.record(Permit::CLOSED, false, t);
        }
        let t1 = t + ms(100);
        let first = b.admit(t1).unwrap();
        let second = b.admit(t1).unwrap();
        assert!(first.is_probe() && second.is_probe());
        assert_eq!(b.record(first, true, t1), Some(BreakerState::Closed));
        // Closed again: two failures in a row, then the second probe is given back.
        for _ in 0..2 {
            b.record(b.admit(t1).unwrap(), false, t1);
        }
        b.abandon(second);
        assert_eq!(b.state(t1), BreakerState::Closed);
        // The third failure in a row opens it.
        assert_eq!(
            b.record(b.admit(t1).unwrap(), false, t1),
            Some(BreakerState::Open)
        );
    }

    /// A breaker of two probes, open for 100 ms: opened, half-open at 100 ms with both
    /// probes out, closed by one of them and opened again, all at 100 ms; with the other
    /// probe, now of an ended spell, and that instant.
    fn reopened_with_a_stale_probe_out() -> (CircuitBreaker, Permit, Instant) {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(1)
            .with_open_for(ms(100))
            .with_probes(2);
        let t = Instant::now();
        b.record(Permit::CLOSED, false, t);
        let t1 = t + ms(100);
        let (first, stale) = (b.admit(t1).unwrap(), b.admit(t1).unwrap());
        assert_eq!(b.record(first, true, t1), Some(BreakerState::Closed));
        assert_eq!(
            b.record(b.admit(t1).unwrap(), false, t1),
            Some(BreakerState::Open)
        );
        (b, stale, t1)
    }

    // A probe from an earlier half-open spell, given back when the breaker is half-open
    // again and holds no probe, changes nothing: two probes may still go, and the
    // breaker has gone half-open twice. Can fail: giving it back took the count of
    // probes below zero, into the state's bits (the breaker read as open again).
    #[test]
    fn a_stale_probe_given_back_to_a_half_open_breaker_holding_none_changes_nothing() {
        let (b, stale, t1) = reopened_with_a_stale_probe_out();
        // Half-open at 200 ms: a probe taken and given back.
        let t2 = t1 + ms(100);
        b.abandon(b.admit(t2).unwrap());
        b.abandon(stale);
        assert!(b.admit(t2).is_ok());
        assert!(b.admit(t2).is_ok());
        assert!(b.admit(t2).is_err());
        assert_eq!(b.snapshot(t2).half_opened, 2);
    }

    // A probe from an earlier half-open spell, still out when the breaker has closed,
    // opened and gone half-open again, decides nothing: its success does not close the
    // breaker, its failure does not reopen it, and given back it frees no place of the
    // new spell's probes. Can fail: a probe told apart only by the state (the stale
    // success closed the breaker while the new probe was out).
    #[test]
    fn a_probe_from_an_earlier_half_open_spell_decides_nothing() {
        let (b, stale, t1) = reopened_with_a_stale_probe_out();
        // The stale probe's failure does not restart the open time.
        assert_eq!(b.record(stale, false, t1 + ms(99)), None);
        // Half-open at 200 ms, with both its probes out.
        let t2 = t1 + ms(100);
        let (probe, other) = (b.admit(t2).unwrap(), b.admit(t2).unwrap());
        assert_eq!(b.record(stale, true, t2), None);
        assert_eq!(b.record(stale, false, t2), None);
        b.abandon(stale);
        assert_eq!(b.state(t2), BreakerState::HalfOpen);
        assert!(b.admit(t2).is_err(), "both places are still taken");
        // The spell's own probes still decide it.
        b.abandon(other);
        assert_eq!(b.record(probe, false, t2), Some(BreakerState::Open));
        assert_eq!(b.snapshot(t2).half_opened, 2);
    }

    // Spell numbers wrap (a probe's fits in a byte): past the wrap, each spell's probe is
    // still a probe, and still decides its own spell. Can fail: a spell number that
    // overflowed the probe's byte (read as a closed breaker's permit).
    #[test]
    fn probes_decide_their_spell_past_the_wrap_of_spell_numbers() {
        let b = CircuitBreaker::new()
            .with_consecutive_failures(1)
            .with_open_for(ms(1));
        let mut t = Instant::now();
        b.record(Permit::CLOSED, false, t);
        for _ in 0..SPELLS + 2 {
            t += ms(1);
            let probe = b.admit(t).unwrap();
            assert!(probe.is_probe());
            assert_eq!(b.record(probe, false, t), Some(BreakerState::Open));
        }
        t += ms(1);
        let probe = b.admit(t).unwrap();
        assert_eq!(format!("{probe:?}"), "Permit { probe_of_spell: 3 }");
        assert_eq!(b.record(probe, true, t), Some(BreakerState::Closed));
        assert_eq!(b.snapshot(t).half_opened, SPELLS + 3);
        assert_eq!(format!("{:?}", b.admit(t).unwrap()), "Permit::CLOSED");
    }

    // Threads that take probes, and record or give them back, while spells come and go
    // (no open time): never more probes of one spell out than allowed, and at the end
    // none held. A probe of an ended spell may still be out beside the new spell's, so
    // probes are counted by spell, over fewer spells than the numbers' wrap.
    // Can fail: a lost update of the count, or a probe freed twice.
    #[test]
    fn probes_in_flight_stay_within_their_number_across_threads() {
        for _ in 0..20 {
            probes_in_flight_within_their_number();
        }
    }

    fn probes_in_flight_within_their_number() {
        use std::sync::atomic::AtomicU32;
        let b = CircuitBreaker::new()
            .with_consecutive_failures(1)
            .with_open_for(Duration::ZERO)
            .with_probes(2);
        let out: [AtomicU32; SPELLS as usize] = [const { AtomicU32::new(0) }; SPELLS as usize];
        let most = AtomicU32::new(0);
        std::thread::scope(|scope| {
            for thread in 0..4u32 {
                let (b, out, most) = (&b, &out, &most);
                scope.spawn(move || {
                    // Each thread starts at most one spell past the check: 4 past it.
                    // Bounded, so that a breaker that stops moving fails, not hangs.
                    for i in thread..thread + 1_000_000 {
                        if b.half_opened.load(Ordering::Relaxed) >= SPELLS - 10 {
                            break;
                        }
                        let now = Instant::now();
                        let Ok(permit) = b.admit(now) else { continue };
                        let Some(spell) = permit.spell() else {
                            b.record(permit, false, now);
                            continue;
                        };
                        // Counted here after the breaker counts it, and let go here
                        // before the breaker does: never more here than there.
                        let out = &out[spell as usize];
                        most.fetch_max(out.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        std::thread::yield_now();
                        out.fetch_sub(1, Ordering::SeqCst);
                        match i % 3 {
                            0 => b.abandon(permit),
                            1 => drop(b.record(permit, false, now)),
                            _ => drop(b.record(permit, true, now)),
                        }
                    }
                });
            }
        });
        assert!(b.half_opened.load(Ordering::Relaxed) >= SPELLS - 10);
        let most = most.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&most),
            "{most} probes of one spell out at once"
        );
        let current = b.state.load(Ordering::Acquire);
        if state_of(current) == HALF_OPEN {
            assert_eq!(count_of(current), 0, "a probe still counted");
        }
    }

    // A probe given back twice (a misuse) frees its place once it holds none: the count
    // stays at zero, and the next probe goes through and decides the spell. Can fail: a
    // count taken below zero, into the spell's number (the breaker then refused every
    // probe, half-open for good).
    #[test]
    fn a_probe_given_back_twice_leaves_the_breaker_working() {
        let (b, t1) = opened_until(ms(100));
        let probe = b.admit(t1).unwrap();
        b.abandon(probe);
        b.abandon(probe);
        let next = b.admit(t1).unwrap();
        assert!(next.is_probe());
        assert!(b.admit(t1).is_err(), "one probe at a time");
        assert_eq!(b.record(next, true, t1), Some(BreakerState::Closed));
    }

    // One test opens a shared breaker an hour into its paused clock; the next test's
    // clock starts earlier. Reset, the breaker is closed at once, has seen nothing, and a
    // probe taken before the reset decides nothing. Can fail: a reset that leaves the
    // opening's time (the breaker open for the rest of that hour) or the probe's spell.
    #[test]
    fn reset_closes_it_and_forgets_what_it_saw() {
        let (b, t1) = opened_until(ms(10_000));
        let late = t1 + Duration::from_secs(3600);
        b.record(b.admit(late).unwrap(), false, late);
        let probe = b.admit(late + ms(10_000)).unwrap();
        let next_test = t1 + ms(60_000);
        assert!(
            b.admit(next_test).is_err(),
            "open, as the hour has not passed here"
        );
        // Results of attempts that did not ask, counted in the window of failure rates.
        b.record(Permit::CLOSED, true, next_test);
        b.record(Permit::CLOSED, false, next_test);
        let seen = b.snapshot(next_test);
        assert_eq!((seen.calls, seen.failures), (2, 1));
        b.reset();
        assert_eq!(b.admit(next_test), Ok(Permit::CLOSED));
        assert_eq!(b.record(probe, false, next_test), None);
        assert_eq!(
            b.snapshot(next_test),
            BreakerSnapshot {
                state: BreakerState::Closed,
                calls: 0,
                failures: 0,
                opened: 0,
                half_opened: 0,
                closed: 0,
                rejected: 0,
            }
        );
        // It opens again as a new one would, and goes half-open after its open time.
        b.record(Permit::CLOSED, false, next_test);
        assert_eq!(b.state(next_test + ms(9_999)), BreakerState::Open);
        assert_eq!(b.state(next_test + ms(10_000)), BreakerState::HalfOpen);
    }

    // A breaker counts consecutive failures without end when that rule is off: the
    // count stops at the top of its bits and does not spill into the spell's number,
    // so a later probe's result still counts. Can fail: an unbounded count.
    #[test]
    fn consecutive_failures_saturate_below_the_spell_number() {
        let b = CircuitBreaker::new().with_consecutive_failures(0);
        b.state
            .store(word(CLOSED, 5, COUNT_MASK), Ordering::Release);
        let t = Instant::now();
        assert_eq!(b.record(Permit::CLOSED, false, t), None);
        let current = b.state.load(Ordering::Acquire);
        assert_eq!(
            (state_of(current), spell_of(current), count_of(current)),
            (CLOSED, 5, COUNT_MASK)
        );
    }

    // What an open breaker's refusal says.
    #[test]
    fn an_open_breaker_says_when_it_will_probe() {
        let open = CircuitOpen {
            retry_in: Duration::from_millis(1500),
        };
        assert_eq!(
            open.to_string(),
            "the circuit breaker is open; the next probe in 1.5s"
        );
        assert_eq!(open.retry_in(), Duration::from_millis(1500));
    }
}
