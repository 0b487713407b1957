#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: the derive allows no lint.

use std::time::Duration;

use persevere::{Class, Classify};

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Overloaded {
        #[retry_after]
        wait: Option<Duration>,
    },
    #[classify]
    Io(std::io::Error),
    #[permanent]
    Rejected,
    #[timed_out]
    TimedOut(persevere::AttemptTimedOut),
}

fn main() {
    let errors = [
        ApiError::Overloaded { wait: None },
        ApiError::Io(std::io::ErrorKind::ConnectionRefused.into()),
        ApiError::Rejected,
    ];
    let classes: Vec<Class> = errors.iter().map(Classify::classify).collect();
    assert_eq!(classes[1], Class::Unsent);
    let _ = format!("{errors:?}");
    let _ = |timed_out: persevere::AttemptTimedOut| ApiError::from(timed_out);
}
