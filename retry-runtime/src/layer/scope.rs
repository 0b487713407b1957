//! Deadline scopes: a future run with a deadline of its own (cut at any enclosing one)
//! as the deadline of everything inside it, without being a retry layer: a server's
//! handler under the deadline its caller sent, [`crate::layer::deadline::scope`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::layer::frame::{Entered, Frame, enclosing_deadline, mark_inner_failure, visible};
use crate::time::clock::CompactDeadline;

pin_project_lite::pin_project! {
    /// A future run inside a deadline scope: its output, and the scope's frame as the
    /// future left it (whether a failure came out of an inner layer). Each poll swaps the
    /// frame into the thread-local and back out, as a task-local would, with no more
    /// state than the frame itself. (An attempt of a `#[retry]` call is polled by the
    /// driver, `driver::run::drive`, which installs its call's frame itself.)
    pub(crate) struct InLayer<F> {
        #[pin]
        future: F,
        frame: Frame,
    }
}

impl<F: Future> Future for InLayer<F> {
    type Output = (F::Output, Frame);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let entered = Entered::new(*this.frame);
        let poll = this.future.poll(cx);
        *this.frame = entered.leave();
        poll.map(|output| (output, *this.frame))
    }
}

/// Runs `future` inside a scope with `frame`.
fn in_layer<F: Future>(frame: Frame, future: F) -> InLayer<F> {
    InLayer { future, frame }
}

/// A frame for a deadline scope, which is not a retry layer and has no clock of its own.
fn scope_frame(deadline: Option<Instant>) -> Frame {
    let deadline = CompactDeadline::new(earliest(deadline, enclosing_deadline()));
    // Code in the scope runs in the enclosing attempt: a retry's, if that is one.
    Frame::known(deadline).retrying(visible().is_retry())
}

/// Runs `fut` with `deadline`, cut at any enclosing deadline, as the deadline of
/// everything inside it. It is not a retry layer: a failure from an inner `#[retry]`
/// call is passed on to the enclosing layer.
pub(crate) async fn with_deadline<F: Future>(deadline: Option<Instant>, fut: F) -> F::Output {
    let (output, frame) = in_layer(scope_frame(deadline), fut).await;
    if frame.inner_failed() {
        mark_inner_failure();
    }
    output
}

/// `fut` with `deadline`, cut at any enclosing deadline, as the deadline of everything
/// inside it: a nameable future, for a tower service to return.
#[cfg(feature = "tower")]
pub(crate) fn scoped<F: Future>(deadline: Option<Instant>, fut: F) -> InLayer<F> {
    in_layer(scope_frame(deadline), fut)
}

/// The earlier of two optional deadlines, `None` meaning none.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
