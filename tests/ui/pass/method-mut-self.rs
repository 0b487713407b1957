#![deny(warnings)]

use persevere::{idempotent, retry};

struct Counter {
    calls: u32,
}

impl Counter {
    #[retry]
    #[idempotent]
    async fn bump(&mut self) -> std::io::Result<u32> {
        self.calls += 1;
        Ok(self.calls)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut counter = Counter { calls: 0 };
    assert_eq!(counter.bump().await.unwrap(), 1);
    assert_eq!(counter.bump().await.unwrap(), 2);
}
