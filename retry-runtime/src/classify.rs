//! What a failure means, and why a call stopped: the classes a retry is decided by
//! ([`Class`](class::Class), [`Classify`](class::Classify)), the reasons a call gives up
//! ([`GiveUp`](give_up::GiveUp)), and the failure of an attempt cut at its time limit
//! ([`AttemptTimedOut`](timed_out::AttemptTimedOut)).

pub(crate) mod class;
pub(crate) mod give_up;
pub(crate) mod timed_out;
