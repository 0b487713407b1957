//! What proves an HTTP request unsent, against real servers on 127.0.0.1, counting the
//! requests each server saw.
//!
//! A POST that creates an order is not safe to repeat: its function says `on = unsent`
//! (the default 6 attempts), so it may be sent again only after a failure that proves
//! the server never received it. A server that takes the POST and answers with a
//! redirect to where nothing listens must see it once: reqwest follows the redirect
//! itself, and the refused connection that comes back is the redirect's, after the POST
//! was processed. reqwest's error cannot say which hop failed, so a connect failure of
//! a client that may follow redirects is transient, and only a client that follows
//! none (`ClientBuilderExt::build_without_redirects`) has unsent connect failures.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use http::header::LOCATION;
use persevere::reqwest::{ClientBuilderExt, RequestError, ResponseExt};
use persevere::{Class, Classify, idempotent, retry};
use reqwest::Client;
use reqwest::redirect::Policy;
use support::{ClosingServer, Server, UNLIMITED, client, refused_url};

/// Creates one order: not idempotent, so only an unsent failure is retried.
#[retry(on = unsent, base = "1ms", cap = "2ms", budget = UNLIMITED)]
async fn order(client: &Client, url: &str, tries: &AtomicU32) -> Result<StatusCode, RequestError> {
    tries.fetch_add(1, Ordering::SeqCst);
    let response = client
        .post(url)
        .body("one order")
        .send()
        .await?
        .error_for_retry()?;
    Ok(response.status())
}

/// The same request from a function marked safe to repeat.
#[retry(base = "1ms", cap = "2ms", budget = UNLIMITED)]
#[idempotent]
async fn order_idempotent(
    client: &Client,
    url: &str,
    tries: &AtomicU32,
) -> Result<StatusCode, RequestError> {
    order_once(client, url, tries).await
}

async fn order_once(
    client: &Client,
    url: &str,
    tries: &AtomicU32,
) -> Result<StatusCode, RequestError> {
    tries.fetch_add(1, Ordering::SeqCst);
    let response = client.post(url).send().await?.error_for_retry()?;
    Ok(response.status())
}

/// A server that creates an order for each POST to `/orders` and answers `status`
/// with a `Location` of `target`; the number of POSTs it saw.
async fn redirecting(status: u16, target: String) -> (Server, Arc<AtomicU32>) {
    let posts = Arc::new(AtomicU32::new(0));
    let seen = posts.clone();
    let router = Router::new().route(
        "/orders",
        post(move || {
            let (seen, target) = (seen.clone(), target.clone());
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                let status = StatusCode::from_u16(status).unwrap();
                (status, [(LOCATION, target)], "created")
            }
        }),
    );
    (Server::serve(router, Default::default()).await, posts)
}

/// A client that follows every redirect by a policy of the user's own.
fn following_client() -> Client {
    Client::builder()
        .no_proxy()
        .redirect(Policy::custom(|attempt| attempt.follow()))
        .build()
        .unwrap()
}

/// Calls [`order`] with `client` against a server answering `status` to a refused
/// target: the POSTs the server saw, and the error's class.
async fn order_redirected(status: u16, client: &Client) -> (u32, Class) {
    let (server, posts) = redirecting(status, refused_url("/orders/1")).await;
    let tries = AtomicU32::new(0);
    let error = order(client, &server.url("/orders"), &tries)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RequestError::Transport(e) if e.is_connect()),
        "{status}: {error:?}"
    );
    assert_eq!(tries.into_inner(), posts.load(Ordering::SeqCst), "{status}");
    (posts.load(Ordering::SeqCst), error.classify())
}

// A processed POST redirected by each status to a refused target, with reqwest's
// default client: sent once, its failure transient.
// Can fail: a connect failure after a followed redirect called unsent (6 POSTs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_301_to_a_refused_target_is_sent_once() {
    assert_eq!(
        order_redirected(301, &client()).await,
        (1, Class::Transient)
    );
}

// Can fail: as above, for 302.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_302_to_a_refused_target_is_sent_once() {
    assert_eq!(
        order_redirected(302, &client()).await,
        (1, Class::Transient)
    );
}

