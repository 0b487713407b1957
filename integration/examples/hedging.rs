//! Hedged attempts against a server with a slow tail: what `hedge = ...` does to the
//! latency of calls, and what it costs the server in requests.
//!
//! ```text
//! cargo run --release -p persevere-integration --example hedging
//! ```
//!
//! An axum server on 127.0.0.1 answers 2 % of its requests after 1 s and the rest after
//! about 2 ms, each request drawn from a seeded generator (a fresh server with the same
//! seed for each run, so the runs meet the same sequence of slow requests). One reqwest
//! client makes 10,000 calls, 20 at a time, through three `#[retry]` functions with the
//! defaults (each with its own default retry budget) and a deadline of 10 s:
//!
//! - `unhedged`: no hedging;
//! - `hedged_10ms`: `hedge = "10ms"`, a copy of any attempt still running after 10 ms;
//! - `hedged_p95`: `hedge = "p95"`, a copy after the 95th percentile of the function's
//!   recent latencies (none for its first 100 attempts, while it learns them).
//!
//! For each it prints the latency of calls (p50, p99, p99.9, max), the calls that took
//! half a slow request or more (those that waited for one), the extra requests the
//! server received (its requests per call, less one) and the hedges sent, won and
//! refused by the budget, from `persevere::stats`.
//!
//! Then the worst case for hedging: every request takes 1 s, so every call wants a copy
//! after 10 ms (2,000 calls, 200 at a time). The copies are paid for from the function's
//! retry budget like retries, so the extra requests stay within its bound: 2 + 10 % of
//! the calls + 1, not one copy per call.
//!
//! It prints the results as a Markdown table, and whether each target is met: p99 and
//! p99.9 at least 10x lower with either hedge, at most 6 % extra requests with `p95`,
//! and the all-slow run within the budget. About 28 s in release on a 2-core VM: 12 s
//! for the unhedged run, which waits out its slow requests, and 10 s for the all-slow
//! one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use persevere::reqwest::{RequestError, ResponseExt};
use persevere::{idempotent, retry};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use reqwest::Client;
use tokio::net::TcpSocket;
use tokio::task::JoinSet;

/// The generator's seed: every run of the example meets the same slow requests.
const SEED: u64 = 41;

/// The mixed runs: calls, calls in flight at once, the share of slow requests.
const CALLS: usize = 10_000;
const CONCURRENCY: usize = 20;
const SLOW_SHARE: f64 = 0.02;

/// The all-slow run.
const ALL_SLOW_CALLS: usize = 2_000;
const ALL_SLOW_CONCURRENCY: usize = 200;

const FAST: Duration = Duration::from_millis(2);
const SLOW: Duration = Duration::from_secs(1);

/// The dependency: a server whose requests are slow at random, at a fixed share.
struct Dependency {
    requests: AtomicU64,
    slow_share: f64,
    draws: Mutex<SmallRng>,
}

async fn item(State(dependency): State<Arc<Dependency>>) -> &'static str {
    dependency.requests.fetch_add(1, Ordering::Relaxed);
    let share = dependency.slow_share;
    let slow = share >= 1.0 || dependency.draws.lock().unwrap().random_bool(share);
    tokio::time::sleep(if slow { SLOW } else { FAST }).await;
    "OK"
}

/// Starts a server on an ephemeral port of 127.0.0.1, slow for `slow_share` of its
/// requests; it runs until the example ends.
async fn serve(slow_share: f64) -> (SocketAddr, Arc<Dependency>) {
    let dependency = Arc::new(Dependency {
        requests: AtomicU64::new(0),
        slow_share,
        draws: Mutex::new(SmallRng::seed_from_u64(SEED)),
    });
    let router = Router::new()
        .route("/item", get(item))
        .with_state(dependency.clone());
    // A backlog of 1,024 rather than the usual 128: 200 clients connect at once in the
    // all-slow run, and a connection the kernel turns away is tried again 1 s later,
    // which would show as calls of 2 s.
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let listener = socket.listen(1024).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, dependency)
}

/// One GET of an item.
async fn get_item(client: &Client, url: &str) -> Result<(), RequestError> {
    client
        .get(url)
        .send()
        .await?
        .error_for_retry()?
        .bytes()
        .await?;
    Ok(())
}

