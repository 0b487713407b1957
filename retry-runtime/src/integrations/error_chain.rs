//! Type-erased errors: `Box<dyn Error + Send + Sync>`, `anyhow::Error`.
//!
//! Their class is that of the first error in the chain (the error, then its `source()`,
//! and so on) whose type persevere knows, except that a proof the request took no
//! effect (unsent, not applied) counts only where no layer persevere cannot see through
//! lies above it. It names every integration's error types, so it sits above them all,
//! with the integrations.

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
///
/// Unsent and not applied say that the request took no effect, and only the error that
/// failed can say so: an error of a type persevere does not know may come from a library
/// that did work of its own first (followed a redirect after the server took a POST,
/// retried, pipelined), and expose the failure of its last step as its `source()`. So
/// those two classes count only from `error` itself or from an error `seen_through` says
/// was reached through layers known to be wrappers alone; found anywhere else, they are
/// transient.
pub(super) fn classify_chain(
    error: &(dyn Error + 'static),
    seen_through: impl Fn(&(dyn Error + 'static)) -> bool,
) -> Class {
    // By position, not address: a wrapper's first field, its source, shares its address.
    let mut top = true;
    let mut next = Some(error);
    while let Some(link) = next {
        if let Some(class) = each_known(&Classed(link)) {
            return match class {
                Class::Unsent | Class::NotApplied if !top && !seen_through(link) => {
                    Class::Transient
                }
                class => class,
            };
        }
        top = false;
        next = link.source();
    }
    Class::Permanent
}

/// A question asked of each error type persevere knows.
trait Probe {
    fn probe<T: Classify + Error + Send + Sync + 'static>(&self) -> Option<Class>;
}

/// The first answer `probe` gives, asking of each type persevere knows in turn.
fn each_known(probe: &impl Probe) -> Option<Class> {
    if let Some(class) = probe.probe::<io::Error>() {
        return Some(class);
    }
    if let Some(class) = probe.probe::<AttemptTimedOut>() {
        return Some(class);
    }
    if let Some(class) = probe.probe::<CircuitOpen>() {
        return Some(class);
    }
    #[cfg(feature = "http")]
    if let Some(class) = probe.probe::<crate::integrations::http::StatusError>() {
        return Some(class);
    }
    #[cfg(feature = "reqwest")]
    if let Some(class) = probe.probe::<reqwest::Error>() {
        return Some(class);
    }
    #[cfg(feature = "reqwest")]
    if let Some(class) = probe.probe::<crate::integrations::reqwest::RequestError>() {
        return Some(class);
    }
    #[cfg(feature = "rusqlite")]
    if let Some(class) = probe.probe::<rusqlite::Error>() {
        return Some(class);
    }
    #[cfg(feature = "tonic")]
    if let Some(class) = probe.probe::<tonic::Status>() {
        return Some(class);
    }
    #[cfg(feature = "postgres")]
    if let Some(class) = probe.probe::<tokio_postgres::Error>() {
        return Some(class);
    }
    #[cfg(feature = "postgres")]
    if let Some(class) = probe.probe::<crate::integrations::postgres::PostgresError>() {
        return Some(class);
    }
    #[cfg(feature = "sqlx")]
    if let Some(class) = probe.probe::<sqlx::Error>() {
        return Some(class);
    }
    None
}

/// The class of an error in the chain, if its type is one persevere knows.
struct Classed<'a>(&'a (dyn Error + 'static));

impl Probe for Classed<'_> {
    fn probe<T: Classify + Error + Send + Sync + 'static>(&self) -> Option<Class> {
        self.0.downcast_ref::<T>().map(Classify::classify)
    }
}

/// Whether an error in an `anyhow::Error`'s chain is the one `anyhow` itself holds: its
/// `downcast_ref` reaches it through `.context(...)` layers, any number of them, and
/// through nothing else (not a `source()`).
#[cfg(feature = "anyhow")]
struct HeldByAnyhow<'a> {
    anyhow: &'a anyhow::Error,
    link: &'a (dyn Error + 'static),
}

