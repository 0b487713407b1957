//! Retry layers: which `#[retry]` call encloses the running code, its deadline, and
//! whether a failure already went through a layer that retried it.
//!
//! An async attempt runs inside a tokio task-local scope; a blocking attempt inside a
//! thread-local frame (no other code can run on the thread while it does). Code looks
//! at the thread-local frame first, since a blocking attempt is always the innermost
//! thing running when it is set.

use std::cell::Cell;
use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::task::futures::TaskLocalFuture;

/// An instant in 8 bytes rather than 16: nanoseconds from a process-wide origin, signed
/// (a tokio runtime with a paused clock may read instants from before it) and stored
/// offset by 2^63 in a `NonZeroU64`, which leaves a niche for `Option`. The state of every
/// retried call and the layer of every attempt carry instants, so their size is part of
/// the size of every retried future.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompactInstant(NonZeroU64);

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

    pub(crate) fn new(instant: Instant) -> Self {
        let origin = Self::origin();
        let nanos = match instant.checked_duration_since(origin) {
            Some(after) => after.as_nanos() as i128,
            None => -(origin.duration_since(instant).as_nanos() as i128),
        };
        // 2^63 ns is 292 years either way; beyond, the instant saturates.
        let stored = (nanos + Self::OFFSET).clamp(1, i128::from(u64::MAX)) as u64;
        Self(NonZeroU64::new(stored).expect("clamped to at least 1"))
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
pub(crate) struct CompactDeadline(CompactInstant);

impl CompactDeadline {
    const NONE: NonZeroU64 = NonZeroU64::MAX;

    pub(crate) fn new(deadline: Option<Instant>) -> Self {
        Self::from_compact(deadline.map(CompactInstant::new))
    }

    #[inline]
    pub(crate) fn from_compact(deadline: Option<CompactInstant>) -> Self {
        match deadline {
            Some(deadline) => Self(deadline),
            None => Self(CompactInstant(Self::NONE)),
        }
    }

    #[inline]
    pub(crate) fn compact(self) -> Option<CompactInstant> {
        (self.0.0 != Self::NONE).then_some(self.0)
    }

    fn get(self) -> Option<Instant> {
        self.compact().map(CompactInstant::get)
    }
}

/// What an enclosing layer tells the code inside it.
pub(crate) struct Layer {
    deadline: CompactDeadline,
    /// Set by an inner `#[retry]` call that returned a failure: it has had its chance
    /// to retry, so the enclosing layer should not multiply the attempts.
    pub(crate) inner_failed: Cell<bool>,
}

#[derive(Clone, Copy)]
struct Frame {
    deadline: CompactDeadline,
    inner_failed: bool,
}

tokio::task_local! {
    static TASK_LAYER: Layer;
}

thread_local! {
    static THREAD_FRAME: Cell<Option<Frame>> = const { Cell::new(None) };
}

/// The deadline of the enclosing layer, if any.
#[inline]
pub(crate) fn enclosing_deadline() -> Option<Instant> {
    enclosing().get()
}

/// The deadline of the enclosing layer, compact.
#[inline]
pub(crate) fn enclosing() -> CompactDeadline {
    if let Some(frame) = THREAD_FRAME.get() {
        return frame.deadline;
    }
    TASK_LAYER
        .try_with(|layer| layer.deadline)
        .unwrap_or(CompactDeadline(CompactInstant(CompactDeadline::NONE)))
}

/// Tells the enclosing layer, if any, that a failure went through a retrying layer.
pub(crate) fn mark_inner_failure() {
    if let Some(mut frame) = THREAD_FRAME.get() {
        frame.inner_failed = true;
        THREAD_FRAME.set(Some(frame));
        return;
    }
    let _ = TASK_LAYER.try_with(|layer| layer.inner_failed.set(true));
}

pin_project_lite::pin_project! {
    /// A future run as an attempt of a layer: its output, and whether a failure came out
    /// of an inner layer while it ran. A plain struct around the task-local scope, so
    /// the future holds the attempt once, not once per wrapping `async fn`.
    pub(crate) struct InLayer<F> {
        #[pin]
        scoped: TaskLocalFuture<Layer, F>,
    }
}

impl<F: Future> Future for InLayer<F> {
    type Output = (F::Output, bool);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut scoped = self.project().scoped;
        let output = std::task::ready!(scoped.as_mut().poll(cx));
        let inner_failed = scoped
            .take_value()
            .is_some_and(|layer| layer.inner_failed.get());
        Poll::Ready((output, inner_failed))
    }
}

/// Runs `fut` as an attempt of a layer with `deadline`.
#[inline]
pub(crate) fn in_layer<F: Future>(deadline: CompactDeadline, fut: F) -> InLayer<F> {
    let layer = Layer {
        deadline,
        inner_failed: Cell::new(false),
    };
    InLayer {
        scoped: TASK_LAYER.scope(layer, fut),
    }
}

/// Runs `f` as an attempt of a blocking layer with `deadline`.
pub(crate) fn run_blocking<T>(deadline: CompactDeadline, f: impl FnOnce() -> T) -> (T, bool) {
    struct Restore(Option<Frame>);
    impl Drop for Restore {
        fn drop(&mut self) {
            THREAD_FRAME.set(self.0);
        }
    }
    let _restore = Restore(THREAD_FRAME.replace(Some(Frame {
        deadline,
        inner_failed: false,
    })));
    let output = f();
    let inner_failed = THREAD_FRAME.get().is_some_and(|frame| frame.inner_failed);
    (output, inner_failed)
}

/// Runs `fut` with `deadline`, cut at any enclosing deadline, as the deadline of
/// everything inside it. It is not a retry layer: a failure from an inner `#[retry]`
/// call is passed on to the enclosing layer.
pub(crate) async fn with_deadline<F: Future>(deadline: Option<Instant>, fut: F) -> F::Output {
    let deadline = earliest(deadline, enclosing_deadline());
    let (output, inner_failed) = in_layer(CompactDeadline::new(deadline), fut).await;
    if inner_failed {
        mark_inner_failure();
    }
    output
}

/// `fut` with `deadline`, cut at any enclosing deadline, as the deadline of everything
/// inside it: a nameable future, for a tower service to return.
#[cfg(feature = "tower")]
pub(crate) fn scoped<F: Future>(deadline: Option<Instant>, fut: F) -> TaskLocalFuture<Layer, F> {
    let layer = Layer {
        deadline: CompactDeadline::new(earliest(deadline, enclosing_deadline())),
        inner_failed: Cell::new(false),
    };
    TASK_LAYER.scope(layer, fut)
}

/// The earlier of two optional deadlines, `None` meaning none.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
