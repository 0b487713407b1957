//! Which gRPC failures a retry can fix: a `tonic::Status` by what failed beneath it (the
//! transport), then by what its server said (pushback, `RetryInfo`), then by its code.

use std::error::Error;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::classify::class::{Class, Classify};
use crate::classify::timed_out::AttemptTimedOut;
use crate::fleet::breaker::CircuitOpen;
use crate::integrations::http::parse_count;

/// The metadata key of gRPC's pushback: how many milliseconds to wait before a retry; a
/// negative or malformed value asks not to retry at all.
pub const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// What a server's answer says about retrying, from its metadata (headers or trailers)
/// and its details, as gRPC's retry design (A6) reads them.
///
/// ```
/// use std::time::Duration;
/// use persevere::tonic::Pushback;
///
/// let mut busy = tonic::Status::unavailable("busy");
/// busy.metadata_mut().insert("grpc-retry-pushback-ms", "250".parse().unwrap());
/// assert_eq!(Pushback::of(&busy), Pushback::Wait(Duration::from_millis(250)));
///
/// let mut stop = tonic::Status::unavailable("shedding retries");
/// stop.metadata_mut().insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
/// assert_eq!(Pushback::of(&stop), Pushback::Stop);
///
/// assert_eq!(Pushback::of(&tonic::Status::unavailable("down")), Pushback::None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushback {
    /// The server said nothing about retrying.
    None,
    /// Wait at least this long before a retry: the larger of `grpc-retry-pushback-ms`
    /// and `google.rpc.RetryInfo`'s `retry_delay` in `grpc-status-details-bin`.
    Wait(Duration),
    /// Do not retry: `grpc-retry-pushback-ms` is negative or not a whole number.
    Stop,
}

impl Pushback {
    /// What `status` says about retrying. Its first `grpc-retry-pushback-ms` decides
    /// between a wait and a stop; details that do not decode are ignored.
    pub fn of(status: &Status) -> Self {
        let pushback = match status.metadata().get(GRPC_RETRY_PUSHBACK_MS) {
            None => None,
            Some(value) => match value.to_str().ok().and_then(parse_count) {
                Some(ms) => Some(Duration::from_millis(ms)),
                None => return Pushback::Stop,
            },
        };
        let retry_info = if status.details().is_empty() {
            None
        } else {
            status
                .get_details_retry_info()
                .and_then(|info| info.retry_delay)
        };
        match pushback.max(retry_info) {
            Some(wait) => Pushback::Wait(wait),
            None => Pushback::None,
        }
    }
}

/// gRPC's failures, as [gRPC's retry design] and [AIP-194] read them.
///
/// First, what failed beneath the status, whatever code tonic gave it (tonic names
/// most transport failures `UNKNOWN`, `CANCELLED` or `UNAVAILABLE`, and maps HTTP/2's
/// reasons to codes only with its `server` feature), by the errors in its `source()`
/// chain:
/// - unsent, safe to repeat for any method: a connection that could not be made
///   (`tonic::ConnectError`: refused, DNS), a stream the server refused before
///   processing it (HTTP/2 `REFUSED_STREAM`, or above a `GOAWAY`'s last stream), a
///   request hyper never sent (canceled);
/// - uncertain: a connection lost mid-call (any other HTTP/2 or I/O failure);
/// - transient: tonic's own timeout (`Endpoint::timeout`, `grpc-timeout`) and an
///   attempt persevere cut at its time limit.
///
/// Then, for a status the server sent: `grpc-retry-pushback-ms` negative or malformed
/// makes it permanent ([`Pushback::Stop`]); otherwise by code:
///
/// | code | class |
/// | --- | --- |
/// | `UNAVAILABLE` | transient; with pushback or `RetryInfo`, a wait of at least that |
/// | `RESOURCE_EXHAUSTED` | with pushback or `RetryInfo`, a wait of at least that; otherwise permanent (it usually means a quota) |
/// | `INTERNAL`, `UNKNOWN` | uncertain |
/// | `ABORTED` | permanent: retry the whole transaction, at the layer that began it |
/// | `DEADLINE_EXCEEDED`, `CANCELLED`, and every other code | permanent |
///
/// [gRPC's retry design]: https://github.com/grpc/proposal/blob/master/A6-client-retries.md
/// [AIP-194]: https://google.aip.dev/194
impl Classify for Status {
    fn classify(&self) -> Class {
        if let Some(class) = transport_class(self) {
            return class;
        }
        let wait = match Pushback::of(self) {
            Pushback::Stop => return Class::Permanent,
            Pushback::Wait(wait) => Some(wait),
            Pushback::None => None,
        };
        match self.code() {
            Code::Unavailable => wait.map_or(Class::Transient, Class::RetryAfter),
            Code::ResourceExhausted => wait.map_or(Class::Permanent, Class::RetryAfter),
            Code::Internal | Code::Unknown => Class::Uncertain,
            _ => Class::Permanent,
        }
    }
}

