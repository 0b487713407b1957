use persevere::{idempotent, retry};

#[retry(hedge = "p95")]
#[idempotent]
fn read_config() -> std::io::Result<String> {
    Ok(String::new())
}

fn main() {}
