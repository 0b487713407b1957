#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: the generated code allows no lint.

use persevere::{idempotent, retry};

#[retry(deadline = "1s")]
#[idempotent]
async fn read(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

#[idempotent]
#[retry(deadline = "1s")]
async fn read_above(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(read(1).await.unwrap() + read_above(1).await.unwrap(), 2);
}
