//! What a gRPC request tells its server of the `#[retry]` call it is made in: which
//! attempt it is, and how long the call has left.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderValue};

use crate::integrations::http::GRPC_TIMEOUT;
use crate::layer::attempt;
use crate::layer::deadline::{parse_grpc_timeout, to_grpc_timeout};
use crate::layer::frame;
use crate::time::clock::{Clock, TokioClock};

type BoxError = Box<dyn Error + Send + Sync>;

/// The metadata key that says how many attempts of this call came before: absent on a
/// first attempt, 1 on the second, and so on.
pub const GRPC_PREVIOUS_RPC_ATTEMPTS: &str = "grpc-previous-rpc-attempts";

/// Writes into a request's headers what a server needs to know of the `#[retry]` call
/// it is made in:
/// - `grpc-previous-rpc-attempts`: the attempts before this one, on a retry only (a
///   server's `RetryAdmissionLayer` sheds such requests first when overloaded); a hedged
///   copy counts as the attempt it copies;
/// - `grpc-timeout`: the time left before the call's deadline, unless the request
///   carries a shorter one already. Under `attempt_timeout` this is still the call's
///   deadline, not the attempt's: persevere cuts the attempt at its limit itself (the
///   server hears of it as a cancelled stream) and retries it, whereas a server that
///   stopped at the same moment would answer `DEADLINE_EXCEEDED`, which is not retried,
///   and whichever came first would decide the call.
///
/// [`RetryMetadata`] calls it for every request; this is for a service of your own.
pub fn insert_retry_metadata(headers: &mut HeaderMap) {
    if let Some(before) = attempt::number().checked_sub(1).filter(|&n| n > 0) {
        headers.insert(GRPC_PREVIOUS_RPC_ATTEMPTS, HeaderValue::from(before));
    }
    let Some(deadline) = frame::request_deadline() else {
        return;
    };
    let left = deadline.saturating_duration_since(TokioClock::now());
    let shorter = headers
        .get(GRPC_TIMEOUT)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_grpc_timeout)
        .is_some_and(|set| set <= left);
    if !shorter {
        let value = HeaderValue::try_from(to_grpc_timeout(left)).expect("digits and a unit");
        headers.insert(GRPC_TIMEOUT, value);
    }
}

/// Wraps a client's channel in [`RetryMetadata`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RetryMetadataLayer;

impl<S> tower_layer::Layer<S> for RetryMetadataLayer {
    type Service = RetryMetadata<S>;

    fn layer(&self, inner: S) -> RetryMetadata<S> {
        RetryMetadata::new(inner)
    }
}

/// A gRPC client's channel that tells the server of the `#[retry]` call each request is
/// made in ([`insert_retry_metadata`]): wrap the channel once, and every `#[retry]`
/// function that uses the client sends it.
///
/// It also answers `DEADLINE_EXCEEDED` where tonic's own timer (which enforces the
/// `grpc-timeout` sent, and `Endpoint::timeout`) cut the request, as persevere's cut at
/// the deadline does, where tonic says `CANCELLED`: the two timers end together, and
/// either may be seen first. Such a status is retried where time is left, as a timeout.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use persevere::tonic::RetryMetadata;
/// use tonic::transport::Channel;
/// use tonic_health::pb::health_client::HealthClient;
///
/// let channel = Channel::from_static("http://127.0.0.1:50051").connect_lazy();
/// let client: HealthClient<RetryMetadata<Channel>> =
///     HealthClient::new(RetryMetadata::new(channel));
/// # let _ = client;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RetryMetadata<S> {
    inner: S,
}

impl<S> RetryMetadata<S> {
    /// Wraps `inner`, a client's channel.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The channel inside.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> tower_service::Service<http::Request<B>> for RetryMetadata<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RetryMetadataFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        insert_retry_metadata(request.headers_mut());
        RetryMetadataFuture {
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RetryMetadata`].
    pub struct RetryMetadataFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F, R, E> Future for RetryMetadataFuture<F>
where
    F: Future<Output = Result<R, E>>,
    E: Into<BoxError>,
{
    type Output = Result<R, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .inner
            .poll(cx)
            .map_err(|error| deadline_exceeded(error.into()))
    }
}

/// A request that tonic's own timer cut, as `DEADLINE_EXCEEDED` keeping the error as
/// its source (so classified as that timeout is); any other error as it is.
fn deadline_exceeded(error: BoxError) -> BoxError {
    let mut next: Option<&(dyn Error + 'static)> = Some(&*error);
    while let Some(e) = next {
        if e.is::<tonic::TimeoutExpired>() {
            let mut status = tonic::Status::deadline_exceeded(error.to_string());
            status.set_source(Arc::from(error));
            return Box::new(status);
        }
        next = e.source();
    }
    error
}
