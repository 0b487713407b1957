//! Retry layers: which `#[retry]` call encloses the running code, its deadline, and
//! whether a failure already went through a layer that retried it.
//!
//! A layer's frame (its deadline, and whether a failure came out of a nested layer) is
//! in a thread-local while its attempt runs: a blocking attempt's for as long as it
//! runs, an async attempt's while it is being polled, swapped in and out on each poll as
//! a task-local is, so tasks that share a thread never see each other's frames.
//!
//! The frame belongs to the tokio task that installed it (none, for a blocking attempt
//! outside any task): a task that another executor polls inside the attempt's poll, as
//! `LocalSet::run_until` polls the tasks of `spawn_local`, is not the attempt, and sees
//! no frame. A future the attempt's own task polls (a `block_on` inside it, a join of
//! several futures) is part of the attempt and sees it: tokio cannot tell it apart, nor
//! the tasks of an executor other than tokio's, which have no tokio task id.

use std::cell::Cell;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use tokio::task::Id as TaskId;

use crate::time::clock::{Clock, CompactDeadline, CompactInstant, TokioClock};

/// What an enclosing layer tells the code inside it: its deadline, and whether a failure
/// came out of a nested `#[retry]` call (which has had its chance to retry, so that the
/// enclosing layer does not multiply the attempts).
///
/// A layer's deadline may not be known yet: an async `#[retry]` call starts its clock
/// only when something needs it. Until then its
/// frame holds the deadline as an offset from a start still to be read, and the first
/// to need the deadline (a nested call, [`crate::layer::deadline::remaining`], or the attempt
/// yielding for the first time) reads the clock and fixes it.
///
/// One word: the frame is copied into and out of a thread-local on every poll, and a
/// word is copied in one move, which the CPU forwards from store to load. The low four
/// bits are flags; the other 60 hold, while the clock has not started, the deadline's
/// offset from the start (up to 36 years; beyond is no deadline), and afterwards an
/// instant (the deadline, or for a frame without one the start) in signed nanoseconds
/// from the process-wide origin (18 years either way, saturating).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame(u64);

impl Frame {
    /// Set when a failure came out of a nested `#[retry]` call.
    const INNER_FAILED: u64 = 1;
    /// Set once the layer's clock has started.
    const STARTED: u64 = 2;
    /// Set for a layer without a deadline.
    const NO_DEADLINE: u64 = 4;
    /// Set, before the clock starts, for a call that must begin at its first poll (it
    /// has a breaker to ask or an attempt timeout to set): kept in the frame, which the
    /// driver has in hand, rather than read from the policy.
    const BEGINS_AT_ONCE: u64 = 8;
    /// Set, once the clock has started, in the frame of a retry (an attempt after the
    /// first): the same bit as `BEGINS_AT_ONCE`, which only a frame not started has.
    const RETRY: u64 = 8;
    const FLAGS: u64 = 15;
    const SHIFT: u32 = 4;
    /// The farthest instant from the origin a frame holds, either way.
    const REACH: i64 = (1 << 59) - 1;

    /// The frame outside any layer: no deadline.
    pub(crate) const OUTSIDE: Self = Self(Self::STARTED | Self::NO_DEADLINE);

    /// `instant` in the 60 bits of a started frame.
    #[inline]
    fn encode(instant: CompactInstant) -> u64 {
        let from_origin = instant.ticks().wrapping_sub(1 << 63) as i64;
        (from_origin.clamp(-Self::REACH, Self::REACH) as u64) << Self::SHIFT
    }

    /// The instant in the 60 bits of a started frame.
    #[inline]
    fn decode(self) -> CompactInstant {
        let from_origin = (self.0 as i64) >> Self::SHIFT;
        let ticks = (from_origin as u64).wrapping_add(1 << 63);
        CompactInstant(NonZeroU64::new(ticks).unwrap_or(NonZeroU64::MIN))
    }

