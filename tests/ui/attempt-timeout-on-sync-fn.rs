use persevere::{idempotent, retry};

#[retry(attempt_timeout = "2s")]
#[idempotent]
fn read_config() -> std::io::Result<String> {
    Ok(String::new())
}

fn main() {}
