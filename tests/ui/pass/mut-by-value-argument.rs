#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn append(mut bytes: Vec<u8>, byte: u8) -> std::io::Result<Vec<u8>> {
    bytes.push(byte);
    Ok(bytes)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(append(vec![1], 2).await.unwrap(), [1, 2]);
}
