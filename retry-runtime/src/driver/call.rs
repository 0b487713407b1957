//! One retried call's state, as the driver (`run`) steps it: begin, admit an attempt,
//! decide after it, resume after a wait.
//!
//! [`Call`] wraps the sans-I/O [`RetryState`] with what touches the world: the clock,
//! the retry budget, the circuit breaker, the statistics, the layer that nested calls
//! see, and the events. It is made only when a call needs it: a call that succeeds at
//! its first attempt without waiting never has one, and is counted by
//! [`first_try_success`] instead.

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::classify::class::Class;
use crate::classify::give_up::GiveUp;
use crate::driver::telemetry::{self, CallSpan};
use crate::fleet::batch::{self, Sink};
use crate::fleet::breaker::{CircuitBreaker, CircuitOpen, Permit};
use crate::fleet::stats::RetryStats;
#[cfg(feature = "tonic")]
use crate::layer::frame::AttemptLimitScope;
use crate::layer::frame::{self, AttemptNumber, Entered, Frame};
use crate::rng::with_thread_rng;
use crate::schedule::policy::{Layers, Policy};
use crate::schedule::state::{Decision, RetryState};
use crate::time::clock::{Clock, CompactInstant, TokioClock};

/// A failed attempt, as the call is told of it.
pub(crate) struct Failure<'a> {
    /// What the failure means.
    pub(crate) class: Class,
    /// The error, for the events.
    pub(crate) error: &'a dyn fmt::Display,
    /// Whether the call began inside an open transaction, as a connection it was given
    /// said: a statement that failed there is not run again inside it.
    pub(crate) inside_transaction: bool,
}

/// What follows an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Return the attempt's outcome to the caller.
    Return,
    /// Wait this long, then make the next attempt.
    Wait(Duration),
}

/// One retried call in progress, on the clock `C`: its [`RetryState`], with its policy's
/// budget, breaker and statistics, and its span once it has failed.
#[derive(Debug)]
pub(crate) struct Call<'p, C: Clock> {
    state: RetryState<'p>,
    // Closed by `Drop`, behind a test, so that dropping a call without a span does
    // nothing more.
    span: ManuallyDrop<CallSpan>,
    /// Set while a retry the budget granted waits to be made: a call dropped then (its
    /// caller gave up on it) gives the token back.
    retry_granted: bool,
    /// Set once the call has returned (or is returning) its outcome: one dropped before
    /// then, after it retried, was abandoned by its caller.
    ended: bool,
    /// Set while an attempt is polled (or a blocking one runs): still set when the call
    /// is dropped, the poll panicked, and the call was not given up on. Atomic rather
    /// than a `Cell` so that a retried future stays `Sync`.
    polling: AtomicBool,
    clock: PhantomData<C>,
}

