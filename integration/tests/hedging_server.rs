//! Hedged attempts (`hedge = ...`) against a real HTTP server on 127.0.0.1, with reqwest:
//! a slow request gets a copy, the copy answers, and the call returns without waiting
//! for the slow one.
//!
//! The slowness is deterministic: each call has an id and counts the requests it sends
//! (`/items/{id}/{n}`, n from 0), and the server answers the first request of an id that
//! is a multiple of 10 after 2 s, and every other request at once. So a slow call's
//! first attempt is slow and its copy fast, whichever reaches the server first.
//!
//! Time is real: the checks are lower bounds where they can be exact (a copy waits at
//! least its delay; an unhedged slow call waits the full 2 s), and upper bounds only
//! catch a call that waited for its slow request, with room for a busy machine.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use http::{HeaderMap, Method, StatusCode, Uri};
use persevere::reqwest::{RequestError, ResponseExt};
use persevere::{RetryBudget, idempotent, retry};
use reqwest::Client;
use support::{Log, Request, Server, client};
use tokio::task::JoinSet;

/// How long the server takes over the first request of a slow id.
const SLOW: Duration = Duration::from_secs(2);

/// The hedge delay of `item_hedged`.
const HEDGE: Duration = Duration::from_millis(50);

const CALLS: u32 = 100;
const CONCURRENCY: usize = 10;
/// Ids 1 to 100: the multiples of 10 are slow.
const SLOW_IDS: u64 = 10;

/// The calls here hedge ten slow ids at about the same moment, early in the run; the
/// default budget (a floor of 2 once busy, and a tenth of a token per request, deposited
/// in batches) could refuse some of those copies. What the budget allows is tested in
/// `tests/hedging.rs`.
static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// The server: logs each request, and takes `SLOW` over the first of a slow id.
async fn item(
    State(log): State<Log>,
    Path((id, n)): Path<(u32, u32)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> String {
    log.push(Request {
        at: Instant::now(),
        method,
        path: uri.path().to_owned(),
        headers,
        body: String::new(),
        answered: Some(StatusCode::OK),
    });
    if id % 10 == 0 && n == 0 {
        tokio::time::sleep(SLOW).await;
    }
    format!("item {id}")
}

async fn start() -> Server {
    let log = Log::default();
    let router = Router::new()
        .route("/items/{id}/{n}", get(item))
        .with_state(log.clone());
    Server::serve(router, log).await
}

/// One GET of item `id`, numbered by `sent`: each attempt and each copy sends the next
/// number.
async fn get_item(
    client: &Client,
    base: &str,
    id: u32,
    sent: &AtomicU32,
) -> Result<String, RequestError> {
    let n = sent.fetch_add(1, Ordering::SeqCst);
    let url = format!("{base}/items/{id}/{n}");
    Ok(client
        .get(url)
        .send()
        .await?
        .error_for_retry()?
        .text()
        .await?)
}

#[retry(hedge = "50ms", deadline = "10s", budget = UNLIMITED)]
#[idempotent]
async fn item_hedged(
    client: &Client,
    base: &str,
    id: u32,
    sent: &AtomicU32,
) -> Result<String, RequestError> {
    get_item(client, base, id, sent).await
}

#[retry(deadline = "10s", budget = UNLIMITED)]
#[idempotent]
async fn item_unhedged(
    client: &Client,
    base: &str,
    id: u32,
    sent: &AtomicU32,
) -> Result<String, RequestError> {
    get_item(client, base, id, sent).await
}

// 100 calls, 10 at a time, 10 of them slow: each slow call gets a copy after 50 ms, which
// wins, and no call waits for a slow request. Every copy is a request the server sees.
// Can fail: no hedge (slow calls take 2 s), a loser awaited, or copies miscounted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_are_hedged_and_the_copies_win() {
    let server = start().await;
    let base: Arc<str> = server.url("").into();
    let client = client();
    let next = Arc::new(AtomicU32::new(1));
    let mut workers = JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (client, base, next) = (client.clone(), base.clone(), next.clone());
        workers.spawn(async move {
            let mut calls = Vec::new();
            loop {
                let id = next.fetch_add(1, Ordering::SeqCst);
                if id > CALLS {
                    return calls;
                }
                let start = Instant::now();
                let result = item_hedged(&client, &base, id, &AtomicU32::new(0)).await;
                calls.push((id, result, start.elapsed()));
            }
        });
    }
    let calls: Vec<_> = workers.join_all().await.into_iter().flatten().collect();
    assert_eq!(calls.len(), CALLS as usize);

    for (id, result, elapsed) in &calls {
        match result {
            Ok(body) => assert_eq!(*body, format!("item {id}")),
            Err(error) => panic!("call {id} failed: {error:?}"),
        }
        // Half the slow time: far above a hedge (50 ms and a fast request), far below a
        // call that waited for its slow request.
        assert!(*elapsed < SLOW / 2, "call {id} took {elapsed:?}");
        if id % 10 == 0 {
            assert!(*elapsed >= HEDGE, "slow call {id} took {elapsed:?}");
        }
    }

    let s = persevere::stats::get("item_hedged").expect("called");
    assert!(s.hedges_won >= SLOW_IDS, "{s:?}");
    assert_eq!(s.hedges_refused, 0, "{s:?}");
    // Each slow id: its slow first request and its copy, both received.
    let requests = server.log.requests();
    for id in (10..=CALLS).step_by(10) {
        let paths: Vec<_> = requests
            .iter()
            .map(|r| r.path.as_str())
            .filter(|path| path.starts_with(&format!("/items/{id}/")))
            .collect();
        assert_eq!(
            paths,
            [format!("/items/{id}/0"), format!("/items/{id}/1")],
            "id {id}"
        );
    }
    // Every hedge sent is one more request at the server: exactly, as on any machine
    // that does not stall a fast request past the 50 ms delay. One that does gets a copy
    // too, which may lose before it is written; such copies are `hedges` beyond the slow
    // ids, and only they may be missing.
    let received = requests.len() as u64;
    let sent = u64::from(CALLS) + s.hedges;
    let unsure = s.hedges.saturating_sub(SLOW_IDS);
    assert!(
        received <= sent && received + unsure >= sent,
        "{received} requests received for {CALLS} calls and {} hedges",
        s.hedges
    );
}

// The same slow request without a hedge: the call waits it out.
// Can fail: a hedge sent by a function without `hedge`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_hedge_a_slow_request_takes_its_full_time() {
    let server = start().await;
    let start = Instant::now();
    let body = item_unhedged(&client(), &server.url(""), 10, &AtomicU32::new(0))
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(body, "item 10");
    assert!(elapsed >= SLOW, "{elapsed:?}");
    assert_eq!(server.log.len(), 1);
    assert_eq!(persevere::stats::get("item_unhedged").unwrap().hedges, 0);
}
