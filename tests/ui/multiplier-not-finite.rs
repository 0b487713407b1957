use persevere::{idempotent, retry};

#[retry(multiplier = 1e400)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
