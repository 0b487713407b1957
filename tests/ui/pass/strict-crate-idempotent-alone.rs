#![forbid(warnings)]
#![forbid(unused)]
#![forbid(unused_imports)]

// A crate that forbids warnings and unused code: `#[idempotent]` without `#[retry]`.

use persevere::idempotent;

#[idempotent]
fn read(id: u64) -> u64 {
    id
}

trait Store {
    #[idempotent]
    fn get(&self) -> u64;
}

struct Memory;

impl Store for Memory {
    fn get(&self) -> u64 {
        read(1)
    }
}

fn main() {
    assert_eq!(Memory.get(), 1);
}
