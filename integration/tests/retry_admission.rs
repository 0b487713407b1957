//! The server sheds retries before first attempts (`persevere::tower::RetryAdmissionLayer`),
//! with clients that say which attempt they send (`persevere::http::AttemptHeader`):
//! against a real axum server on 127.0.0.1 with reqwest, and at twice a handler's
//! capacity in virtual time.

mod support;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use persevere::http::{AttemptHeader, insert_attempt};
use persevere::reqwest::{RequestBuilderExt, RequestError, ResponseExt};
use persevere::tower::{RetryAdmissionLayer, is_retry};
use persevere::{Class, Classify, Jitter, Policy, RetryBudget, idempotent, retry};
use reqwest::Client;
use support::{Reply, Server, client};
use tower::{Layer, Service};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

#[retry(attempts = 4, base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn get(client: &Client, url: &str) -> Result<String, RequestError> {
    let response = client
        .get(url)
        .with_attempt(AttemptHeader::Persevere)
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.text().await?)
}

// A retry carries its attempt number, counting up; a first attempt carries none. The
// layer lets the retries of a server that is failing, not full, through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sees_the_attempt_header_count_up() {
    let layer = RetryAdmissionLayer::new();
    let server = Server::scripted_with(
        [Reply::status(502), Reply::status(502)],
        Reply::ok(),
        |router| router.layer(layer.clone()),
    )
    .await;
    assert_eq!(get(&client(), &server.url("/")).await.unwrap(), "OK");
    let seen: Vec<Option<String>> = server
        .log
        .requests()
        .iter()
        .map(|r| r.header("persevere-attempt").map(str::to_owned))
        .collect();
    assert_eq!(seen, [None, Some("2".to_owned()), Some("3".to_owned())]);
    let s = layer.snapshot();
    assert_eq!(
        (s.first_attempts, s.retries_admitted, s.retries_shed),
        (1, 2, 0)
    );
}

// A server over capacity (503; a layer that takes one such answer as an overload): the
// layer sheds the retry that follows at once, with an answer that makes the client
// stop: the handler sees one request, and the client makes two (the first attempt, and
// the retry refused), not four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_retry_stops_the_client() {
    let layer = RetryAdmissionLayer::new().with_quiet_after(1);
    let server =
        Server::scripted_with([], Reply::status(503), |router| router.layer(layer.clone())).await;
    let error = get(&client(), &server.url("/")).await.unwrap_err();
    assert_eq!(server.log.len(), 1);
    let s = layer.snapshot();
    assert_eq!(
        (s.first_attempts, s.retries_admitted, s.retries_shed),
        (1, 0, 1)
    );
    assert_eq!(error.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(error.classify(), Class::Permanent);
    assert_eq!(
        error.to_string(),
        "the server answered 503 Service Unavailable and asked not to retry"
    );
}

// A blip: one 429 with the server's own wait, then a success. The default layer takes one
// answer over capacity for a blip, so the client's retry, after the wait, passes.
// Can fail: a layer whose quiet time begins at the first 429 (the call then fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blip_s_retry_passes_after_the_server_s_wait() {
    let layer = RetryAdmissionLayer::new();
    let server = Server::scripted_with(
        [Reply::status(429).header("retry-after-ms", "300")],
        Reply::ok(),
        |router| router.layer(layer.clone()),
    )
    .await;
    assert_eq!(get(&client(), &server.url("/")).await.unwrap(), "OK");
    assert_eq!(server.log.answers(), [Some(429), Some(200)]);
    assert_eq!(layer.snapshot().retries_shed, 0);
}

/// A handler of limited capacity: at most `capacity` requests at once, each taking
/// `takes`; a request beyond that is turned away with a 503 at once. Counts the first
/// attempts it turns away while a retry it admitted is in flight.
#[derive(Clone)]
struct Limited {
    capacity: u32,
    takes: Duration,
    in_flight: Rc<Cell<u32>>,
    retries_in_flight: Rc<Cell<u32>>,
    first_attempts: Rc<Cell<u32>>,
    first_turned_away_beside_retries: Rc<Cell<u32>>,
    retries_served: Rc<Cell<u32>>,
}

