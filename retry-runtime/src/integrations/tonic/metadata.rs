//! What a gRPC request tells its server of the `#[retry]` call it is made in: which
//! attempt it is, and how long the call has left.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};

use crate::classify::timed_out::AttemptTimedOut;
use crate::integrations::http::GRPC_TIMEOUT;
use crate::layer::attempt;
use crate::layer::deadline::{parse_grpc_timeout, to_grpc_timeout};
use crate::layer::frame;
use crate::time::clock::{Clock, TokioClock};

type BoxError = Box<dyn Error + Send + Sync>;

/// The metadata key that says how many attempts of this call came before: absent on a
/// first attempt, 1 on the second, and so on.
pub const GRPC_PREVIOUS_RPC_ATTEMPTS: &str = "grpc-previous-rpc-attempts";

/// Writes into a request's headers what a server needs to know of the `#[retry]` call
/// it is made in:
/// - `grpc-previous-rpc-attempts`: the attempts before this one, on a retry only (a
///   server's `RetryAdmissionLayer` sheds such requests first when overloaded); a hedged
///   copy counts as the attempt it copies;
/// - `grpc-timeout`: the time left before the call's deadline (or a `deadline::scope`'s
///   or nested call's inside it, where that is sooner), unless the request carries a
///   shorter one already. Under `attempt_timeout` this is still the call's
///   deadline, not the attempt's: persevere cuts the attempt at its limit itself (the
///   server hears of it as a cancelled stream) and retries it, whereas a server that
///   stopped at the same moment would answer `DEADLINE_EXCEEDED`, which is not retried,
///   and whichever came first would decide the call.
///
/// [`RetryMetadata`] calls it for every request; this is for a service of your own.
pub fn insert_retry_metadata(headers: &mut HeaderMap) {
    insert(headers);
}

/// [`insert_retry_metadata`]; the deadline sent and the time it gave, if one was.
fn insert(headers: &mut HeaderMap) -> Option<(Instant, Duration)> {
    if let Some(before) = attempt::number().checked_sub(1).filter(|&n| n > 0) {
        headers.insert(GRPC_PREVIOUS_RPC_ATTEMPTS, HeaderValue::from(before));
    }
    let deadline = frame::request_deadline()?;
    let left = deadline.saturating_duration_since(TokioClock::now());
    let shorter = headers
        .get(GRPC_TIMEOUT)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_grpc_timeout)
        .is_some_and(|set| set <= left);
    if shorter {
        return None;
    }
    let value = HeaderValue::try_from(to_grpc_timeout(left)).expect("digits and a unit");
    headers.insert(GRPC_TIMEOUT, value);
    Some((deadline, left))
}

/// Wraps a client's channel in [`RetryMetadata`], for a tower `ServiceBuilder`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use persevere::tonic::{RetryMetadata, RetryMetadataLayer};
/// use tonic::transport::Channel;
/// use tonic_health::pb::health_client::HealthClient;
///
/// let channel = Channel::from_static("http://127.0.0.1:50051").connect_lazy();
/// let channel = tower::ServiceBuilder::new()
///     .layer(RetryMetadataLayer::new())
///     .service(channel);
/// let client: HealthClient<RetryMetadata<Channel>> = HealthClient::new(channel);
/// # let _ = client;
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct RetryMetadataLayer;

impl RetryMetadataLayer {
    /// The layer.
    pub const fn new() -> Self {
        Self
    }
}

impl<S> tower_layer::Layer<S> for RetryMetadataLayer {
    type Service = RetryMetadata<S>;

    fn layer(&self, inner: S) -> RetryMetadata<S> {
        RetryMetadata::new(inner)
    }
}

