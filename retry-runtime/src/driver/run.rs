//! The driver: the one loop (`drive`) that runs every async retried call, and what a call
//! holds while it runs ([`Run`]). The future that makes each attempt with a closure (an
//! `async fn` under `#[retry]`, and `retry_fn`) is in `retrying.rs`.
//!
//! Every retried call goes through here: the attempts are made, polled in the call's
//! layer, cut at their time limit, and after each the call's state (`Call`) decides what
//! follows. A function that makes its attempts in its own body reaches the same loop one
//! attempt at a time, through `step` (async) or `step_blocking` (in `step.rs`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::classify::timed_out::AttemptTimedOut;
use crate::driver::call::{Call, Failure, Next, first_try_success};
use crate::driver::handling::{ErasedHandling, Outcome};
use crate::fleet::breaker::CircuitOpen;
use crate::layer::frame::{Entered, Frame};
use crate::schedule::hook::BeforeWait;
use crate::schedule::policy::Policy;
use crate::time::clock::{Clock, CompactInstant, SystemClock, TokioClock};
use crate::time::timer::Timer;

pin_project_lite::pin_project! {
    /// A retried call as the driver runs it: its policy, the frame of the attempt in
    /// flight, and what it holds once it needs more (`Held`).
    ///
    /// A call that succeeds at its first attempt without waiting holds nothing more: its
    /// frame (a word) and its policy are all it needs, and dropping it tests one word.
    /// `T` is the call's timer: an async call's [`Timer`], nothing (`()`) for a blocking
    /// call, which sleeps its thread.
    pub struct Run<'p, C: Clock, T> {
        // The frame of the attempt in flight; until the first poll, the policy's lazy
        // frame, which has not started.
        frame: Frame,
        policy: &'p Policy,
        #[pin]
        held: Option<Held<'p, C, T>>,
    }
}

pin_project_lite::pin_project! {
    /// What a call holds once it has failed, begun with its clock started (inside an
    /// enclosing deadline, or with a breaker to ask or an attempt timeout to set), or
    /// armed its timer: its state (`Call`) from then on, and its timer (with the failure
    /// kept through a wait). One optional part rather than two, so that a call that never
    /// needed either is dropped with one test (BENCHMARKS.md, "A call that succeeds
    /// at once").
    struct Held<'p, C: Clock, T> {
        call: Option<Call<'p, C>>,
        #[pin]
        timer: T,
    }
}

impl<'p, C: Clock, T: Default> Held<'p, C, T> {
    /// The call's held part, made now if it has none.
    fn get(mut slot: Pin<&mut Option<Self>>) -> Pin<&mut Self> {
        if slot.is_none() {
            slot.set(Some(Held {
                call: None,
                timer: T::default(),
            }));
        }
        slot.as_pin_mut().expect("made above")
    }
}

/// An async call's run: its timer cuts its attempts and ends its waits.
pub type AsyncRun<'p, R> = Run<'p, TokioClock, Timer<R>>;