#[retry(deadline = "10s")]
#[idempotent]
async fn unhedged(client: &Client, url: &str) -> Result<(), RequestError> {
    get_item(client, url).await
}

#[retry(deadline = "10s", hedge = "10ms")]
#[idempotent]
async fn hedged_10ms(client: &Client, url: &str) -> Result<(), RequestError> {
    get_item(client, url).await
}

#[retry(deadline = "10s", hedge = "p95")]
#[idempotent]
async fn hedged_p95(client: &Client, url: &str) -> Result<(), RequestError> {
    get_item(client, url).await
}

#[retry(deadline = "10s", hedge = "10ms")]
#[idempotent]
async fn hedged_all_slow(client: &Client, url: &str) -> Result<(), RequestError> {
    get_item(client, url).await
}

/// Which function a run calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Unhedged,
    After10ms,
    P95,
    AllSlow,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Unhedged => "no hedging",
            Variant::After10ms => "`hedge = \"10ms\"`",
            Variant::P95 => "`hedge = \"p95\"`",
            Variant::AllSlow => "every request slow, `hedge = \"10ms\"`",
        }
    }

    fn function(self) -> &'static str {
        match self {
            Variant::Unhedged => "unhedged",
            Variant::After10ms => "hedged_10ms",
            Variant::P95 => "hedged_p95",
            Variant::AllSlow => "hedged_all_slow",
        }
    }

    async fn call(self, client: &Client, url: &str) -> Result<(), RequestError> {
        match self {
            Variant::Unhedged => unhedged(client, url).await,
            Variant::After10ms => hedged_10ms(client, url).await,
            Variant::P95 => hedged_p95(client, url).await,
            Variant::AllSlow => hedged_all_slow(client, url).await,
        }
    }
}

/// What one run measured.
struct Run {
    variant: Variant,
    calls: usize,
    concurrency: usize,
    failed: usize,
    /// The latency of each successful call, sorted.
    latencies: Vec<Duration>,
    server_requests: u64,
    stats: persevere::StatsSnapshot,
    took: Duration,
}

impl Run {
    /// The `q` quantile of the calls' latencies (0.99 for p99).
    fn percentile(&self, q: f64) -> Duration {
        let n = self.latencies.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.latencies[rank - 1]
    }

    fn max(&self) -> Duration {
        *self.latencies.last().unwrap()
    }

    /// Calls that took half a slow request or more: those that waited for one.
    fn slow_calls(&self) -> usize {
        self.latencies.iter().filter(|&&l| l >= SLOW / 2).count()
    }

    /// Requests the server received beyond one per call, as a share of calls.
    fn extra(&self) -> f64 {
        self.server_requests as f64 / self.calls as f64 - 1.0
    }
}

/// Makes `calls` calls through `variant`, `concurrency` at a time, against a fresh
/// server slow for `slow_share` of its requests.
async fn run(
    client: &Client,
    variant: Variant,
    calls: usize,
    concurrency: usize,
    slow_share: f64,
) -> Run {
    let (addr, dependency) = serve(slow_share).await;
    let url: Arc<str> = format!("http://{addr}/item").into();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut failed = 0;
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let call = Instant::now();
                match variant.call(&client, &url).await {
                    Ok(()) => latencies.push(call.elapsed()),
                    Err(error) => {
                        eprintln!("{}: {error}", variant.function());
                        failed += 1;
                    }
                }
            }
            (latencies, failed)
        });
    }
    let mut latencies = Vec::with_capacity(calls);
    let mut failed = 0;
    for (mine, my_failed) in workers.join_all().await {
        latencies.extend(mine);
        failed += my_failed;
    }
    let took = start.elapsed();
    latencies.sort_unstable();
    // A loser's request may still be on its way to the server when its call returns.
    tokio::time::sleep(Duration::from_millis(50)).await;
    Run {
        variant,
        calls,
        concurrency,
        failed,
        latencies,
        server_requests: dependency.requests.load(Ordering::Relaxed),
        stats: persevere::stats::get(variant.function()).expect("called"),
        took,
    }
}

