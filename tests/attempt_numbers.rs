//! `persevere::attempt`: which attempt of the innermost `#[retry]` call is running, in
//! every expansion and inside nested calls, scopes and hedged copies.

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use persevere::{RetryBudget, attempt, deadline, idempotent, retry};

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// What each attempt saw: its number, the call's most attempts, whether a retry.
type Seen = Mutex<Vec<(u32, Option<u32>, bool)>>;

fn see(seen: &Seen) -> usize {
    let mut seen = seen.lock().unwrap();
    seen.push((attempt::number(), attempt::max(), attempt::is_retry()));
    seen.len()
}

fn fail() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn in_one_future(seen: &Seen) -> io::Result<()> {
    if see(seen) < 3 { Err(fail()) } else { Ok(()) }
}

#[retry(attempts = 4, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn in_a_loop(seen: &Seen, count: &mut u32) -> io::Result<()> {
    *count += 1;
    if see(seen) < 3 { Err(fail()) } else { Ok(()) }
}

#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
fn blocking(seen: &Seen) -> io::Result<()> {
    if see(seen) < 3 { Err(fail()) } else { Ok(()) }
}

const THREE: [(u32, Option<u32>, bool); 3] =
    [(1, None, false), (2, Some(3), true), (3, Some(3), true)];

// Can fail: a retry that reads as a first attempt, a wrong number or maximum.
#[tokio::test(start_paused = true)]
async fn each_expansion_counts_its_attempts() {
    let seen = Seen::default();
    in_one_future(&seen).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), THREE);

    let seen = Seen::default();
    in_a_loop(&seen, &mut 0).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, None, false), (2, Some(4), true), (3, Some(4), true)]
    );

    let seen = Seen::default();
    blocking(&seen).unwrap();
    assert_eq!(*seen.lock().unwrap(), THREE);
    // Outside any call: a first attempt.
    assert_eq!(
        (attempt::number(), attempt::max(), attempt::is_retry()),
        (1, None, false)
    );
}

#[retry(attempts = 2, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn inner(seen: &Seen) -> io::Result<()> {
    see(seen);
    Ok(())
}

#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn outer(outer_seen: &Seen, inner_seen: &Seen, scoped: &Seen) -> io::Result<()> {
    // A nested call counts its own attempts; a scope counts as the attempt it is in.
    inner(inner_seen).await?;
    deadline::scope(Duration::from_secs(1), async { see(scoped) }).await;
    if see(outer_seen) < 2 {
        Err(fail())
    } else {
        Ok(())
    }
}

// Can fail: a nested first attempt taken for the retry around it, or the retry's number
// lost after a nested call or inside a scope.
#[tokio::test(start_paused = true)]
async fn a_nested_call_counts_its_own_and_a_scope_its_attempt_s() {
    let (outer_seen, inner_seen, scoped) = (Seen::default(), Seen::default(), Seen::default());
    outer(&outer_seen, &inner_seen, &scoped).await.unwrap();
    assert_eq!(
        *inner_seen.lock().unwrap(),
        [(1, None, false), (1, None, false)]
    );
    assert_eq!(
        *outer_seen.lock().unwrap(),
        [(1, None, false), (2, Some(3), true)]
    );
    assert_eq!(
        *scoped.lock().unwrap(),
        [(1, None, false), (2, Some(3), true)]
    );
}

#[retry(attempts = 2, base = "10ms", attempt_timeout = "1s", budget = UNLIMITED)]
#[idempotent]
async fn begins_at_once(seen: &Seen) -> io::Result<()> {
    if see(seen) < 2 { Err(fail()) } else { Ok(()) }
}

// A call that begins at its first poll (it has an attempt timeout) has state in its
// first attempt, which is still a first attempt.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_with_state_is_a_first_attempt() {
    let seen = Seen::default();
    begins_at_once(&seen).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, None, false), (2, Some(2), true)]
    );
}
