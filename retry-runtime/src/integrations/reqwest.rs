//! reqwest: classifying its errors and responses, a client whose failures to connect
//! prove a request unsent ([`ClientBuilderExt`]), and sending idempotency keys and
//! deadlines. Enabled by the `reqwest` cargo feature.
//!
//! ```no_run
//! use persevere::IdempotencyKey;
//! use persevere::reqwest::{RequestBuilderExt, RequestError, ResponseExt};
//!
//! async fn charge(client: &reqwest::Client, key: IdempotencyKey) -> Result<String, RequestError> {
//!     let response = client
//!         .post("http://127.0.0.1:8080/charges")
//!         .idempotency_key(&key)
//!         .with_deadline()
//!         .send()
//!         .await?
//!         .error_for_retry()?;
//!     Ok(response.text().await?)
//! }
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;
use crate::integrations::http::{StatusError, check};
use crate::key::IdempotencyKey;

/// The header an idempotency key travels in.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// reqwest's errors:
/// - a failure to connect (refused, DNS) of a client that follows no redirect
///   ([`ClientBuilderExt::build_without_redirects`]) is [`Class::Unsent`]: the request
///   never left;
/// - a failure to connect of any other client is transient: reqwest follows redirects
///   inside `send`, and a refused connection to a redirect's target, after the server
///   processed the request, is the same error as a refused first connection;
/// - a timeout, or a failure while sending the request or reading the response body, is
///   transient;
/// - an error made from a status (`error_for_status`) is classified by the status;
/// - building the request, following redirects, and decoding the body are permanent.
impl Classify for reqwest::Error {
    fn classify(&self) -> Class {
        if self.is_connect() && without_redirects(self) {
            Class::Unsent
        } else if self.is_connect() || self.is_timeout() {
            Class::Transient
        } else if let Some(status) = self.status() {
            status.classify()
        } else if self.is_request() || self.is_body() {
            Class::Transient
        } else {
            Class::Permanent
        }
    }
}

/// The error a connector gives: reqwest's `BoxError`.
type BoxError = Box<dyn StdError + Send + Sync>;

/// Building a client whose failures to connect prove a request unsent.
pub trait ClientBuilderExt: Sized {
    /// Builds a client that follows no redirect and marks its connector's failures, so
    /// that its failures to connect (refused, DNS) are [`Class::Unsent`]: without a
    /// redirect, the connection that failed is the one the request would have gone on,
    /// so nothing of it left. A redirect comes back as the response (its status is not
    /// a failure: `error_for_retry` passes it), for the caller to follow or not.
    ///
    /// A client that may follow redirects (reqwest's default, or any policy but
    /// `Policy::none()`) cannot tell: reqwest follows them inside `send`, and a refused
    /// connection to the redirect's target comes back as the same connect error, after
    /// the server processed the request. Its failures to connect are transient, so
    /// `on = unsent` does not retry them.
    ///
    /// Set everything else first: this sets the redirect policy and builds. Connector
    /// layers of yours (`connector_layer`) are inside the mark, so a connect that one
    /// of them timed out is unsent. reqwest times a `connect_timeout` twice, in hyper's
    /// connector (inside the mark: unsent) and around the whole connector (outside it:
    /// transient); whichever fires first decides.
    ///
    /// ```
    /// use persevere::reqwest::ClientBuilderExt;
    ///
    /// let client = reqwest::Client::builder().build_without_redirects()?;
    /// # Ok::<(), reqwest::Error>(())
    /// ```
    fn build_without_redirects(self) -> reqwest::Result<reqwest::Client>;
}

impl ClientBuilderExt for reqwest::ClientBuilder {
    fn build_without_redirects(self) -> reqwest::Result<reqwest::Client> {
        self.connector_layer(MarkConnectFailures)
            .redirect(reqwest::redirect::Policy::none())
            .build()
    }
}

/// A failure to connect in a client of [`ClientBuilderExt::build_without_redirects`]:
/// the one proof that a reqwest connect error is of a request's only hop. Private, so
/// that no client that follows redirects can carry it.
#[derive(Debug)]
struct ConnectFailed(BoxError);

impl fmt::Display for ConnectFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("could not connect (no redirect followed)")
    }
}

