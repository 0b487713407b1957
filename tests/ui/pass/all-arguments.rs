#![deny(warnings)]

use persevere::{BeforeWait, CircuitBreaker, IdempotencyKey, RetryBudget, retry};

static PAYMENTS: RetryBudget = RetryBudget::new();
static PAYMENTS_BREAKER: CircuitBreaker = CircuitBreaker::new();

fn log_wait(wait: &BeforeWait<'_, std::io::Error>) {
    let _ = (wait.function, wait.attempt, wait.error, wait.wait);
}

#[retry(
    deadline = "10s",
    attempts = 4,
    base = "100ms",
    cap = "5s",
    multiplier = 1.5,
    jitter = "decorrelated",
    on = transient,
    attempt_timeout = "2s",
    max_retry_after = "30s",
    uncertain_attempts = 2,
    budget = PAYMENTS,
    breaker = PAYMENTS_BREAKER,
    layers = "every",
    before_wait = log_wait,
    key = key,
    crate = "persevere",
)]
async fn charge(key: IdempotencyKey, amount: u64) -> std::io::Result<u64> {
    let _ = key;
    Ok(amount)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(charge(IdempotencyKey::new(), 3).await.unwrap(), 3);
}
