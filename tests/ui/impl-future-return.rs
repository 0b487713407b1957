use std::future::Future;

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
fn fetch() -> impl Future<Output = std::io::Result<u32>> {
    async { Ok(1) }
}

fn main() {}
