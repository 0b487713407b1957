//! The storm's `--shed` mode: the dependency as an HTTP service behind the server's real
//! retry admission layer, and clients that send persevere's attempt header and read the
//! answer as a persevere client does.

use std::rc::Rc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use persevere::Policy;
use persevere::http::{AttemptHeader, Pushback, X_SHOULD_RETRY, insert_attempt};
use persevere::tower::{RetryAdmission, is_retry};

use crate::sim::{Dependency, Failure};

/// The dependency as an HTTP service (`--shed`), behind the server's admission layer:
/// it tells a retry by the attempt header the client sends, and answers 200, 502 while
/// down, or 503 over capacity.
#[derive(Clone)]
pub struct Handler(pub Rc<Dependency>);

impl tower::Service<Request<()>> for Handler {
    type Response = Response<()>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Response<()>, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Self::Future {
        let status = match self.0.serve(is_retry(request.headers())) {
            Ok(()) => StatusCode::OK,
            Err(Failure::Overloaded) => StatusCode::SERVICE_UNAVAILABLE,
            Err(_) => StatusCode::BAD_GATEWAY,
        };
        let mut response = Response::new(());
        *response.status_mut() = status;
        std::future::ready(Ok(response))
    }
}

/// One call under `policy` through the server's admission layer (`--shed`): each
/// attempt sends persevere's attempt header, and the answer is classified as a
/// persevere client classifies it, by its status and pushback.
pub async fn call_through(
    policy: &Policy,
    service: RetryAdmission<Handler>,
) -> Result<(), Failure> {
    use tower::Service as _;
    let service = &service;
    persevere::retry_fn(policy, move || async move {
        let mut request = Request::new(());
        insert_attempt(request.headers_mut(), AttemptHeader::Persevere);
        let response = service.clone().call(request).await.expect("infallible");
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        if response
            .headers()
            .get(X_SHOULD_RETRY)
            .is_some_and(|v| v == "false")
        {
            service.inner().0.record_shed();
        }
        let class = Pushback::from_headers(response.headers()).class(status);
        Err(Failure::Answered(status.as_u16(), class))
    })
    .await
}
