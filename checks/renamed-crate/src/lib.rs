//! `#[retry(crate = "::retrying")]` in a crate that depends on persevere as `retrying`:
//! the attribute expands, and the call retries, with no crate named `persevere` in
//! scope.

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::atomic::{AtomicU32, Ordering};

    use retrying::{idempotent, retry};

    static CALLS: AtomicU32 = AtomicU32::new(0);

    #[retry(crate = "::retrying", base = "10ms", jitter = "none")]
    #[idempotent]
    async fn flaky() -> io::Result<u32> {
        match CALLS.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Err(io::ErrorKind::ConnectionReset.into()),
            n => Ok(n),
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_renamed_crate_is_what_the_generated_code_names() {
        let start = tokio::time::Instant::now();
        assert_eq!(flaky().await.unwrap(), 2);
        assert_eq!(CALLS.load(Ordering::SeqCst), 3);
        // Waits of 10 ms and 20 ms.
        assert_eq!(start.elapsed(), std::time::Duration::from_millis(30));
    }
}
