//! `on = not_applied`: a function not marked safe to repeat is retried on failures that
//! prove its attempt took no effect (never sent, or rolled back in full, as a database
//! does on a serialization failure), and on nothing else: not a failure that may have
//! taken effect, not an attempt cut at its limit, not a nested call's give-up. Under
//! tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{AttemptTimedOut, Class, Classify, RetryBudget, idempotent, retry};

static NO_LIMIT: RetryBudget = RetryBudget::unlimited();

/// A transaction's failures, one per class.
#[derive(Clone, Debug, PartialEq, Classify)]
enum TxError {
    /// A serialization failure: the server rolled the transaction back.
    #[not_applied]
    RolledBack,
    /// The connection was refused.
    #[unsent]
    Refused,
    /// The connection was lost during `COMMIT`.
    #[uncertain]
    Lost,
    /// A reset.
    #[transient]
    Reset,
    #[permanent]
    Constraint,
    #[timed_out]
    Cut(AttemptTimedOut),
}

/// What each attempt does: fail with an error, or hang (`None`); past the list, succeed.
struct Script {
    acts: Vec<Option<TxError>>,
    calls: AtomicU32,
}

impl Script {
    fn new(acts: Vec<Option<TxError>>) -> Self {
        Self {
            acts,
            calls: AtomicU32::new(0),
        }
    }

    async fn attempt(&self) -> Result<u32, TxError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.acts.get(n as usize) {
            Some(Some(error)) => Err(error.clone()),
            Some(None) => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(n + 1)
            }
            None => Ok(n + 1),
        }
    }

    /// An attempt of a blocking function: a script without hangs.
    fn attempt_blocking(&self) -> Result<u32, TxError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.acts.get(n as usize) {
            Some(error) => Err(error.clone().expect("a blocking attempt cannot hang")),
            None => Ok(n + 1),
        }
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[retry(on = not_applied, attempt_timeout = "100ms", deadline = "5s", base = "10ms", budget = NO_LIMIT)]
async fn transfer(script: &Script) -> Result<u32, TxError> {
    script.attempt().await
}

#[retry(on = unsent, attempt_timeout = "100ms", deadline = "5s", base = "10ms", budget = NO_LIMIT)]
async fn transfer_unsent(script: &Script) -> Result<u32, TxError> {
    script.attempt().await
}

#[retry(on = not_applied, deadline = "5s", base = "1ms", budget = NO_LIMIT)]
fn transfer_blocking(script: &Script) -> Result<u32, TxError> {
    script.attempt_blocking()
}

use TxError::*;

// Can fail: `NotApplied` not admitted by `on = not_applied`, or `Unsent` dropped from it.
#[tokio::test(start_paused = true)]
async fn rolled_back_and_unsent_attempts_are_made_again() {
    let script = Script::new(vec![Some(RolledBack), Some(Refused), Some(RolledBack)]);
    assert_eq!(transfer(&script).await, Ok(4));
    assert_eq!(script.calls(), 4);
}

// Can fail: `on = not_applied` retrying what may have taken effect.
#[tokio::test(start_paused = true)]
async fn what_may_have_taken_effect_is_returned_after_one_attempt() {
    for error in [Lost, Reset, Constraint] {
        let script = Script::new(vec![Some(error.clone())]);
        assert_eq!(transfer(&script).await, Err(error.clone()), "{error:?}");
        assert_eq!(script.calls(), 1, "{error:?}");
    }
    let script = Script::new(vec![Some(RolledBack), Some(Lost)]);
    assert_eq!(transfer(&script).await, Err(Lost));
    assert_eq!(script.calls(), 2);
}

// An attempt cut at its limit may have committed. Can fail: a cut attempt retried.
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_at_its_limit_is_not_made_again() {
    let script = Script::new(vec![Some(RolledBack), None]);
    let start = tokio::time::Instant::now();
    let outcome = transfer(&script).await;
    assert!(matches!(outcome, Err(Cut(_))), "{outcome:?}");
    assert_eq!(script.calls(), 2);
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert!(
        start.elapsed() < Duration::from_millis(200),
        "{:?}",
        start.elapsed()
    );
}

// `on = unsent` does not count a rollback as unsent. Can fail: the two filters merged.
#[tokio::test(start_paused = true)]
async fn on_unsent_does_not_retry_a_rollback() {
    let script = Script::new(vec![Some(RolledBack)]);
    assert_eq!(transfer_unsent(&script).await, Err(RolledBack));
    assert_eq!(script.calls(), 1);
    let script = Script::new(vec![Some(Refused)]);
    assert_eq!(transfer_unsent(&script).await, Ok(2));
}

#[test]
fn blocking_functions_follow_the_same_rule() {
    let script = Script::new(vec![Some(RolledBack), Some(Refused)]);
    assert_eq!(transfer_blocking(&script), Ok(3));
    let script = Script::new(vec![Some(RolledBack), Some(Lost)]);
    assert_eq!(transfer_blocking(&script), Err(Lost));
    assert_eq!(script.calls(), 2);
}

#[idempotent]
#[retry(attempts = 2, base = "1ms", budget = NO_LIMIT)]
async fn inner(script: &Script) -> Result<u32, TxError> {
    script.attempt().await
}

#[retry(on = not_applied, deadline = "5s", base = "1ms", budget = NO_LIMIT)]
async fn outer(script: &Script, calls: &AtomicU32) -> Result<u32, TxError> {
    calls.fetch_add(1, Ordering::SeqCst);
    inner(script).await
}

// A nested call's rollbacks were its own attempts: the outer layer does not run it
// again. Can fail: the outer layer retrying a nested give-up.
#[tokio::test(start_paused = true)]
async fn a_nested_give_up_is_not_made_again() {
    let script = Script::new(vec![Some(RolledBack), Some(RolledBack)]);
    let calls = AtomicU32::new(0);
    assert_eq!(outer(&script, &calls).await, Err(RolledBack));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(script.calls(), 2);
    let stats = persevere::stats::get("outer").unwrap();
    assert_eq!(stats.failed.may_have_taken_effect, 0);
    assert_eq!(stats.failed.retried_inside, 1);
}

#[test]
fn the_derive_marks_a_variant_not_applied() {
    assert_eq!(RolledBack.classify(), Class::NotApplied);
    assert!(Class::NotApplied.is_retryable());
}
