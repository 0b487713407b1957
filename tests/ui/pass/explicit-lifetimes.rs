#![deny(warnings)]

use persevere::{idempotent, retry};

struct Catalog<'a> {
    names: &'a [&'a str],
}

impl<'a> Catalog<'a> {
    #[retry]
    #[idempotent]
    async fn name<'b>(&'b self, index: usize) -> std::io::Result<&'a str> {
        self.names
            .get(index)
            .copied()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

#[retry]
#[idempotent]
async fn longest<'a>(a: &'a str, b: &'a str) -> std::io::Result<&'a str> {
    Ok(if a.len() >= b.len() { a } else { b })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let names = ["ada", "grace"];
    let catalog = Catalog { names: &names };
    assert_eq!(catalog.name(1).await.unwrap(), "grace");
    assert_eq!(longest("ab", "abc").await.unwrap(), "abc");
}
