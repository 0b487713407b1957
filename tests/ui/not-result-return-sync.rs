use persevere::{idempotent, retry};

#[retry]
#[idempotent]
fn count() -> u32 {
    1
}

fn main() {}