#[cfg(feature = "anyhow")]
impl Probe for HeldByAnyhow<'_> {
    fn probe<T: Classify + Error + Send + Sync + 'static>(&self) -> Option<Class> {
        let held = self.anyhow.downcast_ref::<T>()?;
        let link = self.link.downcast_ref::<T>()?;
        std::ptr::eq(held, link).then(|| link.classify())
    }
}

/// Classified by the first error in its chain whose type persevere knows
/// (`std::io::Error`, `AttemptTimedOut`, `CircuitOpen`, and with their features
/// `http::StatusError`, `reqwest::Error`, `RequestError`, `rusqlite::Error`,
/// `tonic::Status`, `tokio_postgres::Error`, `PostgresError`, `sqlx::Error`);
/// permanent if none is. So `Box<dyn Error + Send + Sync>` works as a retried
/// function's error.
///
/// Unsent and not applied, the classes that prove the request took no effect, count
/// only from the boxed error itself. Beneath an error of a type persevere does not know
/// they are transient: that error's library may have done work of its own before the
/// failure it exposes as its `source()` (reqwest without persevere's `reqwest` feature,
/// say, following a redirect after the server took a POST). Other classes are kept.
///
/// ```
/// use std::error::Error;
/// use std::{fmt, io};
/// use persevere::{Class, Classify};
///
/// let reset: Box<dyn Error + Send + Sync> = io::Error::from(io::ErrorKind::ConnectionReset).into();
/// assert_eq!(reset.classify(), Class::Transient);
///
/// let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
/// let boxed: Box<dyn Error + Send + Sync> = refused().into();
/// assert_eq!(boxed.classify(), Class::Unsent);
///
/// // A library's error that persevere does not know, over the refused connection.
/// #[derive(Debug)]
/// struct Sending(io::Error);
/// impl fmt::Display for Sending {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("sending the order")
///     }
/// }
/// impl Error for Sending {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let beneath: Box<dyn Error + Send + Sync> = Sending(refused()).into();
/// assert_eq!(beneath.classify(), Class::Transient);
///
/// let unknown: Box<dyn Error + Send + Sync> = "no such user".into();
/// assert_eq!(unknown.classify(), Class::Permanent);
/// ```
impl Classify for dyn Error + Send + Sync + 'static {
    fn classify(&self) -> Class {
        classify_chain(self, |_| false)
    }
}

/// As for `dyn Error + Send + Sync`: by the first error in its chain whose type
/// persevere knows, unsent or not applied only from the boxed error itself; permanent
/// if none is.
impl Classify for dyn Error + Send + 'static {
    fn classify(&self) -> Class {
        classify_chain(self, |_| false)
    }
}

/// As for `dyn Error + Send + Sync`: by the first error in its chain whose type
/// persevere knows, unsent or not applied only from the boxed error itself; permanent
/// if none is.
impl Classify for dyn Error + 'static {
    fn classify(&self) -> Class {
        classify_chain(self, |_| false)
    }
}

/// Classified by the first error in its chain (`anyhow::Error::chain`, contexts
/// included) whose type persevere knows, as `Box<dyn Error + Send + Sync>` is;
/// permanent if none is. Enabled by the `anyhow` cargo feature.
///
/// Unsent and not applied count only from the error the `anyhow::Error` holds, beneath
/// its contexts (what `anyhow::Error::downcast_ref` reaches): beneath an error of a type
/// persevere does not know, such as a `reqwest::Error` without persevere's `reqwest`
/// feature, they are transient, for that library may have sent the request before the
/// failure it exposes (a redirect followed after the server took a POST).
///
/// ```
/// use std::io;
/// use anyhow::Context;
/// use persevere::{Class, Classify};
///
/// let refused = Err::<(), _>(io::Error::from(io::ErrorKind::ConnectionRefused))
///     .context("loading the user")
///     .context("checkout")
///     .unwrap_err();
/// assert_eq!(refused.classify(), Class::Unsent);
/// assert_eq!(anyhow::anyhow!("bad input").classify(), Class::Permanent);
/// ```
#[cfg(feature = "anyhow")]
impl Classify for anyhow::Error {
    fn classify(&self) -> Class {
        classify_chain(self.as_ref(), |link| {
            each_known(&HeldByAnyhow { anyhow: self, link }).is_some()
        })
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
}
