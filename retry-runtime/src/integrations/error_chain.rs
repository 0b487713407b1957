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
mod tests;