// Can fail: as above, for 303 (the case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_303_to_a_refused_target_is_sent_once() {
    assert_eq!(
        order_redirected(303, &client()).await,
        (1, Class::Transient)
    );
}

// 307 and 308 send the POST on to the target, body and all.
// Can fail: as above, for 307.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_307_to_a_refused_target_is_sent_once() {
    assert_eq!(
        order_redirected(307, &client()).await,
        (1, Class::Transient)
    );
}

// Can fail: as above, for 308.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_308_to_a_refused_target_is_sent_once() {
    assert_eq!(
        order_redirected(308, &client()).await,
        (1, Class::Transient)
    );
}

// The same with a redirect policy of the user's own, which follows every redirect.
// Can fail: a custom policy's followed redirect taken for none (6 POSTs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_301_under_a_custom_policy_is_sent_once() {
    let client = following_client();
    assert_eq!(order_redirected(301, &client).await, (1, Class::Transient));
}

// Can fail: as above, for 302.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_302_under_a_custom_policy_is_sent_once() {
    let client = following_client();
    assert_eq!(order_redirected(302, &client).await, (1, Class::Transient));
}

// Can fail: as above, for 303.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_303_under_a_custom_policy_is_sent_once() {
    let client = following_client();
    assert_eq!(order_redirected(303, &client).await, (1, Class::Transient));
}

// Can fail: as above, for 307.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_307_under_a_custom_policy_is_sent_once() {
    let client = following_client();
    assert_eq!(order_redirected(307, &client).await, (1, Class::Transient));
}

// Can fail: as above, for 308.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_by_308_under_a_custom_policy_is_sent_once() {
    let client = following_client();
    assert_eq!(order_redirected(308, &client).await, (1, Class::Transient));
}

// A redirect target whose connection is taken and reset, or taken and never answered
// (the client's timeout cuts it), or whose connect times out (a full accept queue):
// each after the processed POST, each sent once.
// Can fail: a connect timeout after a followed redirect called unsent (6 POSTs); a
// reset or timeout at the target retried by `on = unsent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_redirected_to_a_target_that_resets_or_times_out_is_sent_once() {
    let resets = ClosingServer::start(0).await;
    let hangs = support::hanging_listener().await;
    let full = support::full_listener().await;
    let client = Client::builder()
        .no_proxy()
        .connect_timeout(support::ms(200))
        .timeout(support::ms(500))
        .build()
        .unwrap();
    for target in [resets.url("/orders/1"), hangs, full] {
        for status in [303, 307] {
            let (server, posts) = redirecting(status, target.clone()).await;
            let tries = AtomicU32::new(0);
            let error = order(&client, &server.url("/orders"), &tries)
                .await
                .unwrap_err();
            assert_ne!(error.classify(), Class::Unsent, "{target}: {error:?}");
            assert_eq!(posts.load(Ordering::SeqCst), 1, "{status} to {target}");
            assert_eq!(tries.into_inner(), 1, "{status} to {target}");
        }
    }
}

// A client that follows no redirect gets the 303 itself: the call succeeds with it, one
// POST, and the redirect is the caller's to follow.
// Can fail: `build_without_redirects` that leaves reqwest's policy on (a connect error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_redirects_returns_the_redirect() {
    let client = Client::builder()
        .no_proxy()
        .build_without_redirects()
        .unwrap();
    for status in [301, 302, 303, 307, 308] {
        let (server, posts) = redirecting(status, refused_url("/orders/1")).await;
        let tries = AtomicU32::new(0);
        let answer = order(&client, &server.url("/orders"), &tries).await;
        assert_eq!(answer.unwrap().as_u16(), status);
        assert_eq!(posts.load(Ordering::SeqCst), 1, "{status}");
    }
}

// Nothing listens. reqwest's default client may follow redirects, so its refused
// connection is transient: an idempotent function retries it (6 attempts), one marked
// only `on = unsent` does not (1).
// Can fail: a connect failure of a client that follows redirects called unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_of_the_default_client_is_transient() {
    let url = refused_url("/orders");
    let (unsent, idempotent) = (AtomicU32::new(0), AtomicU32::new(0));
    let error = order(&client(), &url, &unsent).await.unwrap_err();
    assert_eq!(error.classify(), Class::Transient);
    order_idempotent(&client(), &url, &idempotent)
        .await
        .unwrap_err();
    assert_eq!((unsent.into_inner(), idempotent.into_inner()), (1, 6));
}

