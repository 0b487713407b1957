use persevere::{idempotent, retry};

#[derive(Debug)]
struct ApiError;

#[retry]
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
