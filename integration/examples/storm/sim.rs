//! The world that `examples/storm.rs` and `benches/fleet.rs` simulate: a fleet of
//! clients, each calling one dependency once a second, and the dependency, which is down
//! or degraded for a while and serves at most so many requests a second.
//!
//! Everything runs on one thread under tokio's paused clock: minutes of it pass in
//! moments, and one seed fixes the whole run: the jitter and the dependency's random
//! failures. The clients go through persevere's real runtime; only the dependency and the
//! clock are simulated.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use persevere::{AttemptTimedOut, CircuitOpen, Class, Classify, Policy};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::LocalSet;
use tokio::time::Instant;

/// The shape of a run, in whole seconds from its start.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    /// Normal service first, so that retry budgets have a window of traffic behind them
    /// when the outage starts, as in a fleet that has been up for a while.
    pub warmup: u64,
    /// How long the dependency is down (or degraded: see [`World::fail`]).
    pub outage: u64,
    /// How long the clients go on calling after the dependency is back.
    pub tail: u64,
}

impl Timeline {
    /// When the dependency comes back.
    pub const fn recovery(&self) -> u64 {
        self.warmup + self.outage
    }

    /// When the clients stop starting calls.
    pub const fn end(&self) -> u64 {
        self.recovery() + self.tail
    }

    /// Whether `at` is in the outage.
    pub fn in_outage(&self, at: Duration) -> bool {
        (self.warmup..self.recovery()).contains(&at.as_secs())
    }
}

/// A fleet and the dependency it calls.
#[derive(Clone, Copy, Debug)]
pub struct World {
    /// Clients, each starting one call a second, spread evenly over the second.
    pub clients: u32,
    /// When the dependency is down.
    pub timeline: Timeline,
    /// The most requests the dependency serves in one second; the rest fail as
    /// overloaded, like a 503. `None` for no limit.
    pub capacity: Option<u32>,
    /// The share of requests that fail during the outage, each at random: 1.0 for a
    /// total outage, 0.5 for a dependency that fails half of them.
    pub fail: f64,
}

/// Why an attempt, or a whole call, failed.
#[derive(Debug)]
pub enum Failure {
    /// The dependency is down (or failed this request at random, when degraded).
    Down,
    /// The dependency is up but has served its capacity for this second.
    Overloaded,
    /// A circuit breaker refused the attempt; it never reached the dependency.
    Open(CircuitOpen),
    /// The attempt ran past its time limit (the simulated dependency answers at once,
    /// so only a policy with an attempt timeout shorter than nothing could see this).
    TimedOut(AttemptTimedOut),
    /// Behind the server's retry admission layer (`--shed`): the answer's status, and
    /// its class as the client reads it (a shed retry's is permanent: do not retry).
    Answered(u16, Class),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Down => f.write_str("the dependency is down"),
            Failure::Overloaded => f.write_str("503: the dependency is over capacity"),
            Failure::Open(open) => open.fmt(f),
            Failure::TimedOut(timeout) => timeout.fmt(f),
            Failure::Answered(status, _) => write!(f, "the server answered {status}"),
        }
    }
}

impl std::error::Error for Failure {}

impl Classify for Failure {
    fn classify(&self) -> Class {
        match self {
            Failure::Down | Failure::Overloaded | Failure::TimedOut(_) => Class::Transient,
            Failure::Open(open) => open.classify(),
            Failure::Answered(_, class) => *class,
        }
    }
}

impl From<CircuitOpen> for Failure {
    fn from(open: CircuitOpen) -> Self {
        Failure::Open(open)
    }
}

impl From<AttemptTimedOut> for Failure {
    fn from(timeout: AttemptTimedOut) -> Self {
        Failure::TimedOut(timeout)
    }
}

/// What happened in one second of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Second {
    /// Calls the clients started.
    pub calls: u32,
    /// First attempts that reached the dependency.
    pub first: u32,
    /// Retries that reached it.
    pub retries: u32,
    /// Attempts it served.
    pub served: u32,
    /// Attempts it turned away for lack of capacity.
    pub overloaded: u32,
    /// Retries the server's admission layer refused (`--shed`): they never reached it.
    pub shed: u32,
}

impl Second {
    /// Attempts that reached the dependency: its load.
    pub fn load(&self) -> u32 {
        self.first + self.retries
    }
}

/// The dependency, and the record of everything that reached it.
pub struct Dependency {
    world: World,
    start: Instant,
    /// Which requests fail when the dependency is degraded; seeded from the run's seed.
    failures: RefCell<SmallRng>,
    seconds: RefCell<Vec<Second>>,
    succeeded: Cell<u64>,
    outage_succeeded: Cell<u64>,
    last_retry: Cell<Option<Duration>>,
    last_failed_call: Cell<Option<Duration>>,
    last_end: Cell<Duration>,
    last_end_of_outage_call: Cell<Duration>,
}

