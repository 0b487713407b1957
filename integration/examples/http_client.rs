//! A `#[retry]` function calling a flaky HTTP server with reqwest.
//!
//! Run it with `cargo run --example http_client`. It starts a small server on
//! 127.0.0.1 (an ephemeral port) that answers `503 Service Unavailable` twice, then
//! `429 Too Many Requests` with `Retry-After: 1`, then `200 OK`, and calls it from a
//! retried function. The server prints what it answers; the client prints when each
//! attempt started and how it ended. It shows:
//!
//! - the 503s retried after the computed backoff: 100 ms, then 200 ms, with equal
//!   jitter (half the wait fixed, half random), so 50-100 ms, then 100-200 ms;
//! - the 429's `Retry-After: 1` replacing the computed wait: about one second (0.8 to
//!   1.2 s, jittered so that clients turned away together do not return together);
//! - the caller getting the body of the success, after four attempts and 1 to 1.5 s.
//!
//! `persevere::reqwest::RequestError` classifies what went wrong (transport failures,
//! statuses) and keeps the server's `Retry-After`; `error_for_retry` turns a failure
//! status into one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use http::StatusCode;
use http::header::RETRY_AFTER;
use persevere::reqwest::{RequestError, ResponseExt};
use persevere::{Classify, idempotent, retry};
use reqwest::Client;

/// What the server and the client share: the time origin both print from.
struct Demo {
    started: Instant,
    requests: AtomicU32,
    attempts: AtomicU32,
}

impl Demo {
    fn ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }
}

/// The flaky server: twice unavailable, once rate-limited, then fine.
async fn quote(State(demo): State<Arc<Demo>>) -> impl IntoResponse {
    let n = demo.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let (status, retry_after) = match n {
        1 | 2 => (StatusCode::SERVICE_UNAVAILABLE, None),
        3 => (StatusCode::TOO_MANY_REQUESTS, Some("1")),
        _ => (StatusCode::OK, None),
    };
    match retry_after {
        Some(wait) => println!(
            "{:>5} ms  server: request {n}: {status}, Retry-After: {wait}",
            demo.ms()
        ),
        None => println!("{:>5} ms  server: request {n}: {status}", demo.ms()),
    }
    let body = if status.is_success() {
        "EUR/USD 1.0842".to_owned()
    } else {
        status.to_string()
    };
    let mut response = (status, body).into_response();
    if let Some(wait) = retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, wait.parse().unwrap());
    }
    response
}

// Retried on what `RequestError` classifies as transient (503, 429, a reset
// connection...), for at most 10 s and 6 attempts. Reading a quote is safe to repeat,
// hence `#[idempotent]`.
#[retry(
    deadline = "10s",
    attempts = 6,
    base = "100ms",
    cap = "1s",
    jitter = "equal"
)]
#[idempotent]
async fn fetch_quote(client: &Client, url: &str, demo: &Demo) -> Result<String, RequestError> {
    let n = demo.attempts.fetch_add(1, Ordering::SeqCst) + 1;
    println!("{:>5} ms  client: attempt {n} starts", demo.ms());
    let outcome: Result<String, RequestError> = async {
        let response = client.get(url).send().await?.error_for_retry()?;
        Ok(response.text().await?)
    }
    .await;
    match &outcome {
        Ok(body) => println!("{:>5} ms  client: attempt {n}: ok, {body:?}", demo.ms()),
        Err(e) => println!(
            "{:>5} ms  client: attempt {n}: {e} (class: {:?})",
            demo.ms(),
            e.classify()
        ),
    }
    outcome
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), RequestError> {
    let demo = Arc::new(Demo {
        started: Instant::now(),
        requests: AtomicU32::new(0),
        attempts: AtomicU32::new(0),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("cannot listen on 127.0.0.1");
    let url = format!("http://{}/quote", listener.local_addr().unwrap());
    let app = Router::new().fallback(quote).with_state(demo.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("server listening at {url}\n");

    let client = Client::builder().no_proxy().build()?;
    let quote = fetch_quote(&client, &url, &demo).await?;
    println!(
        "\nfinal: {quote:?} after {} attempts and {} ms",
        demo.attempts.load(Ordering::SeqCst),
        demo.ms()
    );
    Ok(())
}
