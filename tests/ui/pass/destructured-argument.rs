#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn area((width, height): (u32, u32)) -> std::io::Result<u32> {
    Ok(width * height)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(area((3, 4)).await.unwrap(), 12);
}
