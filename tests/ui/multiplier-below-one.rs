use persevere::{idempotent, retry};

#[retry(multiplier = 0.5)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
