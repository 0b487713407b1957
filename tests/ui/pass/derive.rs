#![deny(warnings)]

use std::time::Duration;

use persevere::{Class, Classify, idempotent, retry};

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Overloaded {
        #[retry_after]
        wait: Option<Duration>,
    },
    #[classify]
    Io(std::io::Error),
    #[unsent]
    Refused,
    #[uncertain]
    Internal,
    #[permanent]
    Rejected,
    #[timed_out]
    TimedOut(persevere::AttemptTimedOut),
}

#[derive(Debug, Classify)]
#[transient]
struct Blip;

#[retry(attempts = 2, base = "0s")]
#[idempotent]
async fn call() -> Result<(), ApiError> {
    Err(ApiError::Rejected)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert!(matches!(call().await, Err(ApiError::Rejected)));
    assert_eq!(
        ApiError::Overloaded { wait: None }.classify(),
        Class::Transient
    );
    assert_eq!(
        ApiError::Io(std::io::ErrorKind::TimedOut.into()).classify(),
        Class::Transient
    );
    assert_eq!(ApiError::Refused.classify(), Class::Unsent);
    assert_eq!(ApiError::Internal.classify(), Class::Uncertain);
    assert_eq!(Blip.classify(), Class::Transient);
    let cut = persevere::AttemptTimedOut::after(Duration::from_secs(1));
    assert!(matches!(ApiError::from(cut), ApiError::TimedOut(_)));
    assert_eq!(ApiError::from(cut).classify(), Class::Transient);
}
