use persevere::{idempotent, retry};

// `#[savepoint]` on a parameter that is not an open transaction says nothing true.
#[retry]
#[idempotent]
async fn fetch(#[savepoint] id: u64) -> std::io::Result<u64> {
    Ok(id)
}

fn main() {}
