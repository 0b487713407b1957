use persevere::{idempotent, retry};

fn is_transient(code: &u32) -> bool {
    *code >= 500
}

#[retry(on = is_transient)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
