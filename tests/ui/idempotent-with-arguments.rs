use persevere::{idempotent, retry};

#[retry]
#[idempotent(always)]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
