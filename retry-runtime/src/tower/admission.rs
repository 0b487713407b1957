//! A server layer that sheds retries before first attempts: [`RetryAdmissionLayer`].
//!
//! A client's retry budget bounds what it sends over an outage, but not its first
//! seconds: no client can tell the first failures of an outage from a blip, and a fleet
//! of clients each with its own budget sends about twice its load then. The server can
//! tell, if retries say they are retries (an attempt header,
//! [`AttemptHeader`](crate::http::AttemptHeader)): this layer lets every first attempt
//! through, and a retry only while its budget allows, answering the rest at once with a
//! refusal that makes the client stop.
//!
//! **The budget** earns a token for each answer the inner service serves (a status
//! below 500 other than 429; for gRPC, no error status in the answer's headers), and one
//! a second, up to a cap (100 by default); a retry admitted spends one. An answer "over
//! capacity" (a 429 or 503, or gRPC's `RESOURCE_EXHAUSTED` or `UNAVAILABLE` in its
//! headers) earns nothing, nor does another failure (a 500, a 502). For a moment after the inner service answers "over capacity" (one second by
//! default), no retry is admitted at all: the service has just said it has no room,
//! and a retry would take the room of a first attempt. CONTRIBUTING.md says why this
//! shape and not a fixed share of first attempts, from the storm simulator's runs.
//!
//! **A retry** is a request whose headers say it is one, each by its own counting:
//! `persevere-attempt` and `x-envoy-attempt-count` of 2 or more (they count from 1),
//! `x-stainless-retry-count` of 1 or more (from 0), `grpc-previous-rpc-attempts` of 1
//! or more (the attempts before this one), and `amz-sdk-request`'s `attempt=` of 2 or
//! more. A request without one, or with a malformed one, is a first attempt: a server
//! can only shed the retries that say they are retries.
//!
//! **A refused retry** never reaches the inner service. It is answered as its protocol
//! says "do not retry", told from the request's content type: gRPC (`application/grpc`)
//! gets `UNAVAILABLE` with `grpc-retry-pushback-ms: -1` (gRPC's A6: stop retrying);
//! HTTP gets `503 Service Unavailable` with `x-should-retry: false` and `Retry-After: 1`
//! (for clients that read only that). persevere's clients, gRPC clients that follow A6,
//! and the clients Stainless generates stop at that answer.
//!
//! One budget per layer value, shared by the services it makes: mount one per route or
//! service as the capacity it protects is shared.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};

use crate::clock::{Clock, TokioClock};

/// Whether a request with `headers` says it is a retry. One pass over the headers, each
/// name compared with the five by length first: a request carries a dozen headers or so,
/// and a lookup of each of the five names would hash each of them.
pub fn is_retry(headers: &HeaderMap) -> bool {
    headers
        .iter()
        .any(|(name, value)| says_retry(name.as_str(), value))
}

/// Whether header `name` with `value` says that its request is a retry, each by its own
/// counting: from 1 (`persevere-attempt`, `x-envoy-attempt-count`, `amz-sdk-request`'s
/// `attempt=`), from 0 (`x-stainless-retry-count`), or the attempts before
/// (`grpc-previous-rpc-attempts`).
fn says_retry(name: &str, value: &HeaderValue) -> bool {
    let least = match name {
        crate::http::PERSEVERE_ATTEMPT | crate::http::X_ENVOY_ATTEMPT_COUNT => 2,
        "x-stainless-retry-count" | "grpc-previous-rpc-attempts" => 1,
        crate::http::AMZ_SDK_REQUEST => return aws_attempt(value).is_some_and(|n| n >= 2),
        _ => return false,
    };
    let number = value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    number.is_some_and(|n| n >= least)
}

