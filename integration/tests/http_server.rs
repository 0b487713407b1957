//! `#[retry]` functions calling a real HTTP server on 127.0.0.1 with reqwest.
//!
//! Each test starts its own server (see `support`), scripts its answers, and asserts
//! the server's own log: how many requests arrived, when, and with which headers.
//!
//! Time is real here, not tokio's paused clock, so the checks are one-sided where time
//! is concerned: a wait is never shorter than asked (a timer never fires early, and the
//! gap between two arrivals at the server also holds the reply's and the request's
//! trips), so lower bounds are exact; upper bounds only catch a wait that is wildly
//! wrong, with room for a busy machine. Counts are exact wherever the behaviour is.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use persevere::reqwest::{ClientBuilderExt, RequestBuilderExt, RequestError, ResponseExt};
use persevere::{Class, Classify, IdempotencyKey, idempotent, retry};
use reqwest::Client;
use support::{
    Reply, SLACK, Server, UNLIMITED, Write, WriteServer, client, get, get_3_attempts, ms, status_of,
};

// ---- 1. Transient failures that clear -------------------------------------------------

// Two 503s, then a 200: three requests, the waits between them 20 ms then 40 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_twice_then_ok() {
    let server = Server::scripted([Reply::status(503), Reply::status(503)], Reply::ok()).await;
    let body = get_3_attempts(&client(), &server.url("/users/7"))
        .await
        .unwrap();
    assert_eq!(body, "OK");
    assert_eq!(server.log.answers(), [Some(503), Some(503), Some(200)]);
    let requests = server.log.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.method == "GET" && r.path == "/users/7")
    );
    let gaps = server.log.gaps();
    for (gap, wait) in gaps.iter().zip([ms(20), ms(40)]) {
        assert!(*gap >= wait, "gaps {gaps:?}: one is shorter than its wait");
        assert!(*gap < wait + SLACK, "gaps {gaps:?}: one is far too long");
    }
}

// ---- 2. Failures that do not clear ----------------------------------------------------

#[retry(attempts = 4, base = "20ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn get_4_attempts(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

// Always 503: exactly `attempts` requests, then the function's own error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_unavailable_stops_at_attempts() {
    let server = Server::scripted([], Reply::status(503)).await;
    let error = get_4_attempts(&client(), &server.url("/"))
        .await
        .unwrap_err();
    assert_eq!(status_of(&error), 503);
    assert_eq!(error.classify(), Class::Transient);
    assert_eq!(server.log.len(), 4);
}

#[retry(
    deadline = "1s",
    attempts = 100,
    base = "200ms",
    jitter = "none",
    budget = UNLIMITED
)]
#[idempotent]
async fn get_within_1s(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

// Always 503 under a 1 s deadline: attempts at 0, 200 and 600 ms; the next wait
// (800 ms) would end after the deadline, so the call returns at once instead, long
// before its 100 attempts and before the deadline itself. The requests' own time (a few
// milliseconds, but more on a loaded machine) has 400 ms of room before either count
// would change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_unavailable_stops_at_the_deadline() {
    let server = Server::scripted([], Reply::status(503)).await;
    let start = Instant::now();
    let error = get_within_1s(&client(), &server.url("/"))
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    assert_eq!(status_of(&error), 503);
    assert_eq!(server.log.len(), 3);
    assert!(elapsed >= ms(200 + 400), "{elapsed:?}");
    assert!(
        elapsed < ms(1000),
        "returned after the deadline: {elapsed:?}"
    );
}

// ---- 3. Permanent failures ------------------------------------------------------------

// 400, 401 and 404 say the request itself is wrong: one request each, the status back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_are_not_retried() {
    let client = client();
    for status in [400, 401, 404] {
        let server = Server::scripted([], Reply::status(status)).await;
        let start = Instant::now();
        let error = get_4_attempts(&client, &server.url("/")).await.unwrap_err();
        assert_eq!(status_of(&error), status);
        assert_eq!(error.classify(), Class::Permanent);
        assert_eq!(server.log.len(), 1, "{status}");
        assert!(start.elapsed() < SLACK, "{status}: {:?}", start.elapsed());
    }
}

// ---- 4. Retry-After -------------------------------------------------------------------

// `Retry-After: 1`: the next request comes 0.8 to 1.2 s later (the server's wait, with
// jitter of 0.8 to 1.2), not after the computed 20 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_seconds_sets_the_wait() {
    let server =
        Server::scripted([Reply::status(429).header("retry-after", "1")], Reply::ok()).await;
    let body = get_3_attempts(&client(), &server.url("/")).await.unwrap();
    assert_eq!(body, "OK");
    assert_eq!(server.log.answers(), [Some(429), Some(200)]);
    let gap = server.log.gaps()[0];
    assert!(gap >= ms(800), "{gap:?}");
    assert!(gap < ms(1500), "{gap:?}");
}