// The same refused connection from a client that follows no redirect is unsent: both
// functions make all 6 attempts.
// Can fail: the mark of `build_without_redirects` lost in reqwest's error (1 attempt);
// the mark hiding the refusal beneath it, or saying nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_of_a_client_without_redirects_is_unsent() {
    let client = Client::builder()
        .no_proxy()
        .build_without_redirects()
        .unwrap();
    let url = refused_url("/orders");
    let (unsent, idempotent) = (AtomicU32::new(0), AtomicU32::new(0));
    let error = order(&client, &url, &unsent).await.unwrap_err();
    assert!(
        matches!(&error, RequestError::Transport(e) if e.is_connect()),
        "{error:?}"
    );
    assert_eq!(error.classify(), Class::Unsent);
    // The mark says what it is, and keeps the refusal beneath it for whoever reads the
    // chain.
    let chain: Vec<String> =
        std::iter::successors(std::error::Error::source(&error), |e| e.source())
            .map(|e| e.to_string())
            .collect();
    assert!(
        chain
            .iter()
            .any(|e| e == "could not connect (no redirect followed)"),
        "{chain:?}"
    );
    let refused = std::iter::successors(std::error::Error::source(&error), |e| e.source())
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::ConnectionRefused);
    assert!(refused, "{chain:?}");
    order_idempotent(&client, &url, &idempotent)
        .await
        .unwrap_err();
    assert_eq!((unsent.into_inner(), idempotent.into_inner()), (6, 6));
}

// A pooled HTTP/1 connection that the server closes once the next request is written
// (it reads the request, then hangs up): the request arrived, so it is not unsent, even
// from a client without redirects; the server saw it once.
// Can fail: a request lost on a reused connection called unsent (6 requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_closed_as_the_request_is_written_is_not_unsent() {
    let server = ClosingServer::start(1).await;
    let client = Client::builder()
        .no_proxy()
        .build_without_redirects()
        .unwrap();
    let warm = client.get(server.url("/warm")).send().await.unwrap();
    assert_eq!(warm.text().await.unwrap(), "OK");
    let tries = AtomicU32::new(0);
    let error = order(&client, &server.url("/orders"), &tries)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RequestError::Transport(e) if !e.is_connect()),
        "{error:?}"
    );
    assert_eq!(error.classify(), Class::Transient);
    assert_eq!(tries.into_inner(), 1);
    assert_eq!(server.requests(), 2);
    assert_eq!(server.connections(), 1);
}

// A connect that times out (a full accept queue) from a client without redirects. Timed
// by a connector layer of the user's, inside the mark, it is unsent: 6 attempts.
// reqwest's own `connect_timeout` times it twice with the same limit, in hyper's
// connector (inside the mark: unsent) and around the whole connector (outside it:
// transient); whichever fires first decides each attempt's class, so the attempts run
// until one is transient, or all 6 are made. Nothing is sent either way.
// Can fail: a connect timeout inside the mark not called unsent; a transient attempt
// retried by `on = unsent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_timeout_without_redirects_is_unsent_inside_the_mark() {
    let full = support::full_listener().await;
    let layer = tower::timeout::TimeoutLayer::new(support::ms(50));
    let client = Client::builder()
        .no_proxy()
        .connector_layer(layer)
        .build_without_redirects()
        .unwrap();
    let tries = AtomicU32::new(0);
    let error = order(&client, &full, &tries).await.unwrap_err();
    assert!(
        matches!(&error, RequestError::Transport(e) if e.is_connect()),
        "{error:?}"
    );
    assert_eq!((error.classify(), tries.into_inner()), (Class::Unsent, 6));

    let client = Client::builder()
        .no_proxy()
        .connect_timeout(support::ms(50))
        .build_without_redirects()
        .unwrap();
    let tries = AtomicU32::new(0);
    let error = order(&client, &full, &tries).await.unwrap_err();
    let tries = tries.into_inner();
    match error.classify() {
        Class::Unsent => assert_eq!(tries, 6),
        Class::Transient => assert!((1..=6).contains(&tries), "{tries}"),
        other => panic!("a connect timeout classified {other:?}"),
    }
}
