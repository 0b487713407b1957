use persevere::{idempotent, retry, OpenTransaction};

#[derive(Clone)]
struct Tx(u64);
impl OpenTransaction for Tx {}

// A transaction bound by a pattern is found by its type.
#[retry]
#[idempotent]
fn destructured(Tx(id): Tx) -> std::io::Result<u64> {
    Ok(id)
}

fn main() {}
