//! The call and its driver: one call's state ([`call`]), what the function brings besides
//! its policy ([`handling`]), the one loop that runs every async call ([`run`]), one
//! attempt at a time for functions that loop in their own body ([`step`]), closures
//! ([`retry_fn`]), and the events calls emit ([`telemetry`]).

pub(crate) mod call;
pub(crate) mod handling;
pub(crate) mod retry_fn;
pub(crate) mod run;
pub(crate) mod step;
pub mod telemetry;
