use persevere::{idempotent, retry};

#[retry]
#[idempotent]
const fn answer() -> Result<u32, std::io::Error> {
    Ok(42)
}

fn main() {}
