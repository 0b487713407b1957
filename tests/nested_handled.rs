//! Nested layers do not multiply attempts: once a nested `#[retry]` call gave up in an
//! attempt, that attempt's failure is taken to be the nested one, whatever the attempt
//! did after it (awaited something else, called another retried function), because
//! persevere cannot see which error it returns; this errs toward fewer attempts, never
//! more. A body that handled the nested failure says so with
//! `persevere::nested_failure_handled()`, and its own failures are retried. Async and
//! blocking, in virtual time.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use persevere::{RetryBudget, idempotent, retry};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

/// A counter of calls, one per function under test.
struct Calls(AtomicU32);

impl Calls {
    const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

// ---- Passed on with `?`: five nested layers of three attempts make three calls --------

macro_rules! layer {
    ($name:ident, $inner:ident, $calls:ident) => {
        #[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
        #[idempotent]
        async fn $name() -> io::Result<u32> {
            $calls.next();
            $inner().await
        }
    };
}

static BOTTOM: Calls = Calls::new();
static L2: Calls = Calls::new();
static L3: Calls = Calls::new();
static L4: Calls = Calls::new();
static TOP: Calls = Calls::new();

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn bottom() -> io::Result<u32> {
    BOTTOM.next();
    Err(reset())
}

layer!(layer2, bottom, L2);
layer!(layer3, layer2, L3);
layer!(layer4, layer3, L4);
layer!(top, layer4, TOP);

#[tokio::test(start_paused = true)]
async fn a_nested_failure_passed_on_is_retried_by_one_layer_only() {
    assert!(top().await.is_err());
    assert_eq!(BOTTOM.get(), 3);
    assert_eq!([L2.get(), L3.get(), L4.get(), TOP.get()], [1, 1, 1, 1]);
}

// ---- Passed on after awaiting something else: still not retried ----------------------

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn user(calls: &Calls) -> io::Result<u32> {
    calls.next();
    Err(reset())
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn prefs(calls: &Calls) -> io::Result<u32> {
    calls.next();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    Ok(1)
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn profile(user_calls: &Calls, prefs_calls: &Calls) -> io::Result<u32> {
    let user = user(user_calls).await;
    let prefs = prefs(prefs_calls).await?;
    Ok(user? + prefs)
}

// The user's failure comes out after another retried call succeeded and the attempt
// waited: it is still the nested failure, and the outer layer does not retry it.
// Can fail: clearing the mark on a later nested call or a wait gave 9 calls.
#[tokio::test(start_paused = true)]
async fn a_nested_failure_passed_on_after_other_work_is_not_retried_again() {
    let (user_calls, prefs_calls) = (Calls::new(), Calls::new());
    assert!(profile(&user_calls, &prefs_calls).await.is_err());
    assert_eq!(user_calls.get(), 3);
    assert_eq!(prefs_calls.get(), 1);
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn profile_joined(user_calls: &Calls, prefs_calls: &Calls) -> io::Result<u32> {
    let (user, prefs) = tokio::join!(user(user_calls), prefs(prefs_calls));
    Ok(user? + prefs?)
}

#[tokio::test(start_paused = true)]
async fn a_nested_failure_passed_on_from_a_join_is_not_retried_again() {
    let (user_calls, prefs_calls) = (Calls::new(), Calls::new());
    assert!(profile_joined(&user_calls, &prefs_calls).await.is_err());
    assert_eq!(user_calls.get(), 3);
}

// ---- Handled, then the layer fails on its own: retried once the body says so -----------

#[retry(attempts = 2, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn cache(calls: &Calls) -> io::Result<u32> {
    calls.next();
    Err(reset())
}

#[retry(base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn cached_then_fetch(
    cache_calls: &Calls,
    calls: &Calls,
    says_handled: bool,
) -> io::Result<u32> {
    let attempt = calls.next();
    if let Ok(hit) = cache(cache_calls).await {
        return Ok(hit);
    }
    if says_handled {
        persevere::nested_failure_handled();
    }
    // The cache missed: fetch from the origin, which fails twice of its own.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    if attempt < 3 { Err(reset()) } else { Ok(7) }
}

// Can fail: before, the outer layer gave up after one attempt (`RetriedInside`).
#[tokio::test(start_paused = true)]
async fn a_handled_nested_failure_said_so_leaves_the_layer_its_retries() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert_eq!(
        cached_then_fetch(&cache_calls, &calls, true).await.unwrap(),
        7
    );
    assert_eq!(calls.get(), 3);
    assert_eq!(cache_calls.get(), 6);
}

// Without saying so, the layer's own failure after the miss is taken as the nested one:
// one attempt, fewer than it could have made, never more.
#[tokio::test(start_paused = true)]
async fn a_handled_nested_failure_not_said_so_errs_toward_fewer_attempts() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert!(
        cached_then_fetch(&cache_calls, &calls, false)
            .await
            .is_err()
    );
    assert_eq!(calls.get(), 1);
}

