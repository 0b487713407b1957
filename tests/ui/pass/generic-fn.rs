#![deny(warnings)]

use std::fmt::Display;

use persevere::{idempotent, retry};

#[retry(attempts = 2)]
#[idempotent]
async fn describe<T>(value: T, suffix: &str) -> std::io::Result<String>
where
    T: Clone + Display,
{
    Ok(format!("{value}{suffix}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(describe(42, "!").await.unwrap(), "42!");
    assert_eq!(describe(String::from("a"), "b").await.unwrap(), "ab");
}
