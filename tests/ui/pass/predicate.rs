#![deny(warnings)]

use persevere::{idempotent, retry};

mod policy {
    pub fn is_transient(error: &std::io::Error) -> bool {
        error.kind() == std::io::ErrorKind::TimedOut
    }
}

#[retry(on = policy::is_transient, base = "1ms", cap = "1ms", attempts = 3)]
#[idempotent]
async fn fetch(id: u32) -> std::io::Result<u32> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(fetch(2).await.unwrap(), 2);
}
