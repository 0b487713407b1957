//! What a retried call may do: its deadline, its backoff schedule and its limits.

use std::time::Duration;

use crate::classify::class::Class;
use crate::fleet::breaker::CircuitBreaker;
use crate::fleet::budget::RetryBudget;
use crate::fleet::stats::RetryStats;
use crate::layer::frame::Frame;

/// How a computed wait is randomised, so that a fleet of clients that failed together
/// does not come back together.
///
/// With `d = min(cap, base * multiplier^n)` the wait before retry `n` (counting from 0):
///
/// | jitter | wait |
/// | --- | --- |
/// | [`Jitter::None`] | `d` exactly |
/// | [`Jitter::Full`] | uniform in `[0, d]` |
/// | [`Jitter::Equal`] | `d / 2` + uniform in `[0, d / 2]` |
/// | [`Jitter::Decorrelated`] | `min(cap, uniform in [base, previous * 3])`, `previous` starting at `base` |
///
/// `Full` spreads load best and is the default; `Equal` guarantees at least half the
/// computed wait; `Decorrelated` grows from the previous wait rather than from the retry
/// number (it ignores `multiplier`). See the AWS Architecture Blog post "Exponential
/// Backoff And Jitter" for the comparison these formulas come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Jitter {
    /// No randomness: every client waits exactly the computed time.
    None,
    /// A uniform random wait between zero and the computed time.
    #[default]
    Full,
    /// Half the computed time, plus a uniform random part of up to the other half.
    Equal,
    /// A uniform random wait between `base` and three times the previous wait, capped.
    Decorrelated,
}

/// What a `#[retry]` call does with a failure that comes out of another `#[retry]` call
/// made inside one of its attempts.
///
/// Nested retries multiply: three layers of three attempts make 27 calls to the
/// dependency at the bottom. By default only one layer retries: the innermost, the one
/// closest to the failure, which knows best whether it is transient and has the most
/// specific policy. The enclosing layers see that the failure already went through a
/// layer that retried it, and return it after one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layers {
    /// A failure that an inner `#[retry]` call returned is not retried again here.
    #[default]
    Innermost,
    /// This layer retries whatever failed, even through an inner `#[retry]` call: the
    /// attempts multiply. For a layer that retries something the inner layers cannot,
    /// such as a whole workflow with a fresh connection.
    Every,
}

/// Which failed attempts a call may make again: what its function is safe to repeat.
///
/// A retry runs the function again. For a function that is safe to repeat (a read, or a
/// write that every attempt sends with one idempotency key) any failure a retry can fix
/// may be retried. A function that is not may be retried only when its attempt provably
/// did not take effect: the request never left.
///
/// ```
/// use std::time::{Duration, Instant};
/// use persevere::{Class, GiveUp, Policy, Repeat, RetryState, Decision};
///
/// // A payment sent without an idempotency key: only a refused connection is retried.
/// let policy = Policy::new().with_repeat(Repeat::OnlyUnsent);
/// let (now, mut rng) = (Instant::now(), rand::rng());
/// let mut call = RetryState::new(&policy, now);
/// assert!(matches!(call.on_failure(Class::Unsent, now, &mut rng), Decision::Retry(_)));
/// // A reset connection may have reached the server: the payment may have been made.
/// assert_eq!(
///     call.on_failure(Class::Transient, now, &mut rng),
///     Decision::GiveUp(GiveUp::MayHaveTakenEffect)
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Repeat {
    /// Any failed attempt that a retry can fix, whatever it did before it failed: the
    /// function is `#[idempotent]`, or every attempt carries one idempotency key
    /// (`key = ...`).
    #[default]
    Any,
    /// Only an attempt that provably did not take effect: one that failed on its own with
    /// an error of [`Class::Unsent`](crate::Class::Unsent) (the connection was refused).
    /// Everything that may have taken effect is returned after that attempt, with
    /// [`GiveUp::MayHaveTakenEffect`](crate::GiveUp::MayHaveTakenEffect): a failure of
    /// any other class, an attempt cut at its time limit (its request may have left, and
    /// its answer been late), and a failure that came out of a nested retried call (which
    /// made attempts of its own), whatever [`Layers`] says. A policy like this sends no
    /// hedged copies. What `#[retry(on = unsent)]` sets.
    OnlyUnsent,
    /// Only an attempt that provably did not take effect, because it was never sent
    /// ([`Class::Unsent`](crate::Class::Unsent)) or because the other side undid it in
    /// full ([`Class::NotApplied`](crate::Class::NotApplied): a transaction rolled back
    /// on a serialization failure). Everything else is returned as under
    /// [`Repeat::OnlyUnsent`]. What `#[retry(on = not_applied)]` sets.
    OnlyNotApplied,
}