impl<'p, R> Run<'p, TokioClock, Timer<R>> {
    /// An async call under `policy`, its clock not started.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn lazy(policy: &'p Policy) -> Self {
        Self {
            frame: policy.lazy_frame(),
            policy,
            held: None,
        }
    }

    /// Whether the call is waiting before its next attempt.
    #[inline]
    fn is_waiting(&self) -> bool {
        matches!(&self.held, Some(held) if held.timer.is_waiting())
    }

    /// Whether the attempt in flight still needs its time limit set.
    fn needs_arming(&self) -> bool {
        self.held
            .as_ref()
            .is_none_or(|held| held.timer.needs_arming())
    }

    /// The call's timer, made now if it has none.
    fn timer(self: Pin<&mut Self>) -> Pin<&mut Timer<R>> {
        Held::get(self.project().held).project().timer
    }

    /// What an attempt cut after `limit` failed with: cut by the call's deadline, or by
    /// its own `attempt_timeout`. Without one, only the deadline cuts; with one, the
    /// call has begun (with its state) at its first poll, and the deadline cut it if it
    /// has passed.
    #[cold]
    fn cut(&self, limit: Duration) -> AttemptTimedOut {
        let by_deadline = match self.policy.attempt_timeout() {
            None => true,
            Some(_) => self.call().is_none_or(|call| call.deadline_passed()),
        };
        if by_deadline {
            AttemptTimedOut::at_deadline(limit)
        } else {
            AttemptTimedOut::after(limit)
        }
    }

    /// The call's deadline, once its clock has started.
    pub(crate) fn deadline(&self) -> Option<std::time::Instant> {
        self.call()?.deadline().map(CompactInstant::get)
    }

    /// Moves the cut of the attempt in flight to `end`, its limit being `limit`: for a
    /// hedged attempt, whose copies each have their own limit, the latest copy's. Only
    /// an attempt whose limit is set is moved.
    pub(crate) fn extend_limit(self: Pin<&mut Self>, end: std::time::Instant, limit: Duration) {
        let Some(held) = self.project().held.as_pin_mut() else {
            return;
        };
        let timer = held.project().timer;
        if timer.is_limited() {
            timer.arm_until(end.into(), limit);
        }
    }

    /// The attempt is waiting on something: the clock starts (that time counts), and
    /// `frame` is kept for the next poll. The attempt is cut at the deadline (or its own
    /// time limit): the timer is set when it first waits, its clock then started.
    /// Returns the limit, once it has passed.
    fn waits(mut self: Pin<&mut Self>, mut frame: Frame, cx: &mut Context<'_>) -> Option<Duration> {
        frame.start(TokioClock::now);
        *self.as_mut().project().frame = frame;
        if self.needs_arming() {
            // With a call's state, the frame's deadline is the attempt's limit (see
            // `Call::frame`).
            let limit = match self.call() {
                Some(_) => self.frame.remaining(TokioClock::now()),
                None => self.policy.deadline_within(),
            };
            self.as_mut().timer().arm(limit);
        }
        self.poll_limit(cx)
    }

    /// The attempt's time limit, once it has passed (`None` if it has none).
    fn poll_limit(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        let held = self.project().held.as_pin_mut()?;
        held.project().timer.poll_limit(cx)
    }
}

impl<'p> Run<'p, SystemClock, ()> {
    /// A blocking call under `policy`: its clock starts at its first attempt.
    pub fn blocking(policy: &'p Policy) -> Self {
        Self {
            frame: Frame::OUTSIDE,
            policy,
            held: None,
        }
    }
}

