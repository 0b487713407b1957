//! What a default `RetryBudget` grants over different histories of traffic: the figures
//! of BENCHMARKS.md's "The budget over any history".
//!
//! ```text
//! cargo run --release -p persevere-integration --example budget
//! ```
//!
//! Each scenario but one drives a budget directly, with instants it makes up (no
//! runtime, no sleeping): a call deposits its request and asks for retries, up to the
//! default policy's 5, while its dependency fails. The rare caller, whose calls succeed
//! after retrying, goes through the real runtime under tokio's paused clock. The
//! thread's random numbers are seeded, so the figures are the same on every run.

use std::time::{Duration, Instant};

use persevere::RetryBudget;

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A call at `now` of a total outage, retried while the budget grants it, up to 5
/// retries: its retries.
fn call(budget: &RetryBudget, now: Instant) -> u32 {
    budget.deposit(now);
    (0..5).take_while(|_| budget.withdraw(now)).count() as u32
}

/// `n` calls of a total outage, `gap` apart from `start`: the retries of each.
fn outage(budget: &RetryBudget, start: Instant, gap: Duration, n: u32) -> Vec<u32> {
    (0..n).map(|i| call(budget, start + gap * i)).collect()
}

/// Of 30 calls a minute apart through the real runtime (`retry_fn`, under tokio's paused
/// clock, so that a call that succeeds after retrying gives its half token back), each
/// failing twice before it succeeds: how many succeed.
fn rare_caller() -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused runtime");
    runtime.block_on(async {
        let budget: &'static RetryBudget = Box::leak(Box::new(RetryBudget::new()));
        let policy = persevere::Policy::new().with_budget(budget);
        let mut succeeded = 0;
        for _ in 0..30 {
            let tries = std::cell::Cell::new(0);
            let outcome: std::io::Result<()> = persevere::retry_fn(&policy, || {
                tries.set(tries.get() + 1);
                let fail = tries.get() <= 2;
                async move {
                    if fail {
                        Err(std::io::ErrorKind::ConnectionReset.into())
                    } else {
                        Ok(())
                    }
                }
            })
            .await;
            succeeded += usize::from(outcome.is_ok());
            tokio::time::sleep(secs(60)).await;
        }
        succeeded
    })
}

/// 20,000 calls that succeed within one second, from `start`.
fn burst(budget: &RetryBudget, start: Instant) {
    for i in 0..20_000u32 {
        budget.deposit(start + Duration::from_micros(50) * i);
    }
}

fn most_in_any(per_call: &[u32], width: usize) -> u32 {
    per_call
        .windows(width)
        .map(|w| w.iter().sum())
        .max()
        .unwrap_or(0)
}

fn outage_row(name: &str, history: impl FnOnce(&RetryBudget, Instant) -> Instant) {
    let budget = RetryBudget::new();
    let start = history(&budget, Instant::now());
    let per_call = outage(&budget, start, secs(1), 400);
    let total: u32 = per_call.iter().sum();
    println!(
        "{name:<52} {:>8.2}x {:>10}",
        1.0 + f64::from(total) / 400.0,
        most_in_any(&per_call, 100)
    );
}

fn main() {
    persevere::seed_thread_rng(1);
    println!(
        "{:<52} {:>9} {:>10}",
        "an outage at a call a second, after", "400 calls", "most /100"
    );
    outage_row("nothing (a fresh process)", |_, start| start);
    outage_row(
        "a burst of 20,000 calls, then an hour of quiet",
        |budget, start| {
            burst(budget, start);
            start + secs(3601)
        },
    );
    outage_row(
        "a burst of 20,000 calls, then 10 s of quiet",
        |budget, start| {
            burst(budget, start);
            start + secs(11)
        },
    );
    outage_row("a busy day at a call a second", |budget, start| {
        for i in 0..86_400 {
            budget.deposit(start + secs(i));
        }
        start + secs(86_400)
    });

    println!(
        "\n{:<52} {:>9}",
        "a lone call (retries of 5 it asks for)", "granted"
    );
    let budget = RetryBudget::new();
    let start = Instant::now();
    println!("{:<52} {:>9}", "in a fresh process", call(&budget, start));
    let drained = outage(&budget, start + secs(1), secs(1), 100);
    let last = start + secs(u64::from(drained.len() as u32));
    println!(
        "{:<52} {:>9}",
        "after an outage drained it, and 5 minutes of quiet",
        call(&budget, last + secs(300))
    );

    println!(
        "\na call a minute, failing twice before it succeeds: {} of 30 succeed",
        rare_caller()
    );
    let budget = RetryBudget::new();
    let per_call = outage(&budget, start, secs(60), 120);
    let total: u32 = per_call[20..].iter().sum();
    println!(
        "a call a minute, in a total outage: {:.2}x its load (calls 21 to 120)",
        1.0 + f64::from(total) / 100.0
    );
}
