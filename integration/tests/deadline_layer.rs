//! The tower layer that installs an incoming request's `grpc-timeout` as its deadline.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use persevere::tower::DeadlineLayer;
use persevere::{RetryBudget, deadline, idempotent, retry};
use tower::{Layer, Service, ServiceExt, service_fn};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();
static CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(deadline = "30s", attempts = 1000, base = "50ms", cap = "50ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn downstream() -> io::Result<()> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

async fn handler(_request: http::Request<()>) -> Result<Option<Duration>, Infallible> {
    let seen = deadline::remaining();
    let _ = downstream().await;
    Ok(seen)
}

fn request(grpc_timeout: Option<&str>) -> http::Request<()> {
    let mut builder = http::Request::builder().uri("/");
    if let Some(value) = grpc_timeout {
        builder = builder.header("grpc-timeout", value);
    }
    builder.body(()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_request_deadline_bounds_the_retries_below_it_and_a_malformed_one_is_ignored() {
    let service = DeadlineLayer::new().layer(service_fn(handler));
    let seen = service.oneshot(request(Some("260m"))).await.unwrap();
    assert_eq!(seen, Some(Duration::from_millis(260)));
    // Attempts at 0, 50, ..., 250 ms; the next wait would end past 260 ms.
    assert_eq!(CALLS.swap(0, Ordering::SeqCst), 6);

    // Without a header, the layer's default applies, if it has one.
    let service = DeadlineLayer::new()
        .with_default(Duration::from_millis(120))
        .layer(service_fn(handler));
    let seen = service.oneshot(request(None)).await.unwrap();
    assert_eq!(seen, Some(Duration::from_millis(120)));
    assert_eq!(CALLS.swap(0, Ordering::SeqCst), 3);

    let service = DeadlineLayer::new().layer(service_fn(handler));
    let seen = service.oneshot(request(Some("garbage"))).await.unwrap();
    assert_eq!(seen, None);
    // No deadline but the function's own 30 s: attempts every 50 ms for 30 s.
    assert_eq!(CALLS.swap(0, Ordering::SeqCst), 600);
}

/// A service that is ready only when `ready` says so: not yet, or failing.
struct Busy {
    ready: Poll<Result<(), &'static str>>,
}

impl tower::Service<http::Request<()>> for Busy {
    type Response = ();
    type Error = &'static str;
    type Future = std::future::Ready<Result<(), &'static str>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), &'static str>> {
        self.ready
    }

    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        std::future::ready(Ok(()))
    }
}

// The layer passes on its service's backpressure: not ready while the service is not,
// and the service's error when it fails. Can fail: the layer always ready.
#[tokio::test(start_paused = true)]
async fn the_layer_is_ready_only_when_its_service_is() {
    let mut busy = DeadlineLayer::new().layer(Busy {
        ready: Poll::Pending,
    });
    let waited = tokio::time::timeout(Duration::from_secs(1), busy.ready()).await;
    assert!(waited.is_err(), "ready while its service is not");

    let mut failing = DeadlineLayer::new().layer(Busy {
        ready: Poll::Ready(Err("overloaded")),
    });
    assert_eq!(failing.ready().await.err(), Some("overloaded"));

    let mut idle = DeadlineLayer::new().layer(Busy {
        ready: Poll::Ready(Ok(())),
    });
    idle.ready()
        .await
        .unwrap()
        .call(request(None))
        .await
        .unwrap();
}
