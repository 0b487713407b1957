#![deny(warnings)]

use persevere::{idempotent, retry};

trait Store {
    async fn get(&self, id: u32) -> std::io::Result<String>;
}

struct Memory;

impl Store for Memory {
    #[retry]
    #[idempotent]
    async fn get(&self, id: u32) -> std::io::Result<String> {
        Ok(format!("item {id}"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(Memory.get(3).await.unwrap(), "item 3");
}