// ---- Handled, then failing at once: taken as passed on, unless the body says so --------

#[retry(base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn fails_at_once(cache_calls: &Calls, calls: &Calls, says_handled: bool) -> io::Result<u32> {
    calls.next();
    let _ = cache(cache_calls).await.ok();
    if says_handled {
        persevere::nested_failure_handled();
    }
    Err(reset())
}

// The documented approximation: with nothing in between to tell them apart, a failure
// right after a nested one is taken as the nested one, and not retried (fewer attempts,
// never more).
#[tokio::test(start_paused = true)]
async fn a_failure_right_after_a_nested_one_is_taken_as_passed_on() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert!(fails_at_once(&cache_calls, &calls, false).await.is_err());
    assert_eq!(calls.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn nested_failure_handled_gives_the_layer_its_retries_back() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert!(fails_at_once(&cache_calls, &calls, true).await.is_err());
    // The default policy: 6 attempts, within the deadline.
    assert_eq!(calls.get(), 6);
}

// ---- Blocking ----------------------------------------------------------------------------

static BLOCKING_BOTTOM: Calls = Calls::new();
static BLOCKING_TOP: Calls = Calls::new();

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_bottom() -> io::Result<u32> {
    BLOCKING_BOTTOM.next();
    Err(reset())
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_middle() -> io::Result<u32> {
    blocking_bottom()
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_top() -> io::Result<u32> {
    BLOCKING_TOP.next();
    blocking_middle()
}

#[test]
fn blocking_a_nested_failure_passed_on_is_retried_by_one_layer_only() {
    assert!(blocking_top().is_err());
    assert_eq!(BLOCKING_BOTTOM.get(), 3);
    assert_eq!(BLOCKING_TOP.get(), 1);
}

#[retry(attempts = 2, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_cache(calls: &Calls) -> io::Result<u32> {
    calls.next();
    Err(reset())
}

#[retry(base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_healthy() -> io::Result<u32> {
    Ok(1)
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_profile(cache_calls: &Calls, calls: &Calls) -> io::Result<u32> {
    calls.next();
    let cached = blocking_cache(cache_calls);
    let fallback = blocking_healthy()?;
    Ok(cached? + fallback)
}

// A nested failure passed on after another retried call succeeded: not retried again.
#[test]
fn blocking_a_nested_failure_passed_on_after_other_work_is_not_retried_again() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert!(blocking_profile(&cache_calls, &calls).is_err());
    assert_eq!(calls.get(), 1);
    assert_eq!(cache_calls.get(), 2);
}

#[retry(attempts = 3, base = "1ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
fn blocking_handled_then_own(cache_calls: &Calls, calls: &Calls) -> io::Result<u32> {
    let attempt = calls.next();
    if let Ok(hit) = blocking_cache(cache_calls) {
        return Ok(hit);
    }
    // A blocking attempt never waits, so the body says it handled the miss.
    persevere::nested_failure_handled();
    if attempt < 3 { Err(reset()) } else { Ok(9) }
}

#[test]
fn blocking_a_handled_nested_failure_then_an_own_failure_is_retried() {
    let (cache_calls, calls) = (Calls::new(), Calls::new());
    assert_eq!(blocking_handled_then_own(&cache_calls, &calls).unwrap(), 9);
    assert_eq!(calls.get(), 3);
}
