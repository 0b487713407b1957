use persevere::{idempotent, retry};

#[retry(deadline = "30x")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
