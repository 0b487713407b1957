// A budget must be a `static`: a `const` is a new budget at each use, which no two calls
// would share. rustc refuses it at the name (E0716).
use persevere::{RetryBudget, idempotent, retry};

const SHARED: RetryBudget = RetryBudget::new();

#[retry(budget = SHARED)]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    Ok(1)
}

fn main() {}
