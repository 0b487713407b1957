//! Retry layers: which `#[retry]` call encloses the running code, its deadline, and
//! whether a failure already went through a layer that retried it.
//!
//! An async attempt runs inside a tokio task-local scope; a blocking attempt inside a
//! thread-local frame (no other code can run on the thread while it does). Code looks
//! at the thread-local frame first, since a blocking attempt is always the innermost
//! thing running when it is set.

use std::cell::Cell;
use std::future::Future;
use std::time::Instant;

/// What an enclosing layer tells the code inside it.
pub(crate) struct Layer {
    pub(crate) deadline: Option<Instant>,
    /// Set by an inner `#[retry]` call that returned a failure: it has had its chance
    /// to retry, so the enclosing layer should not multiply the attempts.
    pub(crate) inner_failed: Cell<bool>,
}

#[derive(Clone, Copy)]
struct Frame {
    deadline: Option<Instant>,
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
    if let Some(frame) = THREAD_FRAME.get() {
        return frame.deadline;
    }
    TASK_LAYER.try_with(|layer| layer.deadline).ok().flatten()
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

/// Runs `fut` as an attempt of a layer with `deadline`: its output, and whether a
/// failure came out of an inner layer while it ran.
pub(crate) async fn run_async<F: Future>(deadline: Option<Instant>, fut: F) -> (F::Output, bool) {
    let layer = Layer {
        deadline,
        inner_failed: Cell::new(false),
    };
    TASK_LAYER
        .scope(layer, async move {
            let output = fut.await;
            let inner_failed = TASK_LAYER.with(|layer| layer.inner_failed.get());
            (output, inner_failed)
        })
        .await
}

/// Runs `f` as an attempt of a blocking layer with `deadline`.
pub(crate) fn run_blocking<T>(deadline: Option<Instant>, f: impl FnOnce() -> T) -> (T, bool) {
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
    let (output, inner_failed) = run_async(deadline, fut).await;
    if inner_failed {
        mark_inner_failure();
    }
    output
}

/// `fut` with `deadline`, cut at any enclosing deadline, as the deadline of everything
/// inside it: a nameable future, for a tower service to return.
#[cfg(feature = "tower")]
pub(crate) fn scoped<F: Future>(
    deadline: Option<Instant>,
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<Layer, F> {
    let layer = Layer {
        deadline: earliest(deadline, enclosing_deadline()),
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
