//! `#[derive(Classify)]` on users' error types.

use std::io;
use std::time::Duration;

use persevere::{Class, Classify};

// The payloads the derive does not read are there to give their variants the shapes it
// must handle (a tuple variant with a field besides `#[retry_after]`, a tuple and a
// struct variant without one); a real error type would read them in its Display impl.
#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Overloaded {
        #[retry_after]
        wait: Option<Duration>,
    },
    #[transient]
    Throttled(#[retry_after] Duration, #[expect(dead_code)] u32),
    #[classify]
    Io(io::Error),
    #[permanent]
    BadRequest(#[expect(dead_code)] String),
    #[unsent]
    Refused,
    #[uncertain]
    Internal {
        #[expect(dead_code)]
        code: u16,
    },
}

#[test]
fn each_variant_has_its_class() {
    assert_eq!(
        ApiError::Overloaded { wait: None }.classify(),
        Class::Transient
    );
    assert_eq!(
        ApiError::Overloaded {
            wait: Some(Duration::from_secs(3))
        }
        .classify(),
        Class::RetryAfter(Duration::from_secs(3))
    );
    assert_eq!(
        ApiError::Throttled(Duration::from_millis(5), 1).classify(),
        Class::RetryAfter(Duration::from_millis(5))
    );
    assert_eq!(
        ApiError::Io(io::ErrorKind::TimedOut.into()).classify(),
        Class::Transient
    );
    assert_eq!(
        ApiError::Io(io::ErrorKind::NotFound.into()).classify(),
        Class::Permanent
    );
    assert_eq!(
        ApiError::BadRequest("x".into()).classify(),
        Class::Permanent
    );
    assert_eq!(ApiError::Refused.classify(), Class::Unsent);
    assert_eq!(ApiError::Internal { code: 1 }.classify(), Class::Uncertain);
}

#[derive(Debug, Classify)]
#[transient]
struct Flaky;

#[derive(Debug, Classify)]
#[classify]
struct Wrapped<E: Classify>(E);

#[test]
fn structs_and_generics() {
    assert_eq!(Flaky.classify(), Class::Transient);
    assert_eq!(Wrapped(Flaky).classify(), Class::Transient);
    assert_eq!(
        Wrapped(io::Error::from(io::ErrorKind::ConnectionRefused)).classify(),
        Class::Unsent
    );
}
