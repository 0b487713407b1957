//! gRPC with tonic: `#[retry]` functions whose error is `tonic::Status`, against a real
//! tonic server on 127.0.0.1 (the health service tonic-health ships generated, answering
//! from a script: `support/grpc.rs`), through a channel wrapped in
//! `persevere::tonic::RetryMetadata`.
//!
//! The budget is unlimited here, so that what is retried is decided by the failure
//! alone; what the budget allows is tested on its own elsewhere. Time is real: lower
//! bounds are exact, upper bounds catch a call that waited for what it should not, with
//! room for a busy machine.

#[path = "support/grpc.rs"]
mod grpc_server;
mod support;

use std::time::{Duration, Instant};

use grpc_server::GrpcServer;
use persevere::deadline::parse_grpc_timeout;
use persevere::tonic::{RetryMetadata, RetryMetadataLayer};
use persevere::tower::{DeadlineLayer, RetryAdmissionLayer};
use persevere::{Class, Classify, RetryBudget, idempotent, retry};
use support::{SLACK, ms};
use tokio::task::JoinSet;
use tonic::transport::{Channel, Server};
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// The client as a user writes it once: its channel tells the server which attempt it
/// is and how long the call has.
type Client = HealthClient<RetryMetadata<Channel>>;

fn client(server: &GrpcServer) -> Client {
    HealthClient::new(RetryMetadata::new(server.channel()))
}

async fn check_once(client: &mut Client, case: &str) -> Result<i32, Status> {
    let request = HealthCheckRequest {
        service: case.to_owned(),
    };
    Ok(client.check(request).await?.into_inner().status)
}

/// Safe to repeat: retries every failure a retry can fix.
#[retry(attempts = 3, base = "1ms", cap = "2ms", deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn check(client: &mut Client, case: &str) -> Result<i32, Status> {
    check_once(client, case).await
}

/// Not marked safe to repeat: retries only what never reached the server.
#[retry(attempts = 3, base = "1ms", cap = "2ms", deadline = "5s", budget = UNLIMITED, on = unsent)]
async fn check_unsent(client: &mut Client, case: &str) -> Result<i32, Status> {
    check_once(client, case).await
}

/// Every code a server can fail with, and the requests an idempotent function makes
/// with at most 3 attempts: with no pushback, with a valid one (a wait), and with a
/// negative or malformed one (a stop). Uncertain failures get 2 attempts.
const CODES: [(Code, usize, usize, usize); 16] = [
    (Code::Cancelled, 1, 1, 1),
    (Code::Unknown, 2, 2, 1),
    (Code::InvalidArgument, 1, 1, 1),
    (Code::DeadlineExceeded, 1, 1, 1),
    (Code::NotFound, 1, 1, 1),
    (Code::AlreadyExists, 1, 1, 1),
    (Code::PermissionDenied, 1, 1, 1),
    (Code::ResourceExhausted, 1, 3, 1),
    (Code::FailedPrecondition, 1, 1, 1),
    (Code::Aborted, 1, 1, 1),
    (Code::OutOfRange, 1, 1, 1),
    (Code::Unimplemented, 1, 1, 1),
    (Code::Internal, 2, 2, 1),
    (Code::Unavailable, 3, 3, 1),
    (Code::DataLoss, 1, 1, 1),
    (Code::Unauthenticated, 1, 1, 1),
];

/// The pushback values tried with each code: none, two waits, two stops.
const PUSHBACKS: [Option<&str>; 5] = [None, Some("0"), Some("250"), Some("-1"), Some("x")];

// The matrix: code x pushback x idempotent -> the requests the server saw. A function
// that is not marked idempotent (`on = unsent`) makes one request whatever the server
// answers, since an answer proves the request arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sees_the_requests_each_answer_allows() {
    let server = GrpcServer::start().await;
    let mut calls = JoinSet::new();
    let mut expected = Vec::new();
    for (code, none, wait, stop) in CODES {
        for pushback in PUSHBACKS {
            let requests = match pushback {
                None => none,
                Some("0" | "250") => wait,
                Some(_) => stop,
            };
            for idempotent in [true, false] {
                let name = format!("{code:?}-{pushback:?}-{idempotent}");
                let mut case = format!("{name};code={}", code as i32);
                if let Some(pushback) = pushback {
                    case += &format!(";pushback={pushback}");
                }
                let mut client = client(&server);
                calls.spawn(async move {
                    let result = if idempotent {
                        check(&mut client, &case).await
                    } else {
                        check_unsent(&mut client, &case).await
                    };
                    (result.unwrap_err().code(), code)
                });
                expected.push((name, if idempotent { requests } else { 1 }));
            }
        }
    }
    while let Some(result) = calls.join_next().await {
        let (got, sent) = result.unwrap();
        assert_eq!(got, sent, "the call returns the server's status");
    }
    let seen: Vec<(String, usize)> = expected
        .iter()
        .map(|(name, _)| (name.clone(), server.log.count(name)))
        .collect();
    assert_eq!(seen, expected);
}

