//! gRPC transport failures, each made for real on 127.0.0.1: a refused connection, a
//! request on a connection already closed, a stream the server refused
//! (`REFUSED_STREAM`), a `GOAWAY` before the stream was processed, a connection lost
//! mid-call, and tonic's own timeout. The servers are raw HTTP/2 (the h2 crate, or bytes
//! written by hand), which can misbehave on cue.
//!
//! tonic names these failures by codes that do not tell them apart (and maps HTTP/2's
//! reasons only with its `server` feature), so persevere reads the status's source
//! chain. This file is also compiled by `checks/tonic-client`, with tonic's client
//! features alone, where those codes differ.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::tonic::RetryMetadata;
use persevere::{Class, Classify, RetryBudget, idempotent, retry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

type Client = HealthClient<RetryMetadata<Channel>>;

async fn check_once(client: &mut Client, tries: &AtomicU32) -> Result<i32, Status> {
    tries.fetch_add(1, Ordering::Relaxed);
    let request = HealthCheckRequest::default();
    Ok(client.check(request).await?.into_inner().status)
}

#[retry(attempts = 3, base = "1ms", cap = "2ms", deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn check(client: &mut Client, tries: &AtomicU32) -> Result<i32, Status> {
    check_once(client, tries).await
}

#[retry(attempts = 3, base = "1ms", cap = "2ms", deadline = "5s", budget = UNLIMITED, on = unsent)]
async fn check_unsent(client: &mut Client, tries: &AtomicU32) -> Result<i32, Status> {
    check_once(client, tries).await
}

/// What the raw server does with each connection.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// Resets each stream with `REFUSED_STREAM`.
    RefuseStreams,
    /// Takes the stream, then drops the connection without answering.
    DropMidCall,
    /// Takes the stream and never answers.
    Hang,
    /// Takes the stream, then sends a `GOAWAY` with this reason (its last stream the
    /// one taken) and closes the connection.
    GoAwayAfterTaking(h2::Reason),
}

/// A raw HTTP/2 server that misbehaves as told; counts the streams it received.
async fn misbehaving(how: Misbehaviour) -> (SocketAddr, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streams = Arc::new(AtomicU32::new(0));
    let counted = streams.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let streams = counted.clone();
            tokio::spawn(async move {
                let mut connection = h2::server::handshake(socket).await.unwrap();
                let mut held = Vec::new();
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    streams.fetch_add(1, Ordering::Relaxed);
                    match how {
                        Misbehaviour::RefuseStreams => {
                            respond.send_reset(h2::Reason::REFUSED_STREAM)
                        }
                        Misbehaviour::DropMidCall => return,
                        Misbehaviour::GoAwayAfterTaking(reason) => {
                            connection.abrupt_shutdown(reason);
                            held.push(respond);
                        }
                        Misbehaviour::Hang => held.push(respond),
                    }
                }
            });
        }
    });
    (addr, streams)
}

fn client_of(endpoint: Endpoint) -> Client {
    HealthClient::new(RetryMetadata::new(endpoint.connect_lazy()))
}

fn client(addr: SocketAddr) -> Client {
    client_of(Endpoint::from_shared(format!("http://{addr}")).unwrap())
}

/// Calls an idempotent function and one that retries only unsent failures, each with
/// a client of its own; the failure's class, and each function's attempts.
async fn both(make: impl Fn() -> Client) -> (Class, u32, u32) {
    let tries = AtomicU32::new(0);
    let error = check(&mut make(), &tries).await.unwrap_err();
    let unsent = AtomicU32::new(0);
    check_unsent(&mut make(), &unsent).await.unwrap_err();
    (error.classify(), tries.into_inner(), unsent.into_inner())
}

// Nothing listens: unsent, so retried for any function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unsent() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    assert_eq!(both(|| client(addr)).await, (Class::Unsent, 3, 3));
}

// A request on a connection that has closed: hyper never sends it (canceled). Made
// with hyper's own client, whose connection is dropped before the request, and turned
// into a status as tonic turns a transport error into one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_never_sent_is_unsent() {
    let (addr, streams) = misbehaving(Misbehaviour::Hang).await;
    let socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(socket),
    )
    .await
    .unwrap();
    drop(connection);
    let request = http::Request::new(http_body_util::Empty::<bytes::Bytes>::new());
    let error = sender.send_request(request).await.unwrap_err();
    assert!(error.is_canceled(), "{error:?}");
    let status = Status::from_error(Box::new(error));
    assert_eq!(status.classify(), Class::Unsent);
    assert_eq!(streams.load(Ordering::Relaxed), 0);
}

