use persevere::{idempotent, retry};

#[retry(deadline = "5s", attempt_timeout = "10s")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
