//! A retry storm, side by side: how each backoff strategy treats a dependency with
//! limited capacity that goes down for a while.
//!
//! ```text
//! cargo run --release -p persevere-integration --example storm -- [--clients N]
//!     [--outage SECS] [--fail P] [--capacity RPS] [--seed S] [--svg PATH] [--shared]
//!     [--shed]
//! ```
//!
//! A fleet of clients (1,000 by default) each start one call a second. The dependency
//! serves at most `--capacity` requests a second (1,200 by default) and turns the rest
//! away with a 503; from t = 20 s it fails every request for `--outage` seconds (60), or
//! with `--fail P` a share P of them, at random (0.5: half; 0.01: a blip).
//! Every call goes through persevere's real runtime (`persevere::retry` with the
//! defaults: deadline 30 s, 6 attempts, base 200 ms, cap 20 s) under tokio's paused
//! clock, so the two minutes of each strategy pass in a moment and a seed fixes them.
//!
//! Each client is its own process, with its own retry budget and circuit breaker, unless
//! `--shared` puts the whole fleet in one process behind one of each. `--shed` puts the
//! dependency behind the server's real admission layer
//! (`persevere::tower::RetryAdmissionLayer`), the clients sending persevere's attempt
//! header: first attempts pass, retries while the layer's budget allows, and a refused
//! retry is answered "do not retry" at once, never reaching the dependency.
//!
//! `--svg PATH` plots the load on the dependency over time, one panel per strategy;
//! `docs/storm.svg` is this plot with the defaults, which take about 2 s to run in
//! release (25 s unoptimised), and `docs/storm-degraded.svg` with `--fail 0.5`.

use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use persevere::tower::RetryAdmissionLayer;
use persevere::{CircuitBreaker, Jitter, Policy, RetryBudget};
use tower::Layer as _;

#[path = "storm/options.rs"]
mod options;
#[path = "storm/plot.rs"]
mod plot;
#[path = "storm/shed.rs"]
mod shed;
#[path = "storm/sim.rs"]
mod sim;

use options::Options;
use sim::{Report, Timeline, World};

/// What stands between a client's retries and the dependency, besides its backoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guard {
    /// Nothing: every call makes all the attempts its policy allows.
    Nothing,
    /// The default retry budget: each call earns a tenth of a retry, the budget holds at
    /// most 2 while busy (or 10 % of the last second's calls; a reserve of 5 after
    /// quiet), and each retried call that succeeds gives half a retry back.
    Budget,
    /// The default circuit breaker (opens after 5 failures in a row, for 30 s, then one
    /// probe), and no budget.
    Breaker,
}

/// A way of retrying.
struct Strategy {
    name: &'static str,
    /// `None` for no backoff at all: the retries follow each other at once.
    jitter: Option<Jitter>,
    guard: Guard,
}

const STRATEGIES: [Strategy; 11] = [
    strategy("no backoff", None, Guard::Nothing),
    strategy("exponential, no jitter", Some(Jitter::None), Guard::Nothing),
    strategy("full jitter", Some(Jitter::Full), Guard::Nothing),
    strategy("equal jitter", Some(Jitter::Equal), Guard::Nothing),
    strategy(
        "decorrelated jitter",
        Some(Jitter::Decorrelated),
        Guard::Nothing,
    ),
    strategy("full jitter + budget", Some(Jitter::Full), Guard::Budget),
    strategy("equal jitter + budget", Some(Jitter::Equal), Guard::Budget),
    strategy(
        "decorrelated + budget",
        Some(Jitter::Decorrelated),
        Guard::Budget,
    ),
    strategy("full jitter + breaker", Some(Jitter::Full), Guard::Breaker),
    strategy(
        "equal jitter + breaker",
        Some(Jitter::Equal),
        Guard::Breaker,
    ),
    strategy(
        "decorrelated + breaker",
        Some(Jitter::Decorrelated),
        Guard::Breaker,
    ),
];

const fn strategy(name: &'static str, jitter: Option<Jitter>, guard: Guard) -> Strategy {
    Strategy {
        name,
        jitter,
        guard,
    }
}

