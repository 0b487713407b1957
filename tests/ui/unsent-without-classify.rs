use persevere::retry;

#[derive(Debug)]
struct ApiError;

#[retry(on = unsent)]
async fn submit() -> Result<u32, ApiError> {
    Err(ApiError)
}

impl From<persevere::AttemptTimedOut> for ApiError {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        ApiError
    }
}

fn main() {}
