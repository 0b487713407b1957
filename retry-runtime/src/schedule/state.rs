//! The attempt loop's state machine: after each failure, wait how long, or give up why.
//!
//! [`RetryState`] is sans-I/O: it is told the time and handed the randomness, and answers
//! with a [`Decision`]. The driver (`run`) does the
//! sleeping; tests and simulations can drive it directly.

use std::time::{Duration, Instant};

use rand::Rng;

use crate::classify::class::Class;
use crate::classify::give_up::GiveUp;
use crate::fleet::breaker::Permit;
use crate::layer::frame::Frame;
use crate::schedule::backoff::Backoff;
use crate::schedule::policy::Policy;
use crate::time::clock::{CompactDeadline, CompactInstant};

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then make the next attempt.
    Retry(Duration),
    /// Stop, and return the last failure to the caller.
    GiveUp(GiveUp),
}

/// The state of one retried call: how many attempts it made, when its deadline falls,
/// and where it is in its backoff schedule.
///
/// ```
/// use std::time::{Duration, Instant};
/// use persevere::{Class, GiveUp, Jitter, Policy, RetryState, Decision};
/// use rand::{SeedableRng, rngs::SmallRng};
///
/// let policy = Policy::new().with_attempts(3).with_jitter(Jitter::None);
/// let mut rng = SmallRng::seed_from_u64(1);
/// let start = Instant::now();
/// let mut call = RetryState::new(&policy, start);
///
/// assert_eq!(call.on_failure(Class::Transient, start, &mut rng), Decision::Retry(Duration::from_millis(200)));
/// assert_eq!(call.on_failure(Class::Transient, start, &mut rng), Decision::Retry(Duration::from_millis(400)));
/// assert_eq!(call.on_failure(Class::Transient, start, &mut rng), Decision::GiveUp(GiveUp::AttemptsExhausted));
/// assert_eq!(call.attempts(), 3);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RetryState<'p> {
    policy: &'p Policy,
    /// When the call's clock started: `None` for a call that has not needed it yet (see
    /// `RetryState::unstarted`).
    started: Option<CompactInstant>,
    /// The deadline, in nanoseconds after `started`; `u64::MAX` for none (585 years).
    deadline: u64,
    attempts: u32,
    uncertain: u16,
    backoff: Backoff,
    gave_up: Option<GiveUp>,
    /// The circuit breaker's permit for the attempt in flight: kept by the driver, here
    /// rather than beside this state so that the call's state stays as small.
    pub(crate) permit: Option<Permit>,
}

impl<'p> RetryState<'p> {
    /// The state of a call that starts its first attempt at `now`.
    pub fn new(policy: &'p Policy, now: Instant) -> Self {
        Self::starting(policy, CompactInstant::new(now))
    }

    #[inline]
    pub(crate) fn starting(policy: &'p Policy, started: CompactInstant) -> Self {
        Self {
            started: Some(started),
            ..Self::unstarted(policy)
        }
    }

    /// The state of a call whose clock starts later, when it first needs it: at
    /// [`RetryState::start_at`], or at its first failure.
    #[inline]
    pub(crate) fn unstarted(policy: &'p Policy) -> Self {
        Self {
            policy,
            started: None,
            deadline: policy.deadline_nanos(),
            attempts: 1,
            uncertain: 0,
            backoff: Backoff::new(policy),
            gave_up: None,
            permit: None,
        }
    }

    /// Why the call gave up, once it has.
    pub fn gave_up(&self) -> Option<GiveUp> {
        self.gave_up
    }

    /// Records that the call gave up for a reason outside this state: a refused budget
    /// or circuit breaker, a nested call's failure.
    pub(crate) fn record_give_up(&mut self, reason: GiveUp) {
        self.gave_up = Some(reason);
    }

    /// The same call, its deadline cut to `outer` if that is earlier: a nested call
    /// never outlives the call it serves.
    pub fn within(self, outer: Option<Instant>) -> Self {
        self.within_compact(outer.map(CompactInstant::new))
    }

    /// Cuts the deadline to `outer` if that is earlier. The clock must have started.
    #[inline]
    pub(crate) fn within_compact(mut self, outer: Option<CompactInstant>) -> Self {
        if let (Some(outer), Some(started)) = (outer, self.started) {
            self.deadline = self.deadline.min(started.nanos_until(outer));
        }
        self
    }

