//! PostgreSQL through tokio-postgres: serialization failures and deadlocks retried as
//! whole transactions, by the SQLSTATE the server sent. Enabled by the `postgres` cargo
//! feature (tokio-postgres 0.7).
//!
//! Retry the transaction, never a statement inside one: a statement that fails inside a
//! transaction aborts it, and running it again fails with `25P02`
//! (`in_failed_sql_transaction`). So `#[retry]` goes on the function that begins and
//! commits, and each attempt runs the whole transaction afresh:
//!
//! ```no_run
//! use persevere::postgres::{PostgresError, set_statement_timeout};
//! use persevere::retry;
//! use tokio_postgres::IsolationLevel;
//!
//! // Not idempotent (running it twice moves the money twice), but a transaction the
//! // server rolled back (40001, 40P01) took no effect: `on = not_applied` retries those,
//! // and connections that were never made, and nothing else.
//! #[retry(on = not_applied, deadline = "5s", base = "2ms", cap = "50ms")]
//! async fn transfer(
//!     client: &mut tokio_postgres::Client,
//!     from: i32,
//!     to: i32,
//!     amount: i64,
//! ) -> Result<(), PostgresError> {
//!     let tx = client
//!         .build_transaction()
//!         .isolation_level(IsolationLevel::Serializable)
//!         .start()
//!         .await?;
//!     set_statement_timeout(&tx).await?; // no statement outlives the attempt
//!     let debit = "UPDATE accounts SET balance = balance - $2 WHERE id = $1";
//!     tx.execute(debit, &[&from, &amount]).await?;
//!     let credit = "UPDATE accounts SET balance = balance + $2 WHERE id = $1";
//!     tx.execute(credit, &[&to, &amount]).await?;
//!     Ok(tx.commit().await?)
//! }
//! ```
//!
//! This holds for a function that runs one transaction and has no effect outside the
//! database: a rolled-back transaction undid everything the attempt did only if the
//! attempt did nothing else.

mod classify;
mod error;

pub use error::PostgresError;

use crate::integrations::transaction::OpenTransaction;
use crate::layer::deadline;

/// A `#[retry]` function cannot take one: retry the function that begins and commits.
#[diagnostic::do_not_recommend]
impl OpenTransaction for tokio_postgres::Transaction<'_> {}

/// Bounds every statement of `transaction` by the time left to the attempt (its
/// `attempt_timeout` or the call's deadline, whichever is sooner): `SET LOCAL
/// statement_timeout` to that many milliseconds, rounded up. Outside a `#[retry]` call
/// or [`deadline::scope`], it does nothing.
///
/// An attempt cut at its limit is dropped on the client, but the statement it was
/// waiting on goes on running on the server, holding its locks, and the next attempt on
/// the same connection would queue behind it. With the timeout, the server cancels the
/// statement (`57014`, transient like the cut it races with) by the time the attempt is
/// cut, and the dropped transaction's rollback follows at once. Call it first in each
/// attempt's transaction; `LOCAL` ends with the transaction.
///
/// (Cancelling with tokio-postgres's `CancelToken` when the attempt is cut is racy: a
/// cancel request cancels whatever the connection runs when it arrives, which may be
/// the next attempt's first statement.)
pub async fn set_statement_timeout(
    transaction: &tokio_postgres::Transaction<'_>,
) -> Result<(), tokio_postgres::Error> {
    match deadline::remaining() {
        Some(left) => {
            let sql = format!("SET LOCAL statement_timeout = {}", timeout_ms(left));
            transaction.batch_execute(&sql).await
        }
        None => Ok(()),
    }
}

/// `left` in whole milliseconds, rounded up, and at least 1: PostgreSQL reads 0 as no
/// timeout at all.
fn timeout_ms(left: std::time::Duration) -> u128 {
    left.as_nanos().div_ceil(1_000_000).max(1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // Rounded up to the millisecond, never 0 (no limit), never less than what is left.
    #[test]
    fn the_timeout_in_milliseconds() {
        assert_eq!(timeout_ms(Duration::ZERO), 1);
        assert_eq!(timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1_500)), 2);
        assert_eq!(timeout_ms(Duration::from_millis(250)), 250);
        assert_eq!(timeout_ms(Duration::from_secs(30)), 30_000);
    }
}
