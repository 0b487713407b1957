use persevere::retry;

#[retry(key = k)]
async fn charge(k: String, amount: u64) -> std::io::Result<u64> {
    let _ = k;
    Ok(amount)
}

fn main() {}