    /// The deadline, in nanoseconds after the start; `u64::MAX` for none.
    #[inline]
    pub(crate) fn deadline_nanos(&self) -> u64 {
        self.deadline
    }

    /// Starts the call's clock when the layer of its attempt did, if it did.
    #[inline]
    pub(crate) fn adopt(&mut self, frame: &Frame) {
        if self.started.is_none() {
            self.started = frame.started(self.deadline);
        }
    }

    /// Starts the call's clock at `now`, if it has not started.
    #[inline]
    pub(crate) fn start_at(&mut self, now: CompactInstant) {
        if self.started.is_none() {
            self.started = Some(now);
        }
    }

    /// The frame for the layer of the next attempt: the deadline, or, before the clock
    /// has started, the offset the deadline will have from the start.
    #[inline]
    pub(crate) fn frame(&self) -> Frame {
        match self.started {
            Some(_) => Frame::known(CompactDeadline::from_compact(self.deadline_at())),
            None => Frame::lazy(self.deadline),
        }
    }

    /// The instant of the deadline, once the clock has started; `None` before, or for a
    /// call without one.
    #[inline]
    pub(crate) fn deadline_at(&self) -> Option<CompactInstant> {
        let started = self.started?;
        (self.deadline != u64::MAX).then(|| started.plus_nanos(self.deadline))
    }

    /// The frame for the layer of an attempt made at `now` whose own time limit is
    /// `timeout`: the call's deadline, or `now + timeout` if that is sooner, so that what
    /// runs inside the attempt (a nested call, `deadline::remaining`, a `grpc-timeout`
    /// sent on) is given the time the attempt has, not the call's. A call whose clock
    /// has not started has its lazy frame.
    pub(crate) fn attempt_frame(&self, now: CompactInstant, timeout: Duration) -> Frame {
        let Some(started) = self.started else {
            return self.frame();
        };
        let own = now.plus_nanos(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
        let deadline = match self.deadline {
            u64::MAX => own,
            deadline => started.plus_nanos(deadline).min(own),
        };
        Frame::known(CompactDeadline::from_compact(Some(deadline)))
    }

    /// The policy this call follows.
    #[inline]
    pub fn policy(&self) -> &'p Policy {
        self.policy
    }

    /// How many attempts have been started, the first included.
    #[inline]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The instant by which the call must be over, if it is representable and the
    /// call's clock has started.
    pub fn deadline(&self) -> Option<Instant> {
        // A deadline too far away to represent is no deadline at all.
        if self.deadline == u64::MAX {
            return None;
        }
        self.started()?
            .checked_add(Duration::from_nanos(self.deadline))
    }

    /// When the call's clock started: `None` for a call that started lazily and has not
    /// needed its clock yet.
    pub fn started(&self) -> Option<Instant> {
        self.started.map(CompactInstant::get)
    }

    /// How long the call has left at `now`; the whole deadline if its clock has not
    /// started.
    pub fn remaining(&self, now: Instant) -> Duration {
        if self.deadline == u64::MAX {
            return Duration::MAX;
        }
        match self.deadline() {
            Some(deadline) => deadline.saturating_duration_since(now),
            None if self.started.is_none() => Duration::from_nanos(self.deadline),
            None => Duration::MAX,
        }
    }

    /// Decides what follows a failed attempt of class `class`, observed at `now`. A call
    /// whose clock has not started starts it at `now`.
    ///
    /// A retry is granted only if the failure is retryable (and one the policy's
    /// [`Repeat`](crate::Repeat) admits), the attempts are not exhausted, and the wait ends
    /// strictly before the deadline: a call never sleeps into a deadline it cannot meet,
    /// it returns its last failure at once instead.
    pub fn on_failure<R: Rng + ?Sized>(
        &mut self,
        class: Class,
        now: Instant,
        rng: &mut R,
    ) -> Decision {
        if self.started.is_none() {
            self.started = Some(CompactInstant::new(now));
        }
        let decision = self.decide(class, now, rng);
        if let Decision::GiveUp(reason) = decision {
            self.gave_up = Some(reason);
        }
        decision
    }

