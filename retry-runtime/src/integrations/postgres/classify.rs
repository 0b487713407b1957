//! Which tokio-postgres failures a retry can fix: by the SQLSTATE the server sent, or,
//! where it sent none, by what failed beneath the error.

use crate::classify::class::{Class, Classify};
use crate::integrations::sqlstate;

/// tokio-postgres's message for a connection that could not be made. Its error keeps
/// its kind private and has no constructor: the message is the one public trace of the
/// kind, unchanged through 0.7.
const CONNECTING: &str = "error connecting to server";
/// Its message for a connection that failed while in use.
const COMMUNICATING: &str = "error communicating with the server";
/// Its message for a reply that did not come in time (the blocking `postgres` crate's).
const WAITING: &str = "timeout waiting for server";

/// By the SQLSTATE the server sent, as PostgreSQL's manual reads them:
///
/// | SQLSTATE | class |
/// | --- | --- |
/// | `40001` `serialization_failure`, `40P01` `deadlock_detected` | not applied: the server rolled the transaction back |
/// | `57P03` `cannot_connect_now`, `53300` `too_many_connections`, `08001`, `08004` | unsent: the server refused the connection |
/// | `40003` `statement_completion_unknown`, `57P01` `admin_shutdown`, `57P02` `crash_shutdown`, other `08` codes | uncertain: a COMMIT may have taken effect |
/// | `57014` `query_canceled` | transient, as an attempt cut at its limit is |
/// | any other code: constraint violations (`23505`, `23P01`...), syntax, permissions | permanent |
///
/// Where the server sent none, by what failed: a connection that could not be made
/// (refused, no such socket, DNS, connect timeout) is unsent; one lost while in use
/// (an I/O failure, or the connection closed: [`is_closed`]) is uncertain, since a
/// COMMIT sent on it may have taken effect; the rest (a parameter that does not
/// serialize, a column that does not decode, a bad configuration) is permanent.
///
/// [`is_closed`]: tokio_postgres::Error::is_closed
impl Classify for tokio_postgres::Error {
    fn classify(&self) -> Class {
        if let Some(code) = self.code() {
            return sqlstate::class(code.code());
        }
        if self.is_closed() {
            return Class::Uncertain;
        }
        match self.to_string().as_str() {
            CONNECTING => Class::Unsent,
            COMMUNICATING | WAITING => Class::Uncertain,
            _ => Class::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The one error tokio-postgres lets others make: a reply that did not come in time.
    // (The other structural cases need a server: `integration/tests/postgres.rs`.)
    #[test]
    fn a_reply_that_did_not_come_is_uncertain() {
        let timeout = tokio_postgres::Error::__private_api_timeout();
        assert_eq!(timeout.to_string(), WAITING);
        assert_eq!(timeout.classify(), Class::Uncertain);
    }
}
