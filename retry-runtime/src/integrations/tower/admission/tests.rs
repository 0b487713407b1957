use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::*;

/// An inner service that counts its calls and answers with `status`.
#[derive(Clone)]
struct Answer {
    calls: Arc<AtomicU32>,
    status: Arc<AtomicU32>,
}

impl Answer {
    fn new(status: u16) -> Self {
        Self {
            calls: Arc::default(),
            status: Arc::new(AtomicU32::new(u32::from(status))),
        }
    }

    fn set(&self, status: u16) {
        self.status.store(u32::from(status), Ordering::SeqCst);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<Request<()>> for Answer {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let status = StatusCode::from_u16(self.status.load(Ordering::SeqCst) as u16).unwrap();
        let mut response = Response::new("answered".to_owned());
        *response.status_mut() = status;
        ready(Ok(response))
    }
}

fn request(headers: &[(&'static str, &'static str)]) -> Request<()> {
    let mut builder = Request::builder();
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap()
}

const RETRY: (&str, &str) = ("persevere-attempt", "2");

async fn send(
    service: &mut RetryAdmission<Answer>,
    headers: &[(&'static str, &'static str)],
) -> Response<String> {
    service.call(request(headers)).await.unwrap()
}

/// A layer that earns nothing: its cap is all it admits.
fn fixed(cap: u32) -> RetryAdmissionLayer {
    RetryAdmissionLayer::new()
        .with_cap(cap)
        .with_per_answer(0.0)
        .with_per_second(0.0)
}

#[test]
fn every_attempt_header_is_read_by_its_own_counting() {
    let cases: &[(&[(&str, &str)], bool)] = &[
        (&[], false),
        (&[("persevere-attempt", "1")], false),
        (&[("persevere-attempt", "2")], true),
        (&[("persevere-attempt", " 7 ")], true),
        (&[("x-envoy-attempt-count", "1")], false),
        (&[("x-envoy-attempt-count", "2")], true),
        (&[("x-stainless-retry-count", "0")], false),
        (&[("x-stainless-retry-count", "1")], true),
        (&[("grpc-previous-rpc-attempts", "0")], false),
        (&[("grpc-previous-rpc-attempts", "1")], true),
        (&[("amz-sdk-request", "attempt=1; max=3")], false),
        (&[("amz-sdk-request", "attempt=2; max=3")], true),
        (
            &[("amz-sdk-request", "ttl=20250101T000000Z; attempt=3; max=3")],
            true,
        ),
        (&[("amz-sdk-request", "max=3")], false),
        // Malformed: a first attempt.
        (&[("persevere-attempt", "two")], false),
        (&[("persevere-attempt", "-2")], false),
        (&[("x-envoy-attempt-count", "")], false),
        (&[("amz-sdk-request", "attempt=x")], false),
        (
            &[("grpc-previous-rpc-attempts", "99999999999999999999999")],
            true,
        ),
        (&[("persevere-attempt", "+2")], false),
        (&[("x-envoy-attempt-count", "1, 2")], true),
        (&[("x-envoy-attempt-count", "1,1")], false),
        (&[("amz-sdk-request", "attempt=1; attempt=2")], false),
        (&[("amz-sdk-request", "attempt=x; attempt=2")], false),
    ];
    for (headers, retry) in cases {
        assert_eq!(is_retry(request(headers).headers()), *retry, "{headers:?}");
    }
}

// A budget of 3 admits three retries and sheds the fourth with a cheap answer that
// never reaches the inner service; first attempts pass all along.
// Can fail: a fourth retry admitted, a shed retry reaching the service, a first attempt
// refused.
#[tokio::test(start_paused = true)]
async fn retries_pass_while_the_budget_allows_first_attempts_always() {
    let layer = fixed(3);
    let inner = Answer::new(200);
    let mut service = layer.layer(inner.clone());
    for _ in 0..3 {
        assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
    }
    let shed = send(&mut service, &[RETRY]).await;
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["x-should-retry"], "false");
    assert_eq!(shed.headers()["retry-after"], "1");
    assert_eq!(shed.body(), "");
    assert_eq!(inner.calls(), 3);
    for _ in 0..5 {
        assert_eq!(send(&mut service, &[]).await.status(), StatusCode::OK);
    }
    assert_eq!(inner.calls(), 8);
    let s = layer.snapshot();
    assert_eq!(
        (s.first_attempts, s.retries_admitted, s.retries_shed),
        (5, 3, 1)
    );
}

