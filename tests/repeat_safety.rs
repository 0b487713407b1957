//! Which failed attempts are made again: for each way an attempt can end, and each way a
//! function is marked safe to repeat, the table of `src/guide/what-is-retried.md` ("What
//! is retried, by marking"), one test per cell, async and blocking; and a property test
//! that no attempt follows one that may have taken effect in a function marked only
//! `on = unsent`.
//!
//! Async tests run under tokio's paused clock. Blocking calls sleep their thread in real
//! time: their waits here are a few milliseconds, and the one test of their deadline
//! sleeps past a deadline of 1 s.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{
    AttemptTimedOut, CircuitBreaker, CircuitOpen, Classify, IdempotencyKey, Layers, Policy, Repeat,
    RetryBudget, deadline, idempotent, nested_failure_handled, retry, retry_fn,
};
use proptest::prelude::*;
use tokio::time::Instant;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The error of every function here: one variant per class, and the two failures
/// persevere makes (an attempt cut short, a breaker's refusal).
#[derive(Clone, Debug, PartialEq, Classify)]
enum Failure {
    #[permanent]
    Permanent,
    #[transient]
    Transient,
    #[uncertain]
    Uncertain,
    #[unsent]
    Unsent,
    /// A 503 with `Retry-After: 0.1`.
    #[transient]
    Pushback {
        #[retry_after]
        wait: Option<Duration>,
    },
    #[timed_out]
    Cut(AttemptTimedOut),
    #[permanent]
    Open(CircuitOpen),
}

impl From<CircuitOpen> for Failure {
    fn from(open: CircuitOpen) -> Self {
        Failure::Open(open)
    }
}

/// What one attempt does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    /// Succeeds, with its attempt's number.
    Succeed,
    /// Fails on its own with this error.
    Fail(Own),
    /// Sends its request and waits an hour for the answer (async only): cut at its
    /// `attempt_timeout` or the deadline.
    Hang,
    /// Runs past the deadline, then fails unsent (blocking only: it cannot be cut).
    Overrun,
    /// Calls a nested retried function, which fails unsent twice and gives up, and
    /// returns that function's error.
    Nested,
    /// The same, then says it handled the nested failure and fails unsent on its own.
    NestedHandled,
}

/// A failure of an attempt's own.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Own {
    Permanent,
    Transient,
    Uncertain,
    Unsent,
    Pushback,
}

impl Own {
    fn error(self) -> Failure {
        match self {
            Own::Permanent => Failure::Permanent,
            Own::Transient => Failure::Transient,
            Own::Uncertain => Failure::Uncertain,
            Own::Unsent => Failure::Unsent,
            Own::Pushback => Failure::Pushback {
                wait: Some(ms(100)),
            },
        }
    }
}

use Act::*;
use Own::{Pushback, Uncertain, Unsent};

/// The acts of a call's attempts, in order (every attempt past them succeeds), and what
/// it saw: how many attempts it made, how many its nested calls made, and the key each
/// attempt carried.
struct Script {
    acts: Vec<Act>,
    calls: AtomicU32,
    nested: AtomicU32,
    keys: Mutex<Vec<IdempotencyKey>>,
}

impl Script {
    fn new(acts: &[Act]) -> Self {
        Self {
            acts: acts.to_vec(),
            calls: AtomicU32::new(0),
            nested: AtomicU32::new(0),
            keys: Mutex::new(Vec::new()),
        }
    }

