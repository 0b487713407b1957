use persevere::{idempotent, retry};

#[retry(before_wait = |wait| println!("{wait:?}"))]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