// `Retry-After` as an HTTP date 2 s ahead: written with whole seconds, it is 1 to 2 s
// ahead when read, so the wait is 0.8 s at the least and 2.4 s at the most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_http_date_sets_the_wait() {
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    let server = Server::scripted(
        [Reply::status(503).header("retry-after", &date)],
        Reply::ok(),
    )
    .await;
    let body = get_3_attempts(&client(), &server.url("/")).await.unwrap();
    assert_eq!(body, "OK");
    assert_eq!(server.log.answers(), [Some(503), Some(200)]);
    let gap = server.log.gaps()[0];
    assert!(gap >= ms(800), "{gap:?}");
    assert!(gap < ms(2400) + SLACK, "{gap:?}");
}

// `Retry-After: 3600` is beyond `max_retry_after` (60 s by default): the call fails at
// once, after one request, with the server's wait kept in the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_beyond_the_maximum_fails_at_once() {
    let server = Server::scripted([], Reply::status(429).header("retry-after", "3600")).await;
    let start = Instant::now();
    let error = get_3_attempts(&client(), &server.url("/"))
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    assert_eq!(server.log.len(), 1);
    assert!(elapsed < SLACK, "{elapsed:?}");
    let RequestError::Status(status) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(status.status().as_u16(), 429);
    assert_eq!(status.retry_after(), Some(Duration::from_secs(3600)));
    assert_eq!(
        error.classify(),
        Class::RetryAfter(Duration::from_secs(3600))
    );
}

// A malformed `Retry-After` is ignored: the computed backoff (20 ms) applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_retry_after_falls_back_to_the_backoff() {
    let server = Server::scripted(
        [Reply::status(429).header("retry-after", "soon")],
        Reply::ok(),
    )
    .await;
    let body = get_3_attempts(&client(), &server.url("/")).await.unwrap();
    assert_eq!(body, "OK");
    assert_eq!(server.log.answers(), [Some(429), Some(200)]);
    let gap = server.log.gaps()[0];
    assert!(gap >= ms(20), "{gap:?}");
    assert!(gap < ms(20) + SLACK, "{gap:?}");
}

// ---- 5. A write made safe by its idempotency key --------------------------------------

#[retry(key = key, attempts = 4, base = "20ms", jitter = "none", budget = UNLIMITED)]
async fn charge(
    client: &Client,
    url: &str,
    key: IdempotencyKey,
    cents: u32,
) -> Result<String, RequestError> {
    let response = client
        .post(url)
        .idempotency_key(&key)
        .body(cents.to_string())
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.text().await?)
}

// The server performs the charge and hangs up before answering: the client cannot tell
// whether it took effect, and retries. Every attempt carries the same key, so the
// server finds the charge already made and answers with it: one charge, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_off_before_its_reply_is_made_once() {
    let server = WriteServer::start([Write::ApplyThenHangUp], Write::Apply).await;
    let client = client();
    let key = IdempotencyKey::new();
    let body = charge(&client, &server.url("/charges"), key, 1250)
        .await
        .unwrap();
    assert_eq!(body, "charge-1: 1250");
    assert_eq!(server.log.answers(), [None, Some(200)]);
    let requests = server.log.requests();
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.header("idempotency-key"), Some(&*key.to_string()));
        assert_eq!(request.body, "1250");
    }
    assert_eq!(server.records(), 1);
    assert_eq!(
        server.store.lock().unwrap().get(&key.to_string()),
        Some(&"charge-1: 1250".to_owned())
    );

    // A new operation is a new key, and a new charge.
    let other = IdempotencyKey::new();
    let body = charge(&client, &server.url("/charges"), other, 99)
        .await
        .unwrap();
    assert_eq!(body, "charge-2: 99");
    assert_eq!(server.log.len(), 3);
    assert_eq!(server.records(), 2);
}

// ---- 6. Uncertain failures (500) ------------------------------------------------------

#[retry(attempts = 6, base = "20ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn get_6_attempts(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

