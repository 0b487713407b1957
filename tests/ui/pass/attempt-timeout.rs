#![deny(warnings)]

use persevere::{AttemptTimedOut, Class, Classify, idempotent, retry};

#[derive(Debug)]
enum ApiError {
    TimedOut,
    NotFound,
}

impl From<AttemptTimedOut> for ApiError {
    fn from(_: AttemptTimedOut) -> Self {
        ApiError::TimedOut
    }
}

impl Classify for ApiError {
    fn classify(&self) -> Class {
        match self {
            ApiError::TimedOut => Class::Transient,
            ApiError::NotFound => Class::Permanent,
        }
    }
}

#[retry(attempt_timeout = "2s")]
#[idempotent]
async fn fetch(id: u32) -> Result<u32, ApiError> {
    if id == 0 {
        return Err(ApiError::NotFound);
    }
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(fetch(5).await.unwrap(), 5);
    assert!(matches!(fetch(0).await, Err(ApiError::NotFound)));
}
