#![deny(warnings)]

use persevere::retry;

#[retry(on = unsent)]
async fn submit(order: u64) -> std::io::Result<u64> {
    Ok(order)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(submit(9).await.unwrap(), 9);
}
