use persevere::{Class, Classify, idempotent, retry};

#[derive(Debug)]
enum ApiError {
    Unavailable,
}

impl Classify for ApiError {
    fn classify(&self) -> Class {
        match self {
            ApiError::Unavailable => Class::Transient,
        }
    }
}

#[retry(attempt_timeout = "2s")]
#[idempotent]
async fn fetch() -> Result<u32, ApiError> {
    Err(ApiError::Unavailable)
}

fn main() {}
