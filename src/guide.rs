//! Guides, one topic each at length: how to choose a schedule, retry a payment, read a
//! server's pushback, protect a fleet, hedge, watch and test retried code, each
//! integration in full, gRPC with tonic, and PostgreSQL transactions. The crate page (the
//! README) is the short version.
//!
//! Each module is one markdown file of `src/guide/`, shown here; their code blocks are
//! compiled and run as doc tests of the workspace's `integration` package, where the
//! crates they use are at hand.

#[cfg_attr(not(doctest), doc = include_str!("guide/choosing-a-schedule.md"))]
pub mod choosing_a_schedule {}

#[cfg_attr(not(doctest), doc = include_str!("guide/deadlines.md"))]
pub mod deadlines {}

#[cfg_attr(not(doctest), doc = include_str!("guide/what-is-retried.md"))]
pub mod what_is_retried {}

#[cfg_attr(not(doctest), doc = include_str!("guide/payments.md"))]
pub mod payments {}

#[cfg_attr(not(doctest), doc = include_str!("guide/server-pushback.md"))]
pub mod server_pushback {}

#[cfg_attr(not(doctest), doc = include_str!("guide/where-retries-live.md"))]
pub mod where_retries_live {}

#[cfg_attr(not(doctest), doc = include_str!("guide/fleet.md"))]
pub mod fleet {}

#[cfg_attr(not(doctest), doc = include_str!("guide/server.md"))]
pub mod server {}

#[cfg_attr(not(doctest), doc = include_str!("guide/hedging.md"))]
pub mod hedging {}

#[cfg_attr(not(doctest), doc = include_str!("guide/seeing-it.md"))]
pub mod seeing_it {}

#[cfg_attr(not(doctest), doc = include_str!("guide/testing.md"))]
pub mod testing {}

#[cfg_attr(not(doctest), doc = include_str!("guide/integrations.md"))]
pub mod integrations {}

#[cfg_attr(not(doctest), doc = include_str!("guide/grpc.md"))]
pub mod grpc {}

#[cfg_attr(not(doctest), doc = include_str!("guide/postgres.md"))]
pub mod postgres {}
