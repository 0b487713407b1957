#![deny(warnings)]

use persevere::{idempotent, retry};

#[retry(deadline = "1s", base = "1ms", cap = "10ms")]
#[idempotent]
fn parse(text: &str) -> std::io::Result<u32> {
    text.trim()
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

fn main() {
    assert_eq!(parse(" 12 ").unwrap(), 12);
    assert!(parse("twelve").is_err());
}
