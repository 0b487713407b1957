use persevere::{Class, Classify, idempotent, retry};

// An async call cancels an attempt still running at its deadline, and returns that as
// the function's own error: an error type that cannot say so is a compile error, at the
// key that sets the deadline, or at the return type for the default one.
#[derive(Debug)]
struct ApiError;

impl Classify for ApiError {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

#[retry]
#[idempotent]
async fn fetch() -> Result<u32, ApiError> {
    Err(ApiError)
}

#[retry(deadline = "5s")]
#[idempotent]
async fn fetch_within() -> Result<u32, ApiError> {
    Err(ApiError)
}

fn main() {}
