#![deny(warnings)]

use persevere::retry;

#[retry(on = unsent)]
async fn submit(order: u64) -> std::io::Result<u64> {
    Ok(order)
}

// What still acts on a function retried only on unsent failures: the deadline, each
// attempt's limit, the backoff and the explicit default of `layers`.
#[retry(on = unsent, attempt_timeout = "1s", base = "10ms", layers = "innermost")]
async fn submit_within(order: u64) -> std::io::Result<u64> {
    Ok(order)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(submit(9).await.unwrap(), 9);
    assert_eq!(submit_within(3).await.unwrap(), 3);
}
