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
//! headers) earns nothing, nor does another failure (a 500, a 502). Once the service is
//! over capacity (ten such answers in one second, by default), no retry is admitted for
//! a moment (one second): the service has said it has no room, and a retry would take
//! the room of a first attempt. One such answer is a blip: the retry that follows it,
//! after the server's own wait, passes. CONTRIBUTING.md says why this shape and not a
//! fixed share of first attempts, from the storm simulator's runs.
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
//! service as the capacity it protects is shared (one layer over a router sheds the
//! retries of every route once any of them is over capacity). The `with_*` settings
//! make the layer's budget anew: set a layer up before it makes services.

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
    // A proxy may have joined two values with a comma.
    let Ok(text) = value.to_str() else {
        return false;
    };
    text.split(',')
        .any(|item| count(item).is_some_and(|n| n >= least))
}

/// A count: whole digits, spaces around them allowed; more than a `u64` holds is the
/// most it holds, as for the pushback headers' numbers.
fn count(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse().unwrap_or(u64::MAX))
}

/// `amz-sdk-request`'s first `attempt=`: `attempt=2; max=3`.
fn aws_attempt(value: &HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?;
    text.split(';')
        .find_map(|part| {
            let (key, value) = part.split_once('=')?;
            (key.trim() == "attempt").then(|| count(value))
        })
        .flatten()
}

/// The content type of a gRPC request (`application/grpc`, `application/grpc+proto`,
/// `application/grpc-web`..., in any case), which its refusal answers in; `None` for
/// any other request.
fn grpc_content_type(headers: &HeaderMap) -> Option<HeaderValue> {
    let value = headers.get(http::header::CONTENT_TYPE)?;
    let bytes = value.as_bytes();
    let grpc = b"application/grpc";
    let is_grpc = bytes.len() >= grpc.len()
        && bytes[..grpc.len()].eq_ignore_ascii_case(grpc)
        && matches!(bytes.get(grpc.len()), None | Some(b'+' | b';' | b'-'));
    is_grpc.then(|| value.clone())
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

/// What a layer's budget is set to.
#[derive(Clone, Copy, Debug)]
struct Settings {
    cap_milli: u32,
    per_answer_milli: u32,
    per_second_milli: u32,
    quiet_nanos: u64,
    quiet_after: u32,
}

/// The budget of one layer: tokens in thousandths, earned by answers and by time.
#[derive(Debug)]
struct Budget {
    origin: Instant,
    settings: Settings,
    tokens_milli: AtomicU32,
    // The answers over capacity in the current second: the second since `origin` in
    // the high half, the count in the low.
    overloads: AtomicU64,
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
        let cap = self.settings.cap_milli;
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
        let per_milli = match self.settings.per_second_milli {
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
            Answer::Served => self.earn(self.settings.per_answer_milli),
            Answer::OverCapacity => self.overloaded(),
            Answer::Failed => {}
        }
    }

    /// An answer over capacity: counted in its second, and the quiet time begins once
    /// the second has `quiet_after` of them. One 503 is a blip, whose retry, after the
    /// server's own wait, should pass; many in a second are an overload.
    fn overloaded(&self) {
        /// The count's half of `overloads`.
        const COUNT: u64 = 0xffff_ffff;
        let now = self.nanos(TokioClock::now());
        let second = now / 1_000_000_000;
        // `packed` with this answer counted: in the same second, one more; else the first.
        let bumped = |packed: u64| {
            let count = if packed >> 32 == second {
                packed & COUNT
            } else {
                0
            };
            (second << 32) + (count + 1).min(COUNT)
        };
        let previous = self
            .overloads
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                Some(bumped(packed))
            })
            .unwrap_or_else(|packed| packed);
        let counted = bumped(previous) & COUNT;
        if counted >= u64::from(self.settings.quiet_after) {
            let until = now.saturating_add(self.settings.quiet_nanos);
            self.quiet_until.fetch_max(until, Ordering::Relaxed);
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
    /// A layer whose budget earns a token for each answer served and one a second,
    /// holds at most 100, starts full, and admits no retry for a second after ten answers
    /// over capacity in one second.
    pub fn new() -> Self {
        Self::with_settings(Settings {
            cap_milli: 100_000,
            per_answer_milli: 1000,
            per_second_milli: 1000,
            quiet_nanos: 1_000_000_000,
            quiet_after: 10,
        })
    }

    fn with_settings(settings: Settings) -> Self {
        Self {
            budget: Arc::new(Budget {
                origin: TokioClock::now(),
                settings,
                tokens_milli: AtomicU32::new(settings.cap_milli),
                overloads: AtomicU64::new(0),
                quiet_until: AtomicU64::new(0),
                earned_at: AtomicU64::new(0),
                first_attempts: AtomicU64::new(0),
                admitted: AtomicU64::new(0),
                shed: AtomicU64::new(0),
            }),
        }
    }

    /// This layer's settings changed by `change`, with a budget of its own: set a layer
    /// up before it makes services, since those share the budget it has then.
    fn set(self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = self.budget.settings;
        change(&mut settings);
        Self::with_settings(settings)
    }

    /// The most tokens the budget holds (and starts with): the most retries let through
    /// at once after a quiet time.
    pub fn with_cap(self, tokens: u32) -> Self {
        self.set(|s| s.cap_milli = tokens.saturating_mul(1000))
    }

    /// The tokens each answer served earns: `1.0` lets a retry through for
    /// each answered request, `0.1` for one in ten.
    pub fn with_per_answer(self, tokens: f64) -> Self {
        let milli = (tokens.clamp(0.0, 1000.0) * 1000.0) as u32;
        self.set(|s| s.per_answer_milli = milli)
    }

    /// The tokens the budget earns each second, whatever the traffic.
    pub fn with_per_second(self, tokens: f64) -> Self {
        let milli = (tokens.clamp(0.0, 1_000_000.0) * 1000.0) as u32;
        self.set(|s| s.per_second_milli = milli)
    }

    /// How long no retry passes once the service is over capacity.
    pub fn with_quiet(self, quiet: Duration) -> Self {
        let nanos = u64::try_from(quiet.as_nanos()).unwrap_or(u64::MAX);
        self.set(|s| s.quiet_nanos = nanos)
    }

    /// How many answers over capacity in one second make the service over capacity (10
    /// by default; at least 1): fewer are a blip, whose retries still pass.
    pub fn with_quiet_after(self, answers: u32) -> Self {
        self.set(|s| s.quiet_after = answers.max(1))
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
                    grpc: grpc_content_type(headers),
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
        Shed { grpc: Option<HeaderValue> },
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
            StateProject::Shed { grpc } => Poll::Ready(Ok(shed(grpc.take()))),
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
fn shed<R: Default>(grpc: Option<HeaderValue>) -> Response<R> {
    let mut response = Response::new(R::default());
    if grpc.is_none() {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    let headers = response.headers_mut();
    if let Some(content_type) = grpc {
        // A trailers-only answer, in the request's content type: the status in the
        // headers.
        headers.insert(http::header::CONTENT_TYPE, content_type);
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
