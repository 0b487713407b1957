use persevere::{idempotent, retry};

#[retry(deadline = "1s1s")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
