//! The classification of error chains: each known type in a box or an `anyhow::Error`,
//! and the proofs of "took no effect" only through layers persevere sees.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// An error persevere does not know, wrapping one it may.
#[derive(Debug)]
struct Context(Option<Box<dyn Error + Send + Sync>>);

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("while loading")
    }
}

impl Error for Context {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

fn boxed(e: impl Error + Send + Sync + 'static) -> Box<dyn Error + Send + Sync> {
    Box::new(e)
}

fn io(kind: io::ErrorKind) -> io::Error {
    io::Error::from(kind)
}

#[test]
fn a_known_error_in_a_box_keeps_its_class() {
    assert_eq!(
        boxed(io(io::ErrorKind::ConnectionRefused)).classify(),
        Class::Unsent
    );
    assert_eq!(
        boxed(io(io::ErrorKind::TimedOut)).classify(),
        Class::Transient
    );
    assert_eq!(
        boxed(io(io::ErrorKind::NotFound)).classify(),
        Class::Permanent
    );
    let timed_out = AttemptTimedOut::after(Duration::from_secs(1));
    assert_eq!(boxed(timed_out).classify(), Class::Transient);
}

#[test]
fn the_chain_is_walked_to_the_first_known_error() {
    let deep = Context(Some(boxed(Context(Some(boxed(io(
        io::ErrorKind::ConnectionReset,
    )))))));
    assert_eq!(boxed(deep).classify(), Class::Transient);
    // The first known error decides, even if a later one would say otherwise.
    let io_first = io::Error::new(io::ErrorKind::InvalidData, Context(None));
    assert_eq!(
        boxed(Context(Some(boxed(io_first)))).classify(),
        Class::Permanent
    );
}

#[test]
fn an_unknown_chain_is_permanent() {
    assert_eq!(boxed(Context(None)).classify(), Class::Permanent);
    let message: Box<dyn Error + Send + Sync> = "transient, it says".into();
    assert_eq!(message.classify(), Class::Permanent);
    assert_eq!(boxed(fmt::Error).classify(), Class::Permanent);
}

#[test]
fn every_flavour_of_dyn_error() {
    let reset = || io(io::ErrorKind::ConnectionReset);
    let plain: Box<dyn Error> = Box::new(reset());
    let send: Box<dyn Error + Send> = Box::new(reset());
    let shared: Arc<dyn Error + Send + Sync> = Arc::new(reset());
    assert_eq!(plain.classify(), Class::Transient);
    assert_eq!(send.classify(), Class::Transient);
    assert_eq!(shared.classify(), Class::Transient);
    assert_eq!(Classify::classify(&&*plain), Class::Transient);
    let timed_out: Box<dyn Error> = Box::new(AttemptTimedOut::after(Duration::ZERO));
    assert_eq!(timed_out.classify(), Class::Transient);
}

#[cfg(feature = "http")]
#[test]
fn status_errors_in_the_chain() {
    use crate::integrations::http::StatusError;
    use ::http::StatusCode;
    let busy = StatusError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(Duration::from_secs(3)),
    );
    assert_eq!(
        boxed(Context(Some(boxed(busy)))).classify(),
        Class::RetryAfter(Duration::from_secs(3))
    );
    let internal = StatusError::new(StatusCode::INTERNAL_SERVER_ERROR, None);
    assert_eq!(boxed(internal).classify(), Class::Uncertain);
    let missing = StatusError::new(StatusCode::NOT_FOUND, None);
    assert_eq!(boxed(missing).classify(), Class::Permanent);
    let throttled = StatusError::new(StatusCode::TOO_MANY_REQUESTS, None);
    assert_eq!(boxed(throttled).classify(), Class::Transient);
}

#[cfg(feature = "reqwest")]
#[test]
fn request_errors_in_the_chain() {
    use crate::integrations::reqwest::RequestError;
    let timed_out = RequestError::from(AttemptTimedOut::after(Duration::from_secs(1)));
    assert_eq!(
        boxed(Context(Some(boxed(timed_out)))).classify(),
        Class::Transient
    );
    // A URL reqwest cannot parse fails while building the request: permanent.
    let building = reqwest::Client::new().get("not a url").build().unwrap_err();
    assert_eq!(
        boxed(Context(Some(boxed(building)))).classify(),
        Class::Permanent
    );
}