// A valid pushback is a lower bound on the wait: the retries of an UNAVAILABLE with
// `grpc-retry-pushback-ms: 250` arrive at least 250 ms apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushback_spaces_the_retries() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    let error = check(&mut client, "spaced;code=14;pushback=250")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable);
    let seen = server.log.of("spaced");
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        assert!(pair[1].at - pair[0].at >= ms(250), "{seen:?}");
    }
}

// `google.rpc.RetryInfo` in the status details is a wait as well, and makes a
// RESOURCE_EXHAUSTED (otherwise taken for a quota) retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_info_is_a_wait() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    let error = check(&mut client, "quota;code=8;retryinfo=200")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::ResourceExhausted);
    assert_eq!(error.classify(), Class::RetryAfter(ms(200)));
    let seen = server.log.of("quota");
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        assert!(pair[1].at - pair[0].at >= ms(200), "{seen:?}");
    }
}

// Each request says which attempt it is (`grpc-previous-rpc-attempts`: absent, 1, 2)
// and how long the call has left (`grpc-timeout`, within the 5 s deadline, less on each
// retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_the_attempt_and_the_deadline() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    assert_eq!(check(&mut client, "headers;fail=2").await.unwrap(), 1);
    let seen = server.log.of("headers");
    let previous: Vec<Option<&str>> = seen.iter().map(|s| s.previous.as_deref()).collect();
    assert_eq!(previous, [None, Some("1"), Some("2")]);
    let timeouts: Vec<Duration> = seen
        .iter()
        .map(|s| parse_grpc_timeout(s.timeout.as_deref().unwrap()).unwrap())
        .collect();
    assert!(timeouts[0] <= Duration::from_secs(5), "{timeouts:?}");
    assert!(timeouts[0] > Duration::from_secs(4), "{timeouts:?}");
    assert!(timeouts.windows(2).all(|t| t[1] < t[0]), "{timeouts:?}");
}

// A request made outside any `#[retry]` call carries neither key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outside_a_retried_call_carries_nothing() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    assert_eq!(check_once(&mut client, "plain").await.unwrap(), 1);
    let seen = server.log.of("plain");
    assert_eq!(
        (seen[0].previous.as_deref(), seen[0].timeout.as_deref()),
        (None, None)
    );
}

#[retry(deadline = "300ms", base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn check_by_300ms(client: &mut Client, case: &str) -> Result<i32, Status> {
    check_once(client, case).await
}

// A server that hangs: the call returns DEADLINE_EXCEEDED at its deadline, whichever of
// persevere's cut and tonic's own timer (which enforces the `grpc-timeout` sent) is seen
// first, and the server was told no more than the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_ends_at_the_deadline_with_deadline_exceeded() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    let started = Instant::now();
    let error = check_by_300ms(&mut client, "hung;hang=9")
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
    assert!(took >= ms(300) && took < ms(300) + SLACK, "{took:?}");
    let seen = server.log.of("hung");
    assert_eq!(seen.len(), 1);
    let sent = parse_grpc_timeout(seen[0].timeout.as_deref().unwrap()).unwrap();
    assert!(sent <= ms(300) && sent > ms(200), "{sent:?}");
}

#[retry(deadline = "3s", attempt_timeout = "200ms", attempts = 3, base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn check_in_200ms(client: &mut Client, case: &str) -> Result<i32, Status> {
    check_once(client, case).await
}

// Under `attempt_timeout`, the server is told the call's deadline, not the attempt's:
// persevere cuts each hung attempt at 200 ms and retries it, and no answer of the
// server's (a DEADLINE_EXCEEDED at the same moment, which is not retried) can race the
// cut. The third attempt answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_attempt_timeout_the_server_gets_the_call_s_deadline() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    let started = Instant::now();
    assert_eq!(check_in_200ms(&mut client, "cut;hang=2").await.unwrap(), 1);
    assert!(started.elapsed() >= ms(400));
    let seen = server.log.of("cut");
    let previous: Vec<Option<&str>> = seen.iter().map(|s| s.previous.as_deref()).collect();
    assert_eq!(previous, [None, Some("1"), Some("2")]);
    for s in &seen {
        let sent = parse_grpc_timeout(s.timeout.as_deref().unwrap()).unwrap();
        assert!(sent > Duration::from_secs(2), "{seen:?}");
    }
}

// The same, cut by the attempt timeout every time: the call's error is the cut, as
// DEADLINE_EXCEEDED, after 3 attempts (it was retried).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_cut_by_their_timeout_are_retried() {
    let server = GrpcServer::start().await;
    let mut client = client(&server);
    let error = check_in_200ms(&mut client, "always-cut;hang=9")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::DeadlineExceeded);
    assert_eq!(error.classify(), Class::Transient);
    assert_eq!(server.log.count("always-cut"), 3);
}

