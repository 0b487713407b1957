use persevere::{idempotent, retry};

#[retry(base = "5s", cap = "2s")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