impl Repeat {
    /// Whether this rule lets a failed attempt of class `class`, failed on its own (not
    /// cut at its time limit, not out of a nested retried call), be made again. Whether
    /// the class is worth retrying at all is the class's to say
    /// ([`Class::is_retryable`]), asked first.
    pub const fn admits(self, class: Class) -> bool {
        match self {
            Repeat::Any => true,
            Repeat::OnlyUnsent => matches!(class, Class::Unsent),
            Repeat::OnlyNotApplied => matches!(class, Class::Unsent | Class::NotApplied),
        }
    }

    /// Whether only attempts that provably took no effect are made again (then no
    /// failure out of a nested retried call, no attempt cut at its limit, and no hedged
    /// copy).
    pub const fn only_without_effect(self) -> bool {
        !matches!(self, Repeat::Any)
    }
}

/// A retry policy: everything `#[retry]` needs to know about one function.
///
/// A policy is a plain `Copy` value built in `const` context, so the macro can emit one
/// `static` per function and the runtime can use it without allocating:
///
/// ```
/// use std::time::Duration;
/// use persevere::{Jitter, Policy};
///
/// const SEARCH: Policy = Policy::new()
///     .with_deadline(Duration::from_secs(5))
///     .with_base(Duration::from_millis(50))
///     .with_cap(Duration::from_secs(1))
///     .with_jitter(Jitter::Equal);
///
/// assert_eq!(SEARCH.deadline(), Duration::from_secs(5));
/// assert_eq!(SEARCH.attempts(), 6); // the default backstop
/// ```
///
/// The defaults are those of [`Policy::DEFAULT`].
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    deadline: Duration,
    /// `deadline` in nanoseconds, `u64::MAX` if it does not fit (585 years).
    deadline_nanos: u64,
    /// The frame of a call's first attempt, before its clock starts: made once here,
    /// not on every call.
    lazy_frame: Frame,
    attempts: u32,
    base: Duration,
    cap: Duration,
    multiplier: f64,
    jitter: Jitter,
    attempt_timeout: Option<Duration>,
    max_retry_after: Duration,
    uncertain_attempts: u32,
    layers: Layers,
    repeat: Repeat,
    budget: &'static RetryBudget,
    breaker: Option<&'static CircuitBreaker>,
    stats: Option<&'static RetryStats>,
}

impl Policy {
    /// The defaults: a 30 s deadline, at most 6 attempts, waits of
    /// `min(20 s, 200 ms * 2^n)` with full jitter, no per-attempt timeout, and server
    /// requested waits honoured up to 60 s, at most 2 attempts for failures of uncertain
    /// class (an HTTP 500), only the innermost of nested layers retrying, any failed
    /// attempt a retry can fix repeated ([`Repeat::Any`]), and a default
    /// [`RetryBudget`] shared by every policy that names no other.
    pub const DEFAULT: Policy = Policy {
        deadline: Duration::from_secs(30),
        deadline_nanos: 30_000_000_000,
        lazy_frame: Frame::lazy(30_000_000_000),
        attempts: 6,
        base: Duration::from_millis(200),
        cap: Duration::from_secs(20),
        multiplier: 2.0,
        jitter: Jitter::Full,
        attempt_timeout: None,
        max_retry_after: Duration::from_secs(60),
        uncertain_attempts: 2,
        layers: Layers::Innermost,
        repeat: Repeat::Any,
        budget: RetryBudget::SHARED_BY_DEFAULT,
        breaker: None,
        stats: None,
    };

    /// The default policy, [`Policy::DEFAULT`], to be adjusted with the `with_*` methods.
    pub const fn new() -> Self {
        Self::DEFAULT
    }

