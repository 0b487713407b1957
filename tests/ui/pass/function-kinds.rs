#![deny(warnings)]

// Function kinds beside the plain `fn` and `async fn`: `unsafe`, `extern`, trait
// default methods, a receiver `self: &Arc<Self>`, argument patterns (`_`, a tuple,
// `mut`), in both expansions (one future, and the loop of a function with an `&mut`).

use std::io;
use std::sync::Arc;

use persevere::{idempotent, retry};

struct Store;

impl Store {
    #[retry(attempts = 2)]
    #[idempotent]
    async fn shared(self: &Arc<Self>, (a, b): (u32, u32), _: u8, mut c: u32) -> io::Result<u32> {
        c += a + b;
        Ok(c)
    }

    #[retry(attempts = 2)]
    #[idempotent]
    async fn exclusive(&mut self, (a, b): (u32, u32), _: u8, mut c: u32) -> io::Result<u32> {
        c += a + b;
        Ok(c)
    }

    /// # Safety
    ///
    /// None needed; the function is `unsafe` only to show it compiles.
    #[retry(attempts = 2)]
    #[idempotent]
    unsafe fn unchecked(&self, x: u32) -> io::Result<u32> {
        Ok(x)
    }
}

/// # Safety
///
/// None needed; the function is `unsafe` only to show it compiles.
#[retry(attempts = 2)]
#[idempotent]
async unsafe fn unchecked_async(x: u32) -> io::Result<u32> {
    Ok(x)
}

#[retry(attempts = 2)]
#[idempotent]
extern "Rust" fn with_abi(x: u32) -> io::Result<u32> {
    Ok(x)
}

trait Lookup {
    fn base(&self) -> u32;

    #[retry(attempts = 2)]
    #[idempotent]
    async fn lookup(&self, x: u32) -> io::Result<u32> {
        Ok(self.base() + x)
    }

    #[retry(attempts = 2)]
    #[idempotent]
    fn lookup_blocking(&self, x: u32) -> io::Result<u32> {
        Ok(self.base() + x)
    }
}

impl Lookup for Store {
    fn base(&self) -> u32 {
        10
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let store = Arc::new(Store);
    assert_eq!(store.shared((1, 2), 0, 3).await.unwrap(), 6);
    assert_eq!(Store.exclusive((1, 2), 0, 4).await.unwrap(), 7);
    // SAFETY: `unchecked` has no safety requirements.
    assert_eq!(unsafe { Store.unchecked(5) }.unwrap(), 5);
    // SAFETY: `unchecked_async` has no safety requirements.
    assert_eq!(unsafe { unchecked_async(6) }.await.unwrap(), 6);
    assert_eq!(with_abi(7).unwrap(), 7);
    assert_eq!(Store.lookup(1).await.unwrap(), 11);
    assert_eq!(Store.lookup_blocking(2).unwrap(), 12);
}
