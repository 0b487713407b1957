#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn one() -> std::io::Result<u32> { Ok(1) }

#[retry]
#[idempotent]
fn two() -> std::io::Result<u32> { Ok(2) }

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(one().await.unwrap() + two().unwrap(), 3);
}