/// A gRPC client's channel that tells the server of the `#[retry]` call each request is
/// made in ([`insert_retry_metadata`]): wrap the channel once, and every `#[retry]`
/// function that uses the client sends it.
///
/// At the call's deadline, three timers end together: persevere's, which cuts the
/// attempt with `DEADLINE_EXCEEDED`; tonic's own, which enforces the `grpc-timeout`
/// sent and says `CANCELLED`; and the server's, whose failure may arrive before either
/// of the others is seen (tokio's timers fire on the millisecond after). So that the call
/// ends the same way whichever is first, this answers `DEADLINE_EXCEEDED`, as
/// persevere's cut does, for a failure that arrives at or after the deadline it sent,
/// and for tonic's timer (`tonic::TimeoutExpired`, which `Endpoint::timeout` sets off
/// as well: that status keeps it as its source, and is retried as a timeout where time
/// is left).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use persevere::tonic::RetryMetadata;
/// use tonic::transport::Channel;
/// use tonic_health::pb::health_client::HealthClient;
///
/// let channel = Channel::from_static("http://127.0.0.1:50051").connect_lazy();
/// let client: HealthClient<RetryMetadata<Channel>> =
///     HealthClient::new(RetryMetadata::new(channel));
/// # let _ = client;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RetryMetadata<S> {
    inner: S,
}

