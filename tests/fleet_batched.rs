//! The fleet of `tests/fleet.rs`, each client built as `#[retry]` builds a function: a
//! budget of its own whose reserve is one call's retries, and statistics, which give it
//! a slot in its thread's batches, so that its first-try successes reach the budget 64
//! at a time, as a user's do. After a warm-up longer than a batch, the figures are those
//! of clients that count each call at once: a flushed batch does not lift a budget above
//! what recent calls earned.
//!
//! A test binary of its own: a process batches the first 256 functions it calls, and
//! every client here must be one of them.

#[path = "../integration/examples/storm/sim.rs"]
#[allow(dead_code)] // The storm example reads more of the report.
mod sim;

use persevere::{Policy, RetryBudget, RetryStats};
use sim::{Report, Timeline, World};

const CLIENTS: u32 = 200;

const FLEET: World = World {
    clients: CLIENTS,
    timeline: Timeline {
        // Longer than a batch of 64 calls, one a second.
        warmup: 100,
        outage: 60,
        tail: 35,
    },
    capacity: Some(240),
    fail: 1.0,
};

/// The clients' statistics: made once, so that they take the process's first slots, and
/// shared by the runs, each on a thread of its own (whose batches start empty).
fn client_stats() -> &'static [RetryStats] {
    static STATS: std::sync::OnceLock<Vec<RetryStats>> = std::sync::OnceLock::new();
    STATS.get_or_init(|| {
        (0..CLIENTS)
            .map(|_| RetryStats::new("fleet_batched::client"))
            .collect()
    })
}

/// One client's function, as `#[retry]` makes it with the defaults: a fresh budget, and
/// statistics if `batched`.
fn client_policy(client: usize, batched: bool) -> Policy {
    let policy = Policy::new();
    let budget: &'static RetryBudget = Box::leak(Box::new(
        RetryBudget::new().with_reserve(policy.attempts() - 1),
    ));
    let policy = policy.with_budget(budget);
    if batched {
        policy.with_stats(&client_stats()[client])
    } else {
        policy
    }
}

fn storm(fail: f64, batched: bool) -> Report {
    std::thread::spawn(move || {
        let policies: std::rc::Rc<[Policy]> = (0..CLIENTS as usize)
            .map(|client| client_policy(client, batched))
            .collect();
        sim::run(World { fail, ..FLEET }, 7, move |client, dependency| {
            let policies = std::rc::Rc::clone(&policies);
            async move { sim::call_with(&policies[client as usize], &dependency).await }
        })
    })
    .join()
    .expect("the run")
}

/// The most attempts in one second of the outage after its first two, per 1,000
/// clients.
fn then(report: &Report) -> u32 {
    report.outage_peak_after(2) * 1000 / CLIENTS
}

fn describe(report: &Report) -> String {
    format!(
        "load {:.3}x, then {}/s, success {:.2}%",
        report.amplification(),
        then(report),
        100.0 * report.outage_success_rate()
    )
}

// One test, so that the batched clients are the first 200 functions of the process.
// Can fail: a flush of a thread's batch counted as requests of the last second lifts
// each budget by up to 6.4 tokens when the outage begins (the model: 1,475 to
// 1,751 a second after the first two, for 1,000 clients).
#[test]
fn batched_clients_keep_the_fleet_bounds() {
    for (fail, most_load, most_then, least_success) in
        [(1.0, 1.20, 1300, 0.0), (0.5, 1.20, 1550, 0.55)]
    {
        let batched = storm(fail, true);
        let unbatched = storm(fail, false);
        let seen = format!(
            "failing {fail}: batched {}; each call at once {}",
            describe(&batched),
            describe(&unbatched)
        );
        assert!(batched.amplification() <= most_load, "{seen}");
        assert!(then(&batched) <= most_then, "{seen}");
        assert!(batched.outage_success_rate() >= least_success, "{seen}");
        assert!(
            (batched.amplification() - unbatched.amplification()).abs() <= 0.02,
            "{seen}"
        );
    }
    // The clients were the process's first functions, each with a slot of its own (of
    // 256), and their first-try successes were counted there.
    let report = persevere::stats::all();
    assert_eq!(report.0.len(), CLIENTS as usize);
    assert!(
        report
            .0
            .iter()
            .all(|s| s.function == "fleet_batched::client")
    );
    assert!(report.0.iter().all(|s| s.attempts_to_success[0] > 0));
}
