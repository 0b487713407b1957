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
    /// The limit of an attempt, on tokio's timer.
    #[project = TimerProj]
    pub enum Timer {
        /// Not set yet.
        Unset,
        /// No limit: the policy sets none.
        Off,
        /// Set: the attempt is cut when `sleep` fires.
        Set {
            #[pin]
            sleep: tokio::time::Sleep,
            limit: Duration,
        },
    }
}

impl AttemptLimit for Timer {
    fn unset() -> Self {
        Timer::Unset
    }

    fn needs_arming(&self) -> bool {
        matches!(self, Timer::Unset)
    }

    fn arm(mut self: Pin<&mut Self>, limit: Option<Duration>) {
        Pin::set(
            &mut self,
            match limit {
                Some(limit) => Timer::Set {
                    sleep: tokio::time::sleep(limit),
                    limit,
                },
                None => Timer::Off,
            },
        );
    }

    fn poll_passed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<Duration> {
        match self.project() {
            TimerProj::Set { sleep, limit } => sleep.poll(cx).is_ready().then_some(*limit),
            _ => None,
        }
    }
}
