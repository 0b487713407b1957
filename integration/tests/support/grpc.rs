//! A real gRPC server on 127.0.0.1 (tonic, with the health service tonic-health ships
//! generated), answering each request as its `service` field says, and logging what
//! arrived: the attempt header, the deadline, and the deadline the handler saw.
//!
//! A request's `service` is a case: `name;key=value;...`, the keys being
//! - `code=N`: fail with gRPC code N (14 if no code is given, and `fail` is set);
//! - `fail=K`: fail the first K requests of the case only (every one without it);
//! - `pushback=V`: with `grpc-retry-pushback-ms: V` in the failure's metadata;
//! - `retryinfo=MS`: with `google.rpc.RetryInfo` of MS milliseconds in its details;
//! - `hang=K`: the first K requests of the case never answer;
//! - `slow=MS`: the first request of the case answers after MS milliseconds.
//!
//! The server task is aborted when the server value is dropped.

// Each user of this module uses a different part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_types::{ErrorDetails, StatusExt};

/// What the server saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `grpc-previous-rpc-attempts`, as sent.
    pub previous: Option<String>,
    /// `grpc-timeout`, as sent.
    pub timeout: Option<String>,
    /// `persevere::deadline::remaining()` in the handler (under a `DeadlineLayer`).
    pub remaining: Option<Duration>,
    /// When it arrived.
    pub at: Instant,
}

/// The requests of each case, in order of arrival.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<HashMap<String, Vec<Seen>>>>);

impl Log {
    /// What the server saw of `case` (its name, before the first `;`).
    pub fn of(&self, case: &str) -> Vec<Seen> {
        self.0
            .lock()
            .unwrap()
            .get(case)
            .cloned()
            .unwrap_or_default()
    }

    /// How many requests of `case` arrived.
    pub fn count(&self, case: &str) -> usize {
        self.of(case).len()
    }

    fn record(&self, case: &str, seen: Seen) -> usize {
        let mut log = self.0.lock().unwrap();
        let requests = log.entry(case.to_owned()).or_default();
        requests.push(seen);
        requests.len()
    }
}

/// The health service, answering from each request's case.
#[derive(Clone, Default)]
pub struct Scripted {
    pub log: Log,
}

fn header(request: &Request<HealthCheckRequest>, name: &str) -> Option<String> {
    let value = request.metadata().get(name)?;
    Some(value.to_str().unwrap().to_owned())
}

#[tonic::async_trait]
impl Health for Scripted {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let seen = Seen {
            previous: header(&request, "grpc-previous-rpc-attempts"),
            timeout: header(&request, "grpc-timeout"),
            remaining: persevere::deadline::remaining(),
            at: Instant::now(),
        };
        let case = request.into_inner().service;
        let mut parts = case.split(';');
        let name = parts.next().unwrap_or_default();
        let keys: HashMap<&str, &str> = parts.filter_map(|kv| kv.split_once('=')).collect();
        let key = |k: &str| keys.get(k).map(|v| v.parse::<u64>().unwrap());
        let n = self.log.record(name, seen) as u64;
        if key("hang").is_some_and(|k| n <= k) {
            std::future::pending::<()>().await;
        }
        if let Some(slow) = key("slow").filter(|_| n == 1) {
            tokio::time::sleep(Duration::from_millis(slow)).await;
        }
        let failing = key("code").is_some() || key("fail").is_some();
        if failing && key("fail").is_none_or(|k| n <= k) {
            let code = Code::from_i32(key("code").unwrap_or(14) as i32);
            let mut status = match key("retryinfo") {
                Some(ms) => Status::with_error_details(
                    code,
                    "scripted",
                    ErrorDetails::with_retry_info(Some(Duration::from_millis(ms))),
                ),
                None => Status::new(code, "scripted"),
            };
            if let Some(pushback) = keys.get("pushback") {
                let value = pushback.parse().unwrap();
                status
                    .metadata_mut()
                    .insert("grpc-retry-pushback-ms", value);
            }
            return Err(status);
        }
        Ok(Response::new(HealthCheckResponse { status: 1 }))
    }

    type WatchStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        _request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

/// A server on 127.0.0.1 with the scripted health service.
pub struct GrpcServer {
    pub addr: SocketAddr,
    pub log: Log,
    task: JoinHandle<()>,
}

impl GrpcServer {
    /// Serves the scripted health service.
    pub async fn start() -> Self {
        Self::start_with(|service, incoming| {
            Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
        })
        .await
    }

    /// Serves the scripted health service as `serve` does, which builds the server
    /// (with the layers the test wants) and serves the connections `incoming`.
    pub async fn start_with<F>(
        serve: impl FnOnce(HealthServer<Scripted>, TcpListenerStream) -> F,
    ) -> Self
    where
        F: Future<Output = Result<(), tonic::transport::Error>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let scripted = Scripted::default();
        let log = scripted.log.clone();
        let serving = serve(
            HealthServer::new(scripted),
            TcpListenerStream::new(listener),
        );
        let task = tokio::spawn(async move { serving.await.unwrap() });
        Self { addr, log, task }
    }

    /// A channel to the server, connecting at its first request.
    pub fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect_lazy()
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
