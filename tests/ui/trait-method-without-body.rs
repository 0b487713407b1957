use persevere::{idempotent, retry};

trait Store {
    #[retry]
    #[idempotent]
    async fn get(&self, id: u32) -> std::io::Result<String>;
}

fn main() {}
