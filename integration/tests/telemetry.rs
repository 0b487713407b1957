//! Observability: the events a retried call emits, its statistics, its metrics, and the
//! before-wait hook.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use persevere::{BeforeWait, CircuitBreaker, RetryBudget, idempotent, retry, stats};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// One captured event: its level, its fields (the message among them, as `message`), and
/// the names of its spans.
#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    fields: BTreeMap<String, String>,
    spans: Vec<String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>, Arc<Mutex<SpanCounts>>);

/// What happened to the spans named `retry`: made, entered, exited, closed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SpanCounts {
    made: u32,
    entered: u32,
    exited: u32,
    closed: u32,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: Context<'_, S>,
    ) {
        if attrs.metadata().name() == "retry" {
            self.1.lock().unwrap().made += 1;
        }
    }

    fn on_enter(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.name() == "retry") {
            self.1.lock().unwrap().entered += 1;
        }
    }

    fn on_exit(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.name() == "retry") {
            self.1.lock().unwrap().exited += 1;
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        if ctx.span(&id).is_some_and(|s| s.name() == "retry") {
            self.1.lock().unwrap().closed += 1;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.map(|s| s.name().to_owned()).collect())
            .unwrap_or_default();
        self.0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            fields,
            spans,
        });
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Runs `f` on a paused current-thread runtime with a capturing subscriber.
fn captured<T>(f: impl std::future::Future<Output = T>) -> (T, Vec<Captured>) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let out = tracing::subscriber::with_default(subscriber, || runtime().block_on(f));
    let events = capture.0.lock().unwrap().clone();
    (out, events)
}

/// The counters a recorder holds, by name, function (the last part of its path) and
/// other labels: "persevere_calls_total fetch outcome=ok".
fn counters(snapshotter: &Snapshotter) -> BTreeMap<String, u64> {
    let mut counters = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|l| match l.key() {
                    "function" => l.value().rsplit("::").next().unwrap().to_owned(),
                    _ => format!("{}={}", l.key(), l.value()),
                })
                .collect();
            counters.insert(format!("{} {}", key.key().name(), labels.join(" ")), n);
        }
    }
    counters
}

/// The events among `events` whose message is `message`.
fn with_message<'a>(events: &'a [Captured], message: &str) -> Vec<&'a Captured> {
    events
        .iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some(message))
        .collect()
}

#[derive(Debug)]
struct Flaky(&'static str);

impl From<persevere::AttemptTimedOut> for Flaky {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        Flaky("timed out")
    }
}

impl std::fmt::Display for Flaky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "flaky: {}", self.0)
    }
}

impl persevere::Classify for Flaky {
    fn classify(&self) -> persevere::Class {
        persevere::Class::Transient
    }
}

static TWICE: AtomicU32 = AtomicU32::new(0);

#[retry(base = "100ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn fails_twice() -> Result<u32, Flaky> {
    match TWICE.fetch_add(1, Ordering::SeqCst) {
        0 => Err(Flaky("first")),
        1 => Err(Flaky("second")),
        n => Ok(n + 1),
    }
}

#[test]
fn each_failed_attempt_is_an_event_in_the_calls_span() {
    let (out, events) = captured(fails_twice());
    assert_eq!(out.unwrap(), 3);
    let retrying = with_message(&events, "attempt failed; retrying");
    assert_eq!(retrying.len(), 2, "{events:#?}");
    for (event, (attempt, error, wait)) in retrying
        .iter()
        .zip([("1", "flaky: first", "100"), ("2", "flaky: second", "200")])
    {
        assert_eq!(event.level, Level::DEBUG);
        assert_eq!(event.fields["attempt"], attempt);
        assert_eq!(event.fields["error"], error);
        assert_eq!(event.fields["class"], "Transient");
        assert_eq!(event.fields["wait_ms"], wait);
        assert_eq!(event.spans, ["retry"]);
    }
    let done = with_message(&events, "succeeded after retrying");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].fields["attempts"], "3");
    assert_eq!(done[0].fields["elapsed_ms"], "300");
}

