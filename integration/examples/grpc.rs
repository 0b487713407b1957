//! A `#[retry]` function calling a flaky gRPC server with tonic.
//!
//! Run it with `cargo run -p persevere-integration --example grpc`. It starts a tonic server on 127.0.0.1 (an
//! ephemeral port) serving the health service tonic-health ships, which answers
//! `UNAVAILABLE` twice, then `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms: 500`,
//! then `SERVING`; and a second service name that answers `NOT_FOUND`. The server prints
//! what it received and answers; the client prints each attempt. It shows:
//!
//! - `UNAVAILABLE` retried after the computed backoff (50-100 ms, then 100-200 ms);
//! - `RESOURCE_EXHAUSTED`, a quota unless the server says when to come back, retried
//!   after its pushback: at least 500 ms;
//! - each retry telling the server which attempt it is (`grpc-previous-rpc-attempts`)
//!   and how long the call has left (`grpc-timeout`), through the channel's
//!   `RetryMetadata`;
//! - `NOT_FOUND` returned after one attempt;
//! - the statistics of both calls.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use persevere::tonic::RetryMetadata;
use persevere::{Classify, idempotent, retry};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

/// The time origin the server and the client print from.
static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

fn ms() -> u128 {
    STARTED.get_or_init(Instant::now).elapsed().as_millis()
}

/// The flaky server: twice unavailable, once over quota with a pushback, then serving.
#[derive(Default)]
struct Flaky {
    requests: Arc<AtomicU32>,
}

#[tonic::async_trait]
impl Health for Flaky {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let header = |name| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        let (previous, timeout) = (header("grpc-previous-rpc-attempts"), header("grpc-timeout"));
        let said = format!("previous attempts {previous}, grpc-timeout {timeout}");
        if request.get_ref().service == "payments" {
            println!("{:>5} ms  server: {said}: NOT_FOUND", ms());
            return Err(Status::not_found("no such service"));
        }
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let answer = match n {
            1 | 2 => Err(Status::unavailable("restarting")),
            3 => {
                let mut status = Status::resource_exhausted("over quota");
                let wait = "500".parse().unwrap();
                status.metadata_mut().insert("grpc-retry-pushback-ms", wait);
                Err(status)
            }
            _ => Ok(Response::new(HealthCheckResponse { status: 1 })),
        };
        match &answer {
            Ok(_) => println!("{:>5} ms  server: request {n} ({said}): SERVING", ms()),
            Err(s) => println!(
                "{:>5} ms  server: request {n} ({said}): {:?}",
                ms(),
                s.code()
            ),
        }
        answer
    }

    type WatchStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("not in this example"))
    }
}

/// The client as it is written once: requests say which attempt they are.
type Client = HealthClient<RetryMetadata<Channel>>;

// Retried on what gRPC's rules call transient, for at most 5 s and 5 attempts. Asking
// for health is safe to repeat, hence `#[idempotent]`.
#[retry(
    deadline = "5s",
    attempts = 5,
    base = "100ms",
    cap = "1s",
    jitter = "equal"
)]
#[idempotent]
async fn health(client: &mut Client, service: &str) -> Result<i32, Status> {
    let attempt = persevere::attempt::number();
    println!(
        "{:>5} ms  client: {service:?} attempt {attempt} starts",
        ms()
    );
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    let outcome = client.check(request).await.map(|r| r.into_inner().status);
    if let Err(status) = &outcome {
        let class = status.classify();
        println!(
            "{:>5} ms  client: {:?}, class {class:?}",
            ms(),
            status.code()
        );
    }
    outcome
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ms();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = Server::builder()
        .add_service(HealthServer::new(Flaky::default()))
        .serve_with_incoming(TcpListenerStream::new(listener));
    tokio::spawn(server);
    println!("server listening at {addr}\n");

    let channel = Channel::from_shared(format!("http://{addr}"))?.connect_lazy();
    let mut client: Client = HealthClient::new(RetryMetadata::new(channel));
    let status = health(&mut client, "").await?;
    println!("\nfinal: serving status {status} after {} ms\n", ms());
    let missing = health(&mut client, "payments").await.unwrap_err();
    println!("\nfinal: {:?}, not retried", missing.code());
    println!("\n{}", persevere::stats::all());
    Ok(())
}
