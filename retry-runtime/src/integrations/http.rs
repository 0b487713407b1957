//! HTTP: which statuses a retry can fix, and what the server says about retrying
//! (`Retry-After` and the other pushback headers: [`Pushback`]).
//!
//! Enabled by the `http` cargo feature.
//!
//! | status | class |
//! | --- | --- |
//! | 408 Request Timeout, 429 Too Many Requests, 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout | transient; with a `Retry-After`, the server's wait |
//! | 500 Internal Server Error | uncertain: retried for at most `uncertain_attempts` attempts (2 by default) |
//! | any other 4xx (400, 401, 403, 404, 409, 422, ...) | permanent: the request itself is wrong |
//! | any other 5xx (501, 505, 507, ...) | permanent: the server cannot do this at all |
//! | 1xx, 2xx, 3xx | permanent: not a failure a retry could change |
//!
//! The answer's headers may change that, by [`Pushback`]'s table: `x-should-retry:
//! false` makes any status permanent, `x-should-retry: true` makes a permanent failure
//! transient, and a wait (`retry-after-ms`, `x-ms-retry-after-ms`, `x-amz-retry-after`,
//! `Retry-After`) is the least wait before retrying a transient one.

mod attempt_header;
mod pushback;

pub use attempt_header::{
    AMZ_SDK_REQUEST, AttemptHeader, PERSEVERE_ATTEMPT, X_ENVOY_ATTEMPT_COUNT, insert_attempt,
};
pub use pushback::{
    Pushback, RETRY_AFTER_MS, X_AMZ_RETRY_AFTER, X_MS_RETRY_AFTER_MS, X_SHOULD_RETRY, parse_millis,
    parse_should_retry,
};

use std::fmt;
use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;

/// A status by the table in the module documentation.
impl Classify for StatusCode {
    fn classify(&self) -> Class {
        match self.as_u16() {
            408 | 429 | 502 | 503 | 504 => Class::Transient,
            500 => Class::Uncertain,
            _ => Class::Permanent,
        }
    }
}

/// The wait a response's `Retry-After` header asks for, read at the current system time;
/// `None` if there is none, or it is malformed or negative. A date now or in the past
/// asks for no wait at all: `Some(Duration::ZERO)`, which the retry still spreads.
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, HeaderValue, header::RETRY_AFTER};
/// use persevere::http::retry_after;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("120"));
/// assert_eq!(retry_after(&headers), Some(Duration::from_secs(120)));
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
/// assert_eq!(retry_after(&headers), None);
/// ```
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

/// Reads a `Retry-After` value at `now`: delta-seconds (`"120"`) or an HTTP-date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, and the two obsolete date forms). Garbage or a
/// negative number gives `None`, so that the computed backoff applies instead; a date
/// not after `now` gives a zero wait (the server says "now"); never a panic.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Some(secs) = parse_count(value) {
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value.trim()).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A header's whole number: digits only, spaces around them allowed (no sign, no
/// fraction); more digits than a `u64` holds is the most it holds (a very long wait, a
/// very late attempt). The one reading of every number in the headers persevere reads.
pub(crate) fn parse_count(value: &str) -> Option<u64> {
    let value = value.trim();
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| value.parse().unwrap_or(u64::MAX))
}

/// The class of a response: its status's, as its headers change it ([`Pushback`]): the
/// server's wait for a transient status, permanent if it says not to retry.
pub fn classify_response(status: StatusCode, headers: &HeaderMap) -> Class {
    Pushback::from_headers(headers).class(status)
}

/// A response whose status is a failure, kept with what its server said about retrying.
///
/// Turn a response into one with [`check`]; it classifies by the table in the module
/// documentation, with the server's [`Pushback`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusError {
    status: StatusCode,
    pushback: Pushback,
}

impl StatusError {
    /// A failure with `status`, its server asking for `retry_after`.
    pub fn new(status: StatusCode, retry_after: Option<Duration>) -> Self {
        Self::with_pushback(status, Pushback::new(retry_after, None))
    }

    /// A failure with `status`, its server having said `pushback`.
    pub fn with_pushback(status: StatusCode, pushback: Pushback) -> Self {
        Self { status, pushback }
    }

    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The wait the server asked for, if any (none if it said not to retry).
    pub fn retry_after(&self) -> Option<Duration> {
        self.pushback.wait()
    }

