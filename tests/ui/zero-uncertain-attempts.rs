use persevere::{idempotent, retry};

#[retry(uncertain_attempts = 0)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
