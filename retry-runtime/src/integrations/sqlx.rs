//! sqlx with PostgreSQL: `sqlx::Error` classified by the SQLSTATE the server sent, or by
//! what failed where it sent none, and convertible from an attempt cut at its limit, so
//! that it is a `#[retry]` function's error with no code of yours. Enabled by the `sqlx`
//! cargo feature (sqlx 0.9, which needs Rust 1.94).
//!
//! ```no_run
//! use persevere::retry;
//! use sqlx::PgPool;
//!
//! // Not idempotent, but a transaction the server rolled back (40001, 40P01) took no
//! // effect: `on = not_applied` retries those, and connections never made.
//! #[retry(on = not_applied, deadline = "5s", base = "2ms", cap = "64ms")]
//! async fn transfer(pool: &PgPool, from: i32, to: i32, amount: i64) -> Result<(), sqlx::Error> {
//!     let mut tx = pool.begin().await?;
//!     sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").execute(&mut *tx).await?;
//!     sqlx::query("UPDATE accounts SET balance = balance - $2 WHERE id = $1")
//!         .bind(from)
//!         .bind(amount)
//!         .execute(&mut *tx)
//!         .await?;
//!     sqlx::query("UPDATE accounts SET balance = balance + $2 WHERE id = $1")
//!         .bind(to)
//!         .bind(amount)
//!         .execute(&mut *tx)
//!         .await?;
//!     tx.commit().await
//! }
//! ```

use std::io;

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;
use crate::integrations::sqlstate;
use crate::integrations::transaction::{OpenTransaction, TransactionAware};

/// sqlx's errors:
///
/// - `Database`: by its SQLSTATE (`as_database_error().code()`), as for tokio-postgres:
///   `40001` and `40P01` not applied, `57P03` and `53300` unsent, `40003`, `57P01` and
///   `57P02` uncertain, `57014` transient, the rest permanent;
/// - `Io`: a connection that could not be made (refused, no such socket) is unsent; an
///   attempt cut at its limit (which converts into `Io`, below) transient; any other
///   I/O failure lost a connection in use, perhaps during `COMMIT`: uncertain;
/// - `PoolTimedOut`: no connection came free in time, so nothing was sent: unsent;
/// - `WorkerCrashed`: the connection's worker died, perhaps mid-statement: uncertain;
/// - `PoolClosed` (the application is shutting down), `Tls`, `Protocol`, decoding,
///   configuration, `RowNotFound` and the rest: permanent.
impl Classify for sqlx::Error {
    fn classify(&self) -> Class {
        match self {
            sqlx::Error::Database(e) => e
                .code()
                .map_or(Class::Permanent, |code| sqlstate::class(&code)),
            sqlx::Error::Io(e) => io_class(e),
            sqlx::Error::PoolTimedOut => Class::Unsent,
            sqlx::Error::WorkerCrashed => Class::Uncertain,
            _ => Class::Permanent,
        }
    }
}

fn io_class(error: &io::Error) -> Class {
    if let Some(inner) = error.get_ref() {
        if let Some(cut) = inner.downcast_ref::<AttemptTimedOut>() {
            return cut.classify();
        }
        if let Some(open) = inner.downcast_ref::<CircuitOpen>() {
            return open.classify();
        }
    }
    match error.kind() {
        io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound => Class::Unsent,
        _ => Class::Uncertain,
    }
}

/// An attempt cut at its limit is an `Io` error of kind `TimedOut` that keeps the cut
/// inside (`io::Error::get_ref`), classified as the cut is: sqlx's error has no variant
/// for a time limit of the caller's, and its `Io` is what a cut connection would show.
impl From<AttemptTimedOut> for sqlx::Error {
    fn from(cut: AttemptTimedOut) -> Self {
        sqlx::Error::Io(io::Error::from(cut))
    }
}

/// A call the circuit breaker refused is an `Io` error that keeps the refusal inside,
/// and its class (permanent).
impl From<CircuitOpen> for sqlx::Error {
    fn from(open: CircuitOpen) -> Self {
        sqlx::Error::Io(io::Error::other(open))
    }
}

/// A `#[retry]` function cannot take one: retry the function that begins and commits.
#[diagnostic::do_not_recommend]
impl<DB: sqlx::Database> OpenTransaction for sqlx::Transaction<'_, DB> {}

/// A transaction begun through sqlx (`begin`, on the connection or its pool) and not yet
/// committed or rolled back: what `f(&mut *tx)` hands on. A `BEGIN` statement of the
/// caller's is not counted (sqlx keeps the server's own answer private).
impl TransactionAware for sqlx::PgConnection {
    #[inline]
    fn is_inside_transaction(&self) -> bool {
        sqlx::Connection::is_in_transaction(self)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    // What can be made without a server: I/O failures, a cut, the breaker's refusal, the
    // pool's own. (Database errors need one: `integration/tests/postgres.rs`.)
    #[test]
    fn errors_without_a_server() {
        let io = |kind| sqlx::Error::Io(io::Error::from(kind));
        assert_eq!(
            io(io::ErrorKind::ConnectionRefused).classify(),
            Class::Unsent
        );
        assert_eq!(io(io::ErrorKind::NotFound).classify(), Class::Unsent);
        assert_eq!(
            io(io::ErrorKind::ConnectionReset).classify(),
            Class::Uncertain
        );
        assert_eq!(
            io(io::ErrorKind::UnexpectedEof).classify(),
            Class::Uncertain
        );
        assert_eq!(io(io::ErrorKind::TimedOut).classify(), Class::Uncertain);
        assert_eq!(sqlx::Error::PoolTimedOut.classify(), Class::Unsent);
        assert_eq!(sqlx::Error::PoolClosed.classify(), Class::Permanent);
        assert_eq!(sqlx::Error::WorkerCrashed.classify(), Class::Uncertain);
        assert_eq!(sqlx::Error::RowNotFound.classify(), Class::Permanent);
        let protocol = sqlx::Error::Protocol("unexpected message".into());
        assert_eq!(protocol.classify(), Class::Permanent);

        let cut = sqlx::Error::from(AttemptTimedOut::at_deadline(Duration::from_secs(1)));
        assert_eq!(cut.classify(), Class::Transient);
        let sqlx::Error::Io(inner) = &cut else {
            panic!("{cut:?}")
        };
        assert_eq!(inner.kind(), io::ErrorKind::TimedOut);
        assert!(inner.get_ref().unwrap().is::<AttemptTimedOut>());

        let breaker = crate::CircuitBreaker::new().with_consecutive_failures(1);
        let now = Instant::now();
        let permit = breaker.admit(now).unwrap();
        breaker.record(permit, false, now);
        let open = sqlx::Error::from(breaker.admit(now).unwrap_err());
        assert_eq!(open.classify(), Class::Permanent);
    }
}
