//! The retry admission layer allocates nothing on its pass path: a first attempt, and a
//! retry it admits, cost no allocation beyond the inner service's own.

#[path = "../../tests/support/counting.rs"]
mod counting;

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use counting::allocations;
use http::{Request, Response};
use persevere::tower::RetryAdmissionLayer;
use tower::{Layer, Service};

/// An inner service that answers at once and allocates nothing.
#[derive(Clone, Copy)]
struct Ok200;

impl Service<Request<()>> for Ok200 {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        ready(Ok(Response::new(())))
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_pass_path_allocates_nothing() {
    let layer = RetryAdmissionLayer::new();
    let mut service = layer.layer(Ok200);
    let first = || {
        Request::builder()
            .header("content-type", "application/json")
            .body(())
            .unwrap()
    };
    let retry = || {
        Request::builder()
            .header("persevere-attempt", "2")
            .body(())
            .unwrap()
    };
    // Warm up: the runtime's first timer read and the like.
    service.call(first()).await.unwrap();
    for (what, request) in [("a first attempt", first()), ("a retry admitted", retry())] {
        let (future, count) = allocations(|| service.call(request));
        assert_eq!(count, 0, "{what}: the call");
        let (_, count) = allocations(|| {
            let waker = std::task::Waker::noop();
            let mut cx = Context::from_waker(waker);
            let mut future = std::pin::pin!(future);
            assert!(future.as_mut().poll(&mut cx).is_ready());
        });
        assert_eq!(count, 0, "{what}: the answer");
    }
    assert_eq!(layer.snapshot().retries_admitted, 1);
}
