//! The budget of one admission layer: tokens earned by answers served and by time, spent
//! by retries, and the quiet time once the service is over capacity.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use crate::time::clock::{Clock, TokioClock};

use super::protocol::Answer;

/// What a layer's budget is set to.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    pub(super) cap_milli: u32,
    pub(super) per_answer_milli: u32,
    pub(super) per_second_milli: u32,
    pub(super) quiet_nanos: u64,
    pub(super) quiet_after: u32,
}

/// The budget of one layer: tokens in thousandths, earned by answers and by time.
#[derive(Debug)]
pub(super) struct Budget {
    pub(super) origin: Instant,
    pub(super) settings: Settings,
    pub(super) tokens_milli: AtomicU32,
    // The answers over capacity in the current second: the second since `origin` in
    // the high half, the count in the low.
    pub(super) overloads: AtomicU64,
    // Nanoseconds from `origin`: until when no retry passes, and when the budget last
    // earned by time.
    pub(super) quiet_until: AtomicU64,
    pub(super) earned_at: AtomicU64,
    pub(super) first_attempts: AtomicU64,
    pub(super) admitted: AtomicU64,
    pub(super) shed: AtomicU64,
}

impl Budget {
    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn earn(&self, milli: u32) {
        let cap = self.settings.cap_milli;
        let _ = self
            .tokens_milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                // Never above the cap: a full budget is left as it is, unwritten.
                (tokens != cap).then(|| tokens.saturating_add(milli).min(cap))
            });
    }

    /// Whether a retry may pass now, spending a token if so.
    pub(super) fn admit(&self, now: Instant) -> bool {
        let now = self.nanos(now);
        if now < self.quiet_until.load(Ordering::Relaxed) {
            return false;
        }
        // What time has earned since it last earned, whole thousandths of a token (none
        // for a budget that earns nothing by time).
        let earned_at = self.earned_at.load(Ordering::Relaxed);
        let per_milli = match self.settings.per_second_milli {
            0 => u64::MAX,
            per_second => 1_000_000_000 / u64::from(per_second),
        };
        let milli = now.saturating_sub(earned_at) / per_milli;
        if milli != 0
            && self
                .earned_at
                .compare_exchange(
                    earned_at,
                    earned_at + milli * per_milli,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.earn(u32::try_from(milli).unwrap_or(u32::MAX));
        }
        self.tokens_milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                tokens.checked_sub(1000)
            })
            .is_ok()
    }

    /// The inner service answered as `answer` says.
    pub(super) fn answered(&self, answer: Answer) {
        match answer {
            Answer::Served => self.earn(self.settings.per_answer_milli),
            Answer::OverCapacity => self.overloaded(),
            Answer::Failed => {}
        }
    }

    /// An answer over capacity: counted in its second, and the quiet time begins once
    /// the second has `quiet_after` of them. One 503 is a blip, whose retry, after the
    /// server's own wait, should pass; many in a second are an overload.
    fn overloaded(&self) {
        /// The count's half of `overloads`.
        const COUNT: u64 = 0xffff_ffff;
        let now = self.nanos(TokioClock::now());
        let second = now / 1_000_000_000;
        // `packed` with this answer counted: in the same second, one more; else the first.
        let bumped = |packed: u64| {
            let count = if packed >> 32 == second {
                packed & COUNT
            } else {
                0
            };
            (second << 32) + (count + 1).min(COUNT)
        };
        let previous = self
            .overloads
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                Some(bumped(packed))
            })
            .unwrap_or_else(|packed| packed);
        let counted = bumped(previous) & COUNT;
        if counted >= u64::from(self.settings.quiet_after) {
            let until = now.saturating_add(self.settings.quiet_nanos);
            self.quiet_until.fetch_max(until, Ordering::Relaxed);
        }
    }
}
