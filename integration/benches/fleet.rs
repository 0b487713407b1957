//! The fleet under an outage, in virtual time: how much load retries add to a dependency
//! that is down, and how long they take to die away once it is back.
//!
//! `cargo bench -p persevere-integration --bench fleet` prints a table of load, not of
//! speed. 1,000 clients each start one `#[retry]` call a second, spread over the second,
//! against a dependency that fails every request (transiently) for 60 s and then serves
//! them all. The calls use
//! persevere's real runtime and macros; the clock is tokio's paused one, so the two
//! minutes of each scenario pass in moments, and the jitter is seeded, so every run
//! prints the same figures. It fails (exit code 1) if the defaults amplify the load
//! during the outage by more than the targets, in one process or with a budget per
//! client. It takes about 3 s (30 s unoptimised).

use std::cell::Cell;
use std::process::ExitCode;
use std::rc::Rc;

use persevere::{Policy, RetryBudget, idempotent, retry};

#[path = "../examples/storm/sim.rs"]
#[allow(dead_code)] // Shared with the storm example, which reads more of the report.
mod sim;

use sim::{Dependency, Failure, Report, Timeline, World};

/// 1,000 clients; 20 s of normal service, so that budgets have a window of traffic
/// behind them, then 60 s down, then 40 s up: more than the 30 s deadline, so every
/// call started in the outage has ended.
const WORLD: World = World {
    clients: 1000,
    timeline: Timeline {
        warmup: 20,
        outage: 60,
        tail: 40,
    },
    capacity: None,
    fail: 1.0,
};
const SEED: u64 = 1;
/// The most load the defaults may add during a total outage: the budget's 10 % and some.
const TARGET: f64 = 1.15;
/// The same with a budget per client: the 10 %, and each busy client's floor of 2 spent
/// in the outage's first seconds (2 retries over 60 calls).
const TARGET_PER_CLIENT: f64 = 1.20;

static NO_BUDGET: RetryBudget = RetryBudget::unlimited();

/// Scenario 1: the default policy with nothing to cap the retries but its own attempts.
#[retry(budget = NO_BUDGET)]
#[idempotent]
async fn unbudgeted(dependency: &Dependency, tries: &Cell<u32>) -> Result<(), Failure> {
    dependency.attempt(tries)
}

/// Scenario 2: the defaults, retry budget included. `#[retry]` gives the function one
/// budget in the process, and all 1,000 clients run in this one: they share it.
#[retry]
#[idempotent]
async fn with_defaults(dependency: &Dependency, tries: &Cell<u32>) -> Result<(), Failure> {
    dependency.attempt(tries)
}

/// Scenario 3: three retried functions, each calling the next; only the innermost
/// reaches the dependency. Each has 3 attempts and the defaults otherwise, with the
/// extra arguments given.
macro_rules! stack {
    ($name:ident: $($args:tt)*) => {
        mod $name {
            use super::*;

            #[retry(attempts = 3, $($args)*)]
            #[idempotent]
            pub async fn outer(dependency: &Dependency, tries: &Cell<u32>) -> Result<(), Failure> {
                middle(dependency, tries).await
            }

            #[retry(attempts = 3, $($args)*)]
            #[idempotent]
            async fn middle(dependency: &Dependency, tries: &Cell<u32>) -> Result<(), Failure> {
                inner(dependency, tries).await
            }

            #[retry(attempts = 3, $($args)*)]
            #[idempotent]
            async fn inner(dependency: &Dependency, tries: &Cell<u32>) -> Result<(), Failure> {
                dependency.attempt(tries)
            }
        }
    };
}

stack!(innermost_unbudgeted: layers = "innermost", budget = NO_BUDGET);
stack!(every_unbudgeted: layers = "every", budget = NO_BUDGET);
stack!(innermost_budgeted: layers = "innermost");
stack!(every_budgeted: layers = "every");

/// Runs the fleet with each client making `call`.
fn fleet<Fut>(call: fn(Rc<Dependency>) -> Fut) -> Report
where
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    sim::run(WORLD, SEED, move |_, dependency| call(dependency))
}

/// Scenario 2, as a fleet of 1,000 processes would have it: a default budget per client.
/// The macro cannot give a budget per caller, so this goes through the runtime-only
/// driver with a policy per client.
fn budget_per_client() -> Report {
    let policies: Rc<[Policy]> = (0..WORLD.clients)
        .map(|_| Policy::new().with_budget(Box::leak(Box::new(RetryBudget::new()))))
        .collect();
    sim::run(WORLD, SEED, move |client, dependency| {
        let policies = Rc::clone(&policies);
        async move { sim::call_with(&policies[client as usize], &dependency).await }
    })
}

