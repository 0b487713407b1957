use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    let _ = &__persevere_call;
    let _ = &__persevere_outcome;
    Ok(1)
}

fn main() {}