/// `amz-sdk-request`'s `attempt=`: `attempt=2; max=3`.
fn aws_attempt(value: &HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?;
    text.split(';').find_map(|part| {
        let (key, value) = part.split_once('=')?;
        (key.trim() == "attempt")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// Whether a request with `headers` is gRPC's.
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// What a [`RetryAdmissionLayer`] has let through and refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionSnapshot {
    /// First attempts, all let through.
    pub first_attempts: u64,
    /// Retries let through.
    pub retries_admitted: u64,
    /// Retries refused.
    pub retries_shed: u64,
    /// The tokens the budget holds now, in thousandths.
    pub tokens_milli: u32,
}

/// The budget of one layer: tokens in thousandths, earned by answers and by time.
#[derive(Debug)]
struct Budget {
    origin: Instant,
    cap_milli: u32,
    per_answer_milli: u32,
    per_second_milli: u32,
    quiet_nanos: u64,
    tokens_milli: AtomicU32,
    // Nanoseconds from `origin`: until when no retry passes, and when the budget last
    // earned by time.
    quiet_until: AtomicU64,
    earned_at: AtomicU64,
    first_attempts: AtomicU64,
    admitted: AtomicU64,
    shed: AtomicU64,
}

impl Budget {
    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn earn(&self, milli: u32) {
        let cap = self.cap_milli;
        let _ = self
            .tokens_milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                // Never above the cap: a full budget is left as it is, unwritten.
                (tokens != cap).then(|| tokens.saturating_add(milli).min(cap))
            });
    }

    /// Whether a retry may pass now, spending a token if so.
    fn admit(&self, now: Instant) -> bool {
        let now = self.nanos(now);
        if now < self.quiet_until.load(Ordering::Relaxed) {
            return false;
        }
        // What time has earned since it last earned, whole thousandths of a token (none
        // for a budget that earns nothing by time).
        let earned_at = self.earned_at.load(Ordering::Relaxed);
        let per_milli = match self.per_second_milli {
            0 => u64::MAX,
            per_second => 1_000_000_000 / u64::from(per_second),
        };
        let milli = now.saturating_sub(earned_at) / per_milli;
        if milli != 0
            && self
                .earned_at
                .compare_exchange(
                    earned_at,
                    earned_at + milli * per_milli,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.earn(u32::try_from(milli).unwrap_or(u32::MAX));
        }
        self.tokens_milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                tokens.checked_sub(1000)
            })
            .is_ok()
    }

    /// The inner service answered as `answer` says.
    fn answered(&self, answer: Answer) {
        match answer {
            Answer::Served => self.earn(self.per_answer_milli),
            Answer::OverCapacity => {
                let until = self
                    .nanos(TokioClock::now())
                    .saturating_add(self.quiet_nanos);
                self.quiet_until.fetch_max(until, Ordering::Relaxed);
            }
            Answer::Failed => {}
        }
    }
}

/// Wraps a service in [`RetryAdmission`]: every first attempt passes; a retry passes
/// while the layer's budget allows, and is otherwise answered at once with a refusal
/// that makes the client stop (see the module documentation).
///
/// ```
/// use std::time::Duration;
/// use persevere::tower::RetryAdmissionLayer;
///
/// // With axum: `Router::new().route(...).layer(RetryAdmissionLayer::new())`.
/// let layer = RetryAdmissionLayer::new()
///     .with_cap(50)
///     .with_quiet(Duration::from_millis(500));
/// assert_eq!(layer.snapshot().retries_shed, 0);
/// ```
#[derive(Clone, Debug)]
pub struct RetryAdmissionLayer {
    budget: Arc<Budget>,
}

impl Default for RetryAdmissionLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryAdmissionLayer {
    /// A layer whose budget earns a token for each answer served and one a second, holds at most 100, starts full, and admits no retry for a
    /// second after an answer over capacity.
    pub fn new() -> Self {
        Self::from_parts(100_000, 1000, 1000, Duration::from_secs(1))
    }

    fn from_parts(
        cap_milli: u32,
        per_answer_milli: u32,
        per_second_milli: u32,
        quiet: Duration,
    ) -> Self {
        Self {
            budget: Arc::new(Budget {
                origin: TokioClock::now(),
                cap_milli,
                per_answer_milli,
                per_second_milli,
                quiet_nanos: u64::try_from(quiet.as_nanos()).unwrap_or(u64::MAX),
                tokens_milli: AtomicU32::new(cap_milli),
                quiet_until: AtomicU64::new(0),
                earned_at: AtomicU64::new(0),
                first_attempts: AtomicU64::new(0),
                admitted: AtomicU64::new(0),
                shed: AtomicU64::new(0),
            }),
        }
    }

    fn rebuilt(&self, f: impl FnOnce(&mut (u32, u32, u32, Duration))) -> Self {
        let b = &self.budget;
        let mut parts = (
            b.cap_milli,
            b.per_answer_milli,
            b.per_second_milli,
            Duration::from_nanos(b.quiet_nanos),
        );
        f(&mut parts);
        Self::from_parts(parts.0, parts.1, parts.2, parts.3)
    }

    /// The most tokens the budget holds (and starts with): the most retries let through
    /// at once after a quiet time.
    pub fn with_cap(&self, tokens: u32) -> Self {
        self.rebuilt(|parts| parts.0 = tokens.saturating_mul(1000))
    }

    /// The tokens each answer served earns: `1.0` lets a retry through for
    /// each answered request, `0.1` for one in ten.
    pub fn with_per_answer(&self, tokens: f64) -> Self {
        let milli = (tokens.clamp(0.0, 1000.0) * 1000.0) as u32;
        self.rebuilt(|parts| parts.1 = milli)
    }

