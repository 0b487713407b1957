//! Hedged attempts (`#[retry(hedge = ...)]`): when an attempt is slow, a copy of it is
//! sent beside it, and the first to succeed wins. This module is the hedged attempt
//! itself (when a copy goes, what it costs, how each outcome counts); the future that
//! runs such attempts through the driver is `hedged.rs`, and `spec.rs` the function's
//! `static`.
//!
//! To the driver (`drive`, the one loop of every async call), a hedged attempt is one
//! attempt: a group of [`Copies`] of the request that ends with the first copy to
//! succeed, or with the last copy's failure once every copy has failed. The driver
//! decides after it as after any attempt (retry, wait, give up), cuts it at the deadline
//! as it cuts any attempt (every copy in flight is dropped), and polls it in the call's
//! layer, so the copies' nested calls see the call's deadline. What is particular to
//! hedging lives here:
//!
//! - **when** a copy is sent: after a fixed delay (`hedge = "50ms"`), or after a
//!   percentile of the function's recent attempt latencies (`hedge = "p95"`, read from a
//!   [`LatencySketch`]; no hedge until it holds [`MIN_SAMPLES`](crate::hedge::latency::MIN_SAMPLES)), and again after the same
//!   delay while fewer than `hedges` copies have been sent;
//! - **what it costs**: each copy is a request, paid for from the function's retry budget
//!   like a retry, but never with its last token (left for a retry); refused, no copy is
//!   sent. A copy needs the circuit breaker closed.
//! - **what is counted**: every copy is an attempt in the statistics (`hedges`,
//!   `hedges_won`) and, through a permit of its own, in the breaker; a copy that fails
//!   with a transient error while another is in flight is told to the breaker then, and
//!   does not end the attempt; a permanent failure ends it at once.
//! - **time limits**: each copy is an attempt, cut at its own `attempt_timeout` counted
//!   from when it was sent (within the call's deadline), not at the first's: the
//!   driver's timer cuts the hedged attempt at its latest copy's limit, and a copy whose
//!   limit passes while a later one runs is dropped then.
//! - **nested calls**: each copy runs in a layer of its own, whose deadline is the
//!   copy's limit (the first's without an `attempt_timeout`), and keeps its own mark of a
//!   nested `#[retry]` call's failure.
//!
//! The compile-time half of hedging is in the macros: `hedge` is accepted only on an
//! `async fn` marked `#[idempotent]` or taking an idempotency key, with no `&mut`
//! parameter.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::classify::class::Class;
use crate::driver::call;
use crate::driver::handling::Outcome;
use crate::driver::telemetry;
use crate::hedge::accounting::{admit_copy, failure_ends};
use crate::hedge::spec::{Hedge, MAX_HEDGES};
#[cfg(feature = "tonic")]
use crate::layer::frame::AttemptLimitScope;
use crate::layer::frame::{Entered, Frame, current_frame, enclosing_deadline, swap_inner_failure};
use crate::schedule::policy::Policy;
use crate::time::clock::{Clock, CompactDeadline, TokioClock};

/// A copy sent beside the first: boxed, since a call has at most a few and most calls
/// none, so that a hedged function's future grows by a few words rather than by copies
/// of its attempt.
struct Sent<G> {
    future: Pin<Box<G>>,
    sent: Instant,
    // The copy's own time limit, if the function has an `attempt_timeout`.
    limit: Option<Instant>,
    // The copy's layer, installed around its polls: its deadline (its own time limit,
    // else the first's) and whether a nested `#[retry]` call gave up in it.
    frame: Frame,
}

