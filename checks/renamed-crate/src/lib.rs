//! `#[retry(crate = "::retrying")]` and `#[persevere(crate = "::retrying")]` (for
//! `#[derive(Classify)]`) in a crate that depends on persevere as `retrying`: both
//! expand, and the call retries, with no crate named `persevere` in scope.

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

    #[derive(Debug, retrying::Classify)]
    #[persevere(crate = "::retrying")]
    enum ApiError {
        #[transient]
        Overloaded {
            #[retry_after]
            wait: Option<std::time::Duration>,
        },
        #[permanent]
        NotFound,
    }

    #[test]
    fn the_derive_names_the_renamed_crate() {
        use retrying::{Class, Classify};
        let wait = std::time::Duration::from_secs(2);
        assert_eq!(
            ApiError::Overloaded { wait: Some(wait) }.classify(),
            Class::RetryAfter(wait)
        );
        assert_eq!(
            ApiError::Overloaded { wait: None }.classify(),
            Class::Transient
        );
        assert_eq!(ApiError::NotFound.classify(), Class::Permanent);
    }
}
