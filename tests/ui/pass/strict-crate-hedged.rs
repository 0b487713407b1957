#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: the hedged expansion allows no lint.

use persevere::{idempotent, retry};

#[retry(hedge = "10ms", hedges = 2)]
#[idempotent]
async fn read(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(read(1).await.unwrap(), 1);
}