static SPANNED: AtomicU32 = AtomicU32::new(0);

#[retry(base = "100ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn logs_each_attempt() -> Result<u32, Flaky> {
    let attempt = SPANNED.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::task::yield_now().await;
    tracing::info!(attempt, "inside the attempt");
    if attempt < 3 {
        Err(Flaky("again"))
    } else {
        Ok(attempt)
    }
}

// A call opens one span at its first failure, enters it around every poll of its later
// attempts (and exits it as often), and closes it when it ends; what the body logs in
// those attempts is in it. A call that has not failed has no span.
// Can fail: a span opened again at each retry, or entered without being exited.
#[test]
fn a_call_has_one_span_from_its_first_failure_entered_around_each_poll() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let out =
        tracing::subscriber::with_default(subscriber, || runtime().block_on(logs_each_attempt()));
    assert_eq!(out.unwrap(), 3);
    let spans = *capture.1.lock().unwrap();
    assert_eq!(spans.made, 1, "{spans:?}");
    assert_eq!(spans.closed, 1, "{spans:?}");
    assert_eq!(spans.entered, spans.exited, "{spans:?}");
    // Attempts 2 and 3 are each polled twice (they yield once), and the call's own
    // events are emitted in it: the two "retrying" and the "succeeded".
    assert_eq!(spans.entered, 4 + 3, "{spans:?}");
    let events = capture.0.lock().unwrap().clone();
    let inside = with_message(&events, "inside the attempt");
    let spans_of: Vec<&[String]> = inside.iter().map(|e| e.spans.as_slice()).collect();
    assert_eq!(
        spans_of,
        [
            &[][..],
            &["retry".to_owned()][..],
            &["retry".to_owned()][..]
        ]
    );
}

static ONCE_OK: AtomicU32 = AtomicU32::new(0);

#[retry(budget = UNLIMITED)]
#[idempotent]
async fn succeeds_at_once() -> Result<u32, Flaky> {
    ONCE_OK.fetch_add(1, Ordering::SeqCst);
    Ok(1)
}

#[test]
fn a_call_that_succeeds_at_once_emits_nothing() {
    let (out, events) = captured(succeeds_at_once());
    assert_eq!(out.unwrap(), 1);
    assert_eq!(ONCE_OK.load(Ordering::SeqCst), 1);
    assert!(events.is_empty(), "{events:#?}");
}

#[retry(attempts = 3, base = "10ms", budget = UNLIMITED)]
#[idempotent]
async fn always_reset() -> io::Result<()> {
    Err(io::ErrorKind::ConnectionReset.into())
}

#[retry(budget = UNLIMITED)]
#[idempotent]
async fn not_found() -> io::Result<()> {
    Err(io::ErrorKind::NotFound.into())
}

#[test]
fn giving_up_is_one_event_with_its_reason_and_level() {
    let (out, events) = captured(always_reset());
    assert_eq!(out.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    let gave_up = with_message(&events, "gave up");
    assert_eq!(gave_up.len(), 1);
    let e = gave_up[0];
    assert_eq!(e.level, Level::WARN);
    assert_eq!(e.fields["reason"], "the attempts are exhausted");
    assert_eq!(e.fields["attempts"], "3");
    assert_eq!(e.fields["error"], "connection reset");
    assert!(e.fields["function"].ends_with("telemetry::always_reset"));

    // A permanent failure is the caller's to report: one DEBUG event, outside any span.
    let (out, events) = captured(not_found());
    assert_eq!(out.unwrap_err().kind(), io::ErrorKind::NotFound);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["reason"], "the failure is permanent");
    assert!(events[0].spans.is_empty());
}

/// A budget that pays one retry, then none while busy.
static PAYS_ONE: RetryBudget = RetryBudget::new().with_floor(1).with_reserve(1);

#[retry(base = "10ms", budget = PAYS_ONE)]
#[idempotent]
async fn budget_runs_out() -> io::Result<()> {
    Err(io::ErrorKind::ConnectionReset.into())
}

