//! One attempt at a time: for a function whose attempts cannot be made by a closure. An
//! `async fn` that takes an `&mut` (which each attempt must borrow from the function's own
//! body) loops over [`step`], which runs one attempt and the wait after it through the
//! driver's loop; a blocking function always loops over [`step_blocking`] (its attempts
//! borrow as they please, and the loop costs nothing to compile).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::driver::call::Next;
use crate::driver::handling::{
    ErasedHandling, Handling, OnOpen, OnTimeout, OnWait, Outcome, ShowError, TransactionFacts,
};
use crate::driver::run::{AsyncRun, Attempts, Parts, Run, drive};
use crate::time::clock::SystemClock;

pin_project_lite::pin_project! {
    /// One attempt of an async call, and the wait after it if it fails: what a function
    /// that loops in its own body awaits per attempt (see [`step`]).
    pub struct Step<'r, 'p, G: Future, H> {
        #[pin]
        attempt: Option<G>,
        run: Pin<&'r mut AsyncRun<'p, G::Output>>,
        handling: &'r H,
    }
}

impl<'p, G, H> Attempts<'p, G::Output> for Step<'_, 'p, G, H>
where
    G: Future<Output: Outcome>,
    H: ErasedHandling<G::Output>,
{
    #[inline]
    fn parts(self: Pin<&mut Self>) -> Parts<'_, 'p, G::Output> {
        let this = self.project();
        Parts {
            attempt: match this.attempt.as_pin_mut() {
                Some(attempt) => Some(attempt),
                None => None,
            },
            run: this.run.as_mut(),
            handling: *this.handling,
            caller_makes_next: true,
        }
    }

    /// Drops the failed attempt before the wait; the caller makes the next.
    fn then(self: Pin<&mut Self>) {
        self.project().attempt.set(None);
    }
}

impl<G, H> Future for Step<'_, '_, G, H>
where
    G: Future<Output: Outcome>,
    H: ErasedHandling<G::Output>,
{
    type Output = Option<G::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        drive(self, cx)
    }
}

/// Runs one attempt, `attempt`, of an async call whose function loops in its own body,
/// and the wait after it: the outcome to return, or `None` to make the next attempt.
#[inline]
pub fn step<'r, 'p, R, G, S, O, T, W>(
    run: Pin<&'r mut AsyncRun<'p, R>>,
    attempt: G,
    handling: &'r Handling<R::Err, S, O, T, W, impl TransactionFacts>,
) -> impl Future<Output = Option<R>>
where
    R: Outcome,
    G: Future<Output = R>,
    S: ShowError<R::Err>,
    O: OnOpen<R>,
    T: OnTimeout<R>,
    W: OnWait<R::Err>,
{
    Step {
        attempt: Some(attempt),
        run,
        handling,
    }
}

/// Runs one attempt, `attempt`, of a blocking call, in the call's layer, and sleeps the
/// thread through the wait after it: the outcome to return, or `None` to make the next
/// attempt. A blocking attempt cannot be cancelled: it has no time limit.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn step_blocking<R, S, O, T, W>(
    run: &mut Run<'_, SystemClock, ()>,
    attempt: impl FnOnce() -> R,
    handling: &Handling<R::Err, S, O, T, W, impl TransactionFacts>,
) -> Option<R>
where
    R: Outcome,
    S: ShowError<R::Err>,
    O: OnOpen<R>,
    T: OnTimeout<R>,
    W: OnWait<R::Err>,
{
    let mut run = Pin::new(run);
    // A blocking call's clock starts with it: its attempts never yield, so there is no
    // later moment that would still count their time.
    if run.call().is_none() {
        if let Err(open) = run.as_mut().begin() {
            return Some(handling.circuit_open(open));
        }
    }
    let call = run.call().expect("begun");
    let scope = call.enter(call.frame());
    let outcome = attempt();
    let frame = scope.leave();
    let failure = outcome.failure().map(|error| (error, false));
    match run.as_mut().after_attempt(&frame, failure, handling) {
        Next::Return => Some(outcome),
        Next::Wait(wait) => {
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            if run.resume() { None } else { Some(outcome) }
        }
    }
}
