use std::sync::Arc;

use persevere::{idempotent, retry};

struct Store;

impl Store {
    #[retry]
    #[idempotent]
    async fn get(self: Arc<Self>) -> std::io::Result<u32> {
        Ok(1)
    }
}

fn main() {}