pin_project_lite::pin_project! {
    #[project = CopiesProj]
    /// One hedged attempt: the attempt, the copies sent beside it, and the timer of the
    /// next copy. A future that ends with the first success, or once every copy has
    /// failed, with the last failure.
    pub(crate) struct Copies<'p, M, G, E> {
        #[pin]
        first: Option<G>,
        // When the first was first polled, once it was found waiting.
        started: Option<Instant>,
        // Whether a nested `#[retry]` call gave up in the first: each copy keeps its
        // own mark, swapped into the call's layer around its polls.
        first_marked: bool,
        copies: [Option<Sent<G>>; MAX_HEDGES as usize],
        #[pin]
        timer: Option<tokio::time::Sleep>,
        // Copies sent so far; `None` before the first poll, when the delay is read.
        sent: Option<u32>,
        delay: Option<Duration>,
        make: M,
        hedge: &'static Hedge,
        policy: &'p Policy,
        classify: fn(&E) -> Class,
        // Whether this is the call's first attempt (no restart yet).
        first_attempt: bool,
        // Each copy is an attempt, cut at its own `attempt_timeout` (within the call's
        // deadline, which `Hedged` tells once the call has begun): the driver's timer
        // cuts the whole at the latest copy's limit, to which `Hedged` moves it when a
        // copy is sent (`extended`); `cut` drops an earlier one at its own.
        timeout: Option<Duration>,
        deadline: Option<Instant>,
        first_limit: Option<Instant>,
        extended: Option<(Instant, Duration)>,
        #[pin]
        cut: Option<tokio::time::Sleep>,
    }
}

impl<M, G, E> Copies<'_, M, G, E> {
    /// Counts the call as abandoned by its caller if this is its first attempt and it
    /// sent copies: the call's state counts the calls dropped after they retried, and
    /// nothing else counts these, whose copies are counted.
    pub(crate) fn count_if_abandoned(&self) {
        if self.first_attempt && self.sent.is_some_and(|sent| sent > 0) {
            call::abandoned(self.policy, &telemetry::CallSpan::default(), 1, true);
        }
    }
}

impl<'p, M, G, E> Copies<'p, M, G, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
{
    /// The attempt `first`, not yet hedged.
    pub(crate) fn new(
        first: G,
        make: M,
        hedge: &'static Hedge,
        policy: &'p Policy,
        classify: fn(&E) -> Class,
    ) -> Self {
        Self {
            first: Some(first),
            started: None,
            first_marked: false,
            copies: [const { None }; MAX_HEDGES as usize],
            timer: None,
            sent: None,
            delay: None,
            make,
            hedge,
            policy,
            classify,
            first_attempt: true,
            timeout: policy.attempt_timeout(),
            deadline: None,
            first_limit: None,
            extended: None,
            cut: None,
        }
    }

    /// Tells the copies the call's deadline, within which each copy's limit falls; and
    /// returns where the driver's timer must now cut the attempt, if a copy sent since
    /// has moved it: the instant, and the copy's limit.
    pub(crate) fn exchange(
        self: Pin<&mut Self>,
        deadline: Option<Instant>,
    ) -> Option<(Instant, Duration)> {
        let this = self.project();
        *this.deadline = deadline;
        this.extended.take()
    }

    /// Drops every copy in flight, and makes the next attempt, not yet hedged.
    pub(crate) fn restart(self: Pin<&mut Self>) {
        let mut this = self.project();
        for copy in this.copies.iter_mut() {
            *copy = None;
        }
        this.timer.set(None);
        *this.started = None;
        *this.first_marked = false;
        *this.sent = None;
        *this.first_attempt = false;
        *this.first_limit = None;
        *this.extended = None;
        this.cut.set(None);
        this.first.set(Some((this.make)()));
    }
}

impl<M, G, E> Future for Copies<'_, M, G, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
{
    type Output = G::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G::Output> {
        loop {
            if let Poll::Ready(outcome) = self.as_mut().poll_copies(cx) {
                return Poll::Ready(outcome);
            }
            if self.timeout.is_none() {
                return Poll::Pending;
            }
            self.as_mut().cut_expired();
            let cut = self.as_mut().project().cut.as_pin_mut();
            if !cut.is_some_and(|cut| cut.poll(cx).is_ready()) {
                return Poll::Pending;
            }
        }
    }
}

