#![deny(warnings)]

use std::io;

use persevere::{idempotent, retry};

fn parse(text: &str) -> io::Result<u32> {
    text.parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[retry]
#[idempotent]
async fn checked(text: &str) -> io::Result<u32> {
    if text.is_empty() {
        return Ok(0);
    }
    let value = parse(text)?;
    if value > 100 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too big"));
    }
    Ok(value)
}

#[retry]
#[idempotent]
fn checked_blocking(text: &str) -> io::Result<u32> {
    if text.is_empty() {
        return Ok(0);
    }
    let value = parse(text)?;
    Ok(value)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(checked("").await.unwrap(), 0);
    assert_eq!(checked("7").await.unwrap(), 7);
    assert!(checked("x").await.is_err());
    assert!(checked("500").await.is_err());
    assert_eq!(checked_blocking("9").unwrap(), 9);
}
