use persevere::{idempotent, retry};

#[retry(base = "1 ms")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
