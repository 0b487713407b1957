#![deny(warnings)]

use persevere::{idempotent, retry};

struct Client {
    base: u32,
}

impl Client {
    #[retry]
    #[idempotent]
    async fn fetch(&self, id: u32) -> std::io::Result<u32> {
        Ok(self.base + id)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let client = Client { base: 10 };
    assert_eq!(client.fetch(1).await.unwrap(), 11);
}