impl Dependency {
    fn new(world: World, seed: u64) -> Self {
        Self {
            world,
            start: Instant::now(),
            // A stream apart from the jitter's, not drawn from in a total outage.
            failures: RefCell::new(SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15)),
            seconds: RefCell::default(),
            succeeded: Cell::new(0),
            outage_succeeded: Cell::new(0),
            last_retry: Cell::new(None),
            last_failed_call: Cell::new(None),
            last_end: Cell::new(Duration::ZERO),
            last_end_of_outage_call: Cell::new(Duration::ZERO),
        }
    }

    /// One attempt of a call; `tries` counts the call's attempts so far, which tells a
    /// first attempt from a retry.
    pub fn attempt(&self, tries: &Cell<u32>) -> Result<(), Failure> {
        let retry = tries.get() > 0;
        tries.set(tries.get() + 1);
        self.serve(retry)
    }

    /// A request that reached the dependency, a retry or a first attempt.
    pub fn serve(&self, retry: bool) -> Result<(), Failure> {
        let now = self.start.elapsed();
        if retry {
            self.last_retry.set(Some(now));
        }
        let down = self.world.timeline.in_outage(now) && self.fails_at_random();
        let capacity = self.world.capacity.unwrap_or(u32::MAX);
        self.in_second(now, |second| {
            if retry {
                second.retries += 1;
            } else {
                second.first += 1;
            }
            if down {
                Err(Failure::Down)
            } else if second.served >= capacity {
                second.overloaded += 1;
                Err(Failure::Overloaded)
            } else {
                second.served += 1;
                Ok(())
            }
        })
    }

    /// Whether a request made during the outage fails: always in a total outage, else at
    /// random with probability [`World::fail`].
    fn fails_at_random(&self) -> bool {
        let fail = self.world.fail;
        fail >= 1.0 || (fail > 0.0 && self.failures.borrow_mut().random_bool(fail))
    }

    fn in_second<T>(&self, at: Duration, f: impl FnOnce(&mut Second) -> T) -> T {
        let index = at.as_secs() as usize;
        let mut seconds = self.seconds.borrow_mut();
        if seconds.len() <= index {
            seconds.resize(index + 1, Second::default());
        }
        f(&mut seconds[index])
    }

    /// Counts a retry the server's admission layer refused now (`--shed`).
    pub fn record_shed(&self) {
        let now = self.start.elapsed();
        self.in_second(now, |second| second.shed += 1);
    }

    /// Counts a call started now, and returns when that is.
    fn started(&self) -> Duration {
        let now = self.start.elapsed();
        self.in_second(now, |second| second.calls += 1);
        now
    }

    fn ended(&self, started: Duration, succeeded: bool) {
        let now = self.start.elapsed();
        self.last_end.set(now);
        let in_outage = self.world.timeline.in_outage(started);
        if in_outage {
            self.last_end_of_outage_call.set(now);
        }
        if succeeded {
            self.succeeded.set(self.succeeded.get() + 1);
            if in_outage {
                self.outage_succeeded.set(self.outage_succeeded.get() + 1);
            }
        } else {
            self.last_failed_call.set(Some(now));
        }
    }

    fn report(&self) -> Report {
        Report {
            world: self.world,
            seconds: self.seconds.take(),
            succeeded: self.succeeded.get(),
            outage_succeeded: self.outage_succeeded.get(),
            last_retry: self.last_retry.get(),
            last_failed_call: self.last_failed_call.get(),
            last_end: self.last_end.get(),
            last_end_of_outage_call: self.last_end_of_outage_call.get(),
        }
    }
}

/// One call under `policy` through persevere's runtime-only driver, as a client with a
/// policy of its own (its own budget or breaker) makes it.
pub async fn call_with(policy: &Policy, dependency: &Dependency) -> Result<(), Failure> {
    let tries = Cell::new(0);
    let tries = &tries;
    persevere::retry_fn(policy, move || async move { dependency.attempt(tries) }).await
}

