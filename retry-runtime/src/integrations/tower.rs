//! Tower layers for the serving side. [`DeadlineLayer`] installs an incoming request's
//! deadline for the task handling it, so that every `#[retry]` call below it stops
//! retrying when the caller has given up; [`RetryAdmissionLayer`] sheds retries before
//! first attempts. Enabled by the `tower` cargo feature.
//!
//! The deadline is read from the request's `grpc-timeout` header (written by
//! [`crate::integrations::http::insert_deadline`] or
//! [`RequestBuilderExt::with_deadline`](crate::integrations::reqwest::RequestBuilderExt::with_deadline)
//! on the calling side); a request without one, or with a malformed one, is handled
//! with no deadline, or with [`DeadlineLayer::with_default`]'s.
//!
//! ```
//! use std::time::Duration;
//! use persevere::tower::DeadlineLayer;
//!
//! // With axum: `Router::new().route(...).layer(DeadlineLayer::new())`.
//! let layer = DeadlineLayer::new().with_default(Duration::from_secs(10));
//! # let _ = layer;
//! ```

mod admission;

pub use admission::{
    AdmissionFuture, AdmissionSnapshot, RetryAdmission, RetryAdmissionLayer, is_retry,
};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::layer::scope::{InLayer, scoped};
use crate::time::clock::{Clock, TokioClock};

/// Wraps a service in [`DeadlineService`]: each request is handled under the deadline its
/// `grpc-timeout` header carries, so the `#[retry]` calls made while handling it, and
/// [`deadline::remaining`](crate::layer::deadline::remaining), see the caller's time left.
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use persevere::tower::DeadlineLayer;
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # struct Handler;
/// # impl Service<http::Request<()>> for Handler {
/// #     type Response = Option<Duration>;
/// #     type Error = Infallible;
/// #     type Future = std::pin::Pin<Box<dyn Future<Output = Result<Option<Duration>, Infallible>>>>;
/// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
/// #         std::task::Poll::Ready(Ok(()))
/// #     }
/// #     fn call(&mut self, _: http::Request<()>) -> Self::Future {
/// #         Box::pin(async { Ok(persevere::deadline::remaining()) })
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // `Handler` answers with `deadline::remaining()` as its handler sees it.
/// let mut service = DeadlineLayer::new().layer(Handler);
/// let request = http::Request::builder().header("grpc-timeout", "5S").body(()).unwrap();
/// assert_eq!(service.call(request).await.unwrap(), Some(Duration::from_secs(5)));
///
/// // A request without a deadline gets the layer's default, if it has one.
/// let mut service = DeadlineLayer::new().with_default(Duration::from_secs(10)).layer(Handler);
/// let request = http::Request::builder().body(()).unwrap();
/// assert_eq!(service.call(request).await.unwrap(), Some(Duration::from_secs(10)));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DeadlineLayer {
    default: Option<Duration>,
}

impl DeadlineLayer {
    /// A layer that uses the deadline each request carries, and none otherwise.
    pub const fn new() -> Self {
        Self { default: None }
    }

    /// Gives requests that carry no deadline this much time.
    pub const fn with_default(mut self, timeout: Duration) -> Self {
        self.default = Some(timeout);
        self
    }
}

impl<S> tower_layer::Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> DeadlineService<S> {
        DeadlineService {
            inner,
            default: self.default,
        }
    }
}

/// A service whose calls run with the deadline their request carries.
#[derive(Clone, Copy, Debug)]
pub struct DeadlineService<S> {
    inner: S,
    default: Option<Duration>,
}

impl<S, B> tower_service::Service<http::Request<B>> for DeadlineService<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let timeout = crate::integrations::http::deadline_from(request.headers()).or(self.default);
        let deadline = timeout.and_then(|t| TokioClock::now().checked_add(t));
        DeadlineFuture {
            inner: scoped(deadline, self.inner.call(request)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`DeadlineService`].
    pub struct DeadlineFuture<F> {
        #[pin]
        inner: InLayer<F>,
    }
}

impl<F: Future> Future for DeadlineFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx).map(|(output, _)| output)
    }
}