impl<'p, C: Clock> Call<'p, C> {
    /// Begins a call under `policy` with its clock started now. Inside an enclosing
    /// `#[retry]` call or deadline scope, its deadline is cut to the enclosing one.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn begin(policy: &'p Policy) -> Self {
        let now = C::now();
        // Only async calls start their clocks lazily, so an enclosing layer whose clock
        // has not started is async, and starts on tokio's clock.
        let outer = frame::enclosing(TokioClock::now);
        Self::new(
            RetryState::starting(policy, CompactInstant::new(now)).within_compact(outer.compact()),
        )
    }

    /// Begins a call whose clock has not started: it starts when the frame of its
    /// attempt does, or at its first failure.
    pub(crate) fn unstarted(policy: &'p Policy) -> Self {
        Self::new(RetryState::unstarted(policy))
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn new(state: RetryState<'p>) -> Self {
        if let Some(stats) = state.policy().stats() {
            stats.register();
        }
        Self {
            state,
            span: ManuallyDrop::default(),
            retry_granted: false,
            ended: false,
            polling: AtomicBool::new(false),
            clock: PhantomData,
        }
    }

    /// The policy the call follows.
    pub(crate) fn policy(&self) -> &'p Policy {
        self.state.policy()
    }

    /// How many attempts have been started, the first included.
    pub(crate) fn attempts(&self) -> u32 {
        self.state.attempts()
    }

    /// Whether the call's deadline has passed: an attempt cut now was cut by it, not by
    /// its own `attempt_timeout`.
    pub(crate) fn deadline_passed(&self) -> bool {
        self.state.remaining(C::now()).is_zero()
    }

    /// The call's deadline, once its clock has started (`None` before, or for a call
    /// without one).
    pub(crate) fn deadline(&self) -> Option<CompactInstant> {
        self.state.deadline_at()
    }

    /// The frame for the layer of the next attempt, made now: the call's deadline, cut
    /// to the attempt's own `attempt_timeout` if that falls sooner (async calls only:
    /// a blocking attempt has no time limit of its own).
    #[inline]
    pub(crate) fn frame(&self) -> Frame {
        let frame = match self.policy().attempt_timeout() {
            Some(timeout) if C::CUTS_ATTEMPTS => self
                .state
                .attempt_frame(CompactInstant::new(C::now()), timeout),
            _ => self.state.frame(),
        };
        frame.retrying(self.attempts() > 1)
    }

    /// Asks the policy's circuit breaker, if any, to let the next attempt through.
    /// Refused, the call is over: it returns [`CircuitOpen`] without making the attempt.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn admit(&mut self) -> Result<(), CircuitOpen> {
        match self.policy().breaker() {
            None => Ok(()),
            Some(breaker) => self.admit_through(breaker),
        }
    }

    #[inline(never)]
    fn admit_through(&mut self, breaker: &CircuitBreaker) -> Result<(), CircuitOpen> {
        match breaker.admit(C::now()) {
            Ok(permit) => {
                self.state.permit = Some(permit);
                Ok(())
            }
            Err(open) => {
                // The refused attempt was counted as started; it was not made. Refused
                // a first attempt, the call was refused; a later one, the breaker opened
                // while it waited, and it returns its last failure.
                let made = self.attempts() - 1;
                let reason = if made == 0 {
                    GiveUp::CircuitOpen
                } else {
                    GiveUp::BreakerOpened
                };
                self.finish_failed(reason, made, None);
                Err(open)
            }
        }
    }

    /// Installs the call's layer, `frame`, and its span, if it has one, for one poll of
    /// an async attempt (or the run of a blocking one).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn enter(&self, frame: Frame) -> AttemptScope<'_> {
        self.polling.store(true, Ordering::Relaxed);
        AttemptScope {
            #[cfg(feature = "tracing")]
            span: self.span.as_deref().map(tracing::Span::enter),
            frame: Entered::new(frame),
            _number: AttemptNumber::new(self.attempts(), self.policy().attempts()),
            #[cfg(feature = "tonic")]
            _limit: self
                .policy()
                .attempt_timeout()
                .filter(|_| C::CUTS_ATTEMPTS)
                .map(|_| {
                    AttemptLimitScope::new(
                        frame.started_deadline(),
                        self.deadline().map(CompactInstant::get),
                    )
                }),
            polling: &self.polling,
        }
    }

    /// After an attempt that left its layer's frame as `frame` and failed with
    /// `failure`, or succeeded (`None`): what follows.
    ///
    /// Giving up tells the enclosing layer, if any, that this failure has been through
    /// a retrying layer, so that it does not retry it again.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn after_attempt(&mut self, frame: &Frame, failure: Option<Failure<'_>>) -> Next {
        self.state.adopt(frame);
        match failure {
            None => {
                self.succeeded();
                Next::Return
            }
            Some(failure) => self.failed(failure, frame.inner_failed()),
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn succeeded(&mut self) {
        self.ended = true;
        self.settle(true);
        let policy = self.policy();
        let attempts = self.attempts();
        if attempts == 1 {
            first_try_success::<C>(policy);
            return;
        }
        policy.budget().retry_succeeded(C::now());
        if let Some(stats) = policy.stats() {
            stats.record_success(attempts);
        }
        telemetry::succeeded(policy, &self.span, attempts, || self.elapsed());
    }

    #[inline(never)]
    fn failed(&mut self, failure: Failure<'_>, retried_inside: bool) -> Next {
        let Failure {
            class,
            error,
            inside_transaction,
        } = failure;
        self.settle(!class.is_retryable());
        let attempt = self.attempts();
        let policy = self.policy();
        let now = C::now();
        let compact = CompactInstant::new(now);
        self.state.start_at(compact);
        if attempt == 1 {
            // The budget learns of the first-try successes this thread has pending, and
            // then of this request (the latest, so that it finds the budget busy or quiet
            // as those left it), before the retry asks it.
            if let Some(slot) = policy.stats().and_then(RetryStats::slot) {
                batch::flush(slot, compact);
            }
            policy.budget().deposit_compact(compact);
        }
        let decision = if retried_inside && policy.layers() == Layers::Innermost {
            Decision::GiveUp(GiveUp::RetriedInside)
        } else if retried_inside && policy.repeat().only_without_effect() {
            // The nested call made attempts of its own, any of which may have taken
            // effect, whatever the class of the one it returned.
            Decision::GiveUp(GiveUp::MayHaveTakenEffect)
        } else if inside_transaction && class.is_retryable() {
            // The transaction the caller holds is aborted (PostgreSQL) or still the
            // caller's (SQLite): the retry belongs to the function that began it.
            Decision::GiveUp(GiveUp::InsideTransaction)
        } else if class.is_retryable() && breaker_is_open(policy, now) {
            // This failure (or others') opened the breaker: no retry, so no wait and no
            // budget token; the call returns this failure.
            Decision::GiveUp(GiveUp::BreakerOpened)
        } else {
            match with_thread_rng(|rng| self.state.on_failure(class, now, rng)) {
                Decision::Retry(_) if !policy.budget().withdraw(now) => {
                    Decision::GiveUp(GiveUp::BudgetExhausted)
                }
                decision => decision,
            }
        };
        match decision {
            Decision::Retry(wait) => {
                telemetry::open_span(&mut self.span, policy);
                telemetry::retry_scheduled(policy, &self.span, attempt, error, class, wait);
                if let Some(stats) = policy.stats() {
                    stats.record_wait(wait);
                }
                self.retry_granted = true;
                Next::Wait(wait)
            }
            Decision::GiveUp(reason) => {
                self.finish_failed(reason, attempt, Some(error));
                Next::Return
            }
        }
    }

    /// After a wait: the frame of the next attempt, or `None` if the deadline passed
    /// meanwhile and the call must return its last failure. The next attempt is not
    /// admitted yet (see [`Call::admit`]).
    ///
    /// A wait is granted only if it ends before the deadline, but timers fire on a
    /// millisecond grid and a busy machine wakes tasks late; no attempt starts once the
    /// deadline has passed.
    pub(crate) fn resume(&mut self) -> Option<Frame> {
        self.retry_granted = false;
        if !self.state.remaining(C::now()).is_zero() {
            return Some(self.frame());
        }
        // The attempt counted as started when the wait was granted was not made.
        let made = self.attempts() - 1;
        self.finish_failed(GiveUp::DeadlineExceeded, made, None);
        None
    }

    /// Tells the breaker how the attempt in flight went.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn settle(&mut self, healthy: bool) {
        if let Some(permit) = self.state.permit.take() {
            self.settle_permit(permit, healthy);
        }
    }

    #[inline(never)]
    fn settle_permit(&mut self, permit: Permit, healthy: bool) {
        let policy = self.policy();
        if let Some(breaker) = policy.breaker() {
            if let Some(moved) = breaker.record(permit, healthy, C::now()) {
                telemetry::breaker_moved(policy, moved);
            }
        }
    }

    fn finish_failed(&mut self, reason: GiveUp, attempts: u32, error: Option<&dyn fmt::Display>) {
        self.ended = true;
        self.state.record_give_up(reason);
        let policy = self.policy();
        if let Some(stats) = policy.stats() {
            stats.record_failure(attempts, reason);
        }
        telemetry::gave_up(policy, &self.span, attempts, self.elapsed(), reason, error);
        // A call that made one attempt and ran out of an enclosing layer's time (its
        // deadline cut below its policy's) did not retry: the enclosing layer's own time
        // limit ended it, and that layer may retry. So did a call inside a transaction,
        // which left the retry to the layer that began it.
        let inherited = self.state.deadline_nanos() < policy.deadline_nanos();
        let cut_by_enclosing = reason == GiveUp::DeadlineExceeded && attempts <= 1 && inherited;
        if !cut_by_enclosing && reason != GiveUp::InsideTransaction {
            frame::mark_inner_failure();
        }
    }

    fn elapsed(&self) -> Duration {
        let now = C::now();
        now.saturating_duration_since(self.state.started().unwrap_or(now))
    }
}

