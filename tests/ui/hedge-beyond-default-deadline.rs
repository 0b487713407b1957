use persevere::{idempotent, retry};

// No deadline written: the default of 30 s cuts the attempt before the copy would go,
// as a `deadline = "30s"` written out does.
#[retry(hedge = "40s")]
#[idempotent]
async fn never_hedged() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