impl<S> RetryMetadata<S> {
    /// Wraps `inner`, a client's channel.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The channel inside.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, R> tower_service::Service<http::Request<B>> for RetryMetadata<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RetryMetadataFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let deadline = insert(request.headers_mut());
        RetryMetadataFuture {
            inner: self.inner.call(request),
            deadline,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RetryMetadata`].
    pub struct RetryMetadataFuture<F> {
        #[pin]
        inner: F,
        // The deadline sent, and the time it gave.
        deadline: Option<(Instant, Duration)>,
    }
}

impl<F, R, E> Future for RetryMetadataFuture<F>
where
    F: Future<Output = Result<http::Response<R>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<R>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = ready!(this.inner.poll(cx));
        if let Some((deadline, gave)) = *this.deadline {
            let failed = answer.as_ref().map_or(true, failure_in_headers);
            if failed && TokioClock::now() >= deadline {
                let cut = tonic::Status::from(AttemptTimedOut::at_deadline(gave));
                return Poll::Ready(Err(Box::new(cut)));
            }
        }
        Poll::Ready(answer.map_err(|error| deadline_exceeded(error.into())))
    }
}

/// Whether an answer is a failure told in its headers (gRPC's "trailers-only" answer).
fn failure_in_headers<R>(response: &http::Response<R>) -> bool {
    response
        .headers()
        .get("grpc-status")
        .is_some_and(|status| status != "0")
}

/// A request that tonic's own timer cut, as `DEADLINE_EXCEEDED` keeping the error as
/// its source (so classified as that timeout is); any other error as it is.
fn deadline_exceeded(error: BoxError) -> BoxError {
    let mut next: Option<&(dyn Error + 'static)> = Some(&*error);
    while let Some(e) = next {
        if e.is::<tonic::TimeoutExpired>() {
            let mut status = tonic::Status::deadline_exceeded(error.to_string());
            status.set_source(Arc::from(error));
            return Box::new(status);
        }
        next = e.source();
    }
    error
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Mutex;
    use std::time::Duration;

    use tower_service::Service;

    use super::*;
    use crate::driver::retry_fn::retry_fn;
    use crate::fleet::budget::RetryBudget;
    use crate::schedule::policy::Policy;

    static UNLIMITED: RetryBudget = RetryBudget::unlimited();

    fn policy(attempt_timeout: Option<Duration>) -> Policy {
        Policy::new()
            .with_attempts(3)
            .with_base(Duration::from_millis(10))
            .with_deadline(Duration::from_secs(10))
            .with_attempt_timeout(attempt_timeout)
            .with_budget(&UNLIMITED)
    }

    fn headers_now() -> (Option<String>, Option<Duration>) {
        let mut headers = HeaderMap::new();
        insert_retry_metadata(&mut headers);
        let text = |name| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        let timeout = text(GRPC_TIMEOUT).map(|t| parse_grpc_timeout(&t).unwrap());
        (text(GRPC_PREVIOUS_RPC_ATTEMPTS), timeout)
    }

    /// The metadata each attempt of a call that fails twice writes.
    async fn each_attempt(policy: &Policy) -> Vec<(Option<String>, Option<Duration>)> {
        let seen = Mutex::new(Vec::new());
        let result: Result<(), io::Error> = retry_fn(policy, || async {
            let mut seen = seen.lock().unwrap();
            seen.push(headers_now());
            match seen.len() {
                3 => Ok(()),
                _ => Err(io::ErrorKind::TimedOut.into()),
            }
        })
        .await;
        result.unwrap();
        seen.into_inner().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn outside_a_retried_call_nothing_is_written() {
        assert_eq!(headers_now(), (None, None));
    }

    // Retries say how many attempts came before; every attempt says the time left.
    #[tokio::test(start_paused = true)]
    async fn each_attempt_says_its_place_and_the_time_left() {
        let seen = each_attempt(&policy(None)).await;
        let previous: Vec<_> = seen.iter().map(|(p, _)| p.as_deref()).collect();
        assert_eq!(previous, [None, Some("1"), Some("2")]);
        assert_eq!(seen[0].1, Some(Duration::from_secs(10)));
        assert!(seen[2].1.unwrap() < Duration::from_secs(10));
        assert!(seen[2].1.unwrap() >= Duration::from_millis(9_900));
    }

    // Under `attempt_timeout`, the call's deadline is sent, not the attempt's.
    #[tokio::test(start_paused = true)]
    async fn an_attempt_s_own_limit_is_not_sent() {
        let seen = each_attempt(&policy(Some(Duration::from_millis(200)))).await;
        assert_eq!(seen[0].1, Some(Duration::from_secs(10)));
        assert!(seen[1].1.unwrap() > Duration::from_secs(9));
    }

    // Inside an attempt with a limit of its own (200 ms of a call's 10 s), a nested
    // deadline shorter than that limit is sent as it is; one longer never binds (the
    // attempt is cut first), and the call's is sent. A nested call inherits the
    // attempt's limit as its deadline, and is sent that. Once it has run, the attempt
    // around it is sent its call's deadline again.
    #[tokio::test(start_paused = true)]
    async fn a_nested_deadline_shorter_than_the_limit_is_sent() {
        let outer = policy(Some(Duration::from_millis(200)));
        let inner = Policy::new()
            .with_deadline(Duration::from_secs(5))
            .with_attempt_timeout(Some(Duration::from_millis(100)))
            .with_budget(&UNLIMITED);
        let scoped = |left| crate::layer::deadline::scope(left, async { headers_now().1 });
        let seen = Mutex::new(Vec::new());
        let result: Result<(), io::Error> = retry_fn(&outer, || async {
            let short = scoped(Duration::from_millis(50)).await;
            let long = scoped(Duration::from_secs(1)).await;
            seen.lock().unwrap().extend([short, long]);
            let nested: Result<(), io::Error> = retry_fn(&inner, || async {
                seen.lock().unwrap().push(headers_now().1);
                Ok(())
            })
            .await;
            nested?;
            seen.lock().unwrap().push(headers_now().1);
            Ok(())
        })
        .await;
        result.unwrap();
        let ms = |n| Some(Duration::from_millis(n));
        assert_eq!(
            seen.into_inner().unwrap(),
            [ms(50), ms(10_000), ms(200), ms(10_000)]
        );
    }

    // A shorter `grpc-timeout` the request carries already is kept; a longer one is
    // cut to the call's.
    #[tokio::test(start_paused = true)]
    async fn a_shorter_timeout_is_kept() {
        let policy = policy(None);
        for (set, sent) in [("1S", "1S"), ("20S", "10000000u")] {
            let result: Result<String, io::Error> = retry_fn(&policy, || async {
                let mut headers = HeaderMap::new();
                headers.insert(GRPC_TIMEOUT, HeaderValue::from_static(set));
                insert_retry_metadata(&mut headers);
                Ok(headers[GRPC_TIMEOUT].to_str().unwrap().to_owned())
            })
            .await;
            assert_eq!(result.unwrap(), sent);
        }
    }

    /// A channel that answers after `after`: with tonic's timer's error, or with a
    /// response whose headers are the request's, and `grpc-status` if `status` is set.
    struct Answer {
        after: Duration,
        status: Option<&'static str>,
        timer: bool,
    }

    type Answered = Result<http::Response<()>, BoxError>;

    impl Service<http::Request<()>> for Answer {
        type Response = http::Response<()>;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Answered> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<()>) -> Self::Future {
            let (after, status, timer) = (self.after, self.status, self.timer);
            Box::pin(async move {
                tokio::time::sleep(after).await;
                if timer {
                    return Err(Box::new(tonic::TimeoutExpired(())) as BoxError);
                }
                let mut response = http::Response::new(());
                *response.headers_mut() = request.headers().clone();
                if let Some(status) = status {
                    let status = HeaderValue::from_static(status);
                    response.headers_mut().insert("grpc-status", status);
                }
                Ok(response)
            })
        }
    }

    fn answer(after: u64, status: Option<&'static str>) -> RetryMetadata<Answer> {
        let after = Duration::from_millis(after);
        let answer = Answer {
            after,
            status,
            timer: false,
        };
        tower_layer::Layer::layer(&RetryMetadataLayer, answer)
    }

    /// `service`'s answer to a request made with 100 ms left.
    async fn within_100ms(mut service: RetryMetadata<Answer>) -> Answered {
        let request = http::Request::new(());
        let left = Duration::from_millis(100);
        crate::layer::deadline::scope(left, async move { service.call(request).await }).await
    }

    fn code(answer: Answered) -> tonic::Code {
        answer
            .unwrap_err()
            .downcast::<tonic::Status>()
            .unwrap()
            .code()
    }

    // tonic's own timer answers DEADLINE_EXCEEDED, keeping its error; other errors
    // pass as they are.
    #[tokio::test(start_paused = true)]
    async fn tonic_s_timer_is_deadline_exceeded() {
        let after = Duration::from_millis(10);
        let timer = Answer {
            after,
            status: None,
            timer: true,
        };
        let mut timed_out = RetryMetadata::new(timer);
        let error = timed_out.call(http::Request::new(())).await.unwrap_err();
        let status = error.downcast::<tonic::Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(status.source().unwrap().is::<tonic::TimeoutExpired>());
        let other: BoxError = Box::new(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(deadline_exceeded(other).is::<io::Error>());
    }

    // A server's failure that arrives at the deadline sent is the deadline's, as
    // persevere's own cut would be; before it, and a success after it, pass as they are.
    #[tokio::test(start_paused = true)]
    async fn a_failure_at_the_deadline_is_the_deadline_s() {
        let late = within_100ms(answer(100, Some("1"))).await;
        assert_eq!(code(late), tonic::Code::DeadlineExceeded);
        let timer = Answer {
            after: Duration::from_millis(100),
            status: None,
            timer: true,
        };
        let late = within_100ms(RetryMetadata::new(timer)).await;
        assert_eq!(code(late), tonic::Code::DeadlineExceeded);
        let early = within_100ms(answer(99, Some("14"))).await.unwrap();
        assert_eq!(early.headers()["grpc-status"], "14");
        assert_eq!(early.headers()[GRPC_TIMEOUT], "100000u");
        let success = within_100ms(answer(100, Some("0"))).await.unwrap();
        assert_eq!(success.headers()["grpc-status"], "0");
        let streamed = within_100ms(answer(150, None)).await.unwrap();
        assert!(streamed.headers().get("grpc-status").is_none());
        // Outside any deadline, nothing is sent, and nothing is late.
        let unbounded = answer(100, Some("1")).call(http::Request::new(())).await;
        assert!(unbounded.unwrap().headers().get(GRPC_TIMEOUT).is_none());
    }
}
