use persevere::retry;

#[retry(__idempotent)]
async fn charge() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
