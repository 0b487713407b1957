#![deny(warnings)]

// A parameter type from a `macro_rules!` fragment arrives wrapped in an invisible group:
// an `&mut` in one is still reborrowed by each attempt, not cloned.

use persevere::{idempotent, retry};

macro_rules! fillers {
    ($buffer:ty) => {
        #[retry]
        #[idempotent]
        async fn fill(buffer: $buffer, byte: u8) -> std::io::Result<usize> {
            buffer.push(byte);
            Ok(buffer.len())
        }

        #[retry]
        #[idempotent]
        fn fill_blocking(buffer: $buffer, byte: u8) -> std::io::Result<usize> {
            buffer.push(byte);
            Ok(buffer.len())
        }
    };
}

fillers!(&mut Vec<u8>);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut buffer = Vec::new();
    assert_eq!(fill(&mut buffer, 3).await.unwrap(), 1);
    assert_eq!(fill_blocking(&mut buffer, 4).unwrap(), 2);
    assert_eq!(buffer, [3, 4]);
}