    /// What the server said about retrying.
    pub fn pushback(&self) -> Pushback {
        self.pushback
    }
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the server answered {}", self.status)?;
        // What the server asked, where it counts: a wait only where it applies.
        match self.classify() {
            _ if self.pushback.should_retry() == Some(false) => {
                write!(f, " and asked not to retry")
            }
            Class::RetryAfter(wait) => write!(f, " and asked to retry after {wait:?}"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for StatusError {}

/// An attempt cut at its time limit, as a status: `504 Gateway Timeout`, transient. So a
/// `StatusCode` is an async `#[retry]` function's error as it is. A bare status cannot
/// tell a cut at the deadline from one at `attempt_timeout`, nor either from a server's
/// own 504: where that matters, return an error type of yours that holds a
/// [`AttemptTimedOut`].
impl From<AttemptTimedOut> for StatusCode {
    fn from(_: AttemptTimedOut) -> Self {
        StatusCode::GATEWAY_TIMEOUT
    }
}

/// A call the circuit breaker refused, as a status: `503 Service Unavailable`, the
/// answer a server gives while it cannot serve. So a `StatusCode` is the error of a
/// function with `breaker = ...` as it is.
impl From<CircuitOpen> for StatusCode {
    fn from(_: CircuitOpen) -> Self {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// An attempt cut at its time limit: a `504 Gateway Timeout` with no `Retry-After`, as
/// for [`StatusCode`]'s conversion. So the error of [`check`] is an async `#[retry]`
/// function's error as it is.
impl From<AttemptTimedOut> for StatusError {
    fn from(cut: AttemptTimedOut) -> Self {
        StatusError::new(StatusCode::from(cut), None)
    }
}

/// A call the circuit breaker refused: a `503 Service Unavailable` that asks to come
/// back when the breaker next lets a probe through.
impl From<CircuitOpen> for StatusError {
    fn from(open: CircuitOpen) -> Self {
        StatusError::new(StatusCode::SERVICE_UNAVAILABLE, Some(open.retry_in()))
    }
}

/// By [`Pushback::class`]: the status's class, as the server's headers change it.
impl Classify for StatusError {
    fn classify(&self) -> Class {
        self.pushback.class(self.status)
    }
}

/// `Ok` for a success (2xx) or redirect (3xx) status; otherwise the [`StatusError`],
/// with what the server said about retrying ([`Pushback`]). For an HTTP client other than reqwest (for reqwest,
/// `ResponseExt::error_for_retry` does this), turn a response's status into an error
/// that `#[retry]` classifies:
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, HeaderValue, StatusCode, header::RETRY_AFTER};
/// use persevere::http::check;
/// use persevere::{Class, Classify};
///
/// let mut headers = HeaderMap::new();
/// assert!(check(StatusCode::OK, &headers).is_ok());
/// assert_eq!(check(StatusCode::NOT_FOUND, &headers).unwrap_err().classify(), Class::Permanent);
///
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
/// let busy = check(StatusCode::SERVICE_UNAVAILABLE, &headers).unwrap_err();
/// assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(busy.classify(), Class::RetryAfter(Duration::from_secs(3)));
/// ```
pub fn check(status: StatusCode, headers: &HeaderMap) -> Result<(), StatusError> {
    if status.is_success() || status.is_redirection() || status.is_informational() {
        Ok(())
    } else {
        Err(StatusError::with_pushback(
            status,
            Pushback::from_headers(headers),
        ))
    }
}

/// The header that carries a deadline between services, in gRPC's format.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// Writes the time left before the enclosing deadline into `headers` as `grpc-timeout`,
/// so that the service called next stops retrying when this one gives up. Does nothing
/// outside a `#[retry]` call or deadline scope.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use http::HeaderMap;
/// use persevere::{deadline, http::{GRPC_TIMEOUT, insert_deadline}};
///
/// let mut headers = HeaderMap::new();
/// deadline::scope(Duration::from_secs(2), async { insert_deadline(&mut headers) }).await;
/// assert!(headers.contains_key(GRPC_TIMEOUT));
/// # }
/// ```
pub fn insert_deadline(headers: &mut HeaderMap) {
    if let Some(left) = crate::layer::deadline::remaining() {
        let value = crate::layer::deadline::to_grpc_timeout(left);
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            headers.insert(GRPC_TIMEOUT, value);
        }
    }
}

/// The deadline an incoming request carries in `grpc-timeout`, as the time left; `None`
/// if it carries none or a malformed one. Run the request's handling inside
/// [`deadline::scope`](crate::layer::deadline::scope) with it.
pub fn deadline_from(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.to_str().ok()?;
    crate::layer::deadline::parse_grpc_timeout(value)
}

#[cfg(test)]
mod tests {
    // The error keeps the pushback, and says only what counts of it.
    #[test]
    fn a_status_error_keeps_and_tells_its_pushback() {
        use super::*;
        let pushback = Pushback::new(Some(Duration::from_secs(3)), None);
        let busy = StatusError::with_pushback(StatusCode::SERVICE_UNAVAILABLE, pushback);
        assert_eq!(busy.pushback(), pushback);
        assert_eq!(
            busy.to_string(),
            "the server answered 503 Service Unavailable and asked to retry after 3s"
        );
        // A 500 stays uncertain and a 404 permanent: the wait is not theirs to honour.
        for status in [StatusCode::INTERNAL_SERVER_ERROR, StatusCode::NOT_FOUND] {
            let error = StatusError::with_pushback(status, pushback);
            assert_eq!(error.to_string(), format!("the server answered {status}"));
        }
        let stop = StatusError::with_pushback(
            StatusCode::TOO_MANY_REQUESTS,
            Pushback::new(Some(Duration::from_secs(3)), Some(false)),
        );
        assert_eq!(stop.pushback().should_retry(), Some(false));
        assert_eq!(
            stop.to_string(),
            "the server answered 429 Too Many Requests and asked not to retry"
        );
    }

    use super::*;
    use http::HeaderValue;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn statuses() {
        for code in [408, 429, 502, 503, 504] {
            assert_eq!(
                StatusCode::from_u16(code).unwrap().classify(),
                Class::Transient
            );
        }
        assert_eq!(
            StatusCode::INTERNAL_SERVER_ERROR.classify(),
            Class::Uncertain
        );
        for code in [400, 401, 403, 404, 409, 410, 422, 501, 505, 200, 301] {
            assert_eq!(
                StatusCode::from_u16(code).unwrap().classify(),
                Class::Permanent,
                "{code}"
            );
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = at(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:29:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Wed Oct 21 07:28:10 2015", now),
            Some(Duration::from_secs(10))
        );
        // A date now or past asks for no wait.
        for now_or_past in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 07:27:00 GMT",
        ] {
            assert_eq!(
                parse_retry_after(now_or_past, now),
                Some(Duration::ZERO),
                "{now_or_past:?}"
            );
        }
        for bad in [
            "",
            "-1",
            "1.5",
            "+3",
            "soon",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "١٢٠",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn responses() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            classify_response(StatusCode::SERVICE_UNAVAILABLE, &headers),
            Class::Transient
        );
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(
            classify_response(StatusCode::TOO_MANY_REQUESTS, &headers),
            Class::RetryAfter(Duration::from_secs(7))
        );
        // A permanent status stays permanent whatever the header says.
        assert_eq!(
            classify_response(StatusCode::BAD_REQUEST, &headers),
            Class::Permanent
        );
        headers.insert(RETRY_AFTER, HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        assert_eq!(
            classify_response(StatusCode::TOO_MANY_REQUESTS, &headers),
            Class::Transient
        );
        assert!(check(StatusCode::OK, &headers).is_ok());
        let err = check(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()).unwrap_err();
        assert_eq!(err.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(err.classify(), Class::Transient);
        assert_eq!(err.to_string(), "the server answered 429 Too Many Requests");
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_headers() {
        let mut headers = HeaderMap::new();
        insert_deadline(&mut headers);
        assert!(headers.is_empty());
        crate::layer::deadline::scope(Duration::from_millis(1500), async {
            insert_deadline(&mut headers);
        })
        .await;
        assert_eq!(headers[GRPC_TIMEOUT], "1500000u");
        assert_eq!(deadline_from(&headers), Some(Duration::from_millis(1500)));
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("soon"));
        assert_eq!(deadline_from(&headers), None);
    }

    // What a status check returns for each class of status: informational, success and
    // redirection pass; client and server errors fail, carrying the status and the
    // server's wait.
    // Can fail: an `&&` for an `||` in `check` turns 1xx or 3xx into errors.
    #[test]
    fn check_passes_1xx_2xx_3xx_and_fails_4xx_5xx() {
        let empty = HeaderMap::new();
        for passes in [100, 101, 200, 204, 301, 304, 307] {
            let status = StatusCode::from_u16(passes).unwrap();
            assert_eq!(check(status, &empty), Ok(()), "{passes}");
        }
        for fails in [400, 404, 429, 500, 503] {
            let status = StatusCode::from_u16(fails).unwrap();
            let error = check(status, &empty).unwrap_err();
            assert_eq!(error.status(), status);
            assert_eq!(error.retry_after(), None);
        }
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, http::HeaderValue::from_static("7"));
        let error = check(StatusCode::SERVICE_UNAVAILABLE, &headers).unwrap_err();
        assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(error.classify(), Class::RetryAfter(Duration::from_secs(7)));
    }

    // A 500 with a `Retry-After` is still uncertain: retried at most
    // `uncertain_attempts` times, not as often as a 503 that names its wait.
    // Can fail: it was read as `RetryAfter`, which bypassed that limit.
    #[test]
    fn a_500_stays_uncertain_whatever_wait_it_asks_for() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, http::HeaderValue::from_static("1"));
        assert_eq!(
            classify_response(StatusCode::INTERNAL_SERVER_ERROR, &headers),
            Class::Uncertain
        );
        let error = check(StatusCode::INTERNAL_SERVER_ERROR, &headers).unwrap_err();
        assert_eq!(error.classify(), Class::Uncertain);
        assert_eq!(
            classify_response(StatusCode::SERVICE_UNAVAILABLE, &headers),
            Class::RetryAfter(Duration::from_secs(1))
        );
    }
}
