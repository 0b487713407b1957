//! Which failures a retry can fix.

use std::io;
use std::time::Duration;

/// What a failure says about retrying: the answer of [`Classify::classify`], which
/// `#[retry(on = transient)]` asks of each failed attempt's error.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use persevere::{Class, Classify};
///
/// assert_eq!(io::Error::from(io::ErrorKind::ConnectionRefused).classify(), Class::Unsent);
/// assert_eq!(io::Error::from(io::ErrorKind::TimedOut).classify(), Class::Transient);
/// assert_eq!(io::Error::from(io::ErrorKind::NotFound).classify(), Class::Permanent);
///
/// // What a server asked for, e.g. a 503 with `Retry-After: 2`:
/// let class = Class::RetryAfter(Duration::from_secs(2));
/// assert!(class.is_retryable());
/// assert!(!Class::Permanent.is_retryable());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Repeating the call cannot help: bad input, missing permission, not found. The call
    /// returns this error at once.
    Permanent,
    /// The failure may clear by itself: a reset connection, a timeout, an overloaded
    /// server. The call is retried after the backoff wait.
    Transient,
    /// The failure may be passing or may recur on every attempt: an HTTP 500 is as often
    /// a bug as a blip. Retried, but for at most the policy's `uncertain_attempts`
    /// attempts (2 by default), separately from its `attempts`.
    Uncertain,
    /// The request provably never reached the other side (the connection was refused),
    /// so repeating it is safe for any operation, idempotent or not. Retried like
    /// [`Class::Transient`].
    Unsent,
    /// The request arrived and the other side undid it in full before answering: a
    /// database transaction rolled back on a serialization failure or a deadlock. Like
    /// [`Class::Unsent`], it provably took no effect, so repeating it is safe for any
    /// operation (`on = not_applied` retries both); retried like [`Class::Transient`].
    NotApplied,
    /// The server said when to come back (`Retry-After`). The call is retried after this
    /// long, with jitter, if that fits the policy's `max_retry_after` and the deadline;
    /// otherwise it returns at once.
    RetryAfter(Duration),
}

impl Class {
    /// Whether a failure of this class may be retried at all.
    pub const fn is_retryable(self) -> bool {
        !matches!(self, Class::Permanent)
    }
}

/// Errors that know which of their failures are worth retrying.
///
/// `#[retry(on = transient)]`, the default, asks the function's error type through this
/// trait. Implement it for your own errors by matching on what each variant means:
///
/// ```
/// use std::time::Duration;
/// use persevere::{Class, Classify};
///
/// enum ApiError {
///     Overloaded { retry_after: Option<Duration> },
///     Network(std::io::Error),
///     BadRequest(String),
/// }
///
/// impl Classify for ApiError {
///     fn classify(&self) -> Class {
///         match self {
///             ApiError::Overloaded { retry_after: Some(wait) } => Class::RetryAfter(*wait),
///             ApiError::Overloaded { retry_after: None } => Class::Transient,
///             ApiError::Network(e) => e.classify(),
///             ApiError::BadRequest(_) => Class::Permanent,
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which of its failures are worth retrying",
    label = "`#[retry]` needs `{Self}: persevere::Classify` to tell which failures to retry",
    note = "if `{Self}` is a type of yours, `#[derive(persevere::Classify)]` on it or implement `persevere::Classify` for it; if it is another crate's, wrap it in an error type of yours, or name a function that decides: `#[retry(on = is_transient)]` with `fn is_transient(error: &E) -> bool`, `E` the function's error type"
)]
pub trait Classify {
    /// The class of this failure.
    fn classify(&self) -> Class;
}

impl<T: Classify + ?Sized> Classify for &T {
    fn classify(&self) -> Class {
        (**self).classify()
    }
}

impl<T: Classify + ?Sized> Classify for Box<T> {
    fn classify(&self) -> Class {
        (**self).classify()
    }
}

impl<T: Classify + ?Sized> Classify for std::sync::Arc<T> {
    fn classify(&self) -> Class {
        (**self).classify()
    }
}

/// Never happens, so never retried.
impl Classify for std::convert::Infallible {
    fn classify(&self) -> Class {
        Class::Permanent
    }
}

