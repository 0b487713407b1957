#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: a keyed write allows no lint.

use persevere::{IdempotencyKey, retry};

#[retry(key = key, breaker = BREAKER, attempt_timeout = "1s")]
async fn charge(key: IdempotencyKey, amount: u64) -> std::io::Result<String> {
    Ok(format!("{key}: {amount}"))
}

static BREAKER: persevere::CircuitBreaker = persevere::CircuitBreaker::new();

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let key = IdempotencyKey::new();
    assert_eq!(charge(key, 5).await.unwrap(), format!("{key}: 5"));
}
