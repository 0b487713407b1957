use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn refresh() {}

fn main() {}
