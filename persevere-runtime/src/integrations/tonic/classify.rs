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
