use persevere::{idempotent, retry};

#[retry]
#[idempotent]
fn format() -> Result<String, std::fmt::Error> {
    Ok(String::new())
}

fn main() {}
