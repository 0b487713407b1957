use persevere::{idempotent, retry};

#[retry(deadline = "10s", attempts = 3, deadline = "20s")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
