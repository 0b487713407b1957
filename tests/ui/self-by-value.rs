use persevere::{idempotent, retry};

struct Client;

impl Client {
    #[retry]
    #[idempotent]
    async fn fetch(self) -> std::io::Result<u32> {
        Ok(1)
    }
}

fn main() {}
