//! The workspace's heavy tests, examples and benchmarks live in this package's
//! `tests/`, `examples/` and `benches/`; the library holds only the README's code
//! blocks, compiled and run as doc tests here, where reqwest and the other crates they
//! use are at hand. (The `persevere` crate shows the README as its front page on
//! docs.rs without testing it, so that its own tests stay light.)

/// Every code block of the README, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
