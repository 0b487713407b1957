use persevere::{idempotent, retry};

/// An alias the macro cannot see through: the compiler reports it, once.
type Count = u32;

#[retry]
#[idempotent]
fn count(buffer: &mut Vec<u8>) -> Count {
    buffer.len() as Count
}

fn main() {}
