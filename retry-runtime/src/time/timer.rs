//! The one timer of an async retried call: while an attempt runs it cuts the attempt at
//! its time limit; during the wait after a failure it ends the wait, and keeps the
//! failure to return if no attempt follows.
//!
//! One tokio `Sleep` serves both, since an attempt and a wait never run at once, so the
//! timer costs a retried future one `Sleep`. It is generic over the call's outcome only,
//! not over its function: its code is compiled once per return type.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

// What the timer is doing, in the top two bits of its `state`; below them, in `LIMIT`,
// the attempt's time limit in nanoseconds (up to 146 years, saturating). One word rather
// than a phase beside a `Duration`: the timer is in every retried future.
/// An attempt runs whose limit is not set yet: it is set when the attempt first waits on
/// something.
const UNARMED: u64 = 0;
/// An attempt runs, cut at the sleep's end.
const LIMIT: u64 = 1 << 62;
/// An attempt runs without a time limit.
const NO_LIMIT: u64 = 2 << 62;
/// The call waits before its next attempt, until the sleep's end; the bit `MADE` says
/// the next attempt is made already.
const WAITING: u64 = 3 << 62;
const MADE: u64 = 1;
const PHASE: u64 = 3 << 62;
/// Thirty years: the end of a sleep whose limit no instant holds.
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

pin_project_lite::pin_project! {
    /// The timer of one async call, and the failure kept through a wait.
    pub struct Timer<R> {
        #[pin]
        sleep: Option<Sleep>,
        state: u64,
        outcome: Option<R>,
    }
}

impl<R> Default for Timer<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> Timer<R> {
    /// A timer for a first attempt, not armed.
    pub(crate) const fn new() -> Self {
        Self {
            sleep: None,
            state: UNARMED,
            outcome: None,
        }
    }

    /// Whether the call is waiting before its next attempt.
    #[inline]
    pub(crate) fn is_waiting(&self) -> bool {
        self.state & PHASE == WAITING
    }

    /// Whether the attempt in flight still needs its limit set.
    #[inline]
    pub(crate) fn needs_arming(&self) -> bool {
        self.state & PHASE == UNARMED
    }

    /// Sets the sleep to end `after` from now, reusing the one there is.
    fn start(mut sleep: Pin<&mut Option<Sleep>>, after: Duration) {
        let end = Instant::now() + after;
        match sleep.as_mut().as_pin_mut() {
            Some(sleep) => sleep.reset(end),
            None => sleep.set(Some(tokio::time::sleep_until(end))),
        }
    }

    /// Cuts the attempt in flight after `limit` from now; `None` for no limit.
    pub(crate) fn arm(self: Pin<&mut Self>, limit: Option<Duration>) {
        match limit {
            // A limit past what an instant holds is cut at thirty years, as tokio cuts
            // its own far sleeps; its length is kept as written.
            Some(limit) => {
                let end = Instant::now()
                    .checked_add(limit)
                    .unwrap_or_else(|| Instant::now() + FAR);
                self.arm_until(end, limit)
            }
            None => *self.project().state = NO_LIMIT,
        }
    }

    /// Cuts the attempt in flight at `end`, its time limit being `limit`.
    pub(crate) fn arm_until(self: Pin<&mut Self>, end: Instant, limit: Duration) {
        let mut this = self.project();
        let nanos = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        // The limit fits below the phase bits: the sum is their union.
        *this.state = LIMIT + nanos.min(!PHASE);
        match this.sleep.as_mut().as_pin_mut() {
            Some(sleep) => sleep.reset(end),
            None => this.sleep.set(Some(tokio::time::sleep_until(end))),
        }
    }

    /// Whether an attempt runs with its limit set.
    pub(crate) fn is_limited(&self) -> bool {
        self.state & PHASE == LIMIT
    }

    /// The attempt's limit, once it has passed.
    pub(crate) fn poll_limit(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        let this = self.project();
        if *this.state & PHASE != LIMIT {
            return None;
        }
        let sleep = this.sleep.as_pin_mut()?;
        let limit = Duration::from_nanos(*this.state & !PHASE);
        sleep.poll(cx).is_ready().then_some(limit)
    }

    /// Waits `wait` before the next attempt, keeping `outcome`, the failure; `made` if
    /// the next attempt is made already.
    pub(crate) fn wait(self: Pin<&mut Self>, wait: Duration, outcome: R, made: bool) {
        let this = self.project();
        *this.state = WAITING | u64::from(made);
        *this.outcome = Some(outcome);
        Self::start(this.sleep, wait);
    }

    /// Ready when the wait is over.
    pub(crate) fn poll_wait(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.project().sleep.as_pin_mut() {
            Some(sleep) => sleep.poll(cx),
            None => Poll::Ready(()),
        }
    }

    /// The failure kept through the wait, for a call that makes no next attempt.
    pub(crate) fn take_outcome(self: Pin<&mut Self>) -> Option<R> {
        self.project().outcome.take()
    }

    /// Ready for the next attempt: no limit set, no failure kept. The sleep stays, to be
    /// reset by the next limit or wait rather than made again. Whether the next attempt
    /// was made already, before the wait.
    pub(crate) fn next_attempt(self: Pin<&mut Self>) -> bool {
        let this = self.project();
        let made = *this.state == (WAITING | MADE);
        *this.state = UNARMED;
        *this.outcome = None;
        made
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::time::Duration;

    use super::Timer;

    // The phase and the limit share one word: a limit beyond what the word holds
    // saturates below the phase bits, and the timer stays in its phase.
    #[tokio::test(start_paused = true)]
    async fn a_limit_of_any_size_keeps_the_phase() {
        let mut timer = pin!(Timer::<()>::new());
        assert!(!timer.is_limited());
        assert!(timer.needs_arming());
        for limit in [
            Duration::from_millis(5),
            Duration::from_secs(1 << 40),
            Duration::MAX,
        ] {
            timer.as_mut().arm(Some(limit));
            assert!(timer.is_limited(), "{limit:?}");
            assert!(!timer.is_waiting(), "{limit:?}");
            assert!(!timer.needs_arming(), "{limit:?}");
        }
        // Duration::MAX, armed last, ends the sleep at thirty years.
        let passed = |timer: std::pin::Pin<&mut Timer<()>>| {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            timer.poll_limit(&mut cx)
        };
        let year = Duration::from_secs(365 * 24 * 3600);
        tokio::time::advance(29 * year).await;
        assert_eq!(passed(timer.as_mut()), None);
        tokio::time::advance(2 * year).await;
        // Its length saturates at what the word holds, 146 years.
        assert_eq!(
            passed(timer.as_mut()),
            Some(Duration::from_nanos((1 << 62) - 1))
        );
        timer.as_mut().arm(None);
        assert!(!timer.is_limited());
        timer.as_mut().wait(Duration::from_millis(1), (), false);
        assert!(!timer.is_limited());
        assert!(timer.is_waiting());
    }

    // The limit passes at its end, and says how long it was.
    #[tokio::test(start_paused = true)]
    async fn a_limit_passes_at_its_end() {
        let mut timer = pin!(Timer::<()>::new());
        let end = tokio::time::Instant::now() + Duration::from_millis(30);
        timer.as_mut().arm_until(end, Duration::from_millis(50));
        let limit = std::future::poll_fn(|cx| match timer.as_mut().poll_limit(cx) {
            Some(limit) => std::task::Poll::Ready(limit),
            None => std::task::Poll::Pending,
        })
        .await;
        assert_eq!(limit, Duration::from_millis(50));
        assert_eq!(tokio::time::Instant::now(), end);
    }
}
