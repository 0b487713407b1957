//! What the retry admission layer (`persevere::tower::RetryAdmissionLayer`) costs a
//! request, against the inner service called directly.
//!
//! `cargo bench --manifest-path integration/benches/default-features/Cargo.toml --bench
//! admission`. The inner service drops the request and answers at once; each request
//! carries eight headers, as a browser's or an SDK's does, and is made just before its
//! call (one per iteration), so that its headers are in the cache as a request just
//! parsed by a server is: made in batches ahead, the layer's read of them is mostly
//! cache misses, which a real server does not have. Groups compare the inner service alone with it behind
//! the layer: a first attempt, a retry admitted (the budget never runs out: each answer
//! earns back the token), and a retry shed (the layer answers itself).

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use persevere::tower::RetryAdmissionLayer;
use tower::{Layer, Service};

#[derive(Clone, Copy)]
struct Inner;

impl Service<Request<()>> for Inner {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Self::Future {
        drop(black_box(request));
        ready(Ok(Response::new(())))
    }
}

fn request(attempt: Option<&'static str>) -> Request<()> {
    let mut builder = Request::builder()
        .uri("/users/7")
        .header("host", "api.example.com")
        .header("user-agent", "bench/1.0")
        .header("accept", "application/json")
        .header("accept-encoding", "gzip, br")
        .header("content-type", "application/json")
        .header("authorization", "Bearer abcdefghijklmnop")
        .header("x-request-id", "0f3e2b1a")
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
    if let Some(attempt) = attempt {
        builder = builder.header("persevere-attempt", attempt);
    }
    builder.body(()).unwrap()
}

/// Calls `service` with `request` and polls the answer to its end.
fn call<S>(service: &mut S, request: Request<()>) -> Response<()>
where
    S: Service<Request<()>, Response = Response<()>, Error = Infallible>,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut future = pin!(service.call(request));
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(response)) => response,
        _ => unreachable!("the inner service answers at once"),
    }
}

fn admission(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut group = c.benchmark_group("admission");
    group.measurement_time(Duration::from_secs(5));
    let mut inner = Inner;
    group.bench_function("inner alone", |b| {
        b.iter_batched(
            || request(None),
            |r| call(&mut inner, r),
            BatchSize::PerIteration,
        )
    });
    let mut layered = RetryAdmissionLayer::new().layer(Inner);
    group.bench_function("first attempt", |b| {
        b.iter_batched(
            || request(None),
            |r| call(&mut layered, r),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("retry admitted", |b| {
        b.iter_batched(
            || request(Some("2")),
            |r| call(&mut layered, r),
            BatchSize::PerIteration,
        )
    });
    let mut shedding = RetryAdmissionLayer::new().with_cap(0).layer(Inner);
    group.bench_function("retry shed", |b| {
        b.iter_batched(
            || request(Some("2")),
            |r| call(&mut shedding, r),
            BatchSize::PerIteration,
        )
    });
    let first = request(None);
    group.bench_function("is_retry alone", |b| {
        b.iter(|| persevere::tower::is_retry(black_box(first.headers())))
    });
    group.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
