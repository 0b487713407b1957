use persevere::{idempotent, retry};

static PAYMENTS: u32 = 10;

#[retry(budget = PAYMENTS)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
