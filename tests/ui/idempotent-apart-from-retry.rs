use persevere::{idempotent, retry};

#[idempotent]
#[tokio::main(flavor = "current_thread")]
#[retry]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
