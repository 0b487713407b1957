#![deny(warnings)]

use persevere::{IdempotencyKey, idempotent, retry};

#[retry(hedge = "50ms")]
#[idempotent]
async fn fetch(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

#[retry(hedge = "p99.9", hedges = 3, deadline = "2s")]
#[idempotent]
async fn fetch_tail(name: String, scale: &f64) -> std::io::Result<f64> {
    Ok(name.len() as f64 * scale)
}

#[retry(hedge = "p95", key = key)]
async fn write(key: IdempotencyKey, amount: u64) -> std::io::Result<u64> {
    let _ = key;
    Ok(amount)
}

// The fixes the errors of `tests/ui/hedge-odd-numbers.rs` suggest, and a delay just
// under the default deadline.
#[retry(hedge = "0.5s")]
#[idempotent]
async fn half_a_second() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "29s")]
#[idempotent]
async fn just_under_the_default_deadline() -> std::io::Result<()> {
    Ok(())
}

struct Client;

impl Client {
    #[retry(hedge = "20ms", hedges = 2)]
    #[idempotent]
    async fn get(&self, id: u64) -> std::io::Result<u64> {
        Ok(id)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(fetch(1).await.unwrap(), 1);
    assert_eq!(fetch_tail("ab".into(), &1.5).await.unwrap(), 3.0);
    assert_eq!(write(IdempotencyKey::new(), 5).await.unwrap(), 5);
    assert_eq!(Client.get(7).await.unwrap(), 7);
    half_a_second().await.unwrap();
    just_under_the_default_deadline().await.unwrap();
}