/// Whether `policy`'s breaker, if any, is open at `now`.
fn breaker_is_open(policy: &Policy, now: std::time::Instant) -> bool {
    policy
        .breaker()
        .is_some_and(|breaker| breaker.state(now) == crate::fleet::breaker::BreakerState::Open)
}

/// Counts a call of `policy` that succeeded at its first attempt, in its thread's batch
/// (see [`crate::fleet::stats`]) if its function has a slot, else in its budget and statistics
/// at once. The only count a call without state makes.
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn first_try_success<C: Clock>(policy: &Policy) {
    if let Some(stats) = policy.stats() {
        if batch::add(|| sink(policy, stats), stats.batch_index(), C::now) {
            count_success_metric(policy);
            return;
        }
    }
    first_try_success_unbatched::<C>(policy);
}

/// Registers the function's statistics if this is its first call (a call without state
/// has not), and counts the success in its batch if it now has a slot, else at once.
#[cold]
fn first_try_success_unbatched<C: Clock>(policy: &Policy) {
    count_success_metric(policy);
    if let Some(stats) = policy.stats() {
        stats.register();
        if let Some(slot) = stats.slot() {
            if batch::add(|| sink(policy, stats), slot, C::now) {
                return;
            }
        }
    }
    policy
        .budget()
        .deposit_compact(CompactInstant::new(C::now()));
    if let Some(stats) = policy.stats() {
        stats.record_success(1);
    }
}

