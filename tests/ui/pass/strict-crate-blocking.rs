#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: the blocking expansion allows no lint.

use persevere::{idempotent, retry};

#[retry(deadline = "1s")]
#[idempotent]
fn read(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

#[idempotent]
#[retry]
fn read_above(id: u64) -> std::io::Result<u64> {
    Ok(id)
}

fn main() {
    assert_eq!(read(1).unwrap() + read_above(1).unwrap(), 2);
}