    /// The frame of a layer whose clock has started.
    #[inline]
    pub(crate) fn known(deadline: CompactDeadline) -> Self {
        match deadline.compact() {
            Some(deadline) => Self(Self::encode(deadline) | Self::STARTED),
            None => Self::OUTSIDE,
        }
    }

    /// A frame whose deadline falls `offset` nanoseconds (`u64::MAX` for none) after a
    /// start not yet read.
    #[inline]
    pub(crate) const fn lazy(offset: u64) -> Self {
        if offset > u64::MAX >> Self::SHIFT {
            Self(Self::NO_DEADLINE)
        } else {
            Self(offset << Self::SHIFT)
        }
    }

    /// The same frame, marked to begin at its first poll if `at_once`.
    pub(crate) const fn beginning_at_once(self, at_once: bool) -> Self {
        if at_once {
            Self(self.0 | Self::BEGINS_AT_ONCE)
        } else {
            Self(self.0 & !Self::BEGINS_AT_ONCE)
        }
    }

    /// When the clock started, for a layer whose deadline is `offset` nanoseconds
    /// (`u64::MAX` for none) after its start: `None` if it has not.
    #[inline]
    pub(crate) fn started(&self, offset: u64) -> Option<CompactInstant> {
        if self.0 & Self::STARTED == 0 {
            return None;
        }
        let instant = self.decode();
        if self.0 & Self::NO_DEADLINE != 0 {
            return Some(instant);
        }
        let ticks = instant.ticks().saturating_sub(offset).max(1);
        Some(CompactInstant(NonZeroU64::new(ticks).expect("at least 1")))
    }

    /// The same frame, marked as a retry's if `retry` and its clock has started.
    #[inline]
    pub(crate) fn retrying(self, retry: bool) -> Self {
        if retry && self.0 & Self::STARTED != 0 {
            Self(self.0 | Self::RETRY)
        } else {
            self
        }
    }

    /// Whether this is the frame of a retry.
    #[inline]
    pub(crate) fn is_retry(&self) -> bool {
        self.0 & Self::STARTED != 0 && self.0 & Self::RETRY != 0
    }

    /// Whether a failure came out of a nested `#[retry]` call.
    #[inline]
    pub(crate) fn inner_failed(&self) -> bool {
        self.0 & Self::INNER_FAILED != 0
    }

    /// Records that a failure came out of a nested `#[retry]` call.
    fn mark_inner_failed(&mut self) {
        self.0 |= Self::INNER_FAILED;
    }

    /// The same frame, without the mark of a nested call's failure.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn moved_on(self) -> Self {
        Self(self.0 & !Self::INNER_FAILED)
    }

    /// Whether the frame has a deadline.
    #[inline]
    fn has_deadline(&self) -> bool {
        self.0 & Self::NO_DEADLINE == 0
    }

    /// Starts the layer's clock at `now`, if it has not started.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn start(&mut self, now: impl FnOnce() -> Instant) {
        if self.0 & Self::STARTED == 0 {
            let now = CompactInstant::new(now());
            let flags = self.0 & Self::FLAGS & !Self::BEGINS_AT_ONCE;
            let instant = if self.has_deadline() {
                now.plus_nanos(self.0 >> Self::SHIFT)
            } else {
                now
            };
            self.0 = Self::encode(instant) | flags | Self::STARTED;
        }
    }

    /// How long from `now` until the deadline of a frame whose clock has started; `None`
    /// for a frame without one.
    #[inline]
    pub(crate) fn remaining(&self, now: Instant) -> Option<Duration> {
        let until = CompactInstant::new(now).nanos_until(self.decode());
        self.has_deadline().then(|| Duration::from_nanos(until))
    }

    /// The deadline of a frame whose clock has started; `None` for a frame without one,
    /// or not started.
    #[cfg(feature = "tonic")]
    pub(crate) fn started_deadline(&self) -> Option<Instant> {
        (self.0 & Self::STARTED != 0 && self.has_deadline()).then(|| self.decode().get())
    }

    /// The deadline, starting the clock (with `now`) if it has one and has not started.
    #[inline]
    fn deadline(&mut self, now: impl FnOnce() -> Instant) -> CompactDeadline {
        if !self.has_deadline() {
            return CompactDeadline::NONE;
        }
        self.start(now);
        CompactDeadline(self.decode())
    }
}

