//! The workspace's heavy tests, examples and benchmarks live in this package's
//! `tests/`, `examples/` and `benches/`; the library holds only the code blocks of the
//! README and of the guides (`src/guide/*.md`), compiled and run as doc tests here,
//! where reqwest and the other crates they use are at hand. (The `persevere` crate shows
//! the README as its front page and the guides as its `guide` module on docs.rs without
//! testing them, so that its own tests stay light.)

/// Every code block of the README, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

// Every code block of each guide, one struct per guide.

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/choosing-a-schedule.md")]
pub struct ChoosingAScheduleDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/deadlines.md")]
pub struct DeadlinesDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/what-is-retried.md")]
pub struct WhatIsRetriedDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/payments.md")]
pub struct PaymentsDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/server-pushback.md")]
pub struct ServerPushbackDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/where-retries-live.md")]
pub struct WhereRetriesLiveDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/fleet.md")]
pub struct FleetDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/server.md")]
pub struct ServerDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/hedging.md")]
pub struct HedgingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/seeing-it.md")]
pub struct SeeingItDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/testing.md")]
pub struct TestingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/integrations.md")]
pub struct IntegrationsDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/grpc.md")]
pub struct GrpcDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../src/guide/postgres.md")]
pub struct PostgresDoctests;