#[cfg(feature = "rusqlite")]
#[test]
fn sqlite_errors_in_the_chain() {
    let busy =
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
    assert_eq!(
        boxed(Context(Some(boxed(busy)))).classify(),
        Class::Transient
    );
    let constraint = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
        None,
    );
    assert_eq!(boxed(constraint).classify(), Class::Permanent);
}

#[cfg(feature = "tonic")]
#[test]
fn grpc_statuses_in_the_chain() {
    let unavailable = tonic::Status::unavailable("down");
    assert_eq!(
        boxed(Context(Some(boxed(unavailable)))).classify(),
        Class::Transient
    );
    let mut stop = tonic::Status::unavailable("shedding");
    stop.metadata_mut()
        .insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
    assert_eq!(boxed(stop).classify(), Class::Permanent);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_errors_in_the_chain() {
    use crate::integrations::postgres::PostgresError;
    // The one tokio-postgres error that can be made without a server: uncertain.
    let waited = tokio_postgres::Error::__private_api_timeout();
    assert_eq!(
        boxed(Context(Some(boxed(waited)))).classify(),
        Class::Uncertain
    );
    let cut = PostgresError::from(AttemptTimedOut::after(Duration::from_secs(1)));
    assert_eq!(
        boxed(Context(Some(boxed(cut)))).classify(),
        Class::Transient
    );
    // The wrapper is known itself, before the error it wraps.
    let wrapped = PostgresError::from(tokio_postgres::Error::__private_api_timeout());
    assert_eq!(boxed(wrapped).classify(), Class::Uncertain);
    #[cfg(feature = "anyhow")]
    {
        let waited = anyhow::Error::new(tokio_postgres::Error::__private_api_timeout());
        assert_eq!(waited.context("transfer").classify(), Class::Uncertain);
    }
}

#[cfg(feature = "sqlx")]
#[test]
fn sqlx_errors_in_the_chain() {
    let refused = sqlx::Error::Io(io(io::ErrorKind::ConnectionRefused));
    assert_eq!(boxed(refused).classify(), Class::Unsent);
    // sqlx's error is known before the I/O error inside it: lost, not reset.
    let lost = sqlx::Error::Io(io(io::ErrorKind::ConnectionReset));
    assert_eq!(
        boxed(Context(Some(boxed(lost)))).classify(),
        Class::Uncertain
    );
    assert_eq!(boxed(sqlx::Error::PoolTimedOut).classify(), Class::Unsent);
}

#[cfg(feature = "anyhow")]
#[test]
fn anyhow_errors_by_their_chain() {
    use anyhow::Context as _;
    let reset = Err::<(), _>(io(io::ErrorKind::ConnectionReset))
        .context("reading the stock")
        .context("checkout")
        .unwrap_err();
    assert_eq!(reset.classify(), Class::Transient);
    let missing = anyhow::Error::new(Context(Some(boxed(io(io::ErrorKind::NotFound)))));
    assert_eq!(missing.classify(), Class::Permanent);
    assert_eq!(anyhow::anyhow!("bad input").classify(), Class::Permanent);
    assert_eq!(
        anyhow::Error::new(Context(None)).classify(),
        Class::Permanent
    );
}

fn refused() -> io::Error {
    io(io::ErrorKind::ConnectionRefused)
}

/// A wrapper that holds its source inline, at its own address.
#[derive(Debug)]
struct Inline(io::Error);

impl fmt::Display for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("while sending")
    }
}

impl Error for Inline {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
    }
}

