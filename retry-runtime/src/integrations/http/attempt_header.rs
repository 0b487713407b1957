//! The header a retry carries to say it is one, in the format the server expects.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Which header a retried request carries its attempt number in, so that a server (or a
/// proxy before it) can tell a retry from a first attempt and shed retries first
/// (`persevere::tower::RetryAdmissionLayer`, Envoy's retry budgets). Sent on retries
/// only: a first attempt carries no header, which every server reads as a first attempt.
///
/// Off unless asked for, per request ([`insert_attempt`](crate::integrations::http::insert_attempt),
/// reqwest's `with_attempt`): the format is the server's (which proxy fronts it), and an
/// unknown header can break a strict server or a browser's CORS preflight, so the code
/// that builds the request to that server is the place that knows which to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptHeader {
    /// `persevere-attempt: 2`, counting from 1.
    Persevere,
    /// Envoy's `x-envoy-attempt-count: 2`, counting from 1.
    Envoy,
    /// AWS's `amz-sdk-request: attempt=2; max=3`, counting from 1, with the call's most
    /// attempts.
    Aws,
}

/// persevere's own attempt header.
pub const PERSEVERE_ATTEMPT: &str = "persevere-attempt";
/// Envoy's attempt header.
pub const X_ENVOY_ATTEMPT_COUNT: &str = "x-envoy-attempt-count";
/// AWS's attempt header.
pub const AMZ_SDK_REQUEST: &str = "amz-sdk-request";

impl AttemptHeader {
    /// The header's name.
    pub const fn name(self) -> &'static str {
        match self {
            AttemptHeader::Persevere => PERSEVERE_ATTEMPT,
            AttemptHeader::Envoy => X_ENVOY_ATTEMPT_COUNT,
            AttemptHeader::Aws => AMZ_SDK_REQUEST,
        }
    }

    /// The header's value for the attempt running now, if it is a retry
    /// ([`crate::layer::attempt::number`]); `None` in a first attempt.
    pub fn value(self) -> Option<HeaderValue> {
        let (number, max) = crate::layer::frame::current_retry()?;
        let text = match self {
            AttemptHeader::Aws => format!("attempt={number}; max={max}"),
            AttemptHeader::Persevere | AttemptHeader::Envoy => number.to_string(),
        };
        HeaderValue::from_str(&text).ok()
    }
}

/// Writes the attempt number into `headers` as `header` says, if the attempt running now
/// is a retry; does nothing in a first attempt or outside any `#[retry]` call.
///
/// ```
/// use http::HeaderMap;
/// use persevere::http::{AttemptHeader, insert_attempt};
///
/// let mut headers = HeaderMap::new();
/// insert_attempt(&mut headers, AttemptHeader::Envoy);
/// assert!(headers.is_empty()); // not in a retry
/// ```
pub fn insert_attempt(headers: &mut HeaderMap, header: AttemptHeader) {
    if let Some(value) = header.value() {
        headers.insert(HeaderName::from_static(header.name()), value);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::{Policy, RetryBudget};

    static UNLIMITED: RetryBudget = RetryBudget::unlimited();

    // Each format on each attempt of a call of three: nothing on the first.
    #[tokio::test(start_paused = true)]
    async fn each_format_on_each_attempt() {
        let policy = Policy::new()
            .with_attempts(3)
            .with_base(Duration::from_millis(10))
            .with_budget(&UNLIMITED);
        let seen = Mutex::new(Vec::new());
        let result: std::io::Result<()> = crate::retry_fn(&policy, || async {
            let mut headers = HeaderMap::new();
            for header in [
                AttemptHeader::Persevere,
                AttemptHeader::Envoy,
                AttemptHeader::Aws,
            ] {
                insert_attempt(&mut headers, header);
            }
            let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
            let mut seen = seen.lock().unwrap();
            seen.push([PERSEVERE_ATTEMPT, X_ENVOY_ATTEMPT_COUNT, AMZ_SDK_REQUEST].map(text));
            if seen.len() < 3 {
                Err(std::io::ErrorKind::ConnectionReset.into())
            } else {
                Ok(())
            }
        })
        .await;
        result.unwrap();
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            *seen.lock().unwrap(),
            [
                [None, None, None],
                [some("2"), some("2"), some("attempt=2; max=3")],
                [some("3"), some("3"), some("attempt=3; max=3")],
            ]
        );
    }
}