impl<M, G, E> Copies<'_, M, G, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
{
    /// Drops each copy (the first included) whose own time limit has passed while one
    /// with a later limit runs, as a transient failure told to the breaker, and sets
    /// `cut` to the next such limit. The copy with the latest limit is the driver's to
    /// cut, with the attempt.
    fn cut_expired(self: Pin<&mut Self>) {
        let mut this = self.project();
        let now = TokioClock::now();
        let first = if this.first.is_some() {
            *this.first_limit
        } else {
            None
        };
        let latest = first
            .into_iter()
            .chain(this.copies.iter().flatten().filter_map(|copy| copy.limit))
            .max();
        let Some(latest) = latest else {
            this.cut.set(None);
            return;
        };
        let mut next: Option<Instant> = None;
        let mut expired = |limit: Instant| {
            if limit >= latest {
                return false;
            }
            if limit <= now {
                // Another copy runs on, with a later limit.
                failure_ends(this.policy, Class::Transient, 1);
                return true;
            }
            next = Some(next.map_or(limit, |next| next.min(limit)));
            false
        };
        if first.is_some_and(&mut expired) {
            this.first.set(None);
        }
        for slot in this.copies.iter_mut() {
            if slot
                .as_ref()
                .and_then(|copy| copy.limit)
                .is_some_and(&mut expired)
            {
                *slot = None;
            }
        }
        match (next, this.cut.as_mut().as_pin_mut()) {
            (Some(at), Some(cut)) => cut.reset(at.into()),
            (Some(at), None) => this.cut.set(Some(tokio::time::sleep_until(at.into()))),
            (None, _) => this.cut.set(None),
        }
    }

    /// Polls the first and the copies, and sends the next copy when its time comes.
    fn poll_copies(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G::Output> {
        let mut this = self.project();
        // The loop goes round again only after sending a copy.
        let mut just_sent = false;
        loop {
            // The first attempt, then the copies: the first wins a tie. Right after a
            // copy is sent, the copies first, so that the new one is polled (its
            // request on its way) before the first can end the attempt.
            let order = if just_sent {
                [Turn::Copies, Turn::First]
            } else {
                [Turn::First, Turn::Copies]
            };
            for turn in order {
                let ended = match turn {
                    Turn::Copies => this.poll_sent(cx),
                    Turn::First => this.poll_first(cx),
                };
                if let Some(outcome) = ended {
                    return Poll::Ready(outcome);
                }
            }
            // The next copy, when the timer says.
            let sent = match *this.sent {
                Some(sent) => sent,
                None => this.start_delay(),
            };
            let Some(timer) = this.timer.as_mut().as_pin_mut() else {
                return Poll::Pending;
            };
            if timer.poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.timer.set(None);
            if !admit_copy(this.policy) {
                return Poll::Pending;
            }
            this.send_copy(sent + 1);
            // Polls the new copy at once.
            just_sent = true;
        }
    }
}

impl<M, G, E> CopiesProj<'_, '_, M, G, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
{
    /// Polls the copies sent beside the first attempt, each in its own mark of a nested
    /// failure; the attempt's outcome, if one of them ends it.
    fn poll_sent(&mut self, cx: &mut Context<'_>) -> Option<G::Output> {
        let (hedge, policy) = (*self.hedge, *self.policy);
        for i in 0..self.copies.len() {
            let Some(copy) = &mut self.copies[i] else {
                continue;
            };
            #[cfg(feature = "tonic")]
            let _limit = copy
                .limit
                .map(|limit| AttemptLimitScope::new(Some(limit), *self.deadline));
            let entered = Entered::new(copy.frame);
            let poll = copy.future.as_mut().poll(cx);
            copy.frame = entered.leave();
            let Poll::Ready(outcome) = poll else {
                continue;
            };
            let (sent, marked) = (copy.sent, copy.frame.inner_failed());
            self.copies[i] = None;
            let latency = TokioClock::now() - sent;
            let in_flight =
                usize::from(self.first.is_some()) + self.copies.iter().flatten().count();
            let ends = match outcome.failure() {
                None => {
                    hedge.learn(latency);
                    // The first attempt, still running, lost: its time so far is a
                    // lower bound of its latency, and is learnt as one.
                    if let (Some(started), true) = (*self.started, self.first.is_some()) {
                        hedge.learn(TokioClock::now() - started);
                    }
                    if let Some(stats) = policy.stats() {
                        stats.record_hedge_won();
                    }
                    telemetry::hedge_won(policy, latency);
                    true
                }
                Some(error) => failure_ends(policy, (self.classify)(error), in_flight),
            };
            if ends {
                self.first.set(None);
                return Some(end(outcome, marked, self.copies));
            }
        }
        None
    }

