use persevere::retry;

// Retried only when the request never left: an uncertain failure (an HTTP 500) may have
// taken effect, so a limit on its retries would do nothing.
#[retry(on = unsent, uncertain_attempts = 3)]
async fn charge(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
