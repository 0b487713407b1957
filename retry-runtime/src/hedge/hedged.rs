//! The future of a hedged function (`#[retry(hedge = ...)]`): the one driver (`drive`)
//! running attempts that are each a group of [`Copies`] (`copies.rs`). What is particular
//! to hedging (when a copy is sent, what it costs, how its outcome counts) is there.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::driver::handling::{
    ErasedHandling, Handling, OnOpen, OnTimeout, OnWait, Outcome, ShowError, TransactionFacts,
};
use crate::driver::run::{AsyncRun, Attempts, Parts, Run, drive};
use crate::hedge::copies::Copies;
use crate::hedge::spec::Hedge;
use crate::schedule::policy::Policy;

pin_project_lite::pin_project! {
    /// An async retried call whose slow attempts are hedged: as [`crate::driver::retrying::Retrying`],
    /// with each attempt a group of [`Copies`].
    pub struct Hedged<'p, M, G: Future, H, E> {
        #[pin]
        copies: Copies<'p, M, G, E>,
        #[pin]
        run: AsyncRun<'p, G::Output>,
        handling: H,
        // Whether the call has returned its outcome, and whether a poll is under way (a
        // poll that panicked leaves it set): a call dropped before it returned, by its
        // caller, may be abandoned in its first attempt with copies sent.
        returned: bool,
        polling: bool,
    }
    impl<'p, M, G: Future, H, E> PinnedDrop for Hedged<'p, M, G, H, E> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if !*this.returned && !*this.polling && !std::thread::panicking() {
                this.copies.count_if_abandoned();
            }
        }
    }
}

impl<'p, M, G, H, E> Attempts<'p, G::Output> for Hedged<'p, M, G, H, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
    H: ErasedHandling<G::Output>,
{
    fn parts(self: Pin<&mut Self>) -> Parts<'_, 'p, G::Output> {
        let this = self.project();
        let (mut copies, mut run) = (this.copies, this.run);
        // Copies with time limits of their own: the attempt is cut at the latest.
        if let Some((end, limit)) = copies.as_mut().exchange(run.deadline()) {
            run.as_mut().extend_limit(end, limit);
        }
        Parts {
            attempt: Some(copies),
            run,
            handling: this.handling,
            caller_makes_next: false,
        }
    }

    fn then(self: Pin<&mut Self>) {
        // Every copy still in flight (cut at the deadline) is dropped, and the next
        // attempt made, to start when the wait is over.
        self.project().copies.restart();
    }
}

impl<M, G, H, E> Future for Hedged<'_, M, G, H, E>
where
    M: FnMut() -> G,
    G: Future<Output: Outcome<Err = E>>,
    H: ErasedHandling<G::Output>,
{
    type Output = G::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G::Output> {
        *self.as_mut().project().polling = true;
        let poll = drive(self.as_mut(), cx);
        let this = self.project();
        *this.polling = false;
        *this.returned = poll.is_ready();
        match poll {
            Poll::Ready(Some(outcome)) => Poll::Ready(outcome),
            Poll::Ready(None) => unreachable!("`Hedged` makes its own attempts"),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Runs an async function under `policy`, hedging its slow attempts as `hedge` says:
/// `make` makes each attempt's future (and each copy's), and `handling` says how the
/// function treats its failures.
pub fn hedged<R, M, G, S, O, T, W>(
    policy: &Policy,
    hedge: &'static Hedge,
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
    let first = make();
    Hedged {
        copies: Copies::new(first, make, hedge, policy, handling.classifier()),
        run: Run::lazy(policy),
        handling,
        returned: false,
        polling: false,
    }
}
