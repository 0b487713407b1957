use persevere::{idempotent, retry};

#[retry(jitter = "random")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