// The fleet guide's word on a call the budget refuses: a WARN "gave up" with the reason
// "the retry budget is spent", after the attempts it could pay for (2 of 6 here), and
// the statistics' `budget` column counts it.
// Can fail: a refusal reported as exhausted attempts, at DEBUG, or not at all.
#[test]
fn a_call_the_budget_refuses_is_a_warn_with_that_reason() {
    let (out, events) = captured(budget_runs_out());
    assert_eq!(out.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    let gave_up = with_message(&events, "gave up");
    assert_eq!(gave_up.len(), 1, "{events:#?}");
    let e = gave_up[0];
    assert_eq!(e.level, Level::WARN);
    assert_eq!(e.fields["reason"], "the retry budget is spent");
    assert_eq!(e.fields["attempts"], "2");
    let stats = stats::get("telemetry::budget_runs_out").unwrap();
    assert_eq!(stats.failed.budget_refused, 1);
}

// A type with neither Display nor Debug is still shown, by its name.
struct Mute;

impl persevere::Classify for Mute {
    fn classify(&self) -> persevere::Class {
        persevere::Class::Transient
    }
}

impl From<persevere::AttemptTimedOut> for Mute {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        Mute
    }
}

#[retry(attempts = 2, base = "1ms", budget = UNLIMITED)]
#[idempotent]
async fn mute() -> Result<(), Mute> {
    Err(Mute)
}

#[test]
fn errors_without_display_are_shown_by_type() {
    let (_, events) = captured(mute());
    assert_eq!(
        events[0].fields["error"], "an error of type `telemetry::Mute`",
        "{events:#?}"
    );
}

static SCRIPT: Mutex<Vec<Result<(), io::ErrorKind>>> = Mutex::new(Vec::new());

#[retry(attempts = 4, base = "100ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn scripted() -> io::Result<()> {
    SCRIPT.lock().unwrap().remove(0).map_err(io::Error::from)
}

#[test]
fn statistics_match_a_scripted_sequence_exactly() {
    use io::ErrorKind::{ConnectionReset as T, NotFound as P};
    *SCRIPT.lock().unwrap() = vec![
        Ok(()), // call 1: first try
        Ok(()), // call 2: first try
        Err(T), // call 3: second try
        Ok(()),
        Err(T), // call 4: third try
        Err(T),
        Ok(()),
        Err(P), // call 5: permanent
        Err(T), // call 6: exhausted after 4
        Err(T),
        Err(T),
        Err(T),
    ];
    let rt = runtime();
    let outcomes: Vec<bool> = (0..6).map(|_| rt.block_on(scripted()).is_ok()).collect();
    assert_eq!(outcomes, [true, true, true, true, false, false]);
    assert!(SCRIPT.lock().unwrap().is_empty());

    let s = stats::get("telemetry::scripted").expect("registered on first call");
    assert_eq!(s.requests, 6);
    assert_eq!(s.attempts, 1 + 1 + 2 + 3 + 1 + 4);
    assert_eq!(s.retries, 6);
    assert_eq!(s.succeeded, 4);
    assert_eq!(s.attempts_to_success, [2, 1, 1, 0, 0, 0, 0]);
    assert_eq!(s.failed.permanent, 1);
    assert_eq!(s.failed.attempts_exhausted, 1);
    assert_eq!(s.failed.total(), 2);
    // Waits: 100 (call 3), 100 + 200 (call 4), 100 + 200 + 400 (call 6).
    assert_eq!(s.waited, Duration::from_millis(1100));
    assert!((s.retry_ratio() - 1.0).abs() < 1e-9);
    let table = stats::all().to_string();
    assert!(
        table.lines().any(|l| l.contains("telemetry::scripted")),
        "{table}"
    );
}

static HOOKED: Mutex<Vec<(u32, String, Duration)>> = Mutex::new(Vec::new());

fn remember(event: &BeforeWait<'_, io::Error>) {
    assert!(event.function.ends_with("::hooked"));
    HOOKED
        .lock()
        .unwrap()
        .push((event.attempt, event.error.to_string(), event.wait));
}

