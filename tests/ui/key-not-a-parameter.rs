use persevere::{IdempotencyKey, retry};

#[retry(key = request_key)]
async fn charge(key: IdempotencyKey, amount: u64) -> std::io::Result<u64> {
    let _ = key;
    Ok(amount)
}

fn main() {}
