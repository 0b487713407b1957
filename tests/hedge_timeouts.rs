//! A hedged copy is an attempt: it is cut at its own `attempt_timeout`, counted from
//! when it was sent (within the call's deadline), not at the limit of the attempt it
//! hedges; and what runs inside it sees its own limit as its deadline.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{AttemptTimedOut, Limit, RetryBudget, idempotent, retry};
use tokio::time::Instant;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Each attempt, by the order it starts in, takes its duration and then succeeds with
/// its number; `None` hangs. Records when each attempt started and when it ended or was
/// dropped (ms after `origin`), and what it saw as its deadline.
struct Script {
    takes: Vec<Option<u64>>,
    origin: Instant,
    started: AtomicU32,
    log: Mutex<Vec<(u32, u64, u64)>>,
    remaining: Mutex<Vec<Option<Duration>>>,
}

impl Script {
    fn new(takes: &[Option<u64>]) -> Self {
        Self {
            takes: takes.to_vec(),
            origin: Instant::now(),
            started: AtomicU32::new(0),
            log: Mutex::new(Vec::new()),
            remaining: Mutex::new(Vec::new()),
        }
    }

    fn at(&self) -> u64 {
        (Instant::now() - self.origin).as_millis() as u64
    }

    async fn attempt(&self) -> Result<u32, TimedOut> {
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        self.remaining
            .lock()
            .unwrap()
            .push(persevere::deadline::remaining());
        // Logs the attempt's end, whether it ran to it or was dropped.
        struct Ends<'a>(&'a Script, u32, u64);
        impl Drop for Ends<'_> {
            fn drop(&mut self) {
                let at = self.0.at();
                self.0.log.lock().unwrap().push((self.1, self.2, at));
            }
        }
        let _ends = Ends(self, n, self.at());
        match self.takes[(n as usize).min(self.takes.len() - 1)] {
            Some(takes) => tokio::time::sleep(ms(takes)).await,
            None => std::future::pending().await,
        }
        Ok(n + 1)
    }

    /// (attempt, started, ended) for each attempt, by attempt.
    fn log(&self) -> Vec<(u32, u64, u64)> {
        let mut log = self.log.lock().unwrap().clone();
        log.sort();
        log
    }
}

/// The functions' error: what cut the attempt, or a failure of the dependency.
#[derive(Debug, persevere::Classify)]
enum TimedOut {
    #[timed_out]
    Cut(AttemptTimedOut),
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self::Cut(cut) = self;
        write!(f, "{cut}")
    }
}

impl std::error::Error for TimedOut {}

#[retry(attempt_timeout = "50ms", hedge = "30ms", budget = UNLIMITED)]
#[idempotent]
async fn own_limit(script: &Script) -> Result<u32, TimedOut> {
    script.attempt().await
}

// The case: the first hangs, the copy sent at 30 ms answers 40 ms later, at
// 70 ms, past the first's limit (50 ms) but within its own (80 ms), and wins.
// Can fail: the copy cut with the first at 50 ms (the call then retries, ending later).
#[tokio::test(start_paused = true)]
async fn a_copy_runs_to_its_own_limit_past_the_first_s() {
    let script = Script::new(&[None, Some(40)]);
    assert_eq!(own_limit(&script).await.unwrap(), 2);
    assert_eq!(script.at(), 70);
    // The first was dropped at its own limit, the copy ran to its answer.
    assert_eq!(script.log(), vec![(0, 0, 50), (1, 30, 70)]);
}

#[retry(attempts = 1, attempt_timeout = "50ms", hedge = "30ms", budget = UNLIMITED)]
#[idempotent]
async fn all_hang(script: &Script) -> Result<u32, TimedOut> {
    script.attempt().await
}

// Every copy hangs: the first is dropped at 50 ms, the copy is cut at its own limit,
// 80 ms, and the call fails with the cut of an attempt timeout of 50 ms.
// Can fail: the attempt cut at 50 ms, or never; the error saying the deadline cut it.
#[tokio::test(start_paused = true)]
async fn each_copy_is_cut_at_its_own_limit() {
    let script = Script::new(&[None]);
    let TimedOut::Cut(cut) = all_hang(&script).await.unwrap_err();
    assert_eq!(script.at(), 80);
    assert_eq!(script.log(), vec![(0, 0, 50), (1, 30, 80)]);
    assert_eq!(cut.cut_by(), Limit::AttemptTimeout);
    assert_eq!(cut.limit(), ms(50));
}

#[retry(
    attempts = 1,
    attempt_timeout = "50ms",
    hedge = "30ms",
    hedges = 2,
    budget = UNLIMITED
)]
#[idempotent]
async fn three_copies(script: &Script) -> Result<u32, TimedOut> {
    script.attempt().await
}

// Copies at 0, 30 and 60 ms, each cut at its own limit (50, 80, 110 ms): the earlier
// ones while a later one runs on.
// Can fail: the second copy left running past 80 ms, or the whole cut at 50 ms.
#[tokio::test(start_paused = true)]
async fn with_several_copies_each_earlier_one_is_dropped_at_its_limit() {
    let script = Script::new(&[None]);
    let TimedOut::Cut(cut) = three_copies(&script).await.unwrap_err();
    assert_eq!(script.at(), 110);
    assert_eq!(script.log(), vec![(0, 0, 50), (1, 30, 80), (2, 60, 110)]);
    assert_eq!(cut.limit(), ms(50));
}

#[retry(
    attempts = 1,
    deadline = "60ms",
    attempt_timeout = "50ms",
    hedge = "30ms",
    budget = UNLIMITED
)]
#[idempotent]
async fn within_deadline(script: &Script) -> Result<u32, TimedOut> {
    script.attempt().await
}

// A copy's limit falls within the call's deadline: sent at 30 ms, it is cut at the
// deadline, 60 ms, not at 80 ms; the error says the deadline cut it. What runs inside
// each copy sees its own limit: 50 ms for the first, 30 ms for the copy.
// Can fail: the copy outliving the deadline; a copy seeing the first's limit (20 ms).
#[tokio::test(start_paused = true)]
async fn a_copy_s_limit_falls_within_the_deadline() {
    let script = Script::new(&[None]);
    let TimedOut::Cut(cut) = within_deadline(&script).await.unwrap_err();
    assert_eq!(script.at(), 60);
    assert_eq!(script.log(), vec![(0, 0, 50), (1, 30, 60)]);
    assert_eq!(cut.cut_by(), Limit::Deadline);
    assert_eq!(
        *script.remaining.lock().unwrap(),
        vec![Some(ms(50)), Some(ms(30))]
    );
}

#[retry(attempt_timeout = "50ms", hedge = "30ms", budget = UNLIMITED)]
#[idempotent]
async fn sees_own_limit(script: &Script) -> Result<u32, TimedOut> {
    script.attempt().await
}

// A copy within a long deadline sees its own attempt timeout as what remains: 50 ms.
#[tokio::test(start_paused = true)]
async fn a_copy_sees_its_own_limit_as_its_deadline() {
    let script = Script::new(&[None, Some(10)]);
    assert_eq!(sees_own_limit(&script).await.unwrap(), 2);
    assert_eq!(
        *script.remaining.lock().unwrap(),
        vec![Some(ms(50)), Some(ms(50))]
    );
}
