//! What a copy costs and how its failure counts: a copy is paid for from the retry
//! budget and needs the breaker closed; a failure beside another copy in flight is told
//! to the breaker at once.

use crate::classify::class::Class;
use crate::driver::telemetry;
use crate::fleet::batch;
use crate::fleet::breaker::{BreakerState, Permit};
use crate::schedule::policy::Policy;
use crate::time::clock::{Clock, CompactInstant, TokioClock};

/// Whether a failure of class `class` ends the attempt, with `others` of its futures
/// still in flight. The last one's does; so does a failure no retry can fix (a permanent
/// one), the dependency's answer, which another copy would only repeat. A failure that
/// does not end the attempt is told to the breaker now: a copy is sent only while the
/// breaker is closed, whose permits are all alike, so the attempt has one for each copy
/// it sent and tells at most that many failures (the last outcome is the driver's to
/// tell).
pub(crate) fn failure_ends(policy: &Policy, class: Class, others: usize) -> bool {
    if others == 0 || !class.is_retryable() {
        return true;
    }
    if let Some(breaker) = policy.breaker() {
        let now = TokioClock::now();
        if let Some(moved) = breaker.record(Permit::CLOSED, false, now) {
            telemetry::breaker_moved(policy, moved);
        }
    }
    false
}

/// Whether a copy may be sent now: the function is safe to run twice at once (the
/// macros refuse `hedge` on one that is not; this holds for a policy made by hand), the
/// breaker, if any, is closed (a copy is never a half-open breaker's probe, and asking
/// an open breaker whose time is up would move it to half-open), and the budget pays
/// for it.
pub(crate) fn admit_copy(policy: &Policy) -> bool {
    if policy.repeat().only_without_effect() {
        return false;
    }
    let now = TokioClock::now();
    if policy
        .breaker()
        .is_some_and(|breaker| breaker.state(now) != BreakerState::Closed)
    {
        return false;
    }
    // The budget learns of this thread's pending requests before it is asked.
    if let Some(slot) = policy.stats().and_then(|stats| stats.slot()) {
        batch::flush(slot, CompactInstant::new(now));
    }
    let paid = policy.budget().withdraw_hedge(now);
    if !paid {
        if let Some(stats) = policy.stats() {
            stats.record_hedge_refused();
        }
    }
    paid
}