#[retry(attempts = 3, base = "50ms", jitter = "none", before_wait = remember, budget = UNLIMITED)]
#[idempotent]
async fn hooked() -> io::Result<()> {
    Err(io::ErrorKind::TimedOut.into())
}

#[test]
fn the_hook_runs_before_each_wait() {
    runtime().block_on(hooked()).unwrap_err();
    let seen = HOOKED.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (1, "timed out".to_owned(), Duration::from_millis(50)),
            (2, "timed out".to_owned(), Duration::from_millis(100)),
        ]
    );
}

static METERED: AtomicU32 = AtomicU32::new(0);

#[retry(attempts = 3, base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn metered() -> io::Result<()> {
    if METERED.fetch_add(1, Ordering::SeqCst) < 1 {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok(())
    }
}

#[test]
fn metrics_have_conventional_names_and_a_function_label() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = runtime();
        rt.block_on(metered()).unwrap();
        rt.block_on(metered()).unwrap();
    });
    let mut seen = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        assert!(
            labels
                .iter()
                .any(|l| l.starts_with("function=") && l.ends_with("::metered")),
            "{labels:?}"
        );
        let value = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Histogram(values) => values.iter().map(|v| v.into_inner()).sum(),
            DebugValue::Gauge(g) => g.into_inner(),
        };
        // Keyed by name and the labels other than `function`, e.g. "calls outcome=ok".
        let name = std::iter::once(key.name().to_owned())
            .chain(labels.into_iter().filter(|l| !l.starts_with("function=")))
            .collect::<Vec<_>>()
            .join(" ");
        seen.insert(name, value);
    }
    assert_eq!(seen["persevere_attempts_total"], 3.0);
    assert_eq!(seen["persevere_retries_total"], 1.0);
    assert_eq!(seen["persevere_calls_total outcome=ok"], 2.0);
    assert_eq!(seen["persevere_wait_seconds"], 0.01);
    assert_eq!(seen["persevere_attempts_per_success"], 3.0);
}

static HEDGED_CALLS: AtomicU32 = AtomicU32::new(0);

/// The first attempt of each call takes 1 s; a copy, 10 ms.
#[retry(hedge = "50ms", budget = UNLIMITED)]
#[idempotent]
async fn hedged() -> io::Result<u32> {
    let n = HEDGED_CALLS.fetch_add(1, Ordering::SeqCst);
    let takes = if n % 2 == 0 { 1000 } else { 10 };
    tokio::time::sleep(Duration::from_millis(takes)).await;
    Ok(n)
}

// A hedge is two DEBUG events (sent, won) with the function, outside any span (the call
// did not fail); two metrics; and two columns of the statistics table, shown only when a
// function hedges.
#[test]
fn a_hedge_is_an_event_a_metric_and_a_column() {
    let table = stats::all().to_string();
    assert!(!table.contains("hedges"), "{table}");
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (value, events) = metrics::with_local_recorder(&recorder, || captured(hedged()));
    assert_eq!(value.unwrap(), 1);
    let sent = with_message(&events, "slow attempt; hedge sent");
    assert_eq!(sent.len(), 1, "{events:#?}");
    assert_eq!(sent[0].level, Level::DEBUG);
    assert!(sent[0].fields["function"].ends_with("::hedged"));
    assert_eq!(sent[0].fields["hedge"], "1");
    assert_eq!(sent[0].fields["after_ms"], "50");
    let won = with_message(&events, "hedge won");
    assert_eq!(won.len(), 1, "{events:#?}");
    assert_eq!(won[0].fields["latency_ms"], "10");
    assert!(won[0].spans.is_empty(), "{events:#?}");

    let mut counters = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            counters.insert(key.key().name().to_owned(), n);
        }
    }
    assert_eq!(counters["persevere_hedges_total"], 1);
    assert_eq!(counters["persevere_hedges_won_total"], 1);
    // Two attempts: the first, and its hedge.
    assert_eq!(counters["persevere_attempts_total"], 2);

    let s = stats::get("telemetry::hedged").expect("called");
    assert_eq!(
        (s.requests, s.attempts, s.hedges, s.hedges_won),
        (1, 2, 1, 1)
    );
    let table = stats::all().to_string();
    let header = table.lines().next().unwrap();
    // Another test here may add the column of abandoned calls after these.
    assert!(header.contains("  hedges      won"), "{table}");
    let row = table
        .lines()
        .find(|l| l.contains("telemetry::hedged"))
        .unwrap();
    assert!(row.contains("s        1        1"), "{table}");
}

