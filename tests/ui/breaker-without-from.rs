use persevere::{CircuitBreaker, Class, Classify, idempotent, retry};

#[derive(Debug)]
struct ApiError;

impl Classify for ApiError {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

static ORDERS: CircuitBreaker = CircuitBreaker::new();

#[retry(breaker = ORDERS)]
#[idempotent]
async fn fetch() -> Result<u32, ApiError> {
    Err(ApiError)
}

impl From<persevere::AttemptTimedOut> for ApiError {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        ApiError
    }
}

fn main() {}