// On the serving side, `DeadlineLayer` gives the handler the deadline the request
// carries, as `deadline::remaining()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_server_s_handler_sees_the_caller_s_deadline() {
    let server = GrpcServer::start_with(|service, incoming| {
        Server::builder()
            .layer(DeadlineLayer::new())
            .add_service(service)
            .serve_with_incoming(incoming)
    })
    .await;
    let mut client = client(&server);
    assert_eq!(check_by_300ms(&mut client, "deadline").await.unwrap(), 1);
    let seen = server.log.of("deadline");
    let remaining = seen[0].remaining.expect("a deadline in the handler");
    assert!(remaining <= ms(300) && remaining > ms(200), "{remaining:?}");
}

// A tonic server behind `RetryAdmissionLayer`, over capacity (the layer takes one
// UNAVAILABLE as an overload here): the client's retry, which says it is one, is shed
// with UNAVAILABLE and a pushback of -1, and the client stops. The handler sees one
// request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_retry_stops_a_grpc_client() {
    let layer = RetryAdmissionLayer::new().with_quiet_after(1);
    let server = GrpcServer::start_with({
        let layer = layer.clone();
        move |service, incoming| {
            Server::builder()
                .layer(layer)
                .add_service(service)
                .serve_with_incoming(incoming)
        }
    })
    .await;
    let mut client = client(&server);
    let error = check(&mut client, "shed;code=14").await.unwrap_err();
    assert_eq!(server.log.count("shed"), 1);
    assert_eq!(error.code(), Code::Unavailable);
    assert_eq!(
        error.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "-1"
    );
    assert_eq!(error.classify(), Class::Permanent);
    let s = layer.snapshot();
    assert_eq!(
        (s.first_attempts, s.retries_admitted, s.retries_shed),
        (1, 0, 1)
    );
}

/// Hedged: a copy of a slow attempt after 30 ms. A tonic client takes `&mut self`, so
/// a hedged function takes it by reference and clones it (a clone shares the channel).
#[retry(hedge = "30ms", attempts = 2, deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn check_hedged(client: &Client, case: &str) -> Result<i32, Status> {
    check_once(&mut client.clone(), case).await
}

#[retry(attempts = 2, deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn check_unhedged(client: &Client, case: &str) -> Result<i32, Status> {
    check_once(&mut client.clone(), case).await
}

const SLOW: u64 = 1_000;

/// The 99th percentile of 100 calls, one in ten of which the server answers after
/// `SLOW` (its first request; a copy is answered at once).
async fn p99(server: &GrpcServer, hedged: bool, run: &str) -> Duration {
    let client = client(server);
    let mut calls = JoinSet::new();
    for i in 0..100 {
        let client = client.clone();
        let case = match i % 10 {
            0 => format!("{run}-{i};slow={SLOW}"),
            _ => format!("{run}-{i}"),
        };
        calls.spawn(async move {
            let started = Instant::now();
            let result = match hedged {
                true => check_hedged(&client, &case).await,
                false => check_unhedged(&client, &case).await,
            };
            assert_eq!(result.unwrap(), 1);
            started.elapsed()
        });
    }
    let mut took = calls.join_all().await;
    took.sort();
    took[98]
}

// Against a straggling server, hedging cuts the tail: unhedged, the 99th percentile is
// the slow answer; hedged, the copy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedging_cuts_the_tail_against_a_straggler() {
    let server = GrpcServer::start().await;
    let unhedged = p99(&server, false, "unhedged").await;
    let hedged = p99(&server, true, "hedged").await;
    assert!(unhedged >= ms(SLOW), "{unhedged:?}");
    assert!(hedged < ms(SLOW) / 2, "{hedged:?} against {unhedged:?}");
    assert_eq!(server.log.count("hedged-0"), 2, "the slow call was hedged");
}

// A channel wrapped with the layer, as `ServiceBuilder` users write it, is the same
// client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_wraps_a_channel() {
    let server = GrpcServer::start().await;
    let channel = tower::ServiceBuilder::new()
        .layer(RetryMetadataLayer)
        .service(server.channel());
    let mut client: Client = HealthClient::new(channel);
    assert_eq!(check(&mut client, "layered;fail=1").await.unwrap(), 1);
    let previous: Vec<Option<String>> = server
        .log
        .of("layered")
        .into_iter()
        .map(|s| s.previous)
        .collect();
    assert_eq!(previous, [None, Some("1".to_owned())]);
}

#[retry(hedge = "30ms", attempt_timeout = "500ms", deadline = "5s", budget = UNLIMITED)]
#[idempotent]
async fn check_hedged_in_500ms(client: &Client, case: &str) -> Result<i32, Status> {
    check_once(&mut client.clone(), case).await
}

// A hedged copy with a time limit of its own is sent the call's deadline too, as the
// attempt it copies is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedged_copy_is_sent_the_call_s_deadline() {
    let server = GrpcServer::start().await;
    let client = client(&server);
    assert_eq!(
        check_hedged_in_500ms(&client, "copy;slow=300")
            .await
            .unwrap(),
        1
    );
    let seen = server.log.of("copy");
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.previous, None, "a copy counts as the attempt it copies");
        let sent = parse_grpc_timeout(s.timeout.as_deref().unwrap()).unwrap();
        assert!(sent > Duration::from_secs(4), "{seen:?}");
    }
}
