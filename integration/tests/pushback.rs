//! The server's pushback beside `Retry-After`, read by `#[retry]` functions calling a
//! real HTTP server on 127.0.0.1 with reqwest (`persevere::http::Pushback`): waits in
//! milliseconds, and `x-should-retry`.
//!
//! Time is real here: a wait is never shorter than asked, so lower bounds are exact and
//! upper bounds leave room for a busy machine (see `http_server.rs`).

mod support;

use std::time::Instant;

use persevere::http::{StatusError, check};
use persevere::reqwest::{RequestError, ResponseExt};
use persevere::{Class, Classify, idempotent, retry};
use reqwest::Client;
use support::{Reply, SLACK, Server, UNLIMITED, client, get, get_3_attempts, ms};

// Each millisecond header sets the wait (0.8 to 1.2 times it, the spread after a
// server's wait), before a `Retry-After` of 5 s that comes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn millisecond_waits_are_read_before_retry_after() {
    for name in ["retry-after-ms", "x-ms-retry-after-ms", "x-amz-retry-after"] {
        let server = Server::scripted(
            [Reply::status(503)
                .header(name, "400")
                .header("retry-after", "5")],
            Reply::ok(),
        )
        .await;
        assert_eq!(
            get_3_attempts(&client(), &server.url("/")).await.unwrap(),
            "OK"
        );
        assert_eq!(server.log.answers(), [Some(503), Some(200)], "{name}");
        let gap = server.log.gaps()[0];
        assert!(gap >= ms(320), "{name}: {gap:?}");
        assert!(gap < ms(480) + SLACK, "{name}: {gap:?}");
    }
}

// `x-should-retry: false` on a 503 with `Retry-After`: one request, the call fails at
// once, and the error says the server asked not to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_retry_false_stops_at_once() {
    let server = Server::scripted(
        [],
        Reply::status(503)
            .header("x-should-retry", "false")
            .header("retry-after", "1"),
    )
    .await;
    let start = Instant::now();
    let error = get_3_attempts(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert!(start.elapsed() < SLACK);
    assert_eq!(server.log.len(), 1);
    assert_eq!(error.classify(), Class::Permanent);
    assert_eq!(
        error.to_string(),
        "the server answered 503 Service Unavailable and asked not to retry"
    );
}

#[retry(on = unsent, attempts = 3, base = "20ms", jitter = "none", budget = UNLIMITED)]
async fn post_unsent_only(client: &Client, url: &str) -> Result<String, RequestError> {
    let response = client.post(url).send().await?.error_for_retry()?;
    Ok(response.text().await?)
}

// `x-should-retry: true` on a 409 retries a function safe to repeat; one that retries
// only unsent failures sends its request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_retry_true_retries_only_what_is_safe_to_repeat() {
    let conflict = || Reply::status(409).header("x-should-retry", "true");
    let server = Server::scripted([conflict()], Reply::ok()).await;
    assert_eq!(
        get_3_attempts(&client(), &server.url("/")).await.unwrap(),
        "OK"
    );
    assert_eq!(server.log.answers(), [Some(409), Some(200)]);

    let server = Server::scripted([conflict()], Reply::ok()).await;
    let error = post_unsent_only(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert_eq!(server.log.len(), 1);
    assert_eq!(error.status().map(|s| s.as_u16()), Some(409));
}

// A millisecond wait beyond `max_retry_after` (60 s by default) fails at once, as a
// `Retry-After` would; so does one beyond the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_millisecond_wait_past_the_limits_fails_at_once() {
    let server = Server::scripted([], Reply::status(429).header("retry-after-ms", "61000")).await;
    let start = Instant::now();
    get_3_attempts(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert!(start.elapsed() < SLACK);
    assert_eq!(server.log.len(), 1);

    let server = Server::scripted([], Reply::status(429).header("retry-after-ms", "3000")).await;
    let start = Instant::now();
    within_2s(&client(), &server.url("/")).await.unwrap_err();
    assert!(start.elapsed() < SLACK);
    assert_eq!(server.log.len(), 1);
}

#[retry(deadline = "2s", base = "20ms", budget = UNLIMITED)]
#[idempotent]
async fn within_2s(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

// `http::check`, for a client other than reqwest, reads the same headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reads_the_same_pushback() {
    let server =
        Server::scripted([], Reply::status(503).header("x-ms-retry-after-ms", "1500")).await;
    let response = client().get(server.url("/")).send().await.unwrap();
    let error: StatusError = check(response.status(), response.headers()).unwrap_err();
    assert_eq!(error.retry_after(), Some(ms(1500)));
    assert_eq!(error.classify(), Class::RetryAfter(ms(1500)));
}
