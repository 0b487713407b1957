use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn fetch() -> u32 {
    1
}

fn main() {}