// A gRPC retry refused gets UNAVAILABLE with a pushback that says stop.
#[tokio::test(start_paused = true)]
async fn a_grpc_retry_is_refused_in_grpc_s_words() {
    let mut service = fixed(0).layer(Answer::new(200));
    let shed = send(
        &mut service,
        &[
            ("content-type", "application/grpc+proto"),
            ("grpc-previous-rpc-attempts", "1"),
        ],
    )
    .await;
    assert_eq!(shed.status(), StatusCode::OK);
    assert_eq!(shed.headers()["grpc-status"], "14");
    assert_eq!(shed.headers()["grpc-retry-pushback-ms"], "-1");
    assert_eq!(shed.headers()["content-type"], "application/grpc+proto");
    // In any case; gRPC-Web too, answered in its own content type; not a look-alike.
    for (content_type, grpc) in [
        ("Application/GRPC", true),
        ("application/grpc-web+proto", true),
        ("application/grpc;charset=utf-8", true),
        ("application/grpcfoo", false),
        ("application/json", false),
    ] {
        let shed = send(&mut service, &[("content-type", content_type), RETRY]).await;
        assert_eq!(
            shed.headers().contains_key("grpc-status"),
            grpc,
            "{content_type}"
        );
        assert_eq!(shed.status() == StatusCode::OK, grpc, "{content_type}");
        if grpc {
            assert_eq!(shed.headers()["content-type"], content_type);
        }
    }
}