/// A frame as installed: the frame, and the tokio task that installed it (`None` outside
/// any task: a blocking attempt on a thread of its own, `block_on`'s future). One cell,
/// which an install and a leave each copy in one move of 16 bytes.
#[derive(Clone, Copy)]
struct Installed(Frame, Option<TaskId>);

thread_local! {
    /// The frame of the layer whose attempt is running on this thread right now (an
    /// async attempt's while it is being polled, a blocking attempt's while it runs),
    /// with its owner.
    static FRAME: Cell<Installed> = const { Cell::new(Installed(Frame::OUTSIDE, None)) };
    /// The number of the attempt running now and the call's most attempts, set around
    /// each poll of an attempt of a call with state (every retry has one); read only
    /// when the frame says it is a retry's, so that a first attempt, which sets nothing,
    /// is never taken for the retry around it.
    static ATTEMPT: Cell<(u32, u32)> = const { Cell::new((1, 1)) };
}

/// Whether the code running now is the task that installed this thread's frame (see
/// the module's notes): only then does it run inside that frame's attempt.
#[inline]
fn owned() -> bool {
    FRAME.get().1 == tokio::task::try_id()
}

/// The frame of the layer whose attempt the code running now is part of. Outside any
/// layer, the task is not asked for.
#[inline]
pub(crate) fn visible() -> Frame {
    let Installed(frame, owner) = FRAME.get();
    if frame.0 == Frame::OUTSIDE.0 || owner == tokio::task::try_id() {
        frame
    } else {
        Frame::OUTSIDE
    }
}

/// Replaces the frame installed, keeping its owner.
fn set(frame: Frame) {
    let Installed(_, owner) = FRAME.get();
    FRAME.set(Installed(frame, owner));
}

/// The deadline of the enclosing layer, if any.
#[inline]
pub(crate) fn enclosing_deadline() -> Option<Instant> {
    enclosing(TokioClock::now).get()
}

/// The deadline of the enclosing layer, compact; if that layer has not started its
/// clock yet, it starts now, read from `now`.
#[inline]
pub(crate) fn enclosing(now: impl FnOnce() -> Instant) -> CompactDeadline {
    let mut frame = visible();
    let lazy = frame.0 & Frame::STARTED == 0;
    let deadline = frame.deadline(now);
    if lazy {
        set(frame);
    }
    deadline
}

/// The number of the retry running now and its call's most attempts; `None` in a first
/// attempt, or outside any `#[retry]` call.
pub(crate) fn current_retry() -> Option<(u32, u32)> {
    visible().is_retry().then(|| ATTEMPT.get())
}

/// The attempt number installed for one poll of an attempt, the previous one put back
/// when dropped.
pub(crate) struct AttemptNumber {
    previous: (u32, u32),
}

impl AttemptNumber {
    /// Installs attempt `number` of at most `max`.
    #[inline]
    pub(crate) fn new(number: u32, max: u32) -> Self {
        Self {
            previous: ATTEMPT.replace((number, max)),
        }
    }
}

impl Drop for AttemptNumber {
    #[inline]
    fn drop(&mut self) {
        ATTEMPT.set(self.previous);
    }
}

/// The deadlines of an attempt cut to its own time limit, and of its call.
#[cfg(feature = "tonic")]
type AttemptLimit = (Option<Instant>, Option<Instant>);

#[cfg(feature = "tonic")]
thread_local! {
    /// Set around each poll of an attempt (or hedged copy) that has a time limit of its
    /// own (`attempt_timeout`): that limit and the call's deadline, so that a request
    /// made in it can tell a server the call's time rather than the attempt's.
    static ATTEMPT_LIMIT: Cell<AttemptLimit> = const { Cell::new((None, None)) };
}

