use persevere::{idempotent, retry};

#[retry(deadline = "30x", attempts = 0, jitter = "random")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