    /// The next attempt begins, carrying `key`: its number (from 1) and its act.
    fn begin(&self, key: &IdempotencyKey) -> (u32, Act) {
        self.keys.lock().unwrap().push(*key);
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let act = self.acts.get(n as usize - 1).copied().unwrap_or(Succeed);
        (n, act)
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn nested(&self) -> u32 {
        self.nested.load(Ordering::SeqCst)
    }
}

static NO_LIMIT: RetryBudget = RetryBudget::unlimited();

#[retry(attempts = 2, base = "1ms", jitter = "none", budget = NO_LIMIT)]
#[idempotent]
async fn nested(script: &Script) -> Result<u32, Failure> {
    script.nested.fetch_add(1, Ordering::SeqCst);
    Err(Failure::Unsent)
}

#[retry(attempts = 2, base = "1ms", jitter = "none", budget = NO_LIMIT)]
#[idempotent]
fn nested_blocking(script: &Script) -> Result<u32, Failure> {
    script.nested.fetch_add(1, Ordering::SeqCst);
    Err(Failure::Unsent)
}

async fn play(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
    let (n, act) = script.begin(key);
    match act {
        Succeed => Ok(n),
        Fail(own) => Err(own.error()),
        Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(n)
        }
        Overrun => unreachable!("an async attempt that runs long is `Hang`"),
        Nested => nested(script).await,
        NestedHandled => {
            let _ = nested(script).await;
            nested_failure_handled();
            Err(Failure::Unsent)
        }
    }
}

fn play_blocking(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
    let (n, act) = script.begin(key);
    match act {
        Succeed => Ok(n),
        Fail(own) => Err(own.error()),
        Hang => unreachable!("a blocking attempt cannot be cut"),
        Overrun => {
            std::thread::sleep(BLOCKING_DEADLINE + ms(100));
            Err(Failure::Unsent)
        }
        Nested => nested_blocking(script),
        NestedHandled => {
            let _ = nested_blocking(script);
            nested_failure_handled();
            Err(Failure::Unsent)
        }
    }
}

/// The deadline of the blocking functions: long beside their waits (1 ms, 2 ms, ...).
const BLOCKING_DEADLINE: Duration = Duration::from_secs(1);

/// `on = path`'s predicate: every failure a retry can fix, by the error's own class.
fn retryable(error: &Failure) -> bool {
    error.classify().is_retryable()
}

