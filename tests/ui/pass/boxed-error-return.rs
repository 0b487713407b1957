#![deny(warnings)]

// The boxed errors of `std` classify by walking their chain, and convert from
// `AttemptTimedOut`, so a retried async function can return them as they are.

use std::error::Error;
use std::io;

use persevere::{idempotent, retry};

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn shared() -> Result<u32, Box<dyn Error + Send + Sync>> {
    Err(io::Error::from(io::ErrorKind::NotFound).into())
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn local() -> Result<u32, Box<dyn Error>> {
    Ok(1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert!(shared().await.is_err());
    assert_eq!(local().await.unwrap(), 1);
}
