//! Open database transactions, which a `#[retry]` function must not take: a statement
//! that fails inside a transaction aborts it, so retrying that statement (or anything
//! else inside the same transaction) fails again; PostgreSQL answers `25P02`, "current
//! transaction is aborted". The transaction is retried whole, by the function that
//! begins and commits it.

/// A handle on an open database transaction. `#[retry]` on a function that takes one
/// (by value or by reference) is a compile error at that parameter, saying to put
/// `#[retry]` on the function that begins and commits the transaction instead.
///
/// The check is made with the cargo feature `transactions`, which the database features
/// (`rusqlite`, `postgres`, `sqlx`) turn on: a crate without them has no transaction of
/// persevere's to catch, and does not pay the check's compile time.
///
/// The check is by type, not by name: a payment or ledger type of yours named
/// `Transaction` is not one. persevere implements this for the transactions of the
/// database crates it integrates with (`rusqlite::Transaction`, and with their features
/// tokio-postgres's and sqlx's); implement it for a transaction type of your own (a
/// wrapper around a connection that has begun one) to have it checked the same way.
///
/// A body that rolls back to a savepoint of its own before each attempt may retry
/// inside the transaction (CockroachDB's retry protocol): mark the parameter
/// `#[savepoint]` to say so.
///
/// ```compile_fail
/// use persevere::{idempotent, retry, OpenTransaction};
///
/// struct Tx;
/// impl OpenTransaction for Tx {}
///
/// #[retry]
/// #[idempotent]
/// fn transfer(tx: &mut Tx) -> std::io::Result<()> { // error: an open transaction
///     let _ = tx;
///     Ok(())
/// }
/// ```
pub trait OpenTransaction {}

impl<T: OpenTransaction + ?Sized> OpenTransaction for &T {}
impl<T: OpenTransaction + ?Sized> OpenTransaction for &mut T {}

#[cfg(feature = "rusqlite")]
impl OpenTransaction for rusqlite::Transaction<'_> {}
