//! Retries across layers and across services, against real HTTP servers on 127.0.0.1:
//! nested `#[retry]` functions do not multiply their attempts, and a deadline sent in
//! `grpc-timeout` bounds the retries of the service that receives it.
//!
//! Time is real, so time bounds are one-sided as in `http_server.rs`: a wait is never
//! shorter than asked, and the upper bounds leave room for a busy machine.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use http::{HeaderMap, StatusCode};
use persevere::reqwest::{RequestBuilderExt, RequestError, ResponseExt};
use persevere::{RetryBudget, deadline, idempotent, retry};
use reqwest::Client;
use support::{Log, Reply, Server, client, status_of};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// These tests count attempts; the default per-function budget would cut them short.
static UNLIMITED: RetryBudget = RetryBudget::unlimited();

async fn get(client: &Client, url: &str) -> Result<String, RequestError> {
    let response = client
        .get(url)
        .with_deadline()
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.text().await?)
}

// ---- 8. Retry at one layer ------------------------------------------------------------

#[retry(attempts = 3, base = "20ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn inner(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

#[retry(attempts = 3, base = "20ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn outer(client: &Client, url: &str) -> Result<String, RequestError> {
    inner(client, url).await
}

#[retry(
    attempts = 3,
    base = "20ms",
    jitter = "none",
    layers = "every",
    budget = UNLIMITED
)]
#[idempotent]
async fn outer_every(client: &Client, url: &str) -> Result<String, RequestError> {
    inner(client, url).await
}

// Two layers of 3 attempts over an always-503 server: the inner layer retries, the
// outer one passes its failure on, so the server sees 3 requests, not 3 x 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_layers_make_one_layers_requests() {
    let server = Server::scripted([], Reply::status(503)).await;
    let error = outer(&client(), &server.url("/")).await.unwrap_err();
    assert_eq!(status_of(&error), 503);
    assert_eq!(server.log.len(), 3);
    // The inner layer's waits, 20 ms then 40 ms.
    let gaps = server.log.gaps();
    assert!(gaps[0] >= ms(20) && gaps[1] >= ms(40), "{gaps:?}");
}

// With `layers = "every"` the outer layer retries the inner one's failures too: 3 x 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_every_multiplies_the_requests() {
    let server = Server::scripted([], Reply::status(503)).await;
    let error = outer_every(&client(), &server.url("/")).await.unwrap_err();
    assert_eq!(status_of(&error), 503);
    assert_eq!(server.log.len(), 9);
}

// ---- 9. A deadline carried from service to service ------------------------------------