fn sink(policy: &Policy, stats: &'static RetryStats) -> Sink {
    Sink {
        budget: policy.budget(),
        successes: stats.first_try_successes(),
    }
}

/// The metrics count every call; the events, only those that retried.
#[inline]
fn count_success_metric(policy: &Policy) {
    #[cfg(feature = "metrics")]
    telemetry::succeeded(policy, &CallSpan::default(), 1, || Duration::ZERO);
    let _ = policy;
}

/// What one poll of an attempt installs: the layer's frame, and the call's span if it
/// has one. Dropped by a panic, it puts both back.
pub(crate) struct AttemptScope<'a> {
    // Exited before the frame is put back: fields drop in this order.
    #[cfg(feature = "tracing")]
    span: Option<tracing::span::Entered<'a>>,
    frame: Entered,
    _number: AttemptNumber,
    #[cfg(feature = "tonic")]
    _limit: Option<AttemptLimitScope>,
    polling: &'a AtomicBool,
}

impl AttemptScope<'_> {
    /// Exits the span and puts the previous frame back: the frame as the attempt left
    /// it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn leave(self) -> Frame {
        self.polling.store(false, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        if let Some(span) = self.span {
            exit(span);
        }
        self.frame.leave()
    }
}

/// Exits a span entered for one poll of an attempt, by dropping it on return: out of
/// line, as calls that have not failed have none.
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn exit(_span: tracing::span::Entered<'_>) {}

/// Counts a call its caller dropped before it returned, after `made` attempts, one of
/// them still running if `in_flight`: in its statistics (registering them, for a call
/// that had no state) and its telemetry.
#[cold]
pub(crate) fn abandoned(policy: &Policy, span: &CallSpan, made: u32, in_flight: bool) {
    if let Some(stats) = policy.stats() {
        stats.register();
        stats.record_abandoned(made);
    }
    telemetry::abandoned(policy, span, made, in_flight);
}

impl<C: Clock> Drop for Call<'_, C> {
    /// Gives the breaker permit back if the call was dropped mid-attempt (cancelled), the
    /// budget's token if it was dropped while waiting to retry, counts a call dropped
    /// after it retried as abandoned (unless a panic dropped it), and closes the span: the tests inline, the rest out
    /// of line, so that a retried future stays cheap to drop.
    #[inline]
    fn drop(&mut self) {
        if self.state.permit.is_some()
            || self.retry_granted
            || telemetry::is_open(&self.span)
            || (!self.ended && self.attempts() > 1)
        {
            self.end();
        }
    }
}

