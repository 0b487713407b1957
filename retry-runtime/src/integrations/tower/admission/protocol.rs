//! What the layer reads and writes in the protocol: whether a request says it is a
//! retry, whether it is gRPC's, what the inner service's answer says of its capacity,
//! and the answer to a retry refused.

use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

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
        crate::integrations::http::PERSEVERE_ATTEMPT
        | crate::integrations::http::X_ENVOY_ATTEMPT_COUNT => 2,
        "x-stainless-retry-count" | "grpc-previous-rpc-attempts" => 1,
        crate::integrations::http::AMZ_SDK_REQUEST => {
            return aws_attempt(value).is_some_and(|n| n >= 2);
        }
        _ => return false,
    };
    // A proxy may have joined two values with a comma.
    let Ok(text) = value.to_str() else {
        return false;
    };
    text.split(',')
        .any(|item| crate::integrations::http::parse_count(item).is_some_and(|n| n >= least))
}

/// `amz-sdk-request`'s first `attempt=`: `attempt=2; max=3`.
fn aws_attempt(value: &HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?;
    text.split(';')
        .find_map(|part| {
            let (key, value) = part.split_once('=')?;
            (key.trim() == "attempt").then(|| crate::integrations::http::parse_count(value))
        })
        .flatten()
}

/// The content type of a gRPC request (`application/grpc`, `application/grpc+proto`,
/// `application/grpc-web`..., in any case), which its refusal answers in; `None` for
/// any other request.
pub(super) fn grpc_content_type(headers: &HeaderMap) -> Option<HeaderValue> {
    let value = headers.get(http::header::CONTENT_TYPE)?;
    let bytes = value.as_bytes();
    let grpc = b"application/grpc";
    let is_grpc = bytes.len() >= grpc.len()
        && bytes[..grpc.len()].eq_ignore_ascii_case(grpc)
        && matches!(bytes.get(grpc.len()), None | Some(b'+' | b';' | b'-'));
    is_grpc.then(|| value.clone())
}

/// What an answer of the inner service says of its capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
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
    pub(super) fn of<R>(response: &Response<R>) -> Self {
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
pub(super) fn shed<R: Default>(grpc: Option<HeaderValue>) -> Response<R> {
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
            crate::integrations::http::X_SHOULD_RETRY,
            HeaderValue::from_static("false"),
        );
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}
