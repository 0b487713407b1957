#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry(attempts = 3)]
#[idempotent]
async fn fetch(id: u32) -> std::io::Result<u32> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(fetch(4).await.unwrap(), 4);
}
