use persevere::retry;

// Retried only when the transaction provably took no effect: a server's wait comes with
// a request it received, and a hedge is sent before anything is known to have failed.
#[retry(on = not_applied, max_retry_after = "10s", hedge = "50ms")]
async fn transfer(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
