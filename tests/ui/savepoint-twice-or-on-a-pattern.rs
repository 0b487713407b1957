use persevere::{idempotent, retry, OpenTransaction};

struct Tx;
impl OpenTransaction for Tx {}

#[retry]
#[idempotent]
fn twice(#[savepoint] #[savepoint] tx: &mut Tx) -> std::io::Result<()> {
    let _ = tx;
    Ok(())
}

// A pattern has no one value to check.
#[retry]
#[idempotent]
fn on_a_pattern(#[savepoint] (a, b): (u64, u64)) -> std::io::Result<u64> {
    Ok(a + b)
}

fn main() {}
