//! The call and its driver: one call's state ([`call`]), what the function brings besides
//! its policy ([`handling`]), the one loop that runs every async call ([`run`]), the
//! future of an async call ([`retrying`]), one attempt at a time for functions that loop
//! in their own body ([`step`]), closures ([`retry_fn`]), and the events calls emit
//! ([`telemetry`]).
//!
//! Inlining: the functions every call goes through (the future's `poll`, `drive`, the
//! frame's entry and exit, the first-try count, and the call's state for the blocking
//! and retried paths) are `inline(always)` in an optimised build and left to the
//! compiler in an unoptimised one, where one copy per return type keeps a retried
//! function cheap to compile. Each pays for itself in the overhead bench (BENCHMARKS.md,
//! "Inlining").

pub(crate) mod call;
pub(crate) mod handling;
pub(crate) mod retry_fn;
pub(crate) mod retrying;
pub(crate) mod run;
pub(crate) mod step;
pub mod telemetry;
