use persevere::{idempotent, retry};

#[retry(deadline = "30s1h")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
