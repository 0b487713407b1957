//! Time: where "now" comes from, instants small enough for every retried future
//! ([`clock`]), and the one timer of an async call ([`timer`]).

pub(crate) mod clock;
pub(crate) mod timer;
