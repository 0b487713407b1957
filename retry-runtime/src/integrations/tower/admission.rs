//! A server layer that sheds retries before first attempts: [`RetryAdmissionLayer`].
//!
//! A client's retry budget bounds what it sends over an outage, but not its first
//! seconds: no client can tell the first failures of an outage from a blip, and a fleet
//! of clients each with its own budget sends about twice its load then. The server can
//! tell, if retries say they are retries (an attempt header,
//! [`AttemptHeader`](crate::integrations::http::AttemptHeader)): this layer lets every first attempt
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

mod budget;
mod protocol;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response};

use crate::time::clock::{Clock, TokioClock};

use budget::{Budget, Settings};
pub use protocol::is_retry;
use protocol::{Answer, grpc_content_type, shed};

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

#[cfg(test)]
mod tests;