impl<'p, C: Clock, T: Default> Run<'p, C, T> {
    /// The call's state, once it has one.
    pub(crate) fn call(&self) -> Option<&Call<'p, C>> {
        self.held.as_ref()?.call.as_ref()
    }

    fn call_mut(self: Pin<&mut Self>) -> Option<&mut Call<'p, C>> {
        self.project().held.as_pin_mut()?.project().call.as_mut()
    }

    /// The call begins now, its clock started, and asks the breaker for its first
    /// attempt.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn begin(self: Pin<&mut Self>) -> Result<(), CircuitOpen> {
        let this = self.project();
        let call = Held::get(this.held)
            .project()
            .call
            .insert(Call::begin(this.policy));
        *this.frame = call.frame();
        call.admit()
    }

    /// [`Run::begin`] for an async call, where it is the rare case: out of line.
    #[cold]
    #[inline(never)]
    fn begin_at_first_poll(self: Pin<&mut Self>) -> Result<(), CircuitOpen> {
        self.begin()
    }

    /// After an attempt that left its frame as `frame`: what follows. `failure` is the
    /// failure if it failed: its error, and whether it was cut by its time limit (then
    /// transient, whatever the classifier would say of the error it was turned into:
    /// never unsent, since its request may have left, so a policy that repeats only
    /// unsent attempts returns it).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn after_attempt<R: Outcome>(
        self: Pin<&mut Self>,
        frame: &Frame,
        failure: Option<(&R::Err, bool)>,
        handling: &dyn ErasedHandling<R>,
    ) -> Next {
        let policy = self.policy;
        match failure {
            Some((error, timed_out)) => self.after_failure(frame, error, timed_out, handling),
            None => match self.call_mut() {
                Some(call) => call.after_attempt(frame, None),
                // A first attempt that succeeded in a call without state (which `drive`
                // counts itself, before it gets here).
                None => {
                    first_try_success::<C>(policy);
                    Next::Return
                }
            },
        }
    }

    /// After an attempt that failed with `error`; the call's state is made now if it has
    /// none.
    #[inline(never)]
    fn after_failure<R: Outcome>(
        self: Pin<&mut Self>,
        frame: &Frame,
        error: &R::Err,
        timed_out: bool,
        handling: &dyn ErasedHandling<R>,
    ) -> Next {
        let this = self.project();
        let policy = *this.policy;
        let call = Held::get(this.held)
            .project()
            .call
            .get_or_insert_with(|| Call::unstarted(policy));
        let class = if timed_out {
            crate::classify::class::Class::Transient
        } else {
            handling.classify(error)
        };
        let decision = call.after_attempt(
            frame,
            Some(Failure {
                class,
                error: &handling.show(error),
                inside_transaction: handling.inside_transaction(),
            }),
        );
        if let Next::Wait(wait) = decision {
            handling.before_wait(&BeforeWait {
                function: policy.name(),
                attempt: call.attempts() - 1,
                error,
                wait,
            });
        }
        decision
    }

    /// After a wait: `true` to make the next attempt; `false` if the deadline passed
    /// meanwhile or the breaker opened, and the call returns its last failure.
    pub(crate) fn resume(self: Pin<&mut Self>) -> bool {
        let this = self.project();
        let policy = *this.policy;
        let call = this
            .held
            .as_pin_mut()
            .and_then(|held| held.project().call.as_mut())
            .expect("a wait follows a failure");
        let made = match call.resume() {
            Some(frame) => {
                *this.frame = frame;
                call.admit().is_ok()
            }
            None => false,
        };
        if made {
            if let Some(stats) = policy.stats() {
                stats.record_retry();
            }
        } else {
            // The budget granted this retry before its wait; it is not made.
            policy.budget().retry_not_made(C::now());
        }
        made
    }
}

/// What [`drive`] sees of a call: the attempt in flight (none during a wait), its
/// [`Run`] with the call's timer, and how its function treats failures.
pub(crate) struct Parts<'a, 'p, R> {
    /// The attempt: in flight unless the call is waiting (then it is the one that
    /// failed, the next one, not started, or none).
    pub(crate) attempt: Option<Pin<&'a mut dyn Future<Output = R>>>,
    pub(crate) run: Pin<&'a mut AsyncRun<'p, R>>,
    pub(crate) handling: &'a dyn ErasedHandling<R>,
    /// Whether the next attempt is the caller's to make ([`step`]): `drive` then
    /// returns `None` when it is due.
    pub(crate) caller_makes_next: bool,
}

/// What [`drive`] sees of a call, through a trait object, so that the loop is compiled
/// once per return type, not once per function. Optimised, the loop is inlined into each
/// future's `poll`, where the object's type is known, and the calls through it are
/// direct.
///
/// What is per function is only the attempt: its future, and the closure that makes the
/// next. The wait between attempts and the failure kept through it are in the call's
/// [`Timer`], generic over the return type alone.
pub(crate) trait Attempts<'p, R: Outcome> {
    /// The attempt, the call, and its handling.
    fn parts(self: Pin<&mut Self>) -> Parts<'_, 'p, R>;
    /// The attempt that failed is over, and another follows: replaces it with the next
    /// (when the next is due, or before the wait if the attempt was cut), or drops it if
    /// the caller makes the next.
    fn then(self: Pin<&mut Self>);
}