/// The functions of one marking, in a module of its own: `call` (async, each attempt cut
/// after 1 s) and `call_blocking`, and the same behind a breaker that opens at its first
/// failure (`guarded`, `guarded_blocking`). Every function takes a key, which a keyed
/// function sends and the others ignore, so that the tests call each marking alike.
macro_rules! marking {
    ($name:ident, [$($marks:tt)*] $(#[$attr:meta])*) => {
        mod $name {
            use super::*;

            pub static BREAKER: CircuitBreaker =
                CircuitBreaker::new().with_consecutive_failures(1);
            pub static BLOCKING_BREAKER: CircuitBreaker =
                CircuitBreaker::new().with_consecutive_failures(1);

            #[retry($($marks)* attempt_timeout = "1s", deadline = "10s", base = "10ms", jitter = "none", budget = NO_LIMIT)]
            $(#[$attr])*
            pub async fn call(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
                play(script, key).await
            }

            #[retry($($marks)* deadline = "1s", base = "1ms", jitter = "none", budget = NO_LIMIT)]
            $(#[$attr])*
            pub fn call_blocking(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
                play_blocking(script, key)
            }

            #[retry($($marks)* base = "10ms", jitter = "none", breaker = BREAKER, budget = NO_LIMIT)]
            $(#[$attr])*
            pub async fn guarded(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
                play(script, key).await
            }

            #[retry($($marks)* base = "1ms", jitter = "none", breaker = BLOCKING_BREAKER, budget = NO_LIMIT)]
            $(#[$attr])*
            pub fn guarded_blocking(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
                play_blocking(script, key)
            }
        }
    };
}

marking!(idempotent_fn, [] #[idempotent]);
marking!(keyed, [key = key,]);
marking!(unsent, [on = unsent,]);
marking!(predicate, [on = retryable,] #[idempotent]);

/// The four markings, in the table's order, each with its async and blocking call.
type AsyncCall = for<'a> fn(
    &'a Script,
    &'a IdempotencyKey,
) -> std::pin::Pin<Box<dyn Future<Output = Result<u32, Failure>> + 'a>>;
type BlockingCall = fn(&Script, &IdempotencyKey) -> Result<u32, Failure>;

const MARKINGS: [&str; 4] = ["#[idempotent]", "key = ...", "on = unsent", "on = path"];

fn async_calls() -> [AsyncCall; 4] {
    [
        |s, k| Box::pin(idempotent_fn::call(s, k)),
        |s, k| Box::pin(keyed::call(s, k)),
        |s, k| Box::pin(unsent::call(s, k)),
        |s, k| Box::pin(predicate::call(s, k)),
    ]
}

fn blocking_calls() -> [BlockingCall; 4] {
    [
        idempotent_fn::call_blocking,
        keyed::call_blocking,
        unsent::call_blocking,
        predicate::call_blocking,
    ]
}

/// One row of the table: a script, and for each marking the attempts the call makes.
/// The call returns the last attempt's outcome: a success if the script ran out.
struct Row {
    name: &'static str,
    acts: &'static [Act],
    attempts: [u32; 4],
}

/// Runs `row` through the four async functions; `wrap` puts the call in an enclosing
/// deadline, if any. Checks the attempts made, the outcome (the last attempt's), and
/// that every attempt carried the call's one key.
async fn check_async(row: &Row, within: Option<Duration>) -> Vec<(Result<u32, Failure>, Duration)> {
    let mut seen = Vec::new();
    for (i, call) in async_calls().into_iter().enumerate() {
        let script = Script::new(row.acts);
        let key = IdempotencyKey::new();
        let start = Instant::now();
        let outcome = match within {
            Some(limit) => deadline::scope(limit, call(&script, &key)).await,
            None => call(&script, &key).await,
        };
        let (name, marking) = (row.name, MARKINGS[i]);
        assert_eq!(
            script.calls(),
            row.attempts[i],
            "{name}, {marking}: attempts"
        );
        check_outcome(row, i, &outcome);
        assert!(script.keys.lock().unwrap().iter().all(|k| *k == key));
        seen.push((outcome, start.elapsed()));
    }
    seen
}

fn check_blocking(row: &Row) -> Vec<Result<u32, Failure>> {
    let mut seen = Vec::new();
    for (i, call) in blocking_calls().into_iter().enumerate() {
        let script = Script::new(row.acts);
        let key = IdempotencyKey::new();
        let outcome = call(&script, &key);
        let (name, marking) = (row.name, MARKINGS[i]);
        assert_eq!(
            script.calls(),
            row.attempts[i],
            "{name}, {marking}: attempts (blocking)"
        );
        check_outcome(row, i, &outcome);
        seen.push(outcome);
    }
    seen
}

/// The outcome of `row`'s call under marking `i`: its last attempt's.
fn check_outcome(row: &Row, i: usize, outcome: &Result<u32, Failure>) {
    let last = row.attempts[i];
    let expected = match row.acts.get(last as usize - 1).copied().unwrap_or(Succeed) {
        Succeed => Ok(last),
        Fail(own) => Err(own.error()),
        Nested => Err(Failure::Unsent),
        NestedHandled | Overrun => Err(Failure::Unsent),
        Hang => {
            assert!(
                matches!(outcome, Err(Failure::Cut(_))),
                "{}, {}: {outcome:?}",
                row.name,
                MARKINGS[i]
            );
            return;
        }
    };
    assert_eq!(outcome, &expected, "{}, {}: outcome", row.name, MARKINGS[i]);
}

// Columns: #[idempotent], key = ..., on = unsent, on = path (a predicate that retries
// every retryable class). Each row's script ends in a success.

const PERMANENT: Row = Row {
    name: "its own error, permanent",
    acts: &[Fail(Own::Permanent), Succeed],
    attempts: [1, 1, 1, 1],
};

// Can fail: `on = unsent` retrying a transient failure.
const TRANSIENT: Row = Row {
    name: "its own error, transient",
    acts: &[Fail(Own::Transient), Succeed],
    attempts: [2, 2, 1, 2],
};

// Uncertain twice: `uncertain_attempts` (2) ends the marked calls after the second; a
// predicate's `true` is a transient failure, with no such limit.
const UNCERTAIN: Row = Row {
    name: "its own error, uncertain",
    acts: &[Fail(Uncertain), Fail(Uncertain), Succeed],
    attempts: [2, 2, 1, 3],
};

const UNSENT: Row = Row {
    name: "its own error, unsent",
    acts: &[Fail(Unsent), Fail(Unsent), Succeed],
    attempts: [3, 3, 3, 3],
};

const RETRY_AFTER: Row = Row {
    name: "its own error, with Retry-After",
    acts: &[Fail(Pushback), Succeed],
    attempts: [2, 2, 1, 2],
};

const NESTED: Row = Row {
    name: "a nested call gave up",
    acts: &[Nested, Succeed],
    attempts: [1, 1, 1, 1],
};

const NESTED_HANDLED: Row = Row {
    name: "a nested call gave up, handled, then its own unsent failure",
    acts: &[NestedHandled, Succeed],
    attempts: [2, 2, 2, 2],
};

#[tokio::test(start_paused = true)]
async fn a_permanent_failure_is_never_retried() {
    check_async(&PERMANENT, None).await;
}

#[test]
fn a_permanent_failure_is_never_retried_blocking() {
    check_blocking(&PERMANENT);
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_retried_unless_only_unsent_is_safe() {
    check_async(&TRANSIENT, None).await;
}

#[test]
fn a_transient_failure_is_retried_unless_only_unsent_is_safe_blocking() {
    check_blocking(&TRANSIENT);
}

#[tokio::test(start_paused = true)]
async fn an_uncertain_failure_is_retried_within_its_limit_unless_only_unsent_is_safe() {
    check_async(&UNCERTAIN, None).await;
}

#[test]
fn an_uncertain_failure_is_retried_within_its_limit_unless_only_unsent_is_safe_blocking() {
    check_blocking(&UNCERTAIN);
}

#[tokio::test(start_paused = true)]
async fn an_unsent_failure_is_retried_by_every_marking() {
    check_async(&UNSENT, None).await;
}

#[test]
fn an_unsent_failure_is_retried_by_every_marking_blocking() {
    check_blocking(&UNSENT);
}

// The server's wait is honoured by the classified markings (100 ms, spread by up to a
// fifth of it, and rounded up to tokio's millisecond); a predicate's `true` waits the
// backoff (10 ms).
#[tokio::test(start_paused = true)]
async fn a_retry_after_is_honoured_unless_only_unsent_is_safe() {
    let seen = check_async(&RETRY_AFTER, None).await;
    for (_, took) in &seen[..2] {
        assert!(*took >= ms(100) && *took <= ms(121), "{took:?}");
    }
    assert_eq!(seen[2].1, Duration::ZERO);
    assert_eq!(seen[3].1, ms(10));
}

#[test]
fn a_retry_after_is_honoured_unless_only_unsent_is_safe_blocking() {
    check_blocking(&RETRY_AFTER);
}

// The case: a request that leaves, and whose answer is late. An attempt cut at
// its `attempt_timeout` may have taken effect.
// Can fail: a cut attempt was transient for every marking (the payment sent 6 times).
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_at_its_timeout_is_retried_unless_only_unsent_is_safe() {
    let row = Row {
        name: "cut by attempt_timeout",
        acts: &[Hang, Succeed],
        attempts: [2, 2, 1, 2],
    };
    let seen = check_async(&row, None).await;
    assert_eq!(seen[2].1, ms(1000), "returned at the cut");
    assert_eq!(seen[0].1, ms(1010), "cut, waited 10 ms, succeeded");
}

// An attempt cut at the deadline leaves no time for another, whatever the marking; the
// unsent failure before it was retried by all.
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_at_the_deadline_is_never_retried() {
    let row = Row {
        name: "cut by the deadline",
        acts: &[Fail(Unsent), Hang, Succeed],
        attempts: [2, 2, 2, 2],
    };
    for (_, took) in check_async(&row, Some(ms(500))).await {
        assert_eq!(took, ms(500));
    }
}

// A blocking attempt cannot be cut: one that runs past the deadline and then fails is
// not retried, whatever the marking.
#[test]
fn an_attempt_that_overran_the_deadline_is_never_retried_blocking() {
    let row = Row {
        name: "ran past the deadline",
        acts: &[Fail(Unsent), Overrun, Succeed],
        attempts: [2, 2, 2, 2],
    };
    std::thread::scope(|threads| {
        for (i, call) in blocking_calls().into_iter().enumerate() {
            let row = &row;
            threads.spawn(move || {
                let script = Script::new(row.acts);
                let outcome = call(&script, &IdempotencyKey::new());
                assert_eq!(script.calls(), row.attempts[i], "{}", MARKINGS[i]);
                assert_eq!(outcome, Err(Failure::Unsent));
            });
        }
    });
}

// A nested call's failure was retried there: no layer above retries it, although its
// class (unsent) is one every marking retries of its own failures.
#[tokio::test(start_paused = true)]
async fn a_nested_give_up_is_never_retried() {
    check_async(&NESTED, None).await;
}

#[test]
fn a_nested_give_up_is_never_retried_blocking() {
    check_blocking(&NESTED);
}

// The explicit rule stays: a body that handled the nested failure has its own failure
// retried by its class.
#[tokio::test(start_paused = true)]
async fn a_handled_nested_failure_leaves_the_bodys_own_to_its_class() {
    check_async(&NESTED_HANDLED, None).await;
}

#[test]
fn a_handled_nested_failure_leaves_the_bodys_own_to_its_class_blocking() {
    check_blocking(&NESTED_HANDLED);
}

#[retry(layers = "every", base = "10ms", jitter = "none", budget = NO_LIMIT)]
#[idempotent]
async fn every_layer(script: &Script) -> Result<u32, Failure> {
    play(script, &IdempotencyKey::new()).await
}

#[retry(layers = "every", base = "1ms", jitter = "none", budget = NO_LIMIT)]
#[idempotent]
fn every_layer_blocking(script: &Script) -> Result<u32, Failure> {
    play_blocking(script, &IdempotencyKey::new())
}

static EVERY_BUT_UNSENT: Policy = Policy::new()
    .with_layers(Layers::Every)
    .with_repeat(Repeat::OnlyUnsent)
    .with_budget(&NO_LIMIT);

// `layers = "every"` retries a nested give-up when the function is safe to repeat; a
// policy that repeats only unsent attempts never does (the macros refuse the pair: this
// is the runtime's own rule, for a policy made by hand).
// Can fail: an only-unsent policy honouring `Layers::Every`.
#[tokio::test(start_paused = true)]
async fn every_layer_retries_a_nested_give_up_only_where_safe() {
    let script = Script::new(&[Nested, Succeed]);
    assert_eq!(every_layer(&script).await, Ok(2));
    assert_eq!((script.calls(), script.nested()), (2, 2));

    let script = Script::new(&[Nested, Succeed]);
    let key = IdempotencyKey::new();
    let outcome = retry_fn(&EVERY_BUT_UNSENT, || play(&script, &key)).await;
    assert_eq!(outcome, Err(Failure::Unsent));
    assert_eq!((script.calls(), script.nested()), (1, 2));
}

#[test]
fn every_layer_retries_a_nested_give_up_only_where_safe_blocking() {
    let script = Script::new(&[Nested, Succeed]);
    assert_eq!(every_layer_blocking(&script), Ok(2));
    assert_eq!((script.calls(), script.nested()), (2, 2));

    let script = Script::new(&[Nested, Succeed]);
    let key = IdempotencyKey::new();
    let outcome = persevere::retry_blocking(&EVERY_BUT_UNSENT, || play_blocking(&script, &key));
    assert_eq!(outcome, Err(Failure::Unsent));
    assert_eq!((script.calls(), script.nested()), (1, 2));
}

/// The guarded functions of the four markings.
fn guarded_async() -> [(AsyncCall, &'static CircuitBreaker); 4] {
    [
        (
            |s, k| Box::pin(idempotent_fn::guarded(s, k)),
            &idempotent_fn::BREAKER,
        ),
        (|s, k| Box::pin(keyed::guarded(s, k)), &keyed::BREAKER),
        (|s, k| Box::pin(unsent::guarded(s, k)), &unsent::BREAKER),
        (
            |s, k| Box::pin(predicate::guarded(s, k)),
            &predicate::BREAKER,
        ),
    ]
}

fn guarded_blocking() -> [(BlockingCall, &'static CircuitBreaker); 4] {
    [
        (
            idempotent_fn::guarded_blocking,
            &idempotent_fn::BLOCKING_BREAKER,
        ),
        (keyed::guarded_blocking, &keyed::BLOCKING_BREAKER),
        (unsent::guarded_blocking, &unsent::BLOCKING_BREAKER),
        (predicate::guarded_blocking, &predicate::BLOCKING_BREAKER),
    ]
}

// A breaker that opens at a failure every marking would retry (unsent) ends the call
// with that failure; the next call is refused before any attempt, with `CircuitOpen`.
#[tokio::test(start_paused = true)]
async fn a_breaker_refusal_is_never_retried() {
    for (i, (call, breaker)) in guarded_async().into_iter().enumerate() {
        breaker.reset();
        let script = Script::new(&[Fail(Unsent), Succeed]);
        let key = IdempotencyKey::new();
        assert_eq!(
            call(&script, &key).await,
            Err(Failure::Unsent),
            "{}",
            MARKINGS[i]
        );
        assert_eq!(
            script.calls(),
            1,
            "{}: opened at the first failure",
            MARKINGS[i]
        );
        let refused = call(&script, &key).await;
        assert!(matches!(refused, Err(Failure::Open(_))), "{refused:?}");
        assert_eq!(
            script.calls(),
            1,
            "{}: refused without an attempt",
            MARKINGS[i]
        );
    }
}

#[test]
fn a_breaker_refusal_is_never_retried_blocking() {
    for (i, (call, breaker)) in guarded_blocking().into_iter().enumerate() {
        breaker.reset();
        let script = Script::new(&[Fail(Unsent), Succeed]);
        let key = IdempotencyKey::new();
        assert_eq!(call(&script, &key), Err(Failure::Unsent), "{}", MARKINGS[i]);
        assert_eq!(script.calls(), 1, "{}", MARKINGS[i]);
        assert!(matches!(call(&script, &key), Err(Failure::Open(_))));
        assert_eq!(script.calls(), 1, "{}", MARKINGS[i]);
    }
}

#[retry(hedge = "10ms", base = "10ms", budget = NO_LIMIT)]
#[idempotent]
async fn hedged(script: &Script) -> Result<u32, Failure> {
    play(script, &IdempotencyKey::new()).await
}

#[retry(key = key, hedge = "10ms", base = "10ms", budget = NO_LIMIT)]
async fn hedged_keyed(script: &Script, key: &IdempotencyKey) -> Result<u32, Failure> {
    play(script, key).await
}

#[retry(on = retryable, hedge = "10ms", base = "10ms", budget = NO_LIMIT)]
#[idempotent]
async fn hedged_predicate(script: &Script) -> Result<u32, Failure> {
    play(script, &IdempotencyKey::new()).await
}

// The copy that loses is dropped when the other wins, and never made again. (`on =
// unsent` with `hedge` does not compile: tests/ui/hedge-not-idempotent.rs.)
#[tokio::test(start_paused = true)]
async fn a_lost_hedge_is_never_retried() {
    let key = IdempotencyKey::new();
    for i in 0..3 {
        let script = Script::new(&[Hang, Succeed]);
        let start = Instant::now();
        let outcome = match i {
            0 => hedged(&script).await,
            1 => hedged_keyed(&script, &key).await,
            _ => hedged_predicate(&script).await,
        };
        assert_eq!(outcome, Ok(2));
        assert_eq!(start.elapsed(), ms(10));
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(script.calls(), 2);
    }
}

static HEDGE: persevere::__private::Hedge = persevere::__private::Hedge::after(ms(10));
static ONLY_UNSENT: Policy = Policy::new()
    .with_repeat(Repeat::OnlyUnsent)
    .with_attempt_timeout(Some(ms(100)))
    .with_budget(&NO_LIMIT);

// The hedging driver sends no copy for a policy that repeats only unsent attempts,
// made by hand past the macros' check.
// Can fail: a copy sent at 10 ms beside the hanging attempt.
#[tokio::test(start_paused = true)]
async fn a_policy_that_repeats_only_unsent_sends_no_hedge() {
    use persevere::__private::{Handling, Unused, ViaDebug, hedged};
    let script = Script::new(&[Hang, Succeed]);
    let key = IdempotencyKey::new();
    let handling = Handling::new(
        |e: &Failure| e.classify(),
        ViaDebug,
        Unused,
        |cut| Err(Failure::Cut(cut)),
        Unused,
    );
    let outcome = hedged(&ONLY_UNSENT, &HEDGE, || play(&script, &key), handling).await;
    assert!(matches!(outcome, Err(Failure::Cut(_))), "{outcome:?}");
    assert_eq!(script.calls(), 1);
}

static SENT: AtomicU32 = AtomicU32::new(0);

/// The request leaves at once; its answer takes a second.
async fn send_payment() {
    SENT.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[retry(on = unsent, attempt_timeout = "100ms", deadline = "5s", budget = NO_LIMIT)]
async fn charge() -> std::io::Result<u32> {
    send_payment().await;
    Ok(1)
}

// The example, as a new user wrote it.
// Can fail: today's code sent the payment 6 times.
#[tokio::test(start_paused = true)]
async fn a_payment_whose_answer_is_late_is_sent_once() {
    let start = Instant::now();
    let error = charge().await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(SENT.load(Ordering::SeqCst), 1);
    assert_eq!(start.elapsed(), ms(100));
    let stats = persevere::stats::get("charge").unwrap();
    assert_eq!(stats.failed.may_have_taken_effect, 1);
    assert_eq!(stats.failed.total(), 1);
    assert_eq!((stats.requests, stats.attempts, stats.retries), (1, 1, 0));
    assert_eq!(
        persevere::GiveUp::MayHaveTakenEffect.to_string(),
        "the attempt may have taken effect, and only one that provably did not is safe to repeat"
    );
}

/// The acts a property test draws from, async: everything an attempt can do.
fn any_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        Just(Succeed),
        Just(Fail(Own::Permanent)),
        Just(Fail(Own::Transient)),
        Just(Fail(Uncertain)),
        Just(Fail(Pushback)),
        Just(Hang),
        Just(Nested),
        // Unsent three times as often, so that sequences run long.
        Just(Fail(Unsent)),
        Just(Fail(Unsent)),
        Just(Fail(Unsent)),
    ]
}

/// How many attempts a call of an only-unsent function makes on `acts`: up to and
/// including the first that may have taken effect (anything but an unsent failure), at
/// most the policy's 6.
fn attempts_until_effect(acts: &[Act]) -> u32 {
    let first = acts
        .iter()
        .position(|act| *act != Fail(Unsent))
        .unwrap_or(acts.len());
    (first as u32 + 1).min(6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // Random sequences of outcomes through a function marked only `on = unsent`: no
    // attempt is made after one that may have taken effect, and the call returns that
    // attempt's outcome.
    #[test]
    fn no_attempt_follows_one_that_may_have_taken_effect(
        acts in proptest::collection::vec(any_act(), 0..9)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let script = Script::new(&acts);
        let outcome = runtime.block_on(unsent::call(&script, &IdempotencyKey::new()));
        let made = attempts_until_effect(&acts);
        prop_assert_eq!(script.calls(), made);
        let row = Row { name: "random", acts: Vec::leak(acts.clone()), attempts: [0, 0, made, 0] };
        check_outcome(&row, 2, &outcome);
    }

    #[test]
    fn no_attempt_follows_one_that_may_have_taken_effect_blocking(
        acts in proptest::collection::vec(
            any_act().prop_filter("a blocking attempt cannot be cut", |act| *act != Hang),
            0..9,
        )
    ) {
        let script = Script::new(&acts);
        let outcome = unsent::call_blocking(&script, &IdempotencyKey::new());
        let made = attempts_until_effect(&acts);
        prop_assert_eq!(script.calls(), made);
        let row = Row { name: "random", acts: Vec::leak(acts.clone()), attempts: [0, 0, made, 0] };
        check_outcome(&row, 2, &outcome);
    }
}