/// The most attempts that reached the dependency in one second of the outage.
fn peak_in_outage(report: &Report) -> u32 {
    report.outage().iter().map(|s| s.load()).max().unwrap_or(0)
}

/// The seconds of the outage, from the start of the run, whose load was above `factor`
/// times the calls started in them, with that load.
fn seconds_above(report: &Report, factor: f64) -> impl Iterator<Item = (u64, u32)> + '_ {
    let warmup = report.world.timeline.warmup;
    (warmup..)
        .zip(report.outage())
        .filter(move |(_, s)| f64::from(s.load()) > factor * f64::from(s.calls))
        .map(|(t, s)| (t, s.load()))
}

fn main() -> ExitCode {
    let wall = std::time::Instant::now();
    let timeline = WORLD.timeline;
    println!(
        "fleet: {} clients, 1 call/s each, spread over the second; the dependency fails every \
         request (transient) from t = {} s for {} s, then serves them all.",
        WORLD.clients, timeline.warmup, timeline.outage
    );
    println!(
        "policy: the defaults (deadline 30s, attempts 6, base 200ms, cap 20s, full jitter); \
         virtual time, seed {SEED}."
    );
    println!(
        "amplification = attempts reaching the dependency during the outage / calls started \
         during it; peak/s = the most in one second\nof the outage; drain = from recovery to \
         the last retry (after it, the load is the 1,000 calls/s of the clients alone).\n"
    );
    println!(
        "{:<58} {:>8} {:>9} {:>6} {:>7} {:>7}",
        "scenario", "calls", "attempts", "ampl.", "peak/s", "drain"
    );
    let row = |name: &str, report: &Report| {
        println!(
            "{:<58} {:>8} {:>9} {:>5.2}x {:>7} {:>6.1}s",
            name,
            report.outage_calls(),
            report.outage_attempts(),
            report.amplification(),
            peak_in_outage(report),
            report.drain().as_secs_f64()
        );
    };

    row(
        "1  no budget (RetryBudget::unlimited())",
        &fleet(|d| async move { unbudgeted(&d, &Cell::new(0)).await }),
    );
    let defaults = fleet(|d| async move { with_defaults(&d, &Cell::new(0)).await });
    row(
        "2  default budget: one per process, shared by all 1,000",
        &defaults,
    );
    let per_client = budget_per_client();
    row(
        "2b default budget per client (as 1,000 processes)",
        &per_client,
    );
    println!("3  three nested #[retry] layers, attempts = 3 each:");
    row(
        "   layers = \"innermost\" (default), no budget",
        &fleet(|d| async move { innermost_unbudgeted::outer(&d, &Cell::new(0)).await }),
    );
    row(
        "   layers = \"every\", no budget",
        &fleet(|d| async move { every_unbudgeted::outer(&d, &Cell::new(0)).await }),
    );
    row(
        "   layers = \"innermost\" (default), default budgets",
        &fleet(|d| async move { innermost_budgeted::outer(&d, &Cell::new(0)).await }),
    );
    row(
        "   layers = \"every\", default budgets",
        &fleet(|d| async move { every_budgeted::outer(&d, &Cell::new(0)).await }),
    );

    println!(
        "\nScenario 2 runs every client in one process, so the per-function default budget is \
         one budget for the whole fleet;\n2b gives each client its own, as separate processes \
         would have: each spends its floor of 2 retries in the outage's\nfirst seconds \
         (the peak), then its 10 %."
    );
    let bursts: Vec<String> = seconds_above(&defaults, 1.5)
        .map(|(t, load)| format!("t = {t} s: {load}"))
        .collect();
    println!(
        "Seconds of scenario 2 above 1.5x the normal load: {}.",
        if bursts.is_empty() {
            "none".to_owned()
        } else {
            bursts.join(", ")
        }
    );
    let verdict = |pass: bool| if pass { "PASS" } else { "FAIL" };
    let shared = defaults.amplification();
    let separate = per_client.amplification();
    println!(
        "\ntarget: amplification during the outage <= {TARGET:.2} with the defaults (scenario 2): \
         {shared:.3} -> {}",
        verdict(shared <= TARGET)
    );
    println!(
        "target: <= {TARGET_PER_CLIENT:.2} with a default budget per client (scenario 2b): \
         {separate:.3} -> {}",
        verdict(separate <= TARGET_PER_CLIENT)
    );
    let pass = shared <= TARGET && separate <= TARGET_PER_CLIENT;
    println!("({:.1} s of real time)", wall.elapsed().as_secs_f64());
    if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
