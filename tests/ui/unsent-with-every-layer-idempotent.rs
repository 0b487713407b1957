use persevere::{idempotent, retry};

// Marked safe to repeat already: the fix is to drop `on = unsent`, not to mark it.
#[retry(on = unsent, layers = "every")]
#[idempotent]
async fn refresh(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

fn main() {}
