use persevere::{idempotent, retry};

#[retry(deadline = "30x")]
#[idempotent]
fn fetch(id: u32) -> std::io::Result<u32> {
    Ok(id)
}

fn main() {
    let _ = fetch(1);
}
