#![deny(warnings)]

use persevere::{RetryBudget, idempotent, retry};

static INVENTORY: RetryBudget = RetryBudget::new();

#[retry(budget = INVENTORY)]
#[idempotent]
async fn stock(item: u32) -> std::io::Result<u32> {
    Ok(item * 2)
}

#[retry(budget = INVENTORY)]
#[idempotent]
fn reserve(item: u32) -> std::io::Result<u32> {
    Ok(item)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(stock(2).await.unwrap(), 4);
    assert_eq!(reserve(3).unwrap(), 3);
}
