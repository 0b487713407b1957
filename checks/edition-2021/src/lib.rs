//! `#[retry]` on async functions of an edition-2021 crate: elided and named lifetimes,
//! receivers, generics, trait methods, and a future spawned onto another task.

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use persevere::{idempotent, retry};

    /// Fails with a transient error until `fails` calls have failed.
    struct Flaky {
        calls: AtomicU32,
        fails: u32,
    }

    impl Flaky {
        fn new(fails: u32) -> Self {
            Self {
                calls: AtomicU32::new(0),
                fails,
            }
        }

        fn call(&self) -> io::Result<u32> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if n < self.fails {
                Err(io::ErrorKind::ConnectionReset.into())
            } else {
                Ok(n)
            }
        }

        fn calls(&self) -> u32 {
            self.calls.load(Ordering::SeqCst)
        }

        // A receiver and an elided lifetime in another argument.
        #[retry(base = "10ms", jitter = "none")]
        #[idempotent]
        async fn lookup(&self, name: &str) -> io::Result<usize> {
            self.call().map(|_| name.len())
        }
    }

    // An `impl Trait` in the result that borrows from an argument: in edition 2021 an
    // async fn's opaque result captures the argument's lifetime, and so must the
    // expansion's.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn shown<'a>(flaky: &Flaky, label: &'a str) -> io::Result<impl std::fmt::Display + 'a> {
        flaky.call().map(|_| label)
    }

    // Two elided lifetimes, both captured by the future.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn two_refs(flaky: &Flaky, label: &str) -> io::Result<String> {
        flaky.call().map(|n| format!("{label}{n}"))
    }

    // Named lifetimes and a type parameter.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn named<'a, 'b, T: AsRef<str> + Clone>(
        flaky: &'a Flaky,
        prefix: &'b str,
        value: T,
    ) -> io::Result<String> {
        flaky.call().map(|_| format!("{prefix}{}", value.as_ref()))
    }

    // An `&mut` argument: the attempts run in a loop in the function's own body.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn fill(flaky: &Flaky, buffer: &mut Vec<u32>) -> io::Result<usize> {
        let n = flaky.call()?;
        buffer.push(n);
        Ok(buffer.len())
    }

    // Owned arguments only: the future is `'static` and `Send`, and can be spawned.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn owned(flaky: Arc<Flaky>) -> io::Result<u32> {
        tokio::task::yield_now().await;
        flaky.call()
    }

    trait Lookup {
        fn find(&self, key: &str) -> impl std::future::Future<Output = io::Result<usize>> + Send;
    }

    impl Lookup for Flaky {
        #[retry(base = "10ms", jitter = "none")]
        #[idempotent]
        async fn find(&self, key: &str) -> io::Result<usize> {
            self.call().map(|_| key.len())
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn every_kind_of_signature_retries() {
        let flaky = Flaky::new(2);
        assert_eq!(flaky.lookup("abc").await.unwrap(), 3);
        assert_eq!(flaky.calls(), 3);

        let flaky = Flaky::new(1);
        let label = String::from("n=");
        assert_eq!(two_refs(&flaky, &label).await.unwrap(), "n=1");
        assert_eq!(flaky.calls(), 2);

        let flaky = Flaky::new(1);
        let out = named(&flaky, "x-", String::from("y")).await.unwrap();
        assert_eq!(out, "x-y");
        assert_eq!(flaky.calls(), 2);

        let flaky = Flaky::new(2);
        let mut buffer = Vec::new();
        assert_eq!(fill(&flaky, &mut buffer).await.unwrap(), 1);
        assert_eq!(buffer, [2]);
        assert_eq!(flaky.calls(), 3);

        let flaky = Flaky::new(1);
        assert_eq!(shown(&flaky, "tea").await.unwrap().to_string(), "tea");
        assert_eq!(flaky.calls(), 2);

        let flaky = Flaky::new(1);
        assert_eq!(flaky.find("four").await.unwrap(), 4);
        assert_eq!(flaky.calls(), 2);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_future_of_owned_arguments_can_be_spawned() {
        let flaky = Arc::new(Flaky::new(2));
        let task = tokio::spawn(owned(Arc::clone(&flaky)));
        assert_eq!(task.await.unwrap().unwrap(), 2);
        assert_eq!(flaky.calls(), 3);
    }
}

#[cfg(test)]
mod recursion {
    use std::io;
    use std::sync::atomic::{AtomicU32, Ordering};

    use persevere::{idempotent, retry};

    static CALLS: AtomicU32 = AtomicU32::new(0);

    // A retried function that calls itself, boxed as any recursive async fn must be.
    #[retry(base = "10ms", jitter = "none")]
    #[idempotent]
    async fn depth(n: u32) -> io::Result<u32> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        if n == 0 {
            return Ok(0);
        }
        Ok(1 + Box::pin(depth(n - 1)).await?)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_retried_function_can_call_itself() {
        assert_eq!(depth(3).await.unwrap(), 3);
        assert_eq!(CALLS.load(Ordering::SeqCst), 4);
    }
}
