//! An async retried call as one future ([`Retrying`]): a closure makes each attempt, and
//! the driver (`drive`) runs them. What an `async fn` under `#[retry]` returns, and
//! `retry_fn`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::driver::handling::{
    ErasedHandling, Handling, OnOpen, OnTimeout, OnWait, Outcome, ShowError, TransactionFacts,
};
use crate::driver::run::{AsyncRun, Attempts, Parts, Run, drive};
use crate::schedule::policy::Policy;

pin_project_lite::pin_project! {
    /// An async retried call as one future: `make` makes each attempt (the function's
    /// body, with fresh copies of its arguments), and [`drive`] runs them.
    ///
    /// The function under `#[retry]` returns this future rather than being an
    /// `async fn` that awaits its body: a function is then one state machine (its
    /// body's), not two.
    pub struct Retrying<'p, M, G: Future, H> {
        // The attempt in flight; during a wait, the one that failed (finished, holding
        // nothing), or the next one if that one was cut by its time limit.
        #[pin]
        attempt: G,
        make: M,
        #[pin]
        run: AsyncRun<'p, G::Output>,
        handling: H,
    }
}

impl<'p, M, G, H> Attempts<'p, G::Output> for Retrying<'p, M, G, H>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome>,
    H: ErasedHandling<G::Output>,
{
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn parts(self: Pin<&mut Self>) -> Parts<'_, 'p, G::Output> {
        let this = self.project();
        Parts {
            attempt: Some(this.attempt),
            run: this.run,
            handling: this.handling,
            caller_makes_next: false,
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn then(self: Pin<&mut Self>) {
        let mut this = self.project();
        // The next attempt is made in place: moves are copies in an unoptimised build,
        // and this method is compiled once per function.
        this.attempt.set((this.make)());
    }
}

impl<M, G, H> Future for Retrying<'_, M, G, H>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome>,
    H: ErasedHandling<G::Output>,
{
    type Output = G::Output;

    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G::Output> {
        // A match rather than `Poll::map`, whose closure would be one more item compiled
        // per function.
        match drive(self, cx) {
            Poll::Ready(Some(outcome)) => Poll::Ready(outcome),
            Poll::Ready(None) => unreachable!("`Retrying` makes its own attempts"),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Runs an async function under `policy`: `make` makes each attempt's future, and
/// `handling` says how the function treats its failures.
///
/// The future is returned as `impl Future`: the generated function's return type is then
/// checked against this signature alone, and a bound the function does not meet (an
/// error type without `Classify`) is reported once, at the call. The handling's
/// transaction facts are an `impl` argument, which the generated code's turbofish of the
/// other seven parameters leaves to inference.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn retrying<R, M, G, S, O, T, W>(
    policy: &Policy,
    mut make: M,
    handling: Handling<R::Err, S, O, T, W, impl TransactionFacts>,
) -> impl Future<Output = R>
where
    R: Outcome,
    M: FnMut() -> G,
    G: Future<Output = R>,
    S: ShowError<R::Err>,
    O: OnOpen<R>,
    T: OnTimeout<R>,
    W: OnWait<R::Err>,
{
    Retrying {
        attempt: make(),
        make,
        run: Run::lazy(policy),
        handling,
    }
}
