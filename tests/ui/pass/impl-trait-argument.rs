#![deny(warnings)]

use std::fmt::Display;

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn render(value: impl Display + Clone) -> std::io::Result<String> {
    Ok(value.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(render(7).await.unwrap(), "7");
}
