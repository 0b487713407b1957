//! What `#[retry]` costs a call, against a direct call and against peer crates.
//!
//! `cargo bench --manifest-path integration/benches/default-features/Cargo.toml --bench
//! overhead`. Compare within a group only: the variants of one group run in one process,
//! one after another, so their ratios hold even on a busy machine better than their
//! absolute times do. For numbers that do not move with the
//! load, count instructions with `benches/instructions.rs` under callgrind.
//!
//! Groups:
//! - `async_ok`: an async fn that succeeds at once, polled on a current-thread runtime:
//!   direct, `#[retry]` (default policy), backon, tokio-retry, tower's retry;
//! - `async_once`: one transient failure, then success, with a zero wait; the baseline
//!   is the loop one would write by hand;
//! - `sync`: the same on a plain fn;
//! - `shared_budget`: a `static RetryBudget` written from one thread, then from both
//!   cores at once.

use std::future::Future;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use tokio::runtime::Runtime;

mod support;
use support::*;

/// Benchmarks `call` as `name` in `group`, after checking that it returns `Ok(2)` for 1.
/// `call` is a function item, so each variant is its own, directly called, code.
fn bench_async<Fut>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    name: &str,
    call: impl Fn(u64) -> Fut + Copy,
) where
    Fut: Future<Output = Result<u64, Failure>>,
{
    assert_eq!(rt.block_on(call(1)), Ok(2), "{name}");
    group.bench_function(name, |b| b.to_async(rt).iter(|| call(black_box(1))));
}

fn async_ok(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("async_ok");
    bench_async(&mut group, &rt, "direct", direct);
    bench_async(&mut group, &rt, "retry", retried);
    bench_async(&mut group, &rt, "backon", backon_call);
    bench_async(&mut group, &rt, "tokio-retry", tokio_retry_call);
    bench_async(&mut group, &rt, "tower", tower_call);
    group.finish();
}

fn async_once(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("async_once");
    bench_async(&mut group, &rt, "hand-loop", hand_loop_once);
    bench_async(&mut group, &rt, "retry", retry_once);
    bench_async(&mut group, &rt, "backon", backon_once);
    bench_async(&mut group, &rt, "tokio-retry", tokio_retry_once);
    bench_async(&mut group, &rt, "tower", tower_once);
    group.finish();
}

fn sync(c: &mut Criterion) {
    assert_eq!(retried_sync(1), Ok(2));
    assert_eq!(retry_once_sync(1), Ok(2));
    let mut group = c.benchmark_group("sync");
    group.bench_function("direct", |b| b.iter(|| direct_sync(black_box(1))));
    group.bench_function("retry", |b| b.iter(|| retried_sync(black_box(1))));
    group.bench_function("once/hand-loop", |b| {
        b.iter(|| hand_loop_once_sync(black_box(1)))
    });
    group.bench_function("once/retry", |b| b.iter(|| retry_once_sync(black_box(1))));
    group.finish();
}

/// Runs `f(thread)` `iters` times on each of `threads` threads started together; the
/// time the slowest thread took.
fn on_threads(threads: usize, iters: u64, f: impl Fn(usize) + Sync) -> Duration {
    let start = Barrier::new(threads);
    let (start, f) = (&start, &f);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads)
            .map(|thread| {
                s.spawn(move || {
                    start.wait();
                    let began = Instant::now();
                    for _ in 0..iters {
                        f(thread);
                    }
                    began.elapsed()
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a benchmark thread"))
            .max()
            .unwrap_or_default()
    })
}

fn shared_budget(c: &mut Criterion) {
    static DEPOSITS: persevere::RetryBudget = persevere::RetryBudget::new();
    static WITHDRAWALS: persevere::RetryBudget = persevere::RetryBudget::unlimited();
    let mut group = c.benchmark_group("shared_budget");
    for threads in [1, 2] {
        group.bench_function(format!("direct/{threads}t"), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, |_| {
                    let _ = black_box(direct_sync(black_box(1)));
                })
            })
        });
        group.bench_function(format!("deposit/{threads}t"), |b| {
            b.iter_custom(|iters| on_threads(threads, iters, |_| DEPOSITS.deposit(Instant::now())))
        });
        group.bench_function(format!("deposit+withdraw/{threads}t"), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, |_| {
                    let now = Instant::now();
                    WITHDRAWALS.deposit(now);
                    black_box(WITHDRAWALS.withdraw(now));
                })
            })
        });
        // One function called from every thread: its statistics are shared too.
        group.bench_function(format!("retry-same-fn/{threads}t"), |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, |_| {
                    let _ = black_box(shared_budget_a(black_box(1)));
                })
            })
        });
    }
    // Two functions that share only the budget, one per thread.
    group.bench_function("retry-two-fns/2t", |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, |thread| {
                let call = if thread == 0 {
                    shared_budget_a
                } else {
                    shared_budget_b
                };
                let _ = black_box(call(black_box(1)));
            })
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(1500))
        .measurement_time(Duration::from_secs(4))
        .noise_threshold(0.03)
}

criterion_group! {
    name = benches;
    config = config();
    targets = async_ok, async_once, sync, shared_budget
}
criterion_main!(benches);
