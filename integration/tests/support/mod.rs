//! Real HTTP servers on 127.0.0.1 for the tests that call them with reqwest.
//!
//! Each server listens on an ephemeral port, answers from a script, and keeps its own
//! log of what arrived and when, so that a test asserts what the server saw rather than
//! what the client believes it sent:
//!
//! - [`Server::scripted`] (axum) answers each request with the next [`Reply`] of its
//!   script, then with a fallback reply forever;
//! - [`WriteServer`] (raw TCP, since axum cannot hang up without answering) performs
//!   writes, deduplicated by their `Idempotency-Key`, and can hang up on a request
//!   after performing it, as a server that crashes before replying does;
//! - [`Server::serve`] runs any axum router, for a server whose handler is the test's
//!   own code.
//!
//! The server task is aborted when the server value is dropped.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use persevere::reqwest::{RequestError, ResponseExt};
use persevere::{RetryBudget, idempotent, retry};

pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Room for a busy machine above a wait that should be exact.
pub const SLACK: Duration = ms(500);

/// These tests check backoff and classification; the default per-function budget (10 %
/// of requests, at least 10 retries per 10 s) is the subject of tests of its own.
pub static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// One GET: the body of a success, or the failure classified.
pub async fn get(client: &reqwest::Client, url: &str) -> Result<String, RequestError> {
    let response = client.get(url).send().await?.error_for_retry()?;
    Ok(response.text().await?)
}

/// [`get`], three attempts, 20 ms then 40 ms apart without jitter.
#[retry(attempts = 3, base = "20ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
pub async fn get_3_attempts(client: &reqwest::Client, url: &str) -> Result<String, RequestError> {
    get(client, url).await
}

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Request {
    /// When the server had read it.
    pub at: Instant,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
    /// The status the server answered with; `None` if it hung up without answering.
    pub answered: Option<StatusCode>,
}

impl Request {
    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}

/// A server's log of requests, in order of arrival.
#[derive(Clone, Debug, Default)]
pub struct Log(Arc<Mutex<Vec<Request>>>);

impl Log {
    pub fn push(&self, request: Request) {
        self.0.lock().unwrap().push(request);
    }

    /// How many requests arrived.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.0.lock().unwrap().clone()
    }

    /// The time between consecutive arrivals.
    pub fn gaps(&self) -> Vec<Duration> {
        let requests = self.0.lock().unwrap();
        requests.windows(2).map(|w| w[1].at - w[0].at).collect()
    }

    /// The statuses answered, `None` for a hang-up.
    pub fn answers(&self) -> Vec<Option<u16>> {
        let requests = self.0.lock().unwrap();
        requests
            .iter()
            .map(|r| r.answered.map(|s| s.as_u16()))
            .collect()
    }
}

/// A scripted answer: a status and headers, with the status's name as the body.
#[derive(Clone, Debug)]
pub struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Reply {
    pub fn status(code: u16) -> Self {
        Self {
            status: StatusCode::from_u16(code).unwrap(),
            headers: Vec::new(),
        }
    }

    pub fn ok() -> Self {
        Self::status(200)
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        ));
        self
    }
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    then: Reply,
    log: Log,
}

/// A server on 127.0.0.1 and its log.
pub struct Server {
    pub addr: SocketAddr,
    pub log: Log,
    task: JoinHandle<()>,
}

impl Server {
    /// An axum server answering with `replies` in order, then with `then` forever.
    pub async fn scripted(replies: impl IntoIterator<Item = Reply>, then: Reply) -> Self {
        Self::scripted_with(replies, then, |router| router).await
    }

    /// [`Server::scripted`], its router wrapped by `wrap` (in a layer, say).
    pub async fn scripted_with(
        replies: impl IntoIterator<Item = Reply>,
        then: Reply,
        wrap: impl FnOnce(Router) -> Router,
    ) -> Self {
        let log = Log::default();
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into_iter().collect()),
            then,
            log: log.clone(),
        });
        let router = Router::new().fallback(answer).with_state(script);
        Self::serve(wrap(router), log).await
    }

    /// Serves `router`; its handlers write to `log` themselves.
    pub async fn serve(router: Router, log: Log) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self { addr, log, task }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    State(script): State<Arc<Script>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let reply = script
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| script.then.clone());
    script.log.push(Request {
        at,
        method,
        path: uri.path().to_owned(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        answered: Some(reply.status),
    });
    let mut response_headers = HeaderMap::new();
    for (name, value) in reply.headers {
        response_headers.append(name, value);
    }
    let text = reply.status.canonical_reason().unwrap_or("").to_owned();
    (reply.status, response_headers, text).into_response()
}

/// What the [`WriteServer`] does with a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// Performs it (or finds it already performed under its key) and answers.
    Apply,
    /// Performs it (or finds it already performed), then closes the connection without
    /// answering: the client cannot tell whether the write took effect.
    ApplyThenHangUp,
}

/// The records a [`WriteServer`] holds: the result of each write, by idempotency key.
pub type Store = Arc<Mutex<HashMap<String, String>>>;

/// A raw HTTP/1.1 server on 127.0.0.1 that performs writes, deduplicated by key.
///
/// A write carries its key in `Idempotency-Key`. The first write with a key creates a
/// record (`charge-N` with the request body) and answers `201 Created`; a later write
/// with the same key creates nothing and answers `200 OK` with the stored record and
/// `idempotent-replayed: true`. A write without a key answers `400`. Every response
/// closes its connection, so each request arrives on a connection of its own.
pub struct WriteServer {
    pub addr: SocketAddr,
    pub log: Log,
    pub store: Store,
    task: JoinHandle<()>,
}

