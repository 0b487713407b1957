use persevere::{idempotent, retry};

#[retry(attempts = 3)]
#[retry(deadline = "5s")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
