//! Type-erased errors: `Box<dyn Error + Send + Sync>`, `anyhow::Error`.
//!
//! Their class is that of the first error in the chain (the error, then its `source()`,
//! and so on) whose type persevere knows. It names every integration's error types, so it
//! sits above them all, with the integrations.

use std::error::Error;
use std::io;

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;

/// The class of the first error in `error`'s chain whose type persevere knows:
/// [`io::Error`], [`AttemptTimedOut`], [`CircuitOpen`], and with their features
/// `http::StatusError`, `reqwest::Error`, `persevere::reqwest::RequestError`,
/// `rusqlite::Error`, `tonic::Status`, `tokio_postgres::Error`,
/// `persevere::postgres::PostgresError` and `sqlx::Error`. Permanent if none is.
pub(super) fn classify_chain(error: &(dyn Error + 'static)) -> Class {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(class) = known(error) {
            return class;
        }
        next = error.source();
    }
    Class::Permanent
}

fn known(error: &(dyn Error + 'static)) -> Option<Class> {
    if let Some(e) = error.downcast_ref::<io::Error>() {
        return Some(e.classify());
    }
    if let Some(e) = error.downcast_ref::<AttemptTimedOut>() {
        return Some(e.classify());
    }
    if let Some(e) = error.downcast_ref::<CircuitOpen>() {
        return Some(e.classify());
    }
    #[cfg(feature = "http")]
    if let Some(e) = error.downcast_ref::<crate::integrations::http::StatusError>() {
        return Some(e.classify());
    }
    #[cfg(feature = "reqwest")]
    if let Some(e) = error.downcast_ref::<reqwest::Error>() {
        return Some(e.classify());
    }
    #[cfg(feature = "reqwest")]
    if let Some(e) = error.downcast_ref::<crate::integrations::reqwest::RequestError>() {
        return Some(e.classify());
    }
    #[cfg(feature = "rusqlite")]
    if let Some(e) = error.downcast_ref::<rusqlite::Error>() {
        return Some(e.classify());
    }
    #[cfg(feature = "tonic")]
    if let Some(e) = error.downcast_ref::<tonic::Status>() {
        return Some(e.classify());
    }
    #[cfg(feature = "postgres")]
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        return Some(e.classify());
    }
    #[cfg(feature = "postgres")]
    if let Some(e) = error.downcast_ref::<crate::integrations::postgres::PostgresError>() {
        return Some(e.classify());
    }
    #[cfg(feature = "sqlx")]
    if let Some(e) = error.downcast_ref::<sqlx::Error>() {
        return Some(e.classify());
    }
    None
}

/// Classified by the first error in its chain whose type persevere knows
/// (`std::io::Error`, `AttemptTimedOut`, `CircuitOpen`, and with their features
/// `http::StatusError`, `reqwest::Error`, `RequestError`, `rusqlite::Error`,
/// `tonic::Status`, `tokio_postgres::Error`, `PostgresError`, `sqlx::Error`);
/// permanent if none is. So `Box<dyn Error + Send + Sync>` works as a retried
/// function's error:
///
/// ```
/// use std::error::Error;
/// use std::io;
/// use persevere::{Class, Classify};
///
/// let reset: Box<dyn Error + Send + Sync> = io::Error::from(io::ErrorKind::ConnectionReset).into();
/// assert_eq!(reset.classify(), Class::Transient);
///
/// let unknown: Box<dyn Error + Send + Sync> = "no such user".into();
/// assert_eq!(unknown.classify(), Class::Permanent);
/// ```
impl Classify for dyn Error + Send + Sync + 'static {
    fn classify(&self) -> Class {
        classify_chain(self)
    }
}

/// As for `dyn Error + Send + Sync`: by the first error in its chain whose type
/// persevere knows; permanent if none is.
impl Classify for dyn Error + Send + 'static {
    fn classify(&self) -> Class {
        classify_chain(self)
    }
}

/// As for `dyn Error + Send + Sync`: by the first error in its chain whose type
/// persevere knows; permanent if none is.
impl Classify for dyn Error + 'static {
    fn classify(&self) -> Class {
        classify_chain(self)
    }
}

/// Classified by the first error in its chain (`anyhow::Error::chain`, contexts
/// included) whose type persevere knows, as `Box<dyn Error + Send + Sync>` is;
/// permanent if none is. Enabled by the `anyhow` cargo feature.
///
/// ```
/// use std::io;
/// use anyhow::Context;
/// use persevere::{Class, Classify};
///
/// let refused = Err::<(), _>(io::Error::from(io::ErrorKind::ConnectionRefused))
///     .context("loading the user")
///     .unwrap_err();
/// assert_eq!(refused.classify(), Class::Unsent);
/// assert_eq!(anyhow::anyhow!("bad input").classify(), Class::Permanent);
/// ```
#[cfg(feature = "anyhow")]
impl Classify for anyhow::Error {
    fn classify(&self) -> Class {
        classify_chain(self.as_ref())
    }
}

#[cfg(test)]
mod tests {
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
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
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
        assert_eq!(
            boxed(Context(Some(boxed(refused)))).classify(),
            Class::Unsent
        );
        // sqlx's error is known before the I/O error inside it: lost, not reset.
        let lost = sqlx::Error::Io(io(io::ErrorKind::ConnectionReset));
        assert_eq!(boxed(lost).classify(), Class::Uncertain);
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
        let wrapped =
            anyhow::Error::new(Context(Some(boxed(io(io::ErrorKind::ConnectionRefused)))));
        assert_eq!(wrapped.classify(), Class::Unsent);
        assert_eq!(anyhow::anyhow!("bad input").classify(), Class::Permanent);
        assert_eq!(
            anyhow::Error::new(Context(None)).classify(),
            Class::Permanent
        );
    }
}
