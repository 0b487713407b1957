//! Time for the retry loop: where "now" comes from, and instants small enough to keep in
//! every retried future.
//!
//! Async calls read tokio's clock, so that tests under `tokio::time::pause()` run in
//! virtual time; blocking calls read the operating system's.

use std::num::NonZeroU64;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A source of the current time.
pub trait Clock {
    /// Whether calls on this clock can cut an attempt at its time limit (async ones
    /// can; a blocking attempt runs to its end), and so give it an `attempt_timeout`.
    const CUTS_ATTEMPTS: bool = false;

    /// The current instant.
    fn now() -> Instant;
}

/// Tokio's clock: follows `tokio::time::pause()` and `advance()`.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock;

impl Clock for TokioClock {
    const CUTS_ATTEMPTS: bool = true;

    #[inline]
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The operating system's monotonic clock, for blocking calls.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now() -> Instant {
        Instant::now()
    }
}

/// An instant in 8 bytes rather than 16: nanoseconds from a process-wide origin, signed
/// (a tokio runtime with a paused clock may read instants from before it) and stored
/// offset by 2^63 in a `NonZeroU64`, which leaves a niche for `Option`. The state of every
/// retried call and the layer of every attempt carry instants, so their size is part of
/// the size of every retried future.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CompactInstant(pub(crate) NonZeroU64);

impl std::fmt::Debug for CompactInstant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl CompactInstant {
    const OFFSET: i128 = 1 << 63;

    fn origin() -> Instant {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        *ORIGIN.get_or_init(Instant::now)
    }

    #[inline]
    pub(crate) fn new(instant: Instant) -> Self {
        const MIDDLE: u64 = 1 << 63;
        let origin = Self::origin();
        // 2^63 ns is 292 years either way; beyond, the instant saturates.
        let stored = match instant.checked_duration_since(origin) {
            Some(after) => MIDDLE.saturating_add(Self::nanos(after)),
            None => MIDDLE.saturating_sub(Self::nanos(origin.duration_since(instant))),
        };
        Self(NonZeroU64::new(stored.max(1)).expect("at least 1"))
    }

    /// `d` in nanoseconds, saturating, in 64-bit arithmetic.
    #[inline]
    fn nanos(d: Duration) -> u64 {
        d.as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()))
    }

    /// A monotonic count of nanoseconds (from 2^63 before the process-wide origin), for
    /// windows and durations between instants; never clamped, so instants a paused
    /// clock reads from before the origin keep their distances.
    #[inline]
    pub(crate) fn ticks(self) -> u64 {
        self.0.get()
    }

    /// This instant plus `nanos`, saturating short of the farthest instant.
    #[inline]
    pub(crate) fn plus_nanos(self, nanos: u64) -> Self {
        let stored = self.0.get().saturating_add(nanos).min(u64::MAX - 1);
        Self(NonZeroU64::new(stored).expect("at least the original, which is not zero"))
    }

    /// The nanoseconds from `self` to `later`, zero if `later` is not later.
    #[inline]
    pub(crate) fn nanos_until(self, later: Self) -> u64 {
        later.0.get().saturating_sub(self.0.get())
    }

    pub(crate) fn get(self) -> Instant {
        let nanos = i128::from(self.0.get()) - Self::OFFSET;
        let origin = Self::origin();
        let shift = Duration::from_nanos(nanos.unsigned_abs() as u64);
        let shifted = if nanos >= 0 {
            origin.checked_add(shift)
        } else {
            origin.checked_sub(shift)
        };
        shifted.unwrap_or(origin)
    }
}

/// An optional deadline in 8 bytes, `None` stored as the farthest instant, so that the
/// zero niche is left for an `Option` around the layer that holds it.
#[derive(Clone, Copy)]
pub(crate) struct CompactDeadline(pub(crate) CompactInstant);

impl CompactDeadline {
    /// No deadline.
    pub(crate) const NONE: Self = Self(CompactInstant(NonZeroU64::MAX));

    pub(crate) fn new(deadline: Option<Instant>) -> Self {
        Self::from_compact(deadline.map(CompactInstant::new))
    }

    #[inline]
    pub(crate) fn from_compact(deadline: Option<CompactInstant>) -> Self {
        match deadline {
            Some(deadline) => Self(deadline),
            None => Self::NONE,
        }
    }

    #[inline]
    pub(crate) fn compact(self) -> Option<CompactInstant> {
        (self.0 != Self::NONE.0).then_some(self.0)
    }

    pub(crate) fn get(self) -> Option<Instant> {
        self.compact().map(CompactInstant::get)
    }
}
