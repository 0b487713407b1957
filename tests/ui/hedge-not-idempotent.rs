use persevere::retry;

// Retried only when the request never left: safe to retry, not to send twice at once.
#[retry(on = unsent, hedge = "50ms")]
async fn charge(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