/// Runs `world` in virtual time: every client starts `call(client, dependency)` once a
/// second until the timeline's end, and the run lasts until the last call has returned.
pub fn run<F, Fut>(world: World, seed: u64, call: F) -> Report
where
    F: Fn(u32, Rc<Dependency>) -> Fut,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with a paused clock");
    // Every call runs on this thread, so this one seed fixes the jitter of all of them.
    persevere::seed_thread_rng(seed);
    let local = LocalSet::new();
    let dependency = local.block_on(&runtime, async {
        let dependency = Rc::new(Dependency::new(world, seed));
        let spacing = Duration::from_secs(1) / world.clients.max(1);
        for second in 0..world.timeline.end() {
            for client in 0..world.clients {
                let at = dependency.start + Duration::from_secs(second) + spacing * client;
                tokio::time::sleep_until(at).await;
                let started = dependency.started();
                let outcome = call(client, Rc::clone(&dependency));
                let dependency = Rc::clone(&dependency);
                tokio::task::spawn_local(async move {
                    let succeeded = outcome.await.is_ok();
                    dependency.ended(started, succeeded);
                });
            }
        }
        dependency
    });
    // The clients have stopped starting calls; the calls still retrying finish.
    runtime.block_on(local);
    dependency.report()
}

/// What a run saw.
#[derive(Clone, Debug)]
pub struct Report {
    /// The world that was run.
    pub world: World,
    /// Second by second, from the start.
    pub seconds: Vec<Second>,
    /// Calls that returned `Ok`.
    pub succeeded: u64,
    /// Calls started during the outage that returned `Ok`.
    pub outage_succeeded: u64,
    /// When the last retry reached the dependency.
    pub last_retry: Option<Duration>,
    /// When the last call that failed returned.
    pub last_failed_call: Option<Duration>,
    /// When the last call returned.
    pub last_end: Duration,
    /// When the last call started during the outage returned.
    pub last_end_of_outage_call: Duration,
}

impl Report {
    /// The seconds of the outage.
    pub fn outage(&self) -> &[Second] {
        let timeline = self.world.timeline;
        let end = (timeline.recovery() as usize).min(self.seconds.len());
        &self.seconds[(timeline.warmup as usize).min(end)..end]
    }

    /// Calls the clients started.
    pub fn calls(&self) -> u64 {
        self.seconds.iter().map(|s| u64::from(s.calls)).sum()
    }

    /// Attempts that reached the dependency.
    pub fn attempts(&self) -> u64 {
        self.seconds.iter().map(|s| u64::from(s.load())).sum()
    }

    /// Calls started during the outage.
    pub fn outage_calls(&self) -> u64 {
        self.outage().iter().map(|s| u64::from(s.calls)).sum()
    }

    /// Attempts that reached the dependency during the outage.
    pub fn outage_attempts(&self) -> u64 {
        self.outage().iter().map(|s| u64::from(s.load())).sum()
    }

    /// The dependency's load during the outage over what the clients asked of it: the
    /// attempts that reached it per call started.
    pub fn amplification(&self) -> f64 {
        self.outage_attempts() as f64 / self.outage_calls().max(1) as f64
    }

    /// The most attempts that reached the dependency in one second.
    pub fn peak(&self) -> u32 {
        self.seconds.iter().map(Second::load).max().unwrap_or(0)
    }

    /// The most attempts that reached the dependency in one second of the outage.
    pub fn outage_peak(&self) -> u32 {
        self.outage_peak_after(0)
    }

    /// The most attempts that reached the dependency in one second of the outage after
    /// its first `skip` seconds.
    pub fn outage_peak_after(&self, skip: usize) -> u32 {
        let outage = self.outage();
        outage[skip.min(outage.len())..]
            .iter()
            .map(Second::load)
            .max()
            .unwrap_or(0)
    }

    /// The share of the calls started during the outage that succeeded.
    pub fn outage_success_rate(&self) -> f64 {
        self.outage_succeeded as f64 / self.outage_calls().max(1) as f64
    }

    /// Retries the server's admission layer refused.
    pub fn shed(&self) -> u64 {
        self.seconds.iter().map(|s| u64::from(s.shed)).sum()
    }

    /// The share of calls that succeeded.
    pub fn success_rate(&self) -> f64 {
        self.succeeded as f64 / self.calls().max(1) as f64
    }

    /// From recovery until the last retry reached the dependency: after it, its load is
    /// the clients' own calls and nothing more.
    pub fn drain(&self) -> Duration {
        self.after_recovery(self.last_retry)
    }

    /// From recovery until the fleet is back to normal: no more retries, and no more
    /// calls failing (for lack of capacity, or refused by a breaker still open).
    pub fn settled(&self) -> Duration {
        self.drain().max(self.after_recovery(self.last_failed_call))
    }

    /// From recovery until every call started during the outage has returned: how long
    /// the outage's calls outlast it.
    pub fn outage_calls_done(&self) -> Duration {
        self.after_recovery(Some(self.last_end_of_outage_call))
    }

    fn after_recovery(&self, at: Option<Duration>) -> Duration {
        let recovery = Duration::from_secs(self.world.timeline.recovery());
        at.map_or(Duration::ZERO, |at| at.saturating_sub(recovery))
    }
}