impl Strategy {
    /// The policy of each client (one for all, if they share everything). Budgets and
    /// breakers are `'static` in persevere, as the `static`s `#[retry]` names are; a
    /// simulation needs fresh ones for every run, so it leaks them.
    fn policies(&self, clients: u32, shared: bool) -> Vec<Policy> {
        let backoff = match self.jitter {
            Some(jitter) => Policy::new().with_jitter(jitter),
            None => Policy::new()
                .with_base(Duration::ZERO)
                .with_jitter(Jitter::None),
        };
        let owners = if shared || self.guard == Guard::Nothing {
            1
        } else {
            clients
        };
        (0..owners)
            .map(|_| match self.guard {
                Guard::Nothing => backoff.with_budget(leak(RetryBudget::unlimited())),
                Guard::Budget => backoff.with_budget(leak(RetryBudget::new())),
                Guard::Breaker => backoff
                    .with_budget(leak(RetryBudget::unlimited()))
                    .with_breaker(leak(CircuitBreaker::new())),
            })
            .collect()
    }

    fn run(&self, world: World, options: &Options) -> Report {
        let policies: Rc<[Policy]> = self.policies(world.clients, options.shared).into();
        // The dependency's server, behind one admission layer for the run.
        let shed = options.shed.then(RetryAdmissionLayer::new);
        sim::run(world, options.seed, move |client, dependency| {
            let policies = Rc::clone(&policies);
            let service = shed
                .as_ref()
                .map(|layer| layer.layer(shed::Handler(Rc::clone(&dependency))));
            async move {
                let policy = &policies[client as usize % policies.len()];
                match service {
                    Some(service) => shed::call_through(policy, service).await,
                    None => sim::call_with(policy, &dependency).await,
                }
            }
        })
    }
}

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("storm: {message}\n\n{}", options::USAGE);
            return ExitCode::from(2);
        }
    };
    let world = World {
        fail: options.fail,
        clients: options.clients,
        timeline: Timeline {
            warmup: 20,
            outage: options.outage,
            tail: 40,
        },
        capacity: Some(options.capacity),
    };
    let wall = std::time::Instant::now();
    let runs: Vec<(&Strategy, Report)> = STRATEGIES
        .iter()
        .map(|strategy| (strategy, strategy.run(world, &options)))
        .collect();
    let timeline = world.timeline;
    let scope = if options.shared {
        "one budget or breaker for the whole fleet (--shared)"
    } else {
        "a budget or breaker per client"
    };
    let scope = if options.shed {
        format!("{scope}; the server sheds retries (--shed)")
    } else {
        scope.to_owned()
    };
    let down = if options.fail >= 1.0 {
        "down".to_owned()
    } else {
        format!("failing {}% of requests", 100.0 * options.fail)
    };
    let caption = format!(
        "{} clients x 1 call/s, capacity {}/s, {down} from t = {} s to {} s; {scope}; seed {}",
        world.clients,
        options.capacity,
        timeline.warmup,
        timeline.recovery(),
        options.seed
    );
    println!("{caption}");
    println!(
        "policy: deadline 30s, attempts 6, base 200ms (0 for no backoff), cap 20s; budget: \
         RetryBudget::new(); breaker: CircuitBreaker::new(), no budget\n"
    );
    println!(
        "{:<24} {:>9} {:>17} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "strategy",
        "attempts",
        "in outage (x)",
        "peak/s",
        "then",
        "success",
        "settled",
        "done",
        "overall",
        "shed"
    );
    for (strategy, report) in &runs {
        println!(
            "{:<24} {:>9} {:>9} ({:>5.2}) {:>7} {:>7} {:>7.2}% {:>7.1}s {:>7.1}s {:>7.2}% {:>8}",
            strategy.name,
            report.attempts(),
            report.outage_attempts(),
            report.amplification(),
            report.outage_peak(),
            report.outage_peak_after(2),
            100.0 * report.outage_success_rate(),
            report.settled().as_secs_f64(),
            report.outage_calls_done().as_secs_f64(),
            100.0 * report.success_rate(),
            report.shed()
        );
    }
    println!(
        "\nattempts: requests that reached the dependency; in outage: those during the \
         outage, (x) per call started in it;\npeak/s: most in one second of the outage; \
         then: most in one second after its first two; success: calls started in the\n\
         outage that returned Ok; after recovery, settled: until no call retries or fails, \
         done: until every call\nstarted in the outage has returned; overall: calls that \
         returned Ok, of all the run's (clients start calls until t = {} s);\nshed: retries the \
         server's admission layer refused (--shed), which never reached the dependency.",
        timeline.end()
    );
    if let Some(path) = &options.svg {
        let panels: Vec<plot::Panel<'_>> = runs
            .iter()
            .map(|(strategy, report)| plot::Panel {
                title: strategy.name,
                report,
            })
            .collect();
        if let Err(e) = plot::draw(path, &caption, &panels) {
            eprintln!("storm: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("\nplot: {}", path.display());
    }
    eprintln!("({:.1} s of real time)", wall.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}
