use persevere::retry;

#[retry]
async fn charge(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
