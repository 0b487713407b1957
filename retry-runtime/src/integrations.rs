//! The optional integrations, each behind its cargo feature, and the classification of
//! type-erased errors by the errors in their chain (`error_chain`), which names them
//! all. `persevere` re-exports the public ones from here, so that its modules `http`,
//! `reqwest`, `rusqlite`, `tonic`, `tower`, `postgres` and `sqlx` follow the runtime's
//! features.
//! `sqlstate` reads PostgreSQL's codes for both of its drivers.

pub(crate) mod error_chain;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "rusqlite")]
pub mod rusqlite;
#[cfg(any(feature = "postgres", feature = "sqlx"))]
mod sqlstate;
#[cfg(feature = "sqlx")]
pub mod sqlx;
#[cfg(feature = "tonic")]
pub mod tonic;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "transactions")]
pub(crate) mod transaction;
// At the root of `persevere`, which re-exports this module's items as the runtime was
// built (`persevere::OpenTransaction`).
#[cfg(feature = "transactions")]
pub use transaction::{OpenTransaction, TransactionAware};
