#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: the expansion for an `&mut` argument
// allows no lint.

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>) -> std::io::Result<usize> {
    buffer.push(1);
    Ok(buffer.len())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut buffer = Vec::new();
    assert_eq!(fill(&mut buffer).await.unwrap(), 1);
}