#[retry(
    attempts = 6,
    uncertain_attempts = 3,
    base = "20ms",
    jitter = "none",
    budget = UNLIMITED
)]
#[idempotent]
async fn get_6_attempts_3_uncertain(client: &Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

// A 500 may be a bug every retry hits again: retried for `uncertain_attempts` attempts
// (2 by default), whatever `attempts` allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_errors_stop_at_the_uncertain_limit() {
    let client = client();
    let server = Server::scripted([], Reply::status(500)).await;
    let error = get_6_attempts(&client, &server.url("/")).await.unwrap_err();
    assert_eq!(status_of(&error), 500);
    assert_eq!(error.classify(), Class::Uncertain);
    assert_eq!(server.log.len(), 2);

    let server = Server::scripted([], Reply::status(500)).await;
    let error = get_6_attempts_3_uncertain(&client, &server.url("/"))
        .await
        .unwrap_err();
    assert_eq!(status_of(&error), 500);
    assert_eq!(server.log.len(), 3);
}

// ---- 7. Connection refused: the request never left ----------------------------------

/// Creates something: not idempotent, so only failures that prove the request never
/// left may be retried.
#[retry(on = unsent, attempts = 3, base = "20ms", jitter = "none", budget = UNLIMITED)]
async fn create(client: &Client, url: &str, tries: &AtomicU32) -> Result<String, RequestError> {
    tries.fetch_add(1, Ordering::SeqCst);
    let response = client
        .post(url)
        .body("new")
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.text().await?)
}

// Nothing listens on the port: each attempt of a client that follows no redirect is
// refused, which is safe to retry even for a write; 3 attempts, with the 20 ms and 40 ms
// waits between them. (A client that may follow redirects: `http_unsent.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_retried_without_idempotent() {
    let tries = AtomicU32::new(0);
    let client = Client::builder()
        .no_proxy()
        .build_without_redirects()
        .unwrap();
    let start = Instant::now();
    let error = create(&client, &support::refused_url("/things"), &tries)
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    assert_eq!(tries.load(Ordering::SeqCst), 3);
    assert!(
        matches!(&error, RequestError::Transport(e) if e.is_connect()),
        "{error:?}"
    );
    assert_eq!(error.classify(), Class::Unsent);
    assert!(elapsed >= ms(20 + 40), "{elapsed:?}");
    assert!(elapsed < ms(60) + SLACK, "{elapsed:?}");
}

/// The same write, each attempt cut after 200 ms, and the key sent as a header (for the
/// server's records: to persevere the function is still not safe to repeat).
#[retry(on = unsent, attempt_timeout = "200ms", deadline = "5s", base = "20ms", budget = UNLIMITED)]
async fn create_within(
    client: &Client,
    url: &str,
    key: &IdempotencyKey,
) -> Result<String, RequestError> {
    let response = client
        .post(url)
        .idempotency_key(key)
        .body("new")
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.text().await?)
}

// A server that takes the write and answers late: the attempt is cut at 200 ms, and the
// request, which arrived, is not sent again.
// Can fail: a cut attempt retried as transient (25 requests in the deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsent_only_does_not_retry_a_request_whose_answer_is_late() {
    let arrived = std::sync::Arc::new(AtomicU32::new(0));
    let seen = arrived.clone();
    let router = axum::Router::new().fallback(move || {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(2)).await;
            "created"
        }
    });
    let server = Server::serve(router, Default::default()).await;
    let start = Instant::now();
    let error = create_within(&client(), &server.url("/things"), &IdempotencyKey::new())
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    assert!(matches!(error, RequestError::TimedOut(_)), "{error:?}");
    assert_eq!(arrived.load(Ordering::SeqCst), 1);
    assert!(
        elapsed >= ms(200) && elapsed < ms(200) + SLACK,
        "{elapsed:?}"
    );
}

// A server that performs the write and hangs up before answering: the client cannot tell
// whether it took effect, so it does not send it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsent_only_does_not_retry_a_connection_lost_mid_request() {
    let server = WriteServer::start([Write::ApplyThenHangUp], Write::Apply).await;
    let error = create_within(&client(), &server.url("/things"), &IdempotencyKey::new())
        .await
        .unwrap_err();
    assert!(matches!(error, RequestError::Transport(_)), "{error:?}");
    assert_ne!(error.classify(), Class::Unsent);
    assert_eq!(server.log.answers(), [None]);
    assert_eq!(server.records(), 1);
}

// The same function against a server that answers 503: the request arrived, so it is
// not retried: `on = unsent` retries nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsent_only_does_not_retry_an_answered_request() {
    let server = Server::scripted([], Reply::status(503)).await;
    let tries = AtomicU32::new(0);
    let error = create(&client(), &server.url("/things"), &tries)
        .await
        .unwrap_err();
    assert_eq!(status_of(&error), 503);
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    assert_eq!(server.log.len(), 1);
}