/// Fails at once; with `hang`, its second attempt (the first to have less than the whole
/// 30 s deadline left) hangs instead. A caller's timeout cuts it during a wait or that attempt.
#[retry(base = "1s", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn given_up_on(hang: bool) -> io::Result<()> {
    if hang && persevere::deadline::remaining().is_some_and(|left| left < Duration::from_secs(30)) {
        std::future::pending::<()>().await;
    }
    Err(io::ErrorKind::ConnectionReset.into())
}

// A call its caller drops while it retries is one DEBUG event in its span and a call
// with the outcome `abandoned`; the attempt it was running counts as made, a wait's does
// not. Can fail: the two swapped (the totals of both calls together were the same).
#[test]
fn an_abandoned_call_is_an_event_and_a_metric() {
    let cut = |hang| tokio::time::timeout(Duration::from_millis(1500), given_up_on(hang));
    // Each call on a recorder of its own: dropped in its wait, then in its second attempt.
    let mut attempts = Vec::new();
    let mut all_events = Vec::new();
    for hang in [false, true] {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let (cut_short, events) = metrics::with_local_recorder(&recorder, || {
            captured(async { cut(hang).await.is_err() })
        });
        assert!(cut_short);
        all_events.extend(events);
        let counters = counters(&snapshotter);
        assert_eq!(
            counters["persevere_calls_total given_up_on outcome=abandoned"], 1,
            "{counters:?}"
        );
        attempts.push(counters["persevere_attempts_total given_up_on"]);
    }
    // Dropped in its wait: two attempts made. Dropped in its second attempt: the same,
    // the one it was running counted when it was dropped.
    assert_eq!(attempts, [2, 2]);
    let abandoned = with_message(&all_events, "abandoned by its caller");
    assert_eq!(abandoned.len(), 2, "{all_events:#?}");
    assert_eq!(abandoned[0].level, Level::DEBUG);
    assert_eq!(abandoned[0].fields["attempts"], "2");
    assert_eq!(abandoned[0].spans.len(), 1, "{all_events:#?}");
}

/// One token and no income: the first call's retry is granted, the second's refused.
static ONE_RETRY: RetryBudget = RetryBudget::new()
    .with_ratio(0.0)
    .with_floor(1)
    .with_reserve(1);

#[retry(attempts = 2, base = "10ms", jitter = "none", budget = ONE_RETRY)]
#[idempotent]
async fn over_budget() -> io::Result<()> {
    Err(io::ErrorKind::ConnectionReset.into())
}

static TRIPS_AT_ONCE: CircuitBreaker = CircuitBreaker::new()
    .with_consecutive_failures(1)
    .with_open_for(Duration::from_secs(1));
static HEALED: AtomicBool = AtomicBool::new(false);

#[retry(attempts = 3, base = "10ms", jitter = "none", breaker = TRIPS_AT_ONCE, budget = UNLIMITED)]
#[idempotent]
async fn behind_breaker() -> io::Result<()> {
    if HEALED.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(io::ErrorKind::ConnectionReset.into())
    }
}