/// The deadline to send with a request made now: the enclosing layer's, unless that is
/// an attempt's own time limit, for which the call's deadline is sent. The client cuts
/// the attempt at its limit itself; a server that stopped at it too would answer
/// `DEADLINE_EXCEEDED` in a race with that cut, and only the cut is retried. (With the
/// integration that sends it only: the rest of a retried call pays nothing for it.)
#[cfg(feature = "tonic")]
pub(crate) fn request_deadline() -> Option<Instant> {
    let enclosing = enclosing_deadline();
    match ATTEMPT_LIMIT.get() {
        (Some(limit), call) if enclosing == Some(limit) => call,
        _ => enclosing,
    }
}

/// An attempt's time limit and its call's deadline, installed for one poll, the
/// previous ones put back when dropped.
#[cfg(feature = "tonic")]
pub(crate) struct AttemptLimitScope {
    previous: AttemptLimit,
}

#[cfg(feature = "tonic")]
impl AttemptLimitScope {
    /// Installs `limit`, an attempt's own, and `call`, its call's deadline.
    pub(crate) fn new(limit: Option<Instant>, call: Option<Instant>) -> Self {
        Self {
            previous: ATTEMPT_LIMIT.replace((limit, call)),
        }
    }
}

#[cfg(feature = "tonic")]
impl Drop for AttemptLimitScope {
    fn drop(&mut self) {
        ATTEMPT_LIMIT.set(self.previous);
    }
}

/// The frame of the layer whose attempt runs now.
pub(crate) fn current_frame() -> Frame {
    visible()
}

/// Tells the enclosing layer, if any, that a failure went through a retrying layer.
pub(crate) fn mark_inner_failure() {
    // A task polled inside another's attempt does not fail that attempt.
    if !owned() {
        return;
    }
    // Outside any layer, the mark is on `Frame::OUTSIDE`'s copy, which nobody reads.
    let mut frame = FRAME.get().0;
    frame.mark_inner_failed();
    set(frame);
}

/// Sets whether a nested call has given up in the attempt running now, and returns
/// whether one had: for hedged copies, which share their call's layer and each keep
/// their own mark, swapped in around each poll.
pub(crate) fn swap_inner_failure(marked: bool) -> bool {
    let frame = FRAME.get().0;
    let was = frame.inner_failed();
    let mut now = frame.moved_on();
    if marked {
        now.mark_inner_failed();
    }
    set(now);
    was
}

/// Tells the enclosing `#[retry]` layer that the code running now has handled the
/// failures of the nested `#[retry]` calls it made, so that a failure of its own after
/// them is retried as usual.
///
/// A failure that comes out of a nested `#[retry]` call has been retried by that call,
/// so the layers above return it after one attempt instead of multiplying the attempts.
/// persevere cannot see which error an attempt returns, so once a nested call gave up in
/// an attempt, that attempt's failure is taken to be passing it on: this errs toward
/// fewer attempts, never more. An attempt that handles the nested failure (a cache miss,
/// then a fallback) and then fails on its own says so with this call.
///
/// ```
/// use std::{io, time::Duration};
/// use persevere::{Policy, RetryBudget, nested_failure_handled, retry_blocking};
///
/// // Four retries in a row: more than a quiet process's default budget holds.
/// static NO_LIMIT: RetryBudget = RetryBudget::unlimited();
/// static CACHE: Policy = Policy::new()
///     .with_attempts(2)
///     .with_base(Duration::from_millis(1))
///     .with_budget(&NO_LIMIT);
/// static LOOKUP: Policy = Policy::new()
///     .with_attempts(3)
///     .with_base(Duration::from_millis(1))
///     .with_budget(&NO_LIMIT);
///
/// fn from_cache() -> io::Result<String> {
///     retry_blocking(&CACHE, || Err(io::ErrorKind::ConnectionReset.into()))
/// }
///
/// let mut attempts = 0;
/// let found: io::Result<String> = retry_blocking(&LOOKUP, || {
///     attempts += 1;
///     if let Ok(hit) = from_cache() {
///         return Ok(hit);
///     }
///     // The cache's failure is handled here: what fails next is this layer's own.
///     nested_failure_handled();
///     Err(io::ErrorKind::ConnectionReset.into())
/// });
/// assert!(found.is_err());
/// assert_eq!(attempts, 3); // without the call above: 1
/// ```
pub fn nested_failure_handled() {
    if owned() {
        set(FRAME.get().0.moved_on());
    }
}