/// Service A's call to service B: a policy that, left to itself, would retry for 30 s
/// and 1000 attempts, once every 20 ms.
#[retry(
    deadline = "30s",
    base = "20ms",
    cap = "20ms",
    jitter = "none",
    attempts = 1000,
    budget = UNLIMITED
)]
#[idempotent]
async fn call_b(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

/// Service A: what it read from each request, and when it was done with it.
struct ServiceA {
    client: Client,
    b_url: String,
    log: Log,
    handled: std::sync::Mutex<Vec<Handled>>,
}

/// How A handled one request.
#[derive(Clone, Copy, Debug)]
struct Handled {
    /// The deadline the request carried, as the time left.
    left: Option<Duration>,
    /// A moment inside the deadline scope, before the call to B: the scope's deadline
    /// is at most `left` after it.
    scoped: Instant,
    /// When A had its answer.
    answered: Instant,
}

/// A's handler: it calls B under the deadline its caller sent, and answers 504 if B
/// did not come through in time.
async fn service_a(State(a): State<Arc<ServiceA>>, headers: HeaderMap) -> impl IntoResponse {
    let at = Instant::now();
    a.log.push(support::Request {
        at,
        method: http::Method::GET,
        path: "/".to_owned(),
        headers: headers.clone(),
        body: String::new(),
        answered: None,
    });
    let left = persevere::http::deadline_from(&headers);
    let call = async {
        let scoped = Instant::now();
        (scoped, call_b(&a.client, &a.b_url).await)
    };
    let (scoped, outcome) = match left {
        Some(left) => deadline::scope(left, call).await,
        None => call.await,
    };
    a.handled.lock().unwrap().push(Handled {
        left,
        scoped,
        answered: Instant::now(),
    });
    match outcome {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (StatusCode::GATEWAY_TIMEOUT, e.to_string()),
    }
}

// The caller gives A 300 ms, in `grpc-timeout`. A's own policy would call B for 30 s;
// under the caller's deadline it stops when the caller has given up: B sees one request
// per 20 ms for at most 300 ms, and none after A's deadline but for a late timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_in_grpc_timeout_bounds_the_next_services_retries() {
    let b = Server::scripted([], Reply::status(503)).await;
    let a_log = Log::default();
    let a_state = Arc::new(ServiceA {
        client: client(),
        b_url: b.url("/"),
        log: a_log.clone(),
        handled: Default::default(),
    });
    let a = Server::serve(
        Router::new()
            .fallback(service_a)
            .with_state(a_state.clone()),
        a_log,
    )
    .await;

    let client = client();
    let start = Instant::now();
    let response = deadline::scope(ms(300), async {
        client.get(a.url("/")).with_deadline().send().await
    })
    .await
    .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);

    // A received the caller's deadline: what was left of 300 ms when it sent.
    let a_requests = a.log.requests();
    assert_eq!(a_requests.len(), 1);
    let handled = a_state.handled.lock().unwrap()[0];
    let left = handled.left.expect("A's request carried no grpc-timeout");
    assert!(left <= ms(300) && left > ms(150), "{left:?}");
    // A's deadline: `left` after A received the request, or a moment later, when A
    // opened its scope; these two instants bound it.
    let earliest_deadline = a_requests[0].at + left;
    let latest_deadline = handled.scoped + left;

    // B: retried every 20 ms at the least, and only while A's deadline left room for
    // another wait, so the k-th retry needs k * 20 ms < 300 ms: at most 14 retries, 15
    // requests, far from the policy's 1000.
    let b_requests = b.log.requests();
    let count = b_requests.len();
    assert!((3..=15).contains(&count), "B saw {count} requests");
    for gap in b.log.gaps() {
        assert!(gap >= ms(20), "{gap:?}");
    }
    // Each retry was decided after B had answered the request before it, and granted
    // only if its 20 ms wait ended before A's deadline: every request but the last
    // arrived more than 20 ms before the deadline.
    let (last, earlier) = b_requests.split_last().unwrap();
    for request in earlier {
        assert!(request.at + ms(20) < latest_deadline, "{count} requests");
    }
    // The last one started before the deadline: the retry loop checks it again after
    // each wait, since a timer may fire late (tokio's fire on whole milliseconds, and a
    // busy machine wakes tasks later still). It arrived at B after its trip over
    // loopback, which the allowance covers on a loaded machine; without the deadline, B
    // would be called for another 30 s.
    assert!(
        last.at < latest_deadline + ms(25),
        "B's last request came {:?} after A's deadline",
        last.at - latest_deadline
    );
    // A gave up only when another 20 ms wait would not fit before its deadline.
    assert!(
        handled.answered + ms(20) >= earliest_deadline,
        "A gave up early"
    );
    assert!(elapsed < ms(300) + ms(500), "{elapsed:?}");

    // A passed its deadline on to B: each request to B carried what was left of it.
    let sent: Vec<Duration> = b_requests
        .iter()
        .map(|r| persevere::http::deadline_from(&r.headers).expect("no grpc-timeout"))
        .collect();
    assert!(sent[0] <= left, "{sent:?}");
    for pair in sent.windows(2) {
        assert!(pair[0] >= pair[1] + ms(20), "{sent:?}");
    }
}