    /// Sets the total time for the call: attempts and waits together.
    ///
    /// # Panics
    ///
    /// If `deadline` is zero (at compile time when used in `const` context).
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        assert!(
            !deadline.is_zero(),
            "the deadline must be greater than zero"
        );
        self.deadline = deadline;
        let nanos = deadline.as_nanos();
        self.deadline_nanos = if nanos > u64::MAX as u128 {
            u64::MAX
        } else {
            nanos as u64
        };
        self.with_lazy_frame()
    }

    /// The frame of a call's first attempt, made anew from the deadline and from whether
    /// the call begins at its first poll.
    const fn with_lazy_frame(mut self) -> Self {
        self.lazy_frame = Frame::lazy(self.deadline_nanos)
            .beginning_at_once(self.breaker.is_some() || self.attempt_timeout.is_some());
        self
    }

    /// Sets the backstop on the number of attempts, the first included.
    ///
    /// # Panics
    ///
    /// If `attempts` is zero: a call makes at least one attempt.
    pub const fn with_attempts(mut self, attempts: u32) -> Self {
        assert!(attempts > 0, "attempts must be at least 1");
        self.attempts = attempts;
        self
    }

    /// Sets the wait before the first retry, before jitter.
    pub const fn with_base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// Sets the longest wait between two attempts, before jitter.
    ///
    /// A `cap` below `base` is allowed and means every wait is `cap`.
    pub const fn with_cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// Sets the growth factor of the wait from one retry to the next.
    ///
    /// # Panics
    ///
    /// If `multiplier` is below 1 or not finite: waits must not shrink.
    pub const fn with_multiplier(mut self, multiplier: f64) -> Self {
        assert!(
            multiplier.is_finite() && multiplier >= 1.0,
            "the multiplier must be a finite number of at least 1"
        );
        self.multiplier = multiplier;
        self
    }

    /// Sets how waits are randomised.
    pub const fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets each attempt's own time limit; `None` (the default) lets an attempt run until
    /// the deadline.
    ///
    /// # Panics
    ///
    /// If the timeout is zero.
    pub const fn with_attempt_timeout(mut self, attempt_timeout: Option<Duration>) -> Self {
        if let Some(timeout) = attempt_timeout {
            assert!(
                !timeout.is_zero(),
                "the attempt timeout must be greater than zero"
            );
        }
        self.attempt_timeout = attempt_timeout;
        self.with_lazy_frame()
    }

    /// Sets the longest server-requested wait (`Retry-After`) that is honoured; a longer
    /// one ends the call at once.
    pub const fn with_max_retry_after(mut self, max_retry_after: Duration) -> Self {
        self.max_retry_after = max_retry_after;
        self
    }

    /// Sets how many attempts a call makes at most while its failures are of
    /// [`Class::Uncertain`](crate::Class::Uncertain), such as an HTTP 500: a server error
    /// may be a passing fault or a bug that every retry will hit again.
    ///
    /// # Panics
    ///
    /// If `attempts` is zero.
    pub const fn with_uncertain_attempts(mut self, attempts: u32) -> Self {
        assert!(attempts > 0, "uncertain_attempts must be at least 1");
        self.uncertain_attempts = attempts;
        self
    }

    /// Sets what this layer does with failures of nested `#[retry]` calls.
    pub const fn with_layers(mut self, layers: Layers) -> Self {
        self.layers = layers;
        self
    }

    /// Sets which failed attempts may be made again: [`Repeat::OnlyUnsent`] for a
    /// function that is not safe to repeat.
    pub const fn with_repeat(mut self, repeat: Repeat) -> Self {
        self.repeat = repeat;
        self
    }

    /// Sets the retry budget this policy's retries draw from; share one `static` budget
    /// between all the functions that call one dependency.
    pub const fn with_budget(mut self, budget: &'static RetryBudget) -> Self {
        self.budget = budget;
        self
    }

    /// The retry budget this policy's retries draw from.
    pub const fn budget(&self) -> &'static RetryBudget {
        self.budget
    }

    /// Puts every attempt behind `breaker`; share one `static` breaker between all the
    /// functions that call one dependency.
    pub const fn with_breaker(mut self, breaker: &'static CircuitBreaker) -> Self {
        self.breaker = Some(breaker);
        self.with_lazy_frame()
    }

    /// Counts this policy's calls in `stats`, which also names them in events and
    /// metrics. `#[retry]` gives each function its own.
    pub const fn with_stats(mut self, stats: &'static RetryStats) -> Self {
        self.stats = Some(stats);
        self
    }

    /// Where this policy's calls are counted, if anywhere.
    pub const fn stats(&self) -> Option<&'static RetryStats> {
        self.stats
    }

    /// The name of the function this policy is for, from its statistics; `"retry"` for
    /// a policy without.
    pub fn name(&self) -> &'static str {
        match self.stats {
            Some(stats) => stats.name(),
            None => "retry",
        }
    }

    /// The circuit breaker attempts go through, if any.
    pub const fn breaker(&self) -> Option<&'static CircuitBreaker> {
        self.breaker
    }

    /// The total time for the call, attempts and waits together.
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// How long an attempt of a call without state may run from its first wait, when its
    /// clock starts: the deadline, cut by the attempt timeout; `None` for no limit.
    pub(crate) fn deadline_within(&self) -> Option<Duration> {
        let deadline = (self.deadline_nanos != u64::MAX).then_some(self.deadline);
        match (deadline, self.attempt_timeout) {
            (Some(deadline), Some(timeout)) => Some(deadline.min(timeout)),
            (deadline, timeout) => deadline.or(timeout),
        }
    }

    /// The deadline in nanoseconds, `u64::MAX` beyond 585 years.
    #[inline]
    pub(crate) const fn deadline_nanos(&self) -> u64 {
        self.deadline_nanos
    }

    /// The frame of a call's first attempt, before its clock starts.
    #[inline]
    pub(crate) const fn lazy_frame(&self) -> Frame {
        self.lazy_frame
    }

    /// The backstop on the number of attempts, the first included.
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait before the first retry, before jitter.
    pub const fn base(&self) -> Duration {
        self.base
    }

    /// The longest wait between two attempts, before jitter.
    pub const fn cap(&self) -> Duration {
        self.cap
    }

    /// The growth factor of the wait from one retry to the next.
    pub const fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// How waits are randomised.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// Each attempt's own time limit, if any.
    pub const fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The longest server-requested wait that is honoured.
    pub const fn max_retry_after(&self) -> Duration {
        self.max_retry_after
    }

    /// The most attempts while failures are of uncertain class.
    pub const fn uncertain_attempts(&self) -> u32 {
        self.uncertain_attempts
    }

    /// What this layer does with failures of nested `#[retry]` calls.
    pub const fn layers(&self) -> Layers {
        self.layers
    }

    /// Which failed attempts may be made again.
    pub const fn repeat(&self) -> Repeat {
        self.repeat
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Can fail: a policy admitting a class it must not, or one that repeats only
    // failures without effect reported as repeating any.
    #[test]
    fn each_repeat_admits_its_classes() {
        use Class::*;
        let all = [
            Permanent,
            Transient,
            Uncertain,
            Unsent,
            NotApplied,
            RetryAfter(Duration::ZERO),
        ];
        let admitted = |repeat: Repeat| {
            all.into_iter()
                .filter(|c| repeat.admits(*c))
                .collect::<Vec<_>>()
        };
        assert_eq!(admitted(Repeat::Any), all);
        assert_eq!(admitted(Repeat::OnlyUnsent), [Unsent]);
        assert_eq!(admitted(Repeat::OnlyNotApplied), [Unsent, NotApplied]);
        assert!(!Repeat::Any.only_without_effect());
        assert!(Repeat::OnlyUnsent.only_without_effect());
        assert!(Repeat::OnlyNotApplied.only_without_effect());
    }

    #[test]
    fn defaults_match_the_design() {
        let p = Policy::new();
        assert_eq!(p.deadline(), Duration::from_secs(30));
        assert_eq!(p.attempts(), 6);
        assert_eq!(p.base(), Duration::from_millis(200));
        assert_eq!(p.cap(), Duration::from_secs(20));
        assert_eq!(p.multiplier(), 2.0);
        assert_eq!(p.jitter(), Jitter::Full);
        assert_eq!(p.attempt_timeout(), None);
        assert_eq!(p.max_retry_after(), Duration::from_secs(60));
        assert_eq!(p.uncertain_attempts(), 2);
        assert_eq!(p.layers(), Layers::Innermost);
        assert_eq!(p.repeat(), Repeat::Any);
        assert_eq!(
            p.with_repeat(Repeat::OnlyUnsent).repeat(),
            Repeat::OnlyUnsent
        );
        assert_eq!(Policy::default().deadline(), p.deadline());
        assert!(std::ptr::eq(p.budget(), RetryBudget::SHARED_BY_DEFAULT));
    }

    #[test]
    #[should_panic(expected = "attempts must be at least 1")]
    fn zero_attempts_is_refused() {
        let _ = Policy::new().with_attempts(0);
    }

    #[test]
    #[should_panic(expected = "the multiplier must be a finite number of at least 1")]
    fn shrinking_multiplier_is_refused() {
        let _ = Policy::new().with_multiplier(0.5);
    }

    #[test]
    #[should_panic(expected = "the deadline must be greater than zero")]
    fn zero_deadline_is_refused() {
        let _ = Policy::new().with_deadline(Duration::ZERO);
    }
}