impl WriteServer {
    /// A server that handles writes as `script` says, in order, then as `then`.
    pub async fn start(script: impl IntoIterator<Item = Write>, then: Write) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Log::default();
        let store = Store::default();
        let script: Arc<Mutex<VecDeque<Write>>> =
            Arc::new(Mutex::new(script.into_iter().collect()));
        let (task_log, task_store) = (log.clone(), store.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (log, store, script) = (task_log.clone(), task_store.clone(), script.clone());
                tokio::spawn(async move {
                    let Some(request) = read_request(stream).await else {
                        return;
                    };
                    let (mut stream, request) = request;
                    let write = script.lock().unwrap().pop_front().unwrap_or(then);
                    let (status, body, replayed) = apply(&store, &request);
                    let answered = (write == Write::Apply).then_some(status);
                    log.push(Request {
                        answered,
                        ..request
                    });
                    if answered.is_none() {
                        // Dropping the stream closes the connection with nothing sent.
                        return;
                    }
                    let response = format!(
                        "HTTP/1.1 {} {}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nidempotent-replayed: {replayed}\r\nconnection: close\r\n\r\n{body}",
                        status.as_u16(),
                        status.canonical_reason().unwrap_or(""),
                        body.len(),
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            addr,
            log,
            store,
            task,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The number of records in the store.
    pub fn records(&self) -> usize {
        self.store.lock().unwrap().len()
    }
}

impl Drop for WriteServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A raw HTTP/1.1 server on 127.0.0.1 that answers the first `answered` requests of
/// each connection with `200 OK`, keeping the connection open, and closes it after
/// reading the next one, without answering: a pooled connection the server closes as
/// the request is written (or, with `answered` 0, a server that takes each request and
/// resets). Counts the requests it read and the connections it took.
pub struct ClosingServer {
    pub addr: SocketAddr,
    requests: Arc<std::sync::atomic::AtomicU32>,
    connections: Arc<std::sync::atomic::AtomicU32>,
    task: JoinHandle<()>,
}

impl ClosingServer {
    pub async fn start(answered: usize) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU32::new(0));
        let connections = Arc::new(AtomicU32::new(0));
        let (seen, taken) = (requests.clone(), connections.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                taken.fetch_add(1, Ordering::SeqCst);
                let seen = seen.clone();
                tokio::spawn(async move {
                    for n in 0.. {
                        let Some((next, _)) = read_request(stream).await else {
                            return;
                        };
                        stream = next;
                        seen.fetch_add(1, Ordering::SeqCst);
                        if n >= answered {
                            return;
                        }
                        let ok = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nOK";
                        if stream.write_all(ok.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            requests,
            connections,
            task,
        }
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests it read.
    pub fn requests(&self) -> u32 {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The connections it took.
    pub fn connections(&self) -> u32 {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for ClosingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The URL of a listener on 127.0.0.1 that takes each connection and never reads or
/// answers; it lives until the test's runtime ends.
pub async fn hanging_listener() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    format!("http://{addr}/orders/1")
}

/// The URL of a listener on 127.0.0.1 whose accept queue is full (a backlog of 0, two
/// connections waiting, none accepted), so that a connect to it times out: Linux drops
/// the SYN. It lives until the test's runtime ends.
pub async fn full_listener() -> String {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let connecting = TcpStream::connect(addr);
        if let Ok(Ok(stream)) = tokio::time::timeout(ms(100), connecting).await {
            waiting.push(stream);
        }
    }
    tokio::spawn(async move {
        let _held = (listener, waiting);
        std::future::pending::<()>().await
    });
    format!("http://{addr}/orders/1")
}

/// Performs the write `request`: its status, its body, and whether it was a replay.
fn apply(store: &Store, request: &Request) -> (StatusCode, String, bool) {
    let Some(key) = request.header("idempotency-key") else {
        return (
            StatusCode::BAD_REQUEST,
            "no Idempotency-Key".to_owned(),
            false,
        );
    };
    let mut store = store.lock().unwrap();
    if let Some(record) = store.get(key) {
        return (StatusCode::OK, record.clone(), true);
    }
    let record = format!("charge-{}: {}", store.len() + 1, request.body);
    store.insert(key.to_owned(), record.clone());
    (StatusCode::CREATED, record, false)
}

/// Reads one request (head and `content-length` body) from `stream`; `None` if the
/// client closed the connection first or sent something that is not HTTP/1.1.
async fn read_request(mut stream: TcpStream) -> Option<(TcpStream, Request)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_len = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_len]).ok()?.to_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = Method::from_bytes(request_line.next()?.as_bytes()).ok()?;
    let path = request_line.next()?.to_owned();
    let mut headers = HeaderMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        headers.append(
            HeaderName::from_bytes(name.trim().as_bytes()).ok()?,
            HeaderValue::from_str(value.trim()).ok()?,
        );
    }
    let length: usize = match headers.get(http::header::CONTENT_LENGTH) {
        Some(value) => value.to_str().ok()?.parse().ok()?,
        None => 0,
    };
    while buf.len() < head_len + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_len..head_len + length]).into_owned();
    let request = Request {
        at: Instant::now(),
        method,
        path,
        headers,
        body,
        answered: None,
    };
    Some((stream, request))
}

/// A client for the tests: no proxy from the environment, whatever it says.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The URL of a port on 127.0.0.1 where nothing listens: a listener was bound to it
/// and closed, so connecting is refused.
pub fn refused_url(path: &str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}{path}")
}

/// The status of a `RequestError::Status`, or a panic naming what came back instead.
pub fn status_of(error: &persevere::reqwest::RequestError) -> u16 {
    match error {
        persevere::reqwest::RequestError::Status(e) => e.status().as_u16(),
        other => panic!("expected a status error, got {other:?}"),
    }
}