/// A layer's frame, installed as this thread's until [`Entered::leave`] (or a panic)
/// puts the previous one back. Not generic, so that each future that installs a frame
/// does not bring a copy of its own into the build.
pub(crate) struct Entered {
    previous: Installed,
}

impl Entered {
    /// Installs `frame`, as the frame of the task running now.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn new(frame: Frame) -> Self {
        let owner = tokio::task::try_id();
        Self {
            previous: FRAME.replace(Installed(frame, owner)),
        }
    }

    /// Whether the call whose frame, `frame`, was just installed must begin now: its
    /// clock has not started, and the enclosing layer has a deadline or the call must
    /// begin at its first poll. One test: the enclosing frame's deadline is moved onto
    /// the bit that says "begins at once". The enclosing frame may be another task's
    /// (a task polled inside its attempt): the call then begins at once for nothing,
    /// since [`enclosing`] tells it no deadline; a rare case, not worth a test here.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn must_begin(&self, frame: Frame) -> bool {
        const _: () = assert!(Frame::NO_DEADLINE << 1 == Frame::BEGINS_AT_ONCE);
        let wanted = frame.0 | ((!self.previous.0.0 & Frame::NO_DEADLINE) << 1);
        wanted & (Frame::BEGINS_AT_ONCE | Frame::STARTED) == Frame::BEGINS_AT_ONCE
    }

    /// Puts the previous frame back: the frame as the code inside left it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn leave(self) -> Frame {
        let Installed(frame, _) = FRAME.replace(self.previous);
        std::mem::forget(self);
        frame
    }
}

impl Drop for Entered {
    /// Unwinding from a panic inside, puts the previous frame back all the same.
    fn drop(&mut self) {
        FRAME.set(self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The retry bit is the bit that only a frame not started uses for "begins at once":
    // it is set only on a started frame, stays set, and never reads as "begins at once".
    #[test]
    fn a_retry_s_frame_carries_its_bit() {
        let started = Frame::known(CompactDeadline::NONE);
        assert!(!started.is_retry());
        let retry = started.retrying(true);
        assert!(retry.is_retry());
        assert!(retry.retrying(true).is_retry(), "set twice, still set");
        assert!(!started.retrying(false).is_retry());
        assert!(!retry.moved_on().inner_failed() && retry.moved_on().is_retry());
        // A frame not started is left as it is: its bit means "begins at once".
        let lazy = Frame::lazy(1_000).beginning_at_once(false);
        assert_eq!(lazy.retrying(true).0, lazy.0);
        assert!(!lazy.retrying(true).is_retry());
        let at_once = Frame::lazy(1_000).beginning_at_once(true);
        assert!(!at_once.is_retry());
        // A started retry's frame never asks to begin.
        let entered = Entered::new(Frame::OUTSIDE);
        assert!(!entered.must_begin(retry));
        entered.leave();
    }

    // Only a started frame with a deadline has one to tell: a lazy frame holds an
    // offset, not an instant, and a frame without a deadline the start.
    #[cfg(feature = "tonic")]
    #[test]
    fn a_started_frame_tells_its_deadline() {
        let at = Instant::now() + Duration::from_secs(1);
        let known = Frame::known(CompactDeadline::new(Some(at)));
        let told = known.started_deadline().unwrap();
        assert!(told.max(at) - told.min(at) < Duration::from_micros(1));
        assert_eq!(Frame::known(CompactDeadline::NONE).started_deadline(), None);
        assert_eq!(Frame::OUTSIDE.started_deadline(), None);
        assert_eq!(Frame::lazy(1_000).started_deadline(), None);
        assert_eq!(Frame::lazy(u64::MAX).started_deadline(), None);
    }
}
