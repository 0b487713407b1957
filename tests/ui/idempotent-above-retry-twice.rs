use persevere::{idempotent, retry};

#[idempotent]
#[retry(attempts = 3)]
#[retry(deadline = "5s")]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