impl StdError for ConnectFailed {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

/// Whether `error`'s chain holds the mark of a client that follows no redirect.
fn without_redirects(error: &reqwest::Error) -> bool {
    let mut next = error.source();
    while let Some(error) = next {
        if error.is::<ConnectFailed>() {
            return true;
        }
        next = error.source();
    }
    false
}

/// The connector layer that marks each failed connect as a [`ConnectFailed`].
#[derive(Clone, Copy)]
struct MarkConnectFailures;

impl<S> tower_layer::Layer<S> for MarkConnectFailures {
    type Service = Marking<S>;

    fn layer(&self, inner: S) -> Marking<S> {
        Marking(inner)
    }
}

/// A connector whose failures are marked.
#[derive(Clone)]
struct Marking<S>(S);

fn mark(error: BoxError) -> BoxError {
    Box::new(ConnectFailed(error))
}

impl<S, R> tower_service::Service<R> for Marking<S>
where
    S: tower_service::Service<R, Error = BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Connecting<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, destination: R) -> Self::Future {
        Connecting {
            inner: self.0.call(destination),
        }
    }
}

pin_project_lite::pin_project! {
    /// A connect in flight, its failure marked.
    struct Connecting<F> {
        #[pin]
        inner: F,
    }
}

impl<F, T> Future for Connecting<F>
where
    F: Future<Output = Result<T, BoxError>>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map_err(mark)
    }
}

/// The error of an HTTP call made with reqwest: the transport failed, or the server
/// answered with a failure status. Classified by its parts; convertible from the
/// runtime's own errors, so that it can be the error type of a `#[retry]` function with
/// an attempt timeout or a circuit breaker.
///
/// `?` converts reqwest's errors and [`ResponseExt::error_for_retry`]'s into it:
///
/// ```
/// use persevere::reqwest::{RequestError, ResponseExt};
/// use persevere::{AttemptTimedOut, Class, Classify};
///
/// async fn get_user(client: &reqwest::Client, id: u64) -> Result<String, RequestError> {
///     let url = format!("http://127.0.0.1:8080/users/{id}");
///     Ok(client.get(url).send().await?.error_for_retry()?.text().await?)
/// }
///
/// // An attempt cut short by `attempt_timeout` becomes one, and is transient.
/// let timed_out = RequestError::from(AttemptTimedOut::after(std::time::Duration::from_secs(1)));
/// assert_eq!(timed_out.classify(), Class::Transient);
/// assert_eq!(timed_out.status(), None);
/// ```
#[derive(Debug)]
pub enum RequestError {
    /// The request could not be sent or its response not read.
    Transport(reqwest::Error),
    /// The server answered with a failure status.
    Status(StatusError),
    /// The attempt ran past its time limit.
    TimedOut(AttemptTimedOut),
    /// The circuit breaker refused the call.
    CircuitOpen(CircuitOpen),
}

impl RequestError {
    /// The failure status the server answered with, if it answered.
    pub fn status(&self) -> Option<http::StatusCode> {
        match self {
            RequestError::Status(e) => Some(e.status()),
            RequestError::Transport(e) => e.status(),
            _ => None,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Transport(e) => write!(f, "{e}"),
            RequestError::Status(e) => write!(f, "{e}"),
            RequestError::TimedOut(e) => write!(f, "{e}"),
            RequestError::CircuitOpen(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Transport(e) => Some(e),
            RequestError::Status(e) => Some(e),
            RequestError::TimedOut(e) => Some(e),
            RequestError::CircuitOpen(e) => Some(e),
        }
    }
}

impl Classify for RequestError {
    fn classify(&self) -> Class {
        match self {
            RequestError::Transport(e) => e.classify(),
            RequestError::Status(e) => e.classify(),
            RequestError::TimedOut(e) => e.classify(),
            RequestError::CircuitOpen(e) => e.classify(),
        }
    }
}

impl From<reqwest::Error> for RequestError {
    fn from(e: reqwest::Error) -> Self {
        RequestError::Transport(e)
    }
}

impl From<StatusError> for RequestError {
    fn from(e: StatusError) -> Self {
        RequestError::Status(e)
    }
}

impl From<AttemptTimedOut> for RequestError {
    fn from(e: AttemptTimedOut) -> Self {
        RequestError::TimedOut(e)
    }
}

impl From<CircuitOpen> for RequestError {
    fn from(e: CircuitOpen) -> Self {
        RequestError::CircuitOpen(e)
    }
}

/// Turning a response with a failure status into a classified error.
pub trait ResponseExt: Sized {
    /// `Ok(self)` for a success or redirect status; otherwise a [`StatusError`] that
    /// keeps what the server said about retrying ([`Pushback`](crate::integrations::http::Pushback):
    /// `Retry-After`, `retry-after-ms` and the like, `x-should-retry`). Unlike reqwest's
    /// `error_for_status`, the server's word is not lost.
    fn error_for_retry(self) -> Result<Self, StatusError>;
}

impl ResponseExt for reqwest::Response {
    fn error_for_retry(self) -> Result<Self, StatusError> {
        check(self.status(), self.headers()).map(|()| self)
    }
}

/// Carrying what makes a retried request safe and bounded.
pub trait RequestBuilderExt: Sized {
    /// Sends `key` in the `Idempotency-Key` header. Pass the same key to every attempt:
    /// take it as a parameter of the `#[retry(key = ...)]` function.
    fn idempotency_key(self, key: &IdempotencyKey) -> Self;