impl Service<Request<()>> for Limited {
    type Response = Response<()>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Response<()>, Self::Error>>>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Self::Future {
        let retry = is_retry(request.headers());
        if !retry {
            self.first_attempts.set(self.first_attempts.get() + 1);
        }
        let this = self.clone();
        Box::pin(async move {
            let mut response = Response::new(());
            if this.in_flight.get() >= this.capacity {
                if !retry && this.retries_in_flight.get() > 0 {
                    let n = &this.first_turned_away_beside_retries;
                    n.set(n.get() + 1);
                }
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                return Ok(response);
            }
            this.in_flight.set(this.in_flight.get() + 1);
            if retry {
                this.retries_in_flight.set(this.retries_in_flight.get() + 1);
            }
            tokio::time::sleep(this.takes).await;
            this.in_flight.set(this.in_flight.get() - 1);
            if retry {
                this.retries_in_flight.set(this.retries_in_flight.get() - 1);
                this.retries_served.set(this.retries_served.get() + 1);
            }
            Ok(response)
        })
    }
}

/// Offers twice the handler's capacity for 5 s (2,000 calls a second against 100 at
/// once of 100 ms each: 1,000 a second), each call retrying a 503 up to 3 times with
/// the attempt header; returns the first attempts, those turned away while a retry held
/// a place, and the retries the layer admitted and shed.
fn overload(layer: RetryAdmissionLayer) -> (u32, u32, u64, u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    persevere::seed_thread_rng(7);
    let local = tokio::task::LocalSet::new();
    let handler = Limited {
        capacity: 100,
        takes: Duration::from_millis(100),
        in_flight: Rc::default(),
        retries_in_flight: Rc::default(),
        first_attempts: Rc::default(),
        first_turned_away_beside_retries: Rc::default(),
        retries_served: Rc::default(),
    };
    let policy: &'static Policy = Box::leak(Box::new(
        Policy::new()
            .with_attempts(4)
            .with_base(Duration::from_millis(20))
            .with_jitter(Jitter::Full)
            .with_budget(&UNLIMITED),
    ));
    local.block_on(&runtime, async {
        let service = layer.layer(handler.clone());
        let start = tokio::time::Instant::now();
        let mut calls = Vec::new();
        for n in 0..10_000u32 {
            tokio::time::sleep_until(start + Duration::from_micros(500) * n).await;
            let service = service.clone();
            calls.push(tokio::task::spawn_local(async move {
                let service = &service;
                let _ = persevere::retry_fn(policy, move || async move {
                    let mut request = Request::new(());
                    insert_attempt(request.headers_mut(), AttemptHeader::Envoy);
                    let response = service.clone().call(request).await.unwrap();
                    persevere::http::check(response.status(), response.headers())
                })
                .await;
            }));
        }
        for call in calls {
            call.await.unwrap();
        }
    });
    let s = layer.snapshot();
    (
        handler.first_attempts.get(),
        handler.first_turned_away_beside_retries.get(),
        s.retries_admitted,
        s.retries_shed,
    )
}

// At twice the handler's capacity, the layer sheds retries before the handler has to
// turn first attempts away: first attempts turned away while an admitted retry holds a
// place stay under 1 % of first attempts.
// Can fail: without the quiet time after an answer over capacity (below), retries take
// the places of first attempts.
#[test]
fn at_twice_capacity_retries_are_shed_before_first_attempts() {
    let (first, beside_retries, admitted, shed) = overload(RetryAdmissionLayer::new());
    println!(
        "default: {first} first attempts, {beside_retries} turned away beside retries, {admitted} retries admitted, {shed} shed"
    );
    assert_eq!(first, 10_000);
    assert!(shed > 0);
    assert!(
        u64::from(beside_retries) * 100 < u64::from(first),
        "{beside_retries} of {first}"
    );

    let (first, beside_retries, admitted, shed) =
        overload(RetryAdmissionLayer::new().with_quiet(Duration::ZERO));
    println!(
        "no quiet: {first} first attempts, {beside_retries} turned away beside retries, {admitted} retries admitted, {shed} shed"
    );
    assert!(
        u64::from(beside_retries) * 100 >= u64::from(first),
        "{beside_retries} of {first}"
    );
}
