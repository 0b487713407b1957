#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>, byte: u8) -> std::io::Result<usize> {
    buffer.clear();
    buffer.push(byte);
    Ok(buffer.len())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut buffer = Vec::new();
    assert_eq!(fill(&mut buffer, 3).await.unwrap(), 1);
    assert_eq!(buffer, [3]);
}