// Each refusal has its own counter, counted only for its own reason; a breaker's moves
// are a counter by the state it moved to, and an event: WARN when it opens, INFO when it
// closes. Can fail: a refusal counted for the other's reason (or for every give-up), a
// move not reported.
#[test]
fn refusals_and_breaker_moves_are_metrics_and_events() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (outcomes, events) = metrics::with_local_recorder(&recorder, || {
        captured(async {
            let mut outcomes = Vec::new();
            // Retried once, then out of attempts; then refused its retry by the budget.
            outcomes.push(over_budget().await.unwrap_err().kind());
            outcomes.push(over_budget().await.unwrap_err().kind());
            // Opens the breaker; is refused by it; a second later, closes it.
            outcomes.push(behind_breaker().await.unwrap_err().kind());
            outcomes.push(behind_breaker().await.unwrap_err().kind());
            tokio::time::sleep(Duration::from_secs(1)).await;
            HEALED.store(true, Ordering::SeqCst);
            behind_breaker().await.unwrap();
            outcomes
        })
    });
    use io::ErrorKind::{ConnectionReset, Other};
    // The breaker's refusal comes back as `CircuitOpen`, an `io::Error` of kind `Other`.
    assert_eq!(
        outcomes,
        [ConnectionReset, ConnectionReset, ConnectionReset, Other]
    );

    let counters = counters(&snapshotter);
    let count = |name: &str| counters.get(name).copied().unwrap_or(0);
    assert_eq!(
        count("persevere_budget_refusals_total over_budget"),
        1,
        "{counters:#?}"
    );
    assert_eq!(count("persevere_budget_refusals_total behind_breaker"), 0);
    assert_eq!(count("persevere_breaker_refusals_total behind_breaker"), 1);
    assert_eq!(count("persevere_breaker_refusals_total over_budget"), 0);
    assert_eq!(
        count("persevere_breaker_transitions_total behind_breaker to=open"),
        1
    );
    assert_eq!(
        count("persevere_breaker_transitions_total behind_breaker to=closed"),
        1
    );

    let opened = with_message(&events, "circuit breaker opened");
    assert_eq!(opened.len(), 1, "{events:#?}");
    assert_eq!(opened[0].level, Level::WARN);
    assert!(opened[0].fields["function"].ends_with("::behind_breaker"));
    let closed = with_message(&events, "circuit breaker closed");
    assert_eq!(closed.len(), 1, "{events:#?}");
    assert_eq!(closed[0].level, Level::INFO);
}

static READS: AtomicU32 = AtomicU32::new(0);

/// A read that fails with a reset, through a connection it is given.
#[retry(attempts = 3, base = "10ms", jitter = "none", budget = UNLIMITED)]
#[idempotent]
async fn read_through(conn: &rusqlite::Connection) -> io::Result<()> {
    let _ = conn;
    READS.fetch_add(1, Ordering::SeqCst);
    Err(io::ErrorKind::ConnectionReset.into())
}

// A call given a connection inside an open transaction gives up after its first
// attempt with a reason of its own: in the event (DEBUG, since the failure goes on to
// the function that began the transaction), the metrics and the statistics.
// Can fail: the reason missing from one of them, or the call retrying (3 attempts).
#[test]
fn giving_up_inside_a_transaction_is_an_event_a_metric_and_a_count() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("BEGIN").unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (out, events) = metrics::with_local_recorder(&recorder, || captured(read_through(&conn)));
    assert_eq!(out.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(READS.load(Ordering::SeqCst), 1);

    let gave_up = with_message(&events, "gave up");
    assert_eq!(gave_up.len(), 1, "{events:#?}");
    assert_eq!(gave_up[0].level, Level::DEBUG);
    assert_eq!(
        gave_up[0].fields["reason"],
        "the connection is inside an open transaction: retry the whole transaction, where it began"
    );
    assert_eq!(gave_up[0].fields["attempts"], "1");

    let counters = counters(&snapshotter);
    let count = |name: &str| counters.get(name).copied().unwrap_or(0);
    assert_eq!(
        count("persevere_give_ups_total read_through reason=inside_transaction"),
        1,
        "{counters:#?}"
    );
    assert_eq!(count("persevere_attempts_total read_through"), 1);
    assert_eq!(count("persevere_retries_total read_through"), 0);

    let stats = stats::get("read_through").unwrap();
    assert_eq!(stats.failed.inside_transaction, 1);
    assert_eq!(stats.failed.total(), 1);
}
