use persevere::{idempotent, retry};

#[retry(budget = persevere::RetryBudget::new(), attempts = 3)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
