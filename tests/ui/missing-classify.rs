use persevere::{idempotent, retry};

#[derive(Debug)]
struct ApiError;

#[retry]
#[idempotent]
async fn fetch() -> Result<u32, ApiError> {
    Err(ApiError)
}

fn main() {}
