//! What a server says about retrying, in the headers of its answer: how long to wait
//! before the next attempt, or not to retry at all.
//!
//! | header | says | read as |
//! | --- | --- | --- |
//! | `x-should-retry: false` | do not retry | permanent, whatever else the answer says: no wait is read |
//! | `x-should-retry: true` | retry | a status otherwise permanent (a 409, a 400) becomes transient, for a function safe to repeat; `on = unsent` retries it no more than any other answer |
//! | `retry-after-ms` | wait this many milliseconds | the wait, if it is the first valid one in this table's order |
//! | `x-ms-retry-after-ms` | the same (Azure) | the wait, if none above is valid |
//! | `x-amz-retry-after` | the same (AWS) | the wait, if none above is valid |
//! | `Retry-After` | wait this many seconds, or until this HTTP date | the wait, if none above is valid |
//!
//! A wait is a lower bound: the retry is spread after it, and it must fit the policy's
//! `max_retry_after` and the deadline, or the call gives up at once, as for
//! `Retry-After`. It applies to a transient status (408, 429, 502, 503, 504, and a status
//! `x-should-retry: true` made retryable); a 500 stays uncertain, with its own limit of
//! attempts, whatever wait it asks for.
//!
//! Each header's first value is read. A value that is not a number (garbage, a
//! negative number, a fraction, an empty value) is ignored, and the next header in the
//! table is read; a number too large for a `u64` is a very long wait (so the call gives
//! up, as for any wait past `max_retry_after`). `x-should-retry` is `true` or `false` in
//! any case, with surrounding spaces; anything else is ignored. Nothing here panics.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

use crate::classify::class::{Class, Classify};

use super::parse_retry_after;

/// `x-should-retry`: `true` or `false`, the server's word on retrying (OpenAI's and
/// Anthropic's APIs, and the clients Stainless generates).
pub const X_SHOULD_RETRY: &str = "x-should-retry";
/// `retry-after-ms`: the wait in milliseconds.
pub const RETRY_AFTER_MS: &str = "retry-after-ms";
/// `x-ms-retry-after-ms`: the wait in milliseconds (Azure).
pub const X_MS_RETRY_AFTER_MS: &str = "x-ms-retry-after-ms";
/// `x-amz-retry-after`: the wait in milliseconds (AWS).
pub const X_AMZ_RETRY_AFTER: &str = "x-amz-retry-after";

/// What an answer's headers say about retrying it: the least wait before the next
/// attempt, and the server's `x-should-retry`, read by the table in the module
/// documentation.
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, HeaderValue, StatusCode};
/// use persevere::Class;
/// use persevere::http::Pushback;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("retry-after-ms", HeaderValue::from_static("250"));
/// headers.insert("retry-after", HeaderValue::from_static("3"));
/// let pushback = Pushback::from_headers(&headers);
/// assert_eq!(pushback.wait(), Some(Duration::from_millis(250)));
/// assert_eq!(pushback.class(StatusCode::TOO_MANY_REQUESTS), Class::RetryAfter(Duration::from_millis(250)));
///
/// headers.insert("x-should-retry", HeaderValue::from_static("false"));
/// assert_eq!(Pushback::from_headers(&headers).class(StatusCode::SERVICE_UNAVAILABLE), Class::Permanent);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pushback {
    wait: Option<Duration>,
    should_retry: Option<bool>,
}

impl Pushback {
    /// A server that said nothing about retrying.
    pub const NONE: Self = Self {
        wait: None,
        should_retry: None,
    };

    /// A server that asked for `wait`, and said `should_retry` (`x-should-retry`), if
    /// anything.
    pub const fn new(wait: Option<Duration>, should_retry: Option<bool>) -> Self {
        Self { wait, should_retry }
    }

    /// What `headers` say, a `Retry-After` date read at the current system time.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        Self::read(headers, SystemTime::now())
    }

    /// What `headers` say, a `Retry-After` date read at `now`.
    pub fn read(headers: &HeaderMap, now: SystemTime) -> Self {
        let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
        let should_retry = text(X_SHOULD_RETRY).and_then(parse_should_retry);
        let wait = [RETRY_AFTER_MS, X_MS_RETRY_AFTER_MS, X_AMZ_RETRY_AFTER]
            .into_iter()
            .find_map(|name| text(name).and_then(parse_millis))
            .or_else(|| text("retry-after").and_then(|value| parse_retry_after(value, now)));
        Self { wait, should_retry }
    }

    /// The least wait before the next attempt the server asked for; `None` if it asked
    /// for none, or said not to retry at all.
    pub fn wait(&self) -> Option<Duration> {
        match self.should_retry {
            Some(false) => None,
            _ => self.wait,
        }
    }

    /// The server's `x-should-retry`, if it sent a valid one.
    pub fn should_retry(&self) -> Option<bool> {
        self.should_retry
    }

    /// The class of an answer with `status` and this pushback: `x-should-retry: false`
    /// makes it permanent; `x-should-retry: true` makes a failure status otherwise
    /// permanent transient; a transient one with a wait is the server's wait. A 500 stays
    /// uncertain; a status that is not a failure (1xx, 2xx, 3xx) stays permanent.
    pub fn class(&self, status: StatusCode) -> Class {
        let class = match (status.classify(), self.should_retry) {
            (_, Some(false)) => return Class::Permanent,
            (Class::Permanent, Some(true))
                if status.is_client_error() || status.is_server_error() =>
            {
                Class::Transient
            }
            (class, _) => class,
        };
        match (class, self.wait) {
            (Class::Transient, Some(wait)) => Class::RetryAfter(wait),
            (class, _) => class,
        }
    }
}

/// A wait in whole milliseconds (`retry-after-ms`, `x-ms-retry-after-ms`,
/// `x-amz-retry-after`), surrounding spaces allowed; `None` for anything else (a
/// negative or fractional number, garbage, nothing). More digits than a `u64` holds is
/// a very long wait, as for `Retry-After`.
pub fn parse_millis(value: &str) -> Option<Duration> {
    super::parse_count(value).map(Duration::from_millis)
}

/// `x-should-retry`'s value: `true` or `false` in any case, surrounding spaces allowed;
/// `None` for anything else.
pub fn parse_should_retry(value: &str) -> Option<bool> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
