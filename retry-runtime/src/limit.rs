//! An attempt's time limit, kept beside the attempt: a timer for a function with an
//! attempt timeout, nothing for one without.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

/// Where an attempt's time limit is kept.
pub trait AttemptLimit {
    /// No limit set yet.
    fn unset() -> Self
    where
        Self: Sized;
    /// Whether the limit is still to be armed: only before the attempt is first polled with a call state.
    fn needs_arming(&self) -> bool;
    /// Cuts the attempt after `limit`; `None` for no limit.
    fn arm(self: Pin<&mut Self>, limit: Option<Duration>);
    /// The limit, once it has passed.
    fn poll_passed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration>;
}

/// The limit of an attempt that has none: nothing to keep.
#[derive(Debug)]
pub struct NoLimit;

impl AttemptLimit for NoLimit {
    #[inline]
    fn unset() -> Self {
        NoLimit
    }

    #[inline]
    fn needs_arming(&self) -> bool {
        false
    }

    fn arm(self: Pin<&mut Self>, _: Option<Duration>) {}

    #[inline]
    fn poll_passed(self: Pin<&mut Self>, _: &mut Context<'_>) -> Option<Duration> {
        None
    }
}

pin_project_lite::pin_project! {
    /// The limit of an attempt, on tokio's timer: no timer until it is armed, and none
    /// for an attempt without a limit. (A timer beside a flag, rather than an enum of
    /// the three states, so that dropping an attempt that never waited tests one word.)
    pub struct Timer {
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        limit: Duration,
        armed: bool,
    }
}

impl AttemptLimit for Timer {
    fn unset() -> Self {
        Timer {
            sleep: None,
            limit: Duration::ZERO,
            armed: false,
        }
    }

    fn needs_arming(&self) -> bool {
        !self.armed
    }

    fn arm(self: Pin<&mut Self>, limit: Option<Duration>) {
        let mut this = self.project();
        *this.armed = true;
        if let Some(limit) = limit {
            *this.limit = limit;
            this.sleep.set(Some(tokio::time::sleep(limit)));
        }
    }

    fn poll_passed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        let this = self.project();
        let sleep = this.sleep.as_pin_mut()?;
        sleep.poll(cx).is_ready().then_some(*this.limit)
    }
}