// `REFUSED_STREAM` says the server processed nothing of the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_is_unsent() {
    let (addr, streams) = misbehaving(Misbehaviour::RefuseStreams).await;
    assert_eq!(both(|| client(addr)).await, (Class::Unsent, 3, 3));
    assert_eq!(streams.load(Ordering::Relaxed), 6);
}

/// A server that answers each connection's preface with its settings and a `GOAWAY`
/// whose last stream is 0 (none processed), then reads what comes until the client
/// leaves: written byte by byte, since an HTTP/2 library that sent the `GOAWAY` closes
/// the connection at once, and the client may then see the close before the frame.
async fn going_away() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                // SETTINGS (empty), then GOAWAY: last stream 0, NO_ERROR.
                let frames = [
                    &[0, 0, 0, 4, 0, 0, 0, 0, 0][..],
                    &[0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
                ];
                for frame in frames {
                    socket.write_all(frame).await.unwrap();
                }
                let mut sink = [0; 1024];
                while socket.read(&mut sink).await.is_ok_and(|n| n > 0) {}
            });
        }
    });
    addr
}

// A `GOAWAY` whose last stream is below the request's: it was never processed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_above_a_goaway_is_unsent() {
    let addr = going_away().await;
    assert_eq!(both(|| client(addr)).await, (Class::Unsent, 3, 3));
}

// The server took the stream and the connection died: it may have run, so only an
// idempotent function retries it, and as uncertain (2 attempts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_mid_call_is_uncertain() {
    let (addr, streams) = misbehaving(Misbehaviour::DropMidCall).await;
    assert_eq!(both(|| client(addr)).await, (Class::Uncertain, 2, 1));
    assert_eq!(streams.load(Ordering::Relaxed), 3);
}

// tonic's own timer (`Endpoint::timeout`) cut the request: a timeout, retried by an
// idempotent function, returned as DEADLINE_EXCEEDED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tonic_s_own_timeout_is_transient() {
    let (addr, streams) = misbehaving(Misbehaviour::Hang).await;
    let make = || {
        let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
        client_of(endpoint.timeout(Duration::from_millis(50)))
    };
    let tries = AtomicU32::new(0);
    let error = check(&mut make(), &tries).await.unwrap_err();
    assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
    assert_eq!(
        (error.classify(), tries.into_inner()),
        (Class::Transient, 3)
    );
    assert_eq!(streams.load(Ordering::Relaxed), 3);
}

// The server took the stream, then sent a `GOAWAY` whose last stream is that one and
// closed: the stream may have run (it is not above the `GOAWAY`), so it is uncertain,
// whatever the reason the server gave, and sent once by an `on = unsent` function.
// Can fail: any `GOAWAY` taken as proof that the stream was not processed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goaway_after_the_stream_was_taken_is_uncertain() {
    for reason in [h2::Reason::NO_ERROR, h2::Reason::INTERNAL_ERROR] {
        let (addr, streams) = misbehaving(Misbehaviour::GoAwayAfterTaking(reason)).await;
        assert_eq!(
            both(|| client(addr)).await,
            (Class::Uncertain, 2, 1),
            "{reason:?}"
        );
        assert_eq!(streams.load(Ordering::Relaxed), 3, "{reason:?}");
    }
}

/// A TCP proxy on 127.0.0.1 in front of `backend`, as a load balancer in TCP mode is:
/// each connection it takes, it connects on to the backend and copies both ways.
async fn proxy(backend: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    addr
}

// Through a proxy, the connection the client made is to the proxy: a backend that took
// the stream and dropped its connection is a connection lost mid-call to the client
// (uncertain, sent once by an `on = unsent` function), not a refused one. (A backend
// that refuses the proxy makes the proxy hang up: unsent if the client saw that before
// it wrote the request, uncertain if after, by a race; both are true.)
// Can fail: a failure behind a proxy read as unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_a_backend_that_drops_the_call_is_uncertain() {
    let (backend, streams) = misbehaving(Misbehaviour::DropMidCall).await;
    let addr = proxy(backend).await;
    assert_eq!(both(|| client(addr)).await, (Class::Uncertain, 2, 1));
    assert_eq!(streams.load(Ordering::Relaxed), 3);
}
