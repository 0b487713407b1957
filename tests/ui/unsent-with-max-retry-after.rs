use persevere::retry;

// A server that asks for a wait received the request: never retried under `on = unsent`.
#[retry(max_retry_after = "2m", on = unsent)]
async fn charge(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