impl<C: Clock> Call<'_, C> {
    #[cold]
    #[inline(never)]
    fn end(&mut self) {
        // Dropped while it unwinds from a panic (in its body, or its caller's), or after
        // a panic in its attempt was caught around it, the call was not given up on.
        let panicked = std::thread::panicking() || self.polling.load(Ordering::Relaxed);
        if !self.ended && self.attempts() > 1 && !panicked {
            // Dropped during a wait, the attempt it was for was counted, not made.
            let made = self.attempts() - u32::from(self.retry_granted);
            abandoned(self.policy(), &self.span, made, !self.retry_granted);
        }
        if self.retry_granted {
            self.policy().budget().retry_not_made(C::now());
        }
        if let Some(permit) = self.state.permit.take() {
            if let Some(breaker) = self.policy().breaker() {
                breaker.abandon(permit);
            }
        }
        telemetry::close_span(&mut self.span);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::fleet::budget::RetryBudget;
    use crate::schedule::policy::Jitter;

    /// A clock that tests move by hand, per thread: time that passes while an attempt
    /// runs without yielding, with no runtime at all.
    struct ManualClock;

    thread_local! {
        static MANUAL_NOW: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }

    impl ManualClock {
        fn advance(d: Duration) {
            MANUAL_NOW.set(Some(Self::now() + d));
        }
    }

    impl Clock for ManualClock {
        fn now() -> Instant {
            MANUAL_NOW.get().unwrap_or_else(|| {
                let now = Instant::now();
                MANUAL_NOW.set(Some(now));
                now
            })
        }
    }

    const fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    static UNLIMITED: RetryBudget = RetryBudget::unlimited();
    static POLICY: Policy = Policy::new()
        .with_deadline(secs(12))
        .with_base(secs(1))
        .with_cap(secs(1))
        .with_jitter(Jitter::None)
        .with_attempts(100)
        .with_budget(&UNLIMITED);

    // A call that has not started its clock has no start and no deadline until its
    // first failure, 5 s after it began, and its deadline is then 12 s after that
    // failure.
    // Can fail: `Call::begin` (eager) would report a start at 0 and a deadline at 12 s.
    #[test]
    fn an_unstarted_call_starts_its_clock_at_its_first_failure() {
        let begun = ManualClock::now();
        let mut call = Call::<ManualClock>::unstarted(&POLICY);
        assert_eq!(call.state.started(), None);
        assert_eq!(call.state.deadline(), None);
        ManualClock::advance(secs(5));
        let failure = Failure {
            class: Class::Transient,
            error: &"connection reset",
            inside_transaction: false,
        };
        let decision = call.after_attempt(&POLICY.lazy_frame(), Some(failure));
        assert_eq!(decision, Next::Wait(secs(1)));
        assert_eq!(call.state.started(), Some(begun + secs(5)));
        assert_eq!(call.state.deadline(), Some(begun + secs(17)));
    }
}
