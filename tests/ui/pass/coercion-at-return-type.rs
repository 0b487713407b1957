#![deny(warnings)]

// The declared return type stays the coercion site of the body, as in the function
// without `#[retry]`: `Err(Box::new(e))` becomes a `Box<dyn Error>` at `return` and at
// the tail, and `?` converts into it, in every expansion.

use std::error::Error;
use std::fmt::Debug;
use std::io;

use persevere::{idempotent, retry};

type BoxError = Box<dyn Error + Send + Sync>;

fn refused() -> io::Error {
    io::ErrorKind::ConnectionRefused.into()
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn in_one_future(text: &str) -> Result<u32, BoxError> {
    if text.is_empty() {
        return Err(Box::new(refused()));
    }
    if text == "tail" {
        Err(Box::new(refused()))
    } else {
        Ok(text.parse::<u32>()?)
    }
}

#[retry(attempts = 2, base = "1ms", hedge = "1s")]
#[idempotent]
async fn hedged(text: &str) -> Result<u32, BoxError> {
    if text.is_empty() {
        return Err(Box::new(refused()));
    }
    Ok(text.parse::<u32>()?)
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn in_a_loop(seen: &mut u32) -> Result<u32, Box<dyn Error>> {
    *seen += 1;
    if *seen == 1 {
        return Err(Box::new(refused()));
    }
    Ok(*seen)
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
fn blocking(text: &str) -> Result<u32, BoxError> {
    if text.is_empty() {
        return Err(Box::new(refused()));
    }
    Ok(text.parse::<u32>()?)
}

/// An `Ok` value that coerces too: a boxed trait object.
#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn boxed_value(n: u32) -> io::Result<Box<dyn Debug + Send>> {
    if n == 0 {
        return Ok(Box::new("none"));
    }
    Ok(Box::new(n))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(in_one_future("7").await.unwrap(), 7);
    assert!(in_one_future("x").await.is_err());
    assert!(in_one_future("tail").await.is_err());
    assert_eq!(hedged("8").await.unwrap(), 8);
    let mut seen = 0;
    assert_eq!(in_a_loop(&mut seen).await.unwrap(), 2);
    assert_eq!(blocking("9").unwrap(), 9);
    assert_eq!(format!("{:?}", boxed_value(3).await.unwrap()), "3");
}