/// A duration in milliseconds, to a tenth below 100 ms.
fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{} ms", thousands(ms.round() as u64))
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(share: f64) -> String {
    format!("{:.2} %", share * 100.0)
}

/// The budget's bound on the copies of `calls` calls: the default budget's reserve (2),
/// its 10 % of requests, and the debt of the last fraction of a token (1).
fn budget_bound(calls: usize) -> f64 {
    2.0 + 0.1 * calls as f64 + 1.0
}

fn print_table(runs: &[Run]) {
    println!(
        "| run | calls (at once) | p50 | p99 | p99.9 | max | calls ≥ 0.5 s | extra requests | hedges sent / won / refused |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for run in runs {
        let s = &run.stats;
        println!(
            "| {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} / {} / {} |",
            run.variant.label(),
            thousands(run.calls as u64),
            run.concurrency,
            ms(run.percentile(0.50)),
            ms(run.percentile(0.99)),
            ms(run.percentile(0.999)),
            ms(run.max()),
            thousands(run.slow_calls() as u64),
            percent(run.extra()),
            thousands(s.hedges),
            thousands(s.hedges_won),
            thousands(s.hedges_refused),
        );
    }
}

/// Prints whether each target is met.
fn check_targets(unhedged: &Run, hedged: &[&Run], p95: &Run, all_slow: &Run) {
    let check = |met: bool, what: String| {
        println!("- {}: {what}", if met { "met" } else { "MISSED" });
    };
    for run in hedged {
        for (name, q) in [("p99", 0.99), ("p99.9", 0.999)] {
            let ratio = unhedged.percentile(q).as_secs_f64() / run.percentile(q).as_secs_f64();
            check(
                ratio >= 10.0,
                format!(
                    "{} with {}: {ratio:.0}x lower than without hedging (target: at least 10x)",
                    name,
                    run.variant.label()
                ),
            );
        }
    }
    check(
        p95.extra() <= 0.06,
        format!(
            "extra requests with {}: {} (target: at most 6 %)",
            p95.variant.label(),
            percent(p95.extra())
        ),
    );
    let bound = budget_bound(all_slow.calls);
    let extra = all_slow.server_requests as f64 - all_slow.calls as f64;
    check(
        extra <= bound,
        format!(
            "every request slow: {} extra requests for {} calls ({}), within the budget's bound of 2 + 10 % of calls + 1 = {bound:.0} ({})",
            extra,
            thousands(all_slow.calls as u64),
            percent(all_slow.extra()),
            percent(bound / all_slow.calls as f64),
        ),
    );
}

#[tokio::main]
async fn main() {
    let client = Client::builder().no_proxy().build().unwrap();
    let started = Instant::now();
    let mut runs = Vec::new();
    for variant in [Variant::Unhedged, Variant::After10ms, Variant::P95] {
        eprintln!("{}: {} calls...", variant.label(), thousands(CALLS as u64));
        runs.push(run(&client, variant, CALLS, CONCURRENCY, SLOW_SHARE).await);
    }
    eprintln!(
        "{}: {} calls...",
        Variant::AllSlow.label(),
        thousands(ALL_SLOW_CALLS as u64)
    );
    runs.push(
        run(
            &client,
            Variant::AllSlow,
            ALL_SLOW_CALLS,
            ALL_SLOW_CONCURRENCY,
            1.0,
        )
        .await,
    );

    println!(
        "{} calls, {} at a time; 2 % of requests take 1 s, the rest about 2 ms. Then every request takes 1 s.\n",
        thousands(CALLS as u64),
        CONCURRENCY
    );
    print_table(&runs);
    println!();
    for run in &runs {
        println!(
            "{}: {} server requests, {} retries, {} failed calls, {:.1} s",
            run.variant.function(),
            thousands(run.server_requests),
            run.stats.retries,
            run.failed,
            run.took.as_secs_f64(),
        );
    }
    println!();
    let [unhedged, after, p95, all_slow] = &runs[..] else {
        unreachable!("four runs")
    };
    check_targets(unhedged, &[after, p95], p95, all_slow);
    println!("\n{:.1} s in all", started.elapsed().as_secs_f64());
}
