//! `PostgresError`: tokio-postgres's error, or the runtime's own failures, as one type
//! a `#[retry]` function can return.

use std::error::Error;
use std::fmt;

use tokio_postgres::error::SqlState;

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;

/// The error of a PostgreSQL transaction run with tokio-postgres: the database's, or an
/// attempt cut at its time limit, or a call the circuit breaker refused. Classified by
/// its parts ([`tokio_postgres::Error`]'s class is by its SQLSTATE); `?` converts
/// tokio-postgres's errors into it, and the runtime converts a cut attempt, so it is a
/// `#[retry]` function's error with no code of yours. (tokio-postgres's own error has
/// no public constructor, so it cannot say "cut at the deadline" itself.)
///
/// ```
/// use std::time::Duration;
/// use persevere::postgres::PostgresError;
/// use persevere::{AttemptTimedOut, Class, Classify};
///
/// async fn balance(client: &tokio_postgres::Client, id: i32) -> Result<i64, PostgresError> {
///     let row = client.query_one("SELECT balance FROM accounts WHERE id = $1", &[&id]).await?;
///     Ok(row.get(0))
/// }
///
/// let cut = PostgresError::from(AttemptTimedOut::after(Duration::from_secs(1)));
/// assert_eq!(cut.classify(), Class::Transient);
/// assert_eq!(cut.code(), None);
/// ```
#[derive(Debug)]
pub enum PostgresError {
    /// The database or the connection to it failed.
    Postgres(tokio_postgres::Error),
    /// The attempt ran past its time limit; its statement may still be running on the
    /// server (see [`set_statement_timeout`](super::set_statement_timeout)).
    TimedOut(AttemptTimedOut),
    /// The circuit breaker refused the call.
    CircuitOpen(CircuitOpen),
}

impl PostgresError {
    /// The SQLSTATE the server failed with, if it sent one.
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            PostgresError::Postgres(e) => e.code(),
            _ => None,
        }
    }

    /// tokio-postgres's error, if the database or the connection failed.
    pub fn as_postgres(&self) -> Option<&tokio_postgres::Error> {
        match self {
            PostgresError::Postgres(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for PostgresError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // tokio-postgres's message names only the kind ("db error"): the server's
            // own words, or the I/O failure, follow it.
            PostgresError::Postgres(e) => match e.source() {
                Some(cause) => write!(f, "{e}: {cause}"),
                None => write!(f, "{e}"),
            },
            PostgresError::TimedOut(e) => write!(f, "{e}"),
            PostgresError::CircuitOpen(e) => write!(f, "{e}"),
        }
    }
}

impl Error for PostgresError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PostgresError::Postgres(e) => Some(e),
            PostgresError::TimedOut(e) => Some(e),
            PostgresError::CircuitOpen(e) => Some(e),
        }
    }
}

impl Classify for PostgresError {
    fn classify(&self) -> Class {
        match self {
            PostgresError::Postgres(e) => e.classify(),
            PostgresError::TimedOut(e) => e.classify(),
            PostgresError::CircuitOpen(e) => e.classify(),
        }
    }
}

impl From<tokio_postgres::Error> for PostgresError {
    fn from(e: tokio_postgres::Error) -> Self {
        PostgresError::Postgres(e)
    }
}

impl From<AttemptTimedOut> for PostgresError {
    fn from(e: AttemptTimedOut) -> Self {
        PostgresError::TimedOut(e)
    }
}

impl From<CircuitOpen> for PostgresError {
    fn from(e: CircuitOpen) -> Self {
        PostgresError::CircuitOpen(e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    // Each variant's class, code, message and source.
    #[test]
    fn each_variant() {
        let cut = PostgresError::from(AttemptTimedOut::at_deadline(Duration::from_secs(2)));
        assert_eq!(cut.classify(), Class::Transient);
        assert_eq!(cut.code(), None);
        assert!(cut.as_postgres().is_none());
        assert_eq!(
            cut.to_string(),
            "the attempt was cut at the call's deadline, after 2s"
        );
        assert!(cut.source().unwrap().is::<AttemptTimedOut>());

        let breaker = crate::CircuitBreaker::new().with_consecutive_failures(1);
        let now = Instant::now();
        let permit = breaker.admit(now).unwrap();
        breaker.record(permit, false, now);
        let open = PostgresError::from(breaker.admit(now).unwrap_err());
        assert_eq!(open.classify(), Class::Permanent);
        assert!(open.source().unwrap().is::<CircuitOpen>());
        assert_eq!(open.code(), None);

        let waited = PostgresError::from(tokio_postgres::Error::__private_api_timeout());
        assert_eq!(waited.classify(), Class::Uncertain);
        assert_eq!(waited.code(), None);
        assert!(waited.as_postgres().is_some());
        assert_eq!(waited.to_string(), "timeout waiting for server");
        assert!(waited.source().unwrap().is::<tokio_postgres::Error>());
    }
}