/// The loop of every async retried call: polls its attempts under the call's policy,
/// with the layer's frame installed around each poll of an attempt. `None` when the
/// next attempt is the caller's to make.
///
/// An optimised build inlines the loop into each future's `poll`, where the calls through
/// `attempts` become direct; an unoptimised build keeps one copy per return type, which
/// keeps a retried function cheap to compile (see `driver.rs` on inlining).
///
/// One function of about a hundred lines: the loop is one idea, a call's states (an
/// attempt in flight, first or later; a wait) and what follows each, and its happy path
/// must stay in one piece for the optimiser.
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
pub(crate) fn drive<'p, R: Outcome>(
    mut attempts: Pin<&mut dyn Attempts<'p, R>>,
    cx: &mut Context<'_>,
) -> Poll<Option<R>> {
    loop {
        let Parts {
            attempt,
            mut run,
            handling,
            caller_makes_next,
        } = attempts.as_mut().parts();
        match attempt {
            // Only a call with state waits: the happy path tests one word here.
            Some(attempt) if !run.is_waiting() => {
                let (poll, frame) = match run.call() {
                    // Nothing has failed yet: no call state, and so no span to enter. A
                    // path of its own, so that a success here is told from the state
                    // tested once.
                    None => {
                        let entered = Entered::new(run.frame);
                        // At the first poll (the only one whose frame has not started: a
                        // poll that leaves the attempt waiting starts it), the call
                        // begins now if its clock must start at once. The enclosing
                        // frame is the one just replaced: one read of the thread-local.
                        if entered.must_begin(run.frame) {
                            entered.leave();
                            if let Err(open) = run.as_mut().begin_at_first_poll() {
                                return Poll::Ready(Some(handling.circuit_open(open)));
                            }
                            continue;
                        }
                        let poll = attempt.poll(cx);
                        let frame = entered.leave();
                        if let Poll::Ready(outcome) = &poll {
                            if outcome.failure().is_none() {
                                first_try_success::<TokioClock>(run.policy);
                                return poll.map(Some);
                            }
                        }
                        (poll, frame)
                    }
                    Some(call) => {
                        let scope = call.enter(run.frame);
                        let poll = attempt.poll(cx);
                        (poll, scope.leave())
                    }
                };
                let (outcome, timed_out) = match poll {
                    Poll::Ready(outcome) => (outcome, false),
                    Poll::Pending => {
                        let Some(limit) = run.as_mut().waits(frame, cx) else {
                            return Poll::Pending;
                        };
                        (handling.timed_out(run.cut(limit)), true)
                    }
                };
                let failure = outcome.failure().map(|error| (error, timed_out));
                match run.as_mut().after_attempt(&frame, failure, handling) {
                    Next::Return => return Poll::Ready(Some(outcome)),
                    // No timer for a zero wait, which tokio would round up to its next
                    // millisecond.
                    Next::Wait(wait) if wait.is_zero() => {
                        if !run.as_mut().resume() {
                            return Poll::Ready(Some(outcome));
                        }
                        run.as_mut().timer().next_attempt();
                        if caller_makes_next {
                            return Poll::Ready(None);
                        }
                        attempts.as_mut().then();
                    }
                    Next::Wait(wait) => {
                        // An attempt that finished holds nothing and is replaced after
                        // the wait, when the next attempt is due; one cut by its time
                        // limit may hold a connection or a lock, and goes at once.
                        run.as_mut().timer().wait(wait, outcome, timed_out);
                        if timed_out {
                            attempts.as_mut().then();
                        }
                    }
                }
            }
            _ => {
                std::task::ready!(run.as_mut().timer().poll_wait(cx));
                if !run.as_mut().resume() {
                    // The deadline passed, or the breaker opened, while waiting: the
                    // last failure stands.
                    return Poll::Ready(run.as_mut().timer().take_outcome());
                }
                let made = run.as_mut().timer().next_attempt();
                if caller_makes_next {
                    return Poll::Ready(None);
                }
                if !made {
                    attempts.as_mut().then();
                }
            }
        }
    }
}