    /// Polls the first attempt; the attempt's outcome, if the first ends it.
    fn poll_first(&mut self, cx: &mut Context<'_>) -> Option<G::Output> {
        let in_flight = usize::from(self.first.is_some()) + self.copies.iter().flatten().count();
        let first = self.first.as_mut().as_pin_mut()?;
        swap_inner_failure(*self.first_marked);
        let poll = first.poll(cx);
        *self.first_marked = swap_inner_failure(false);
        let Poll::Ready(outcome) = poll else {
            return None;
        };
        self.first.set(None);
        let ends = match outcome.failure() {
            None => {
                // An attempt that answered without waiting says nothing of how long a
                // slow one takes: not learnt.
                if let Some(started) = *self.started {
                    self.hedge.learn(TokioClock::now() - started);
                }
                true
            }
            Some(error) => failure_ends(self.policy, (self.classify)(error), in_flight - 1),
        };
        ends.then(|| end(outcome, *self.first_marked, self.copies))
    }

    /// At the first poll that found the attempt waiting: the delay starts. Returns the
    /// copies sent so far (none).
    fn start_delay(&mut self) -> u32 {
        let now = TokioClock::now();
        *self.started = Some(now);
        // The first's limit is its layer's deadline.
        if self.timeout.is_some() {
            *self.first_limit = enclosing_deadline();
        }
        *self.delay = self.hedge.delay();
        if let Some(delay) = *self.delay {
            self.timer
                .set(Some(tokio::time::sleep_until((now + delay).into())));
        }
        *self.sent = Some(0);
        0
    }

    /// Sends copy number `sent` (from 1), in a free slot, and arms the timer of the next
    /// if there is to be one.
    fn send_copy(&mut self, sent: u32) {
        let i = self
            .copies
            .iter()
            .position(Option::is_none)
            .expect("a free slot");
        let now = TokioClock::now();
        // The copy's limit, within the call's deadline; without one, the copy runs in
        // the first's layer.
        let limit = self.timeout.map(|timeout| {
            let own = now + timeout;
            self.deadline.map_or(own, |deadline| deadline.min(own))
        });
        let frame = match limit {
            Some(limit) => {
                *self.extended = Some((limit, limit - now));
                Frame::known(CompactDeadline::new(Some(limit))).retrying(current_frame().is_retry())
            }
            None => current_frame().moved_on(),
        };
        self.copies[i] = Some(Sent {
            future: Box::pin((self.make)()),
            sent: now,
            limit,
            frame,
        });
        *self.sent = Some(sent);
        if let Some(stats) = self.policy.stats() {
            stats.record_hedge();
        }
        let waited = self
            .started
            .map(|started| now - started)
            .unwrap_or_default();
        telemetry::hedge_sent(self.policy, sent, waited);
        if sent < self.hedge.hedges() {
            if let Some(delay) = *self.delay {
                self.timer
                    .set(Some(tokio::time::sleep_until((now + delay).into())));
            }
        }
    }
}

/// Which of the attempt's futures is polled.
#[derive(Clone, Copy)]
enum Turn {
    First,
    Copies,
}

/// The attempt's end, with `outcome`: every other copy in flight is dropped now (the
/// driver tells the breaker of the outcome). The call's layer gets the mark of the copy
/// whose outcome it is. A copy that lost is not learnt: its time so far, from when it was
/// sent, says nothing of how long an attempt takes.
fn end<G, R>(outcome: R, marked: bool, copies: &mut [Option<Sent<G>>]) -> R {
    for copy in copies.iter_mut() {
        *copy = None;
    }
    swap_inner_failure(marked);
    outcome
}