/// The class of what failed beneath `status`, if a transport failure or a cut did.
fn transport_class(status: &Status) -> Option<Class> {
    let mut next = status.source();
    let mut lost = false;
    while let Some(error) = next {
        if let Some(class) = known(error) {
            return Some(class);
        }
        lost |= error.is::<hyper::Error>();
        next = error.source();
    }
    lost.then_some(Class::Uncertain)
}

fn known(error: &(dyn Error + 'static)) -> Option<Class> {
    if let Some(status) = error.downcast_ref::<Status>() {
        return Some(status.classify());
    }
    if let Some(cut) = error.downcast_ref::<AttemptTimedOut>() {
        return Some(cut.classify());
    }
    if let Some(open) = error.downcast_ref::<CircuitOpen>() {
        return Some(open.classify());
    }
    if error.is::<tonic::ConnectError>() {
        return Some(Class::Unsent);
    }
    if error.is::<tonic::TimeoutExpired>() {
        return Some(Class::Transient);
    }
    if let Some(e) = error.downcast_ref::<hyper::Error>() {
        return e.is_canceled().then_some(Class::Unsent);
    }
    if let Some(e) = error.downcast_ref::<h2::Error>() {
        return Some(h2_class(e));
    }
    if let Some(e) = error.downcast_ref::<io::Error>() {
        return Some(match e.kind() {
            io::ErrorKind::ConnectionRefused => Class::Unsent,
            _ => Class::Uncertain,
        });
    }
    None
}

/// A stream the server never processed is unsent: one it refused, or one above the last
/// stream of the `GOAWAY` it sent (h2 gives a stream that error only then, and to a
/// request made after it). Any other HTTP/2 failure lost a stream that may have run.
fn h2_class(error: &h2::Error) -> Class {
    let refused = error.is_reset() && error.reason() == Some(h2::Reason::REFUSED_STREAM);
    if error.is_remote() && (refused || error.is_go_away()) {
        Class::Unsent
    } else {
        Class::Uncertain
    }
}

/// An attempt cut at its time limit is a `DEADLINE_EXCEEDED` status that keeps the cut
/// as its source, so that it is retried as the cut is (where time is left), while the
/// same code from a server is not.
impl From<AttemptTimedOut> for Status {
    fn from(cut: AttemptTimedOut) -> Self {
        let mut status = Status::deadline_exceeded(cut.to_string());
        status.set_source(Arc::new(cut));
        status
    }
}

/// A call the circuit breaker refused is an `UNAVAILABLE` status that keeps the refusal
/// as its source, and its class.
impl From<CircuitOpen> for Status {
    fn from(open: CircuitOpen) -> Self {
        let mut status = Status::unavailable(open.to_string());
        status.set_source(Arc::new(open));
        status
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use tonic_types::ErrorDetails;

    use super::*;

    fn with_pushback(code: Code, value: &str) -> Status {
        let mut status = Status::new(code, "");
        let value = tonic::metadata::MetadataValue::try_from(value).unwrap();
        status.metadata_mut().insert(GRPC_RETRY_PUSHBACK_MS, value);
        status
    }

    fn with_retry_info(code: Code, delay: Duration) -> Status {
        Status::with_error_details(code, "", ErrorDetails::with_retry_info(Some(delay)))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    // Every code, as a server sends it, with nothing about retrying.
    #[test]
    fn every_code() {
        use Code::*;
        let table = [
            (Ok, Class::Permanent),
            (Cancelled, Class::Permanent),
            (Unknown, Class::Uncertain),
            (InvalidArgument, Class::Permanent),
            (DeadlineExceeded, Class::Permanent),
            (NotFound, Class::Permanent),
            (AlreadyExists, Class::Permanent),
            (PermissionDenied, Class::Permanent),
            (ResourceExhausted, Class::Permanent),
            (FailedPrecondition, Class::Permanent),
            (Aborted, Class::Permanent),
            (OutOfRange, Class::Permanent),
            (Unimplemented, Class::Permanent),
            (Internal, Class::Uncertain),
            (Unavailable, Class::Transient),
            (DataLoss, Class::Permanent),
            (Unauthenticated, Class::Permanent),
        ];
        for (code, class) in table {
            assert_eq!(Status::new(code, "").classify(), class, "{code:?}");
        }
    }

    // A valid pushback is the wait of a retryable code, and makes RESOURCE_EXHAUSTED one;
    // it leaves an uncertain failure uncertain and a permanent one permanent.
    #[test]
    fn a_valid_pushback_is_a_wait() {
        let wait = |code, value| with_pushback(code, value).classify();
        assert_eq!(wait(Code::Unavailable, "250"), Class::RetryAfter(ms(250)));
        assert_eq!(wait(Code::Unavailable, "0"), Class::RetryAfter(ms(0)));
        assert_eq!(wait(Code::Unavailable, " 40 "), Class::RetryAfter(ms(40)));
        assert_eq!(
            wait(Code::ResourceExhausted, "100"),
            Class::RetryAfter(ms(100))
        );
        assert_eq!(wait(Code::Internal, "100"), Class::Uncertain);
        assert_eq!(wait(Code::Unknown, "100"), Class::Uncertain);
        assert_eq!(wait(Code::NotFound, "100"), Class::Permanent);
        // Past a u64 of milliseconds: a wait longer than any call takes, not a stop.
        assert_eq!(
            wait(Code::Unavailable, "99999999999999999999999"),
            Class::RetryAfter(ms(u64::MAX))
        );
    }

    // A negative or malformed pushback stops retrying, whatever the code (A6).
    #[test]
    fn a_negative_or_malformed_pushback_stops() {
        for value in ["-1", "-0", "x", "", "1.5", "+5", "1e3", "0x10", "१"] {
            for code in [Code::Unavailable, Code::ResourceExhausted, Code::Internal] {
                let status = with_pushback(code, value);
                assert_eq!(Pushback::of(&status), Pushback::Stop, "{value:?}");
                assert_eq!(status.classify(), Class::Permanent, "{code:?} {value:?}");
            }
        }
    }

    // The first pushback decides.
    #[test]
    fn the_first_pushback_decides() {
        let mut status = with_pushback(Code::Unavailable, "-1");
        status
            .metadata_mut()
            .append(GRPC_RETRY_PUSHBACK_MS, "100".parse().unwrap());
        assert_eq!(status.classify(), Class::Permanent);
    }

    // `RetryInfo` is a wait as well; with a pushback, the longer of the two.
    #[test]
    fn retry_info_is_a_wait() {
        let quota = with_retry_info(Code::ResourceExhausted, ms(300));
        assert_eq!(Pushback::of(&quota), Pushback::Wait(ms(300)));
        assert_eq!(quota.classify(), Class::RetryAfter(ms(300)));
        let mut both = with_retry_info(Code::Unavailable, ms(300));
        both.metadata_mut()
            .insert(GRPC_RETRY_PUSHBACK_MS, "500".parse().unwrap());
        assert_eq!(both.classify(), Class::RetryAfter(ms(500)));
        let mut shorter = with_retry_info(Code::Unavailable, ms(300));
        shorter
            .metadata_mut()
            .insert(GRPC_RETRY_PUSHBACK_MS, "100".parse().unwrap());
        assert_eq!(shorter.classify(), Class::RetryAfter(ms(300)));
        let mut stop = with_retry_info(Code::Unavailable, ms(300));
        stop.metadata_mut()
            .insert(GRPC_RETRY_PUSHBACK_MS, "-1".parse().unwrap());
        assert_eq!(stop.classify(), Class::Permanent);
        // Details that do not decode say nothing.
        let garbage = Status::with_details(Code::ResourceExhausted, "", vec![0xff, 0x01].into());
        assert_eq!(Pushback::of(&garbage), Pushback::None);
        assert_eq!(garbage.classify(), Class::Permanent);
        let no_delay = Status::with_error_details(
            Code::ResourceExhausted,
            "",
            ErrorDetails::with_retry_info(None),
        );
        assert_eq!(no_delay.classify(), Class::Permanent);
    }

    fn from(error: impl Error + Send + Sync + 'static) -> Status {
        Status::from_error(Box::new(error))
    }

    #[derive(Debug)]
    struct Wrapper(Box<dyn Error + Send + Sync>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("transport error")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    // What failed beneath a status decides before its code.
    #[test]
    fn the_source_chain_decides_first() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let connect = from(Wrapper(Box::new(tonic::ConnectError(Box::new(refused)))));
        assert_eq!(connect.code(), Code::Unavailable);
        assert_eq!(connect.classify(), Class::Unsent);
        let dns = io::Error::other("failed to lookup address");
        assert_eq!(
            from(tonic::ConnectError(Box::new(dns))).classify(),
            Class::Unsent
        );
        let timeout = from(Wrapper(Box::new(tonic::TimeoutExpired(()))));
        assert_eq!(timeout.code(), Code::Cancelled);
        assert_eq!(timeout.classify(), Class::Transient);
        let lost = from(Wrapper(Box::new(io::Error::from(
            io::ErrorKind::BrokenPipe,
        ))));
        assert_eq!(lost.classify(), Class::Uncertain);
        let refused = from(Wrapper(Box::new(io::Error::from(
            io::ErrorKind::ConnectionRefused,
        ))));
        assert_eq!(refused.classify(), Class::Unsent);
        // An HTTP/2 failure of the client's own, not the server's refusal: the stream
        // may have run.
        let local = h2::Error::from(h2::Reason::REFUSED_STREAM);
        assert_eq!(from(Wrapper(Box::new(local))).classify(), Class::Uncertain);
        // A status inside a status: the inner one's class.
        let mut outer = Status::internal("wrapped");
        outer.set_source(Arc::new(Status::unavailable("down")));
        assert_eq!(outer.classify(), Class::Transient);
        // An error persevere does not know: the code decides.
        let mut unknown = Status::unavailable("down");
        unknown.set_source(Arc::new(fmt::Error));
        assert_eq!(unknown.classify(), Class::Transient);
    }

    // A cut attempt is DEADLINE_EXCEEDED, retried as the cut is; a refusal of the
    // breaker is UNAVAILABLE, not retried.
    #[test]
    fn persevere_s_own_failures() {
        let cut = Status::from(AttemptTimedOut::after(ms(200)));
        assert_eq!(cut.code(), Code::DeadlineExceeded);
        assert_eq!(cut.classify(), Class::Transient);
        assert_eq!(
            cut.message(),
            "the attempt timed out after 200ms (its attempt_timeout)"
        );
        assert!(cut.source().unwrap().is::<AttemptTimedOut>());
        let breaker = crate::CircuitBreaker::new().with_consecutive_failures(1);
        let now = std::time::Instant::now();
        let permit = breaker.admit(now).unwrap();
        breaker.record(permit, false, now);
        let open = Status::from(breaker.admit(now).unwrap_err());
        assert_eq!(open.code(), Code::Unavailable);
        assert_eq!(open.classify(), Class::Permanent);
        assert!(open.source().unwrap().is::<CircuitOpen>());
    }
}