    fn decide<R: Rng + ?Sized>(&mut self, class: Class, now: Instant, rng: &mut R) -> Decision {
        if !class.is_retryable() {
            return Decision::GiveUp(GiveUp::Permanent);
        }
        if !self.policy.repeat().admits(class) {
            return Decision::GiveUp(GiveUp::MayHaveTakenEffect);
        }
        if class == Class::Uncertain {
            self.uncertain = self.uncertain.saturating_add(1);
            if u32::from(self.uncertain) >= self.policy.uncertain_attempts() {
                return Decision::GiveUp(GiveUp::UncertainExhausted);
            }
        }
        if self.attempts >= self.policy.attempts() {
            return Decision::GiveUp(GiveUp::AttemptsExhausted);
        }
        let remaining = self.remaining(now);
        let wait = match class {
            Class::RetryAfter(requested) => {
                if requested > self.policy.max_retry_after() {
                    return Decision::GiveUp(GiveUp::RetryAfterTooLong);
                }
                match server_wait(requested, self.policy.base(), remaining, rng) {
                    Some(wait) => wait,
                    None => return Decision::GiveUp(GiveUp::DeadlineExceeded),
                }
            }
            _ => self.backoff.next_delay(self.policy, rng),
        };
        if wait >= remaining {
            return Decision::GiveUp(GiveUp::DeadlineExceeded);
        }
        self.attempts += 1;
        Decision::Retry(wait)
    }
}

