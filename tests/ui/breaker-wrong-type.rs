use persevere::{RetryBudget, idempotent, retry};

static ORDERS: RetryBudget = RetryBudget::new();

#[retry(breaker = ORDERS)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
