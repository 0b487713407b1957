use persevere::{idempotent, retry};

#[retry(layers = "all")]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
