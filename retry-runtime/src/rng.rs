//! Randomness for jitter: a fast generator per thread, seedable for tests.

use std::cell::RefCell;

use rand::{SeedableRng, rngs::SmallRng};

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::from_os_rng());
}

/// Seeds the jitter randomness of the current thread, so that the waits of every retried
/// call on this thread are reproducible.
///
/// Use it in tests, together with tokio's paused clock. A `#[tokio::test]` runs on one
/// thread by default, so seeding at its start makes the whole test deterministic:
///
/// ```
/// persevere::seed_thread_rng(42);
/// ```
///
/// The randomness is only drawn when a call is about to wait, never on a call that
/// succeeds at once. Unseeded, each thread's generator starts from the operating
/// system's entropy. The generator is fast, not cryptographic: jitter needs spread, not
/// secrecy.
pub fn seed_thread_rng(seed: u64) {
    RNG.with(|rng| *rng.borrow_mut() = SmallRng::seed_from_u64(seed));
}

/// Runs `f` with this thread's jitter generator.
pub(crate) fn with_thread_rng<T>(f: impl FnOnce(&mut SmallRng) -> T) -> T {
    RNG.with(|rng| f(&mut rng.borrow_mut()))
}