// Can fail: if the walk takes an unsent class from beneath an error it cannot see
// through (a library that may have followed a redirect after the server took a POST).
#[test]
fn a_refused_connection_beneath_an_unknown_error_is_transient() {
    assert_eq!(boxed(refused()).classify(), Class::Unsent);
    assert_eq!(
        boxed(Context(Some(boxed(refused())))).classify(),
        Class::Transient
    );
    let deep = Context(Some(boxed(Context(Some(boxed(refused()))))));
    assert_eq!(boxed(deep).classify(), Class::Transient);
    let plain: Box<dyn Error> = Box::new(Context(Some(boxed(refused()))));
    assert_eq!(plain.classify(), Class::Transient);
    let send: Box<dyn Error + Send> = Box::new(Context(Some(boxed(refused()))));
    assert_eq!(send.classify(), Class::Transient);
    assert_eq!(boxed(Inline(refused())).classify(), Class::Transient);
}

// Can fail: if anyhow's own layers (contexts) hide a refused connection, or if a
// foreign error inside the `anyhow::Error` lets one through as unsent.
#[cfg(feature = "anyhow")]
#[test]
fn anyhow_proves_unsent_only_through_its_contexts() {
    use anyhow::Context as _;
    assert_eq!(anyhow::Error::new(refused()).classify(), Class::Unsent);
    let contexts = Err::<(), _>(refused())
        .context("a")
        .context("b")
        .unwrap_err();
    assert_eq!(contexts.classify(), Class::Unsent);
    let on_anyhow = anyhow::Error::new(refused()).context("a").context("b");
    assert_eq!(on_anyhow.classify(), Class::Unsent);

    let foreign = anyhow::Error::new(Context(Some(boxed(refused()))));
    assert_eq!(foreign.classify(), Class::Transient);
    let foreign_in_contexts = Err::<(), _>(Context(Some(boxed(refused()))))
        .context("a")
        .context("b")
        .unwrap_err();
    assert_eq!(foreign_in_contexts.classify(), Class::Transient);
    let inline = anyhow::Error::new(Inline(refused())).context("a");
    assert_eq!(inline.classify(), Class::Transient);
}

/// A database error with a SQLSTATE, as sqlx's PostgreSQL driver gives (its own type
/// needs a server to be made).
#[cfg(feature = "sqlx")]
#[derive(Debug)]
struct Sqlstate(&'static str);

#[cfg(feature = "sqlx")]
impl fmt::Display for Sqlstate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SQLSTATE {}", self.0)
    }
}

#[cfg(feature = "sqlx")]
impl Error for Sqlstate {}

#[cfg(feature = "sqlx")]
impl sqlx::error::DatabaseError for Sqlstate {
    fn message(&self) -> &str {
        "could not serialize access"
    }
    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some(self.0.into())
    }
    fn as_error(&self) -> &(dyn Error + Send + Sync + 'static) {
        self
    }
    fn as_error_mut(&mut self) -> &mut (dyn Error + Send + Sync + 'static) {
        self
    }
    fn into_error(self: Box<Self>) -> Box<dyn Error + Send + Sync + 'static> {
        self
    }
    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

// Can fail: if a not-applied class (a transaction rolled back) is taken from beneath
// an error persevere cannot see through, or lost under anyhow's contexts.
#[cfg(feature = "sqlx")]
#[test]
fn a_rolled_back_transaction_beneath_an_unknown_error_is_transient() {
    let rolled_back = || sqlx::Error::Database(Box::new(Sqlstate("40001")));
    assert_eq!(boxed(rolled_back()).classify(), Class::NotApplied);
    assert_eq!(
        boxed(Context(Some(boxed(rolled_back())))).classify(),
        Class::Transient
    );
    let refused = sqlx::Error::Io(refused());
    assert_eq!(
        boxed(Context(Some(boxed(refused)))).classify(),
        Class::Transient
    );
    #[cfg(feature = "anyhow")]
    {
        let held = anyhow::Error::new(rolled_back()).context("transfer");
        assert_eq!(held.context("checkout").classify(), Class::NotApplied);
        let foreign = anyhow::Error::new(Context(Some(boxed(rolled_back()))));
        assert_eq!(foreign.context("transfer").classify(), Class::Transient);
    }
}