    /// Sends the time left before the enclosing deadline as `grpc-timeout`, if there is
    /// a deadline.
    fn with_deadline(self) -> Self;

    /// Sends the attempt number in `header`'s format if this request is a retry, so that
    /// the server can tell it from a first attempt (and shed it first); a first attempt
    /// sends nothing.
    fn with_attempt(self, header: crate::integrations::http::AttemptHeader) -> Self;
}

impl RequestBuilderExt for reqwest::RequestBuilder {
    fn idempotency_key(self, key: &IdempotencyKey) -> Self {
        self.header(IDEMPOTENCY_KEY, key.to_string())
    }

    fn with_deadline(self) -> Self {
        match crate::layer::deadline::remaining() {
            Some(left) => self.header(
                crate::integrations::http::GRPC_TIMEOUT,
                crate::layer::deadline::to_grpc_timeout(left),
            ),
            None => self,
        }
    }

    fn with_attempt(self, header: crate::integrations::http::AttemptHeader) -> Self {
        match header.value() {
            Some(value) => self.header(header.name(), value),
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::time::Duration;

    use http::{HeaderMap, StatusCode};

    use super::*;

    fn status_error() -> RequestError {
        RequestError::Status(
            crate::integrations::http::check(StatusCode::BAD_GATEWAY, &HeaderMap::new())
                .unwrap_err(),
        )
    }

    fn transport_error() -> RequestError {
        let error = reqwest::Client::new()
            .get("not a url")
            .build()
            .expect_err("a malformed URL");
        RequestError::Transport(error)
    }

    // What each variant says its status is, how it reads, and what its source is.
    // Can fail: a `status()` that invents a status, or loses the server's; a `Display`
    // that says nothing; a `source()` that hides the cause.
    #[test]
    fn each_variant_tells_its_status_display_and_source() {
        let status = status_error();
        assert_eq!(status.status(), Some(StatusCode::BAD_GATEWAY));
        assert!(status.to_string().contains("502"), "{status}");
        let source = status.source().expect("a status error has its cause");
        assert!(
            source
                .downcast_ref::<crate::integrations::http::StatusError>()
                .is_some()
        );

        let transport = transport_error();
        assert_eq!(transport.status(), None);
        assert!(!transport.to_string().is_empty());
        let source = transport.source().expect("a transport error has its cause");
        assert!(source.downcast_ref::<reqwest::Error>().is_some());

        // A transport error that carries the server's status (reqwest's own
        // `error_for_status`) tells it too.
        let answered = reqwest::Response::from(
            http::Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .body("busy")
                .unwrap(),
        );
        let with_status = RequestError::Transport(answered.error_for_status().unwrap_err());
        assert_eq!(with_status.status(), Some(StatusCode::SERVICE_UNAVAILABLE));

        let timed_out = RequestError::from(AttemptTimedOut::after(Duration::from_secs(2)));
        assert_eq!(timed_out.status(), None);
        assert_eq!(
            timed_out.to_string(),
            AttemptTimedOut::after(Duration::from_secs(2)).to_string()
        );
        assert!(
            timed_out
                .source()
                .unwrap()
                .downcast_ref::<AttemptTimedOut>()
                .is_some()
        );
        assert_eq!(timed_out.classify(), Class::Transient);
    }
}
