#![deny(warnings)]

use persevere::{CircuitBreaker, CircuitOpen, Class, Classify, idempotent, retry};

static ORDERS: CircuitBreaker = CircuitBreaker::new().with_consecutive_failures(3);

#[derive(Debug)]
enum ApiError {
    Open,
    NotFound,
}

impl From<persevere::AttemptTimedOut> for ApiError {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        ApiError::NotFound
    }
}

impl From<CircuitOpen> for ApiError {
    fn from(_: CircuitOpen) -> Self {
        ApiError::Open
    }
}

impl Classify for ApiError {
    fn classify(&self) -> Class {
        match self {
            ApiError::Open | ApiError::NotFound => Class::Permanent,
        }
    }
}

#[retry(breaker = ORDERS)]
#[idempotent]
async fn order(id: u32) -> Result<u32, ApiError> {
    if id == 0 {
        return Err(ApiError::NotFound);
    }
    Ok(id)
}

#[retry(breaker = ORDERS)]
#[idempotent]
fn order_blocking(id: u32) -> std::io::Result<u32> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(order(1).await.unwrap(), 1);
    assert!(matches!(order(0).await, Err(ApiError::NotFound)));
    assert_eq!(order_blocking(2).unwrap(), 2);
}
