use persevere::{idempotent, retry};

#[retry(cap = "100ms")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