    /// The tokens the budget earns each second, whatever the traffic.
    pub fn with_per_second(&self, tokens: f64) -> Self {
        let milli = (tokens.clamp(0.0, 1_000_000.0) * 1000.0) as u32;
        self.rebuilt(|parts| parts.2 = milli)
    }

    /// How long after an answer over capacity no retry passes.
    pub fn with_quiet(&self, quiet: Duration) -> Self {
        self.rebuilt(|parts| parts.3 = quiet)
    }

    /// What the layer has let through and refused so far, across the services it made.
    pub fn snapshot(&self) -> AdmissionSnapshot {
        let b = &self.budget;
        AdmissionSnapshot {
            first_attempts: b.first_attempts.load(Ordering::Relaxed),
            retries_admitted: b.admitted.load(Ordering::Relaxed),
            retries_shed: b.shed.load(Ordering::Relaxed),
            tokens_milli: b.tokens_milli.load(Ordering::Relaxed),
        }
    }
}

impl<S> tower_layer::Layer<S> for RetryAdmissionLayer {
    type Service = RetryAdmission<S>;

    fn layer(&self, inner: S) -> RetryAdmission<S> {
        RetryAdmission {
            inner,
            budget: Arc::clone(&self.budget),
        }
    }
}

/// A service that lets every first attempt through and retries while its layer's budget
/// allows ([`RetryAdmissionLayer`]).
#[derive(Clone, Debug)]
pub struct RetryAdmission<S> {
    inner: S,
    budget: Arc<Budget>,
}

impl<S> RetryAdmission<S> {
    /// The service it wraps.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S, B, R> tower_service::Service<Request<B>> for RetryAdmission<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = AdmissionFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let headers = request.headers();
        let counter = if !is_retry(headers) {
            &self.budget.first_attempts
        } else if self.budget.admit(TokioClock::now()) {
            &self.budget.admitted
        } else {
            self.budget.shed.fetch_add(1, Ordering::Relaxed);
            return AdmissionFuture {
                state: State::Shed {
                    grpc: is_grpc(headers),
                },
            };
        };
        counter.fetch_add(1, Ordering::Relaxed);
        AdmissionFuture {
            state: State::Inner {
                future: self.inner.call(request),
                budget: Arc::clone(&self.budget),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RetryAdmission`].
    pub struct AdmissionFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProject]
    enum State<F> {
        Inner { #[pin] future: F, budget: Arc<Budget> },
        Shed { grpc: bool },
    }
}

impl<F, R, E> Future for AdmissionFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
    R: Default,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProject::Inner { future, budget } => {
                let output = std::task::ready!(future.poll(cx));
                if let Ok(response) = &output {
                    budget.answered(Answer::of(response));
                }
                Poll::Ready(output)
            }
            StateProject::Shed { grpc } => Poll::Ready(Ok(shed(*grpc))),
        }
    }
}

/// What an answer of the inner service says of its capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// It served the request: a status below 500 other than 429, without a gRPC error
    /// status in the headers.
    Served,
    /// It had no room: HTTP 429 or 503, or gRPC's `RESOURCE_EXHAUSTED` (8) or
    /// `UNAVAILABLE` (14) in the answer's headers.
    OverCapacity,
    /// Any other failure.
    Failed,
}

impl Answer {
    fn of<R>(response: &Response<R>) -> Self {
        /// Named once: a lookup by `&str` would parse the name on every answer.
        const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
        let status = response.status();
        let grpc = response.headers().get(&GRPC_STATUS);
        if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::SERVICE_UNAVAILABLE
            || grpc.is_some_and(|code| code == "8" || code == "14")
        {
            Answer::OverCapacity
        } else if status.as_u16() < 500 && grpc.is_none_or(|code| code == "0") {
            Answer::Served
        } else {
            Answer::Failed
        }
    }
}

/// The answer to a retry refused: "unavailable, do not retry", in the request's protocol.
#[cold]
fn shed<R: Default>(grpc: bool) -> Response<R> {
    let mut response = Response::new(R::default());
    if !grpc {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    let headers = response.headers_mut();
    if grpc {
        // A trailers-only answer: the status in the headers.
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static("14"));
        headers.insert(
            "grpc-message",
            HeaderValue::from_static("retry%20shed%20by%20the%20server"),
        );
        headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("-1"));
    } else {
        headers.insert(
            crate::http::X_SHOULD_RETRY,
            HeaderValue::from_static("false"),
        );
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

#[cfg(test)]
mod tests;
