//! Deadline propagation: a nested call never outlives the call it serves.
//!
//! A `#[retry]` call's deadline is the earlier of its own and the enclosing call's:
//! inside another `#[retry]` call, or inside [`scope`] (which a server uses to install
//! an incoming request's deadline), retries stop when the caller has given up. User code
//! reads what is left with [`remaining`] and sends it on with [`to_grpc_timeout`], the
//! `grpc-timeout` header format.

use std::future::Future;
use std::time::Duration;

use crate::layer::{frame, scope};
use crate::time::clock::{Clock, TokioClock};

/// The time left before the deadline of the enclosing `#[retry]` call or [`scope`];
/// `None` outside any, as in a tokio task spawned inside one (see
/// [`attempt::number`](crate::attempt::number) on which code is inside).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use persevere::deadline;
///
/// assert_eq!(deadline::remaining(), None);
/// deadline::scope(Duration::from_secs(2), async {
///     let left = deadline::remaining().unwrap();
///     assert!(left <= Duration::from_secs(2));
/// })
/// .await;
/// # }
/// ```
pub fn remaining() -> Option<Duration> {
    let deadline = frame::enclosing_deadline()?;
    Some(deadline.saturating_duration_since(TokioClock::now()))
}

/// Runs `fut` with a deadline `timeout` from now (or the enclosing deadline, if that is
/// earlier): every `#[retry]` call inside it stops retrying when it passes.
///
/// This only bounds retries; it does not cancel `fut`. Wrap it in
/// `tokio::time::timeout` as well to cut the work itself.
pub async fn scope<F: Future>(timeout: Duration, fut: F) -> F::Output {
    let deadline = TokioClock::now().checked_add(timeout);
    scope::with_deadline(deadline, fut).await
}

/// The `grpc-timeout` header value for `timeout`: at most 8 digits and a unit (`n`, `u`,
/// `m`, `S`, `M`, `H`), in the finest unit that fits, rounded down so the callee never
/// gets more time than the caller has.
///
/// ```
/// use std::time::Duration;
/// use persevere::deadline::to_grpc_timeout;
///
/// assert_eq!(to_grpc_timeout(Duration::from_millis(1500)), "1500000u");
/// assert_eq!(to_grpc_timeout(Duration::from_secs(3600 * 24)), "86400000m");
/// ```
pub fn to_grpc_timeout(timeout: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    for (scale, unit) in units {
        let value = nanos / scale;
        if value <= MAX {
            return format!("{value}{unit}");
        }
    }
    format!("{MAX}H")
}

/// Reads a `grpc-timeout` header value; `None` if it is malformed (more than 8 digits,
/// no digits, an unknown unit, anything else), which callers should treat as no
/// deadline rather than an error.
///
/// ```
/// use std::time::Duration;
/// use persevere::deadline::parse_grpc_timeout;
///
/// assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
/// assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
/// assert_eq!(parse_grpc_timeout("-1S"), None);
/// assert_eq!(parse_grpc_timeout("123456789S"), None);
/// ```
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let value = value.trim();
    let unit = value.chars().last()?;
    let digits = &value[..value.len() - unit.len_utf8()];
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'n' => Duration::from_nanos(n),
        'u' => Duration::from_micros(n),
        'm' => Duration::from_millis(n),
        'S' => Duration::from_secs(n),
        'M' => Duration::from_secs(n * 60),
        'H' => Duration::from_secs(n * 3600),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_round_trip() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(7),
            Duration::from_millis(250),
            Duration::from_secs(30),
            Duration::from_secs(3600 * 1000),
        ] {
            let text = to_grpc_timeout(d);
            let back = parse_grpc_timeout(&text).unwrap();
            assert!(back <= d, "{d:?} -> {text} -> {back:?}");
            assert!(
                d - back < d / 1000 + Duration::from_nanos(1),
                "{d:?} -> {text}"
            );
        }
        assert_eq!(to_grpc_timeout(Duration::MAX), "99999999H");
        for bad in ["", "S", "1x", "1.5S", "123456789m", " m", "1ms", "٣S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    // Every unit the gRPC spec names, as a caller may send it. Can fail: minutes and
    // hours, which `to_grpc_timeout` sends only beyond 99,999,999 ms, went unread.
    #[test]
    fn grpc_timeout_reads_every_unit() {
        let cases = [
            ("7n", Duration::from_nanos(7)),
            ("7u", Duration::from_micros(7)),
            ("7m", Duration::from_millis(7)),
            ("7S", Duration::from_secs(7)),
            ("7M", Duration::from_secs(7 * 60)),
            ("7H", Duration::from_secs(7 * 3600)),
        ];
        for (text, duration) in cases {
            assert_eq!(parse_grpc_timeout(text), Some(duration), "{text}");
        }
    }

    // A deadline farther than a layer can hold (about 18 years from the process's start)
    // is held as the farthest it can: far away, never in the past.
    #[tokio::test]
    async fn a_deadline_decades_away_is_held_as_the_farthest_one() {
        const YEAR: u64 = 365 * 24 * 3600;
        let left = scope(Duration::from_secs(30 * YEAR), async { remaining() })
            .await
            .expect("a deadline");
        assert!(left > Duration::from_secs(18 * YEAR), "{left:?}");
        assert!(left < Duration::from_secs(19 * YEAR), "{left:?}");
    }

    // A policy's deadline is what a call's body sees: none for a policy without one, or
    // with one beyond what a layer can count before its clock starts (2^60 ns, about 36
    // years); the farthest a layer holds (about 18 years) for one just within it.
    #[tokio::test]
    async fn a_call_tells_its_body_whether_it_has_a_deadline() {
        use crate::driver::retry_fn::retry_fn;
        use crate::schedule::policy::Policy;
        const YEAR: u64 = 365 * 24 * 3600;
        static NONE: Policy = Policy::new().with_deadline(Duration::MAX);
        static CENTURY: Policy = Policy::new().with_deadline(Duration::from_secs(100 * YEAR));
        // 2^64 ns and one second more: beyond what the policy counts in nanoseconds, and
        // none, not the one second left over when the count wraps.
        static BEYOND: Policy =
            Policy::new().with_deadline(Duration::new(18_446_744_074, 709_551_616));
        static WITHIN: Policy = Policy::new().with_deadline(Duration::from_nanos(u64::MAX >> 4));
        let seen = |policy: &'static Policy| {
            retry_fn(policy, || async { Ok::<_, std::io::Error>(remaining()) })
        };
        assert_eq!(seen(&NONE).await.unwrap(), None);
        assert_eq!(seen(&CENTURY).await.unwrap(), None);
        assert_eq!(seen(&BEYOND).await.unwrap(), None);
        // Still none once the attempt has waited on something, which starts its clock.
        let after_a_wait = retry_fn(&NONE, || async {
            tokio::task::yield_now().await;
            Ok::<_, std::io::Error>(remaining())
        });
        assert_eq!(after_a_wait.await.unwrap(), None);
        let left = seen(&WITHIN).await.unwrap().expect("a deadline");
        assert!(left > Duration::from_secs(18 * YEAR), "{left:?}");
    }
}
