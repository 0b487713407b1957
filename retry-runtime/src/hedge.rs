//! Hedging (`#[retry(hedge = ...)]`): the latency sketch a percentile is read from
//! ([`latency`]), a function's hedging ([`spec`]), what a copy costs
//! ([`accounting`]), a hedged attempt and its copies ([`copies`]), and the future of a
//! hedged function ([`hedged`]).

pub(crate) mod accounting;
pub(crate) mod copies;
pub(crate) mod hedged;
pub(crate) mod latency;
pub(crate) mod spec;
