use persevere::retry;

#[derive(Debug)]
struct ApiError;

#[retry(on = unsent)]
async fn submit() -> Result<u32, ApiError> {
    Err(ApiError)
}

fn main() {}
