#![deny(warnings)]

use persevere::{IdempotencyKey, retry};

#[retry(key = key)]
async fn charge(key: IdempotencyKey, amount: u64) -> std::io::Result<String> {
    Ok(format!("{key}: {amount}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let key = IdempotencyKey::new();
    assert_eq!(charge(key, 5).await.unwrap(), format!("{key}: 5"));
}