/// The wait before retrying a server that asked for `requested`: never less, so that no
/// client comes back before the time the server named, and spread after it by up to a
/// fifth of it, or by up to `base` if that is more (so that even a `Retry-After: 0`
/// spreads the clients a server turned away together). The wait ends before the
/// deadline, `remaining` from now: the spread is cut to fit, and a `requested` that
/// leaves no room gives `None`.
fn server_wait<R: Rng + ?Sized>(
    requested: Duration,
    base: Duration,
    remaining: Duration,
    rng: &mut R,
) -> Option<Duration> {
    let room = remaining.checked_sub(requested)?;
    if room.is_zero() {
        return None;
    }
    // The latest end that is still before the deadline.
    let latest = room - Duration::from_nanos(1);
    let spread = (requested / 5).max(base).min(latest);
    let nanos = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX);
    Some(requested + Duration::from_nanos(rng.random_range(0..=nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::policy::{Jitter, Repeat};
    use rand::{SeedableRng, rngs::SmallRng};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    // A state printed for debugging shows when the call started as the instant it is,
    // though it keeps it in a compact form.
    #[test]
    fn its_debug_output_shows_when_it_started() {
        let p = Policy::new();
        let now = Instant::now();
        let shown = format!("{:?}", RetryState::new(&p, now));
        assert!(
            shown.contains(&format!("started: Some({now:?})")),
            "{shown}"
        );
    }

    // Once it has given up, a state says why; before, it says nothing.
    #[test]
    fn it_says_why_it_gave_up() {
        let p = Policy::new().with_attempts(2).with_jitter(Jitter::None);
        let now = Instant::now();
        let mut s = RetryState::new(&p, now);
        let mut rng = SmallRng::seed_from_u64(0);
        assert!(matches!(
            s.on_failure(Class::Transient, now, &mut rng),
            Decision::Retry(_)
        ));
        assert_eq!(s.gave_up(), None);
        s.on_failure(Class::Transient, now, &mut rng);
        assert_eq!(s.gave_up(), Some(GiveUp::AttemptsExhausted));
    }

    #[test]
    fn permanent_gives_up_at_once() {
        let p = Policy::new();
        let now = Instant::now();
        let mut s = RetryState::new(&p, now);
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(
            s.on_failure(Class::Permanent, now, &mut rng),
            Decision::GiveUp(GiveUp::Permanent)
        );
        assert_eq!(s.attempts(), 1);
    }

    #[test]
    fn a_wait_that_reaches_the_deadline_gives_up_now() {
        let p = Policy::new()
            .with_deadline(ms(1000))
            .with_base(ms(300))
            .with_jitter(Jitter::None)
            .with_attempts(100);
        let start = Instant::now();
        let mut s = RetryState::new(&p, start);
        let mut rng = SmallRng::seed_from_u64(0);
        // 300 ms wait at t=0 fits; 600 ms wait at t=300 ms would end at 900 ms: fits.
        assert_eq!(
            s.on_failure(Class::Transient, start, &mut rng),
            Decision::Retry(ms(300))
        );
        assert_eq!(
            s.on_failure(Class::Transient, start + ms(300), &mut rng),
            Decision::Retry(ms(600))
        );
        // 1200 ms wait at t=900 ms cannot fit.
        assert_eq!(
            s.on_failure(Class::Transient, start + ms(900), &mut rng),
            Decision::GiveUp(GiveUp::DeadlineExceeded)
        );
        assert_eq!(s.attempts(), 3);
        assert_eq!(s.remaining(start + ms(2000)), Duration::ZERO);
    }

    // The server's wait is a lower bound: no retry before it, spread after it by up to
    // a fifth of it (or `base`, if more), within the deadline.
    // Can fail: the former factor in [0.8, 1.2] came back up to 20 % early.
    #[test]
    fn retry_after_is_a_lower_bound_spread_after_it() {
        let p = Policy::new()
            .with_max_retry_after(ms(5000))
            .with_base(ms(100));
        let start = Instant::now();
        let mut rng = SmallRng::seed_from_u64(9);
        let (mut least, mut most) = (Duration::MAX, Duration::ZERO);
        for _ in 0..10_000 {
            let mut s = RetryState::new(&p, start);
            match s.on_failure(Class::RetryAfter(ms(1000)), start, &mut rng) {
                Decision::Retry(w) => {
                    assert!(w >= ms(1000) && w <= ms(1200), "{w:?}");
                    least = least.min(w);
                    most = most.max(w);
                }
                other => panic!("{other:?}"),
            }
        }
        // Spread over the whole range, not bunched at the server's instant.
        assert!(least < ms(1010) && most > ms(1190), "{least:?}..{most:?}");
        let mut s = RetryState::new(&p, start);
        assert_eq!(
            s.on_failure(Class::RetryAfter(ms(5001)), start, &mut rng),
            Decision::GiveUp(GiveUp::RetryAfterTooLong)
        );
        let huge = Policy::new()
            .with_max_retry_after(Duration::MAX)
            .with_deadline(Duration::MAX);
        let mut s = RetryState::new(&huge, start);
        assert!(matches!(
            s.on_failure(Class::RetryAfter(Duration::MAX), start, &mut rng),
            Decision::GiveUp(GiveUp::DeadlineExceeded) | Decision::Retry(_)
        ));
    }

    // `Retry-After: 0` still spreads the retries, over `base`.
    #[test]
    fn a_zero_retry_after_is_spread_over_base() {
        let p = Policy::new().with_base(ms(200));
        let start = Instant::now();
        let mut rng = SmallRng::seed_from_u64(3);
        let waits: Vec<Duration> = (0..1000)
            .map(|_| {
                match RetryState::new(&p, start).on_failure(
                    Class::RetryAfter(Duration::ZERO),
                    start,
                    &mut rng,
                ) {
                    Decision::Retry(w) => w,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert!(waits.iter().all(|w| *w <= ms(200)));
        assert!(waits.iter().filter(|w| **w > ms(100)).count() > 400);
    }

    // The spread is cut so that the wait ends before the deadline; a server wait that
    // reaches the deadline gives up at once.
    #[test]
    fn the_spread_after_a_retry_after_stays_within_the_deadline() {
        let p = Policy::new()
            .with_deadline(ms(1100))
            .with_max_retry_after(ms(5000));
        let start = Instant::now();
        let mut rng = SmallRng::seed_from_u64(5);
        for _ in 0..1000 {
            match RetryState::new(&p, start).on_failure(
                Class::RetryAfter(ms(1000)),
                start,
                &mut rng,
            ) {
                Decision::Retry(w) => assert!(w >= ms(1000) && w < ms(1100), "{w:?}"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            RetryState::new(&p, start).on_failure(Class::RetryAfter(ms(1100)), start, &mut rng),
            Decision::GiveUp(GiveUp::DeadlineExceeded)
        );
        // One that leaves 1 ns before the deadline is waited exactly: no room to spread.
        // Can fail: a spread that may end at the deadline or 1 ns past it.
        let requested = ms(1100) - Duration::from_nanos(1);
        for _ in 0..100 {
            assert_eq!(
                RetryState::new(&p, start).on_failure(
                    Class::RetryAfter(requested),
                    start,
                    &mut rng
                ),
                Decision::Retry(requested)
            );
        }
    }

    #[test]
    fn uncertain_failures_have_their_own_limit() {
        let p = Policy::new().with_attempts(10).with_uncertain_attempts(2);
        let now = Instant::now();
        let mut rng = SmallRng::seed_from_u64(0);
        let mut s = RetryState::new(&p, now);
        assert!(matches!(
            s.on_failure(Class::Uncertain, now, &mut rng),
            Decision::Retry(_)
        ));
        assert!(matches!(
            s.on_failure(Class::Transient, now, &mut rng),
            Decision::Retry(_)
        ));
        assert_eq!(
            s.on_failure(Class::Uncertain, now, &mut rng),
            Decision::GiveUp(GiveUp::UncertainExhausted)
        );
        assert_eq!(s.attempts(), 3);
    }

    // A policy that repeats only unsent attempts retries nothing else, each class of
    // failure counted for its own reason: permanent is permanent; the rest may have
    // taken effect, before their own limits (uncertain, Retry-After) are asked.
    // Can fail: the check placed after the uncertain limit, or not made at all.
    #[test]
    fn only_unsent_failures_are_repeated_under_only_unsent() {
        let p = Policy::new()
            .with_repeat(Repeat::OnlyUnsent)
            .with_uncertain_attempts(1)
            .with_max_retry_after(ms(1));
        let now = Instant::now();
        let mut rng = SmallRng::seed_from_u64(0);
        let mut s = RetryState::new(&p, now);
        assert!(matches!(
            s.on_failure(Class::Unsent, now, &mut rng),
            Decision::Retry(_)
        ));
        for (class, reason) in [
            (Class::Permanent, GiveUp::Permanent),
            (Class::Transient, GiveUp::MayHaveTakenEffect),
            (Class::Uncertain, GiveUp::MayHaveTakenEffect),
            (Class::RetryAfter(ms(10)), GiveUp::MayHaveTakenEffect),
        ] {
            let mut s = RetryState::new(&p, now);
            assert_eq!(
                s.on_failure(class, now, &mut rng),
                Decision::GiveUp(reason),
                "{class:?}"
            );
            assert_eq!(s.attempts(), 1);
        }
    }

    // `on = not_applied` retries what provably took no effect, never sent or rolled
    // back in full, and nothing else; `on = unsent` does not count a rollback as unsent.
    // Can fail: either kind of proof missing from a policy, or one policy taking the
    // other's.
    #[test]
    fn only_failures_without_effect_are_repeated_under_only_not_applied() {
        let now = Instant::now();
        let mut rng = SmallRng::seed_from_u64(0);
        let cases = [
            (Repeat::OnlyNotApplied, Class::Unsent, None),
            (Repeat::OnlyNotApplied, Class::NotApplied, None),
            (
                Repeat::OnlyNotApplied,
                Class::Transient,
                Some(GiveUp::MayHaveTakenEffect),
            ),
            (
                Repeat::OnlyNotApplied,
                Class::Uncertain,
                Some(GiveUp::MayHaveTakenEffect),
            ),
            (
                Repeat::OnlyNotApplied,
                Class::Permanent,
                Some(GiveUp::Permanent),
            ),
            (
                Repeat::OnlyUnsent,
                Class::NotApplied,
                Some(GiveUp::MayHaveTakenEffect),
            ),
            (Repeat::Any, Class::NotApplied, None),
        ];
        for (repeat, class, gave_up) in cases {
            let p = Policy::new().with_repeat(repeat);
            let mut s = RetryState::new(&p, now);
            let decision = s.on_failure(class, now, &mut rng);
            match gave_up {
                None => assert!(
                    matches!(decision, Decision::Retry(_)),
                    "{repeat:?} {class:?}"
                ),
                Some(reason) => {
                    assert_eq!(decision, Decision::GiveUp(reason), "{repeat:?} {class:?}")
                }
            }
        }
    }

    #[test]
    fn an_earlier_outer_deadline_wins() {
        let p = Policy::new().with_deadline(ms(30_000));
        let now = Instant::now();
        let s = RetryState::new(&p, now).within(Some(now + ms(500)));
        assert_eq!(s.remaining(now), ms(500));
        let s = RetryState::new(&p, now).within(Some(now + ms(60_000)));
        assert_eq!(s.remaining(now), ms(30_000));
        let s = RetryState::new(&p, now).within(None);
        assert_eq!(s.remaining(now), ms(30_000));
    }

    #[test]
    fn retry_after_beyond_the_deadline_gives_up() {
        let p = Policy::new().with_deadline(ms(2000));
        let start = Instant::now();
        let mut s = RetryState::new(&p, start);
        let mut rng = SmallRng::seed_from_u64(9);
        assert_eq!(
            s.on_failure(Class::RetryAfter(ms(3000)), start, &mut rng),
            Decision::GiveUp(GiveUp::DeadlineExceeded)
        );
    }
}
