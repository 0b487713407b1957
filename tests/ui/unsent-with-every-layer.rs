use persevere::retry;

// A nested call's attempts may have taken effect: never retried under `on = unsent`,
// whichever layer.
#[retry(on = unsent, layers = "every")]
fn charge(amount: u64) -> std::io::Result<u64> {
    Ok(amount)
}

fn main() {}