// Each answer not over capacity earns a token, up to the cap; time earns one a second.
// Can fail: earning from an answer over capacity, beyond the cap, or not by time.
#[tokio::test(start_paused = true)]
async fn answers_and_time_earn_tokens_up_to_the_cap() {
    let layer = RetryAdmissionLayer::new().with_cap(2).with_per_second(0.0);
    let inner = Answer::new(200);
    let mut service = layer.layer(inner.clone());
    for _ in 0..2 {
        send(&mut service, &[RETRY]).await;
    }
    assert_eq!(
        layer.snapshot().tokens_milli,
        2000,
        "each admitted retry answered earns one back"
    );
    let layer = fixed(2).with_per_answer(0.5);
    let mut service = layer.layer(inner.clone());
    send(&mut service, &[RETRY]).await;
    send(&mut service, &[RETRY]).await;
    assert_eq!(layer.snapshot().tokens_milli, 1000);
    for _ in 0..10 {
        send(&mut service, &[]).await;
    }
    assert_eq!(layer.snapshot().tokens_milli, 2000);

    let layer = fixed(5).with_per_second(1.0);
    let mut service = layer.layer(inner.clone());
    for _ in 0..5 {
        send(&mut service, &[RETRY]).await;
    }
    assert_eq!(
        send(&mut service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    tokio::time::advance(Duration::from_millis(2500)).await;
    assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
    assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
    assert_eq!(
        send(&mut service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    // (A budget that earns nothing by time earns nothing in a long while either.)
    let idle = fixed(1);
    let mut idle_service = idle.layer(inner.clone());
    send(&mut idle_service, &[RETRY]).await;
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(
        send(&mut idle_service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}

// After an answer over capacity, no retry passes for the quiet time, tokens or not.
// Can fail: a retry admitted while the service has just said it has no room.
#[tokio::test(start_paused = true)]
async fn an_answer_over_capacity_stops_retries_for_a_moment() {
    for over in [503, 429] {
        let layer = RetryAdmissionLayer::new()
            .with_quiet(Duration::from_millis(800))
            .with_quiet_after(1);
        let inner = Answer::new(over);
        let mut service = layer.layer(inner.clone());
        assert_eq!(send(&mut service, &[]).await.status().as_u16(), over);
        inner.set(200);
        assert_eq!(
            send(&mut service, &[RETRY]).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            send(&mut service, &[]).await.status(),
            StatusCode::OK,
            "first attempts pass"
        );
        tokio::time::advance(Duration::from_millis(799)).await;
        assert_eq!(
            send(&mut service, &[RETRY]).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
        assert_eq!(inner.calls(), 3);
    }
}

// An answer with gRPC's RESOURCE_EXHAUSTED or UNAVAILABLE in its headers is over
// capacity too; a served 404 earns; a 500 or 502, or a gRPC error, earns nothing.
#[test]
fn what_each_answer_says() {
    let with = |status: u16, grpc: Option<&'static str>| {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        if let Some(code) = grpc {
            response
                .headers_mut()
                .insert("grpc-status", HeaderValue::from_static(code));
        }
        super::Answer::of(&response)
    };
    use super::Answer as A;
    assert_eq!(with(503, None), A::OverCapacity);
    assert_eq!(with(429, None), A::OverCapacity);
    assert_eq!(with(200, Some("14")), A::OverCapacity);
    assert_eq!(with(200, Some("8")), A::OverCapacity);
    assert_eq!(with(200, Some("0")), A::Served);
    assert_eq!(with(200, None), A::Served);
    assert_eq!(with(404, None), A::Served);
    assert_eq!(with(200, Some("13")), A::Failed);
    assert_eq!(with(500, None), A::Failed);
    assert_eq!(with(502, None), A::Failed);
}

// A failure that is not over capacity earns nothing and stops nothing.
// Can fail: a 502 earning a token, or starting the quiet time.
#[tokio::test(start_paused = true)]
async fn a_failed_answer_earns_nothing() {
    let layer = fixed(2).with_per_answer(1.0);
    let inner = Answer::new(502);
    let mut service = layer.layer(inner.clone());
    for _ in 0..2 {
        assert_eq!(send(&mut service, &[RETRY]).await.status().as_u16(), 502);
    }
    assert_eq!(layer.snapshot().tokens_milli, 0);
    assert_eq!(
        send(&mut service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    inner.set(200);
    send(&mut service, &[]).await;
    assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
}

// Time earns exactly what the layer was given: half a token a second is one in 2 s.
#[tokio::test(start_paused = true)]
async fn time_earns_the_rate_it_was_given() {
    let layer = fixed(5).with_per_second(0.5);
    let mut service = layer.layer(Answer::new(200));
    for _ in 0..5 {
        send(&mut service, &[RETRY]).await;
    }
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);
    // Two earned, one spent.
    assert_eq!(layer.snapshot().tokens_milli, 1000);
}

/// An inner service not ready yet.
struct Busy;

impl Service<Request<()>> for Busy {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Pending
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        unreachable!("never ready")
    }
}

// The layer is ready when the service it wraps is: it adds no capacity of its own.
#[test]
fn the_layer_is_ready_when_its_service_is() {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(
        RetryAdmissionLayer::new()
            .layer(Busy)
            .poll_ready(&mut cx)
            .is_pending()
    );
    assert!(
        RetryAdmissionLayer::new()
            .layer(Answer::new(200))
            .poll_ready(&mut cx)
            .is_ready()
    );
}

// One answer over capacity is a blip: the retry after it passes. Ten in one second are
// an overload; nine in one second and one in the next are not.
// Can fail: a single 503 shedding the retry that follows it (a blip made a failure), or
// the count not kept per second.
#[tokio::test(start_paused = true)]
async fn the_quiet_time_begins_at_the_tenth_overload_in_a_second() {
    let layer = RetryAdmissionLayer::new();
    let inner = Answer::new(503);
    let mut service = layer.layer(inner.clone());
    send(&mut service, &[]).await;
    assert_eq!(send(&mut service, &[RETRY]).await.status().as_u16(), 503);
    assert_eq!(
        layer.snapshot().retries_shed,
        0,
        "the retry reached the service"
    );
    // Eight more in this second, 50 ms apart: ten in all, with the retry's own.
    for _ in 0..8 {
        tokio::time::advance(Duration::from_millis(50)).await;
        send(&mut service, &[]).await;
    }
    inner.set(200);
    assert_eq!(
        send(&mut service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(layer.snapshot().retries_shed, 1);

    let layer = RetryAdmissionLayer::new();
    let inner = Answer::new(503);
    let mut service = layer.layer(inner.clone());
    for _ in 0..9 {
        send(&mut service, &[]).await;
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    send(&mut service, &[]).await;
    inner.set(200);
    assert_eq!(send(&mut service, &[RETRY]).await.status(), StatusCode::OK);

    // Ten in a later second are an overload too.
    inner.set(503);
    tokio::time::advance(Duration::from_secs(5)).await;
    for _ in 0..10 {
        send(&mut service, &[]).await;
    }
    inner.set(200);
    assert_eq!(
        send(&mut service, &[RETRY]).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}