/// An I/O error is classified by its [`io::ErrorKind`]; see the impl for `ErrorKind`.
impl Classify for io::Error {
    fn classify(&self) -> Class {
        self.kind().classify()
    }
}

/// I/O failures by kind.
///
/// Unsent (the peer never saw the request, so safe to repeat for any operation):
/// - `ConnectionRefused`: nothing accepted the connection.
///
/// Transient (the same call may succeed a moment later):
/// - `ConnectionReset`, `ConnectionAborted`, `BrokenPipe`, `NotConnected`,
///   `UnexpectedEof`: the connection was cut, typically by a restarting or overloaded
///   peer or a load balancer;
/// - `TimedOut`, `WouldBlock`, `Interrupted`: the operation did not complete in time or
///   was interrupted, not refused;
/// - `HostUnreachable`, `NetworkUnreachable`, `NetworkDown`: routing and link failures
///   that come and go (a failover, a flapping link);
/// - `AddrInUse`, `AddrNotAvailable`: local ephemeral ports exhausted, which frees up as
///   connections close;
/// - `ResourceBusy`, `ExecutableFileBusy`, `Deadlock`: a contended resource; retrying
///   after a wait is the standard remedy;
/// - `StaleNetworkFileHandle`: a network file system remounted under the handle;
/// - `WriteZero`: the peer stopped accepting data mid-write.
///
/// Permanent (the same call fails the same way):
/// - `NotFound`, `PermissionDenied`, `AlreadyExists`, `InvalidInput`, `InvalidData`,
///   `Unsupported`, `NotADirectory`, `IsADirectory`, `DirectoryNotEmpty`,
///   `ReadOnlyFilesystem`, `StorageFull`, `QuotaExceeded`, `FileTooLarge`, `NotSeekable`,
///   `CrossesDevices`, `TooManyLinks`, `InvalidFilename`, `ArgumentListTooLong`,
///   `OutOfMemory`: the request or the environment is wrong, and waiting does not change
///   it;
/// - `Other`, and any kind not listed here: a failure nobody classified is not retried,
///   since repeating an unknown failure can do harm and rarely helps.
impl Classify for io::ErrorKind {
    fn classify(&self) -> Class {
        use io::ErrorKind::*;
        match self {
            ConnectionRefused => Class::Unsent,
            ConnectionReset
            | ConnectionAborted
            | BrokenPipe
            | NotConnected
            | UnexpectedEof
            | TimedOut
            | WouldBlock
            | Interrupted
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
            | AddrInUse
            | AddrNotAvailable
            | ResourceBusy
            | ExecutableFileBusy
            | Deadlock
            | StaleNetworkFileHandle
            | WriteZero => Class::Transient,
            _ => Class::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io::ErrorKind::*;

    #[test]
    fn io_kinds() {
        assert_eq!(ConnectionRefused.classify(), Class::Unsent);
        for kind in [
            ConnectionReset,
            ConnectionAborted,
            BrokenPipe,
            NotConnected,
            UnexpectedEof,
            TimedOut,
            WouldBlock,
            Interrupted,
            HostUnreachable,
            NetworkUnreachable,
            NetworkDown,
            AddrInUse,
            AddrNotAvailable,
            ResourceBusy,
            Deadlock,
            WriteZero,
        ] {
            assert_eq!(kind.classify(), Class::Transient, "{kind:?}");
        }
        for kind in [
            NotFound,
            PermissionDenied,
            AlreadyExists,
            InvalidInput,
            InvalidData,
            Unsupported,
            IsADirectory,
            ReadOnlyFilesystem,
            StorageFull,
            OutOfMemory,
            Other,
        ] {
            assert_eq!(kind.classify(), Class::Permanent, "{kind:?}");
        }
    }

    #[test]
    fn io_error_uses_its_kind() {
        let e = io::Error::new(TimedOut, "slow");
        assert_eq!(e.classify(), Class::Transient);
        assert_eq!(Classify::classify(&&e), Class::Transient);
        assert_eq!(Box::new(e).classify(), Class::Transient);
        assert!(!Class::Permanent.is_retryable());
        assert!(Class::Unsent.is_retryable());
    }
}
