//! The retry budget's tests: its exact bound over any history, its two regimes
//! (busy and quiet), batches dated by their spacing, and counts that never wrap.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::rng::seed_thread_rng;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A call against a dependency that fails each attempt with probability `fail`: one
/// request, then retries while the budget grants them (up to 5, as the default
/// policy's 6 attempts); the retries it made if it succeeded.
fn call(budget: &RetryBudget, now: Instant, fail: f64, dependency: &mut SmallRng) -> Option<u32> {
    budget.deposit(now);
    for retries in 0..=5 {
        if !dependency.random_bool(fail) {
            if retries > 0 {
                budget.retry_succeeded(now);
            }
            return Some(retries);
        }
        if retries == 5 || !budget.withdraw(now) {
            return None;
        }
    }
    None
}

/// The retries `budget` grants to `n` calls of a total outage, one every `gap` from
/// `start`, each asking until refused (or 5 times): per call.
fn outage(budget: &RetryBudget, start: Instant, gap: Duration, n: u32) -> Vec<u32> {
    (0..n)
        .map(|i| {
            let now = start + gap * i;
            budget.deposit(now);
            (0..5).take_while(|_| budget.withdraw(now)).count() as u32
        })
        .collect()
}

/// The most retries in any `width` consecutive calls of `per_call`.
fn most_in_any(per_call: &[u32], width: usize) -> u32 {
    per_call
        .windows(width)
        .map(|w| w.iter().sum())
        .max()
        .unwrap_or(0)
}

// Finagle's check of its budget: after n requests that all fail, retries are n x the
// ratio plus what a fresh budget holds (the reserve, 5), within one (the last retry
// may be granted on a fraction of a token). 10,000 calls that each ask until refused:
// 1,000 + 5.
// Can fail: a reserve that refills with time while busy (a call every millisecond),
// a ratio applied to retries as well as requests, or grants on a fraction that do not
// pay it back.
#[test]
fn when_every_request_fails_retries_are_the_ratio_plus_the_reserve_within_one() {
    seed_thread_rng(1);
    let budget = RetryBudget::new();
    let mut dependency = SmallRng::seed_from_u64(1);
    let start = Instant::now();
    let n: u32 = 10_000;
    for i in 0..n {
        // One request a millisecond: ten seconds of them.
        let now = start + ms(u64::from(i));
        assert_eq!(call(&budget, now, 1.0, &mut dependency), None);
    }
    let snapshot = budget.snapshot(start + ms(u64::from(n)));
    let bound = f64::from(n) * 0.1 + 5.0;
    assert!(
        (snapshot.retries as f64 - bound).abs() <= 1.0,
        "{snapshot:?}"
    );
    assert_eq!(snapshot.requests, u64::from(n));
    // Every call ends on a refusal, but the first, whose 5 retries the reserve paid.
    assert_eq!(snapshot.refusals, u64::from(n) - 1);
    assert!((-1.0..1.0).contains(&snapshot.tokens), "{snapshot:?}");
}

// The same after a history: a burst of 20,000 calls that succeeded in one second,
// then, 5 s later, an outage of 10,000 calls a millisecond apart: the burst's 2,000
// tokens are gone, and retries are again 1,000 + the floor (2: the budget is still
// busy), within one. After an hour of quiet instead, 1,000 + the reserve (5).
// Can fail: a balance not cut back when the rate falls (3,000 retries).
#[test]
fn the_exact_bound_holds_after_a_burst_and_after_quiet() {
    seed_thread_rng(7);
    for (quiet, held) in [(secs(5), 2.0), (secs(3600), 5.0)] {
        let budget = RetryBudget::new();
        let start = Instant::now();
        for i in 0..20_000u64 {
            budget.deposit(start + Duration::from_micros(50 * i));
        }
        // The tokens of the burst, while it is recent.
        assert!(budget.snapshot(start + ms(999)).tokens > 1000.0);
        let outage = start + secs(1) + quiet;
        let retries: u32 = outage_sum(&budget, outage, ms(1), 10_000);
        let bound = 10_000.0 * 0.1 + held;
        assert!(
            (f64::from(retries) - bound).abs() <= 1.0,
            "after {quiet:?}: {retries} retries, bound {bound}"
        );
    }
}

fn outage_sum(budget: &RetryBudget, start: Instant, gap: Duration, n: u32) -> u32 {
    outage(budget, start, gap, n).iter().sum()
}

// Every 100 calls of an outage at one call a second get at most 10 % of them plus
// the reserve, plus one: 16 retries, 1.16x, once the window before it holds no burst.
// Histories: a burst of 20,000 calls then an hour of quiet; a busy day at a call a
// second; a burst then 10 s of quiet. The figure on the old budget: 500 in the
// first 100. (An outage within a window of a burst spends the burst's share:
// `history_tests::a_burst_then_an_outage_keeps_the_stated_bound_and_breaks_the_old_one`.)
// Can fail: tokens earned by calls no longer made, kept (500 in 100 calls).
#[test]
fn every_hundred_calls_of_an_outage_get_at_most_a_tenth_plus_the_reserve() {
    seed_thread_rng(8);
    type History = fn(&RetryBudget, Instant) -> Instant;
    let histories: [(&str, History); 3] = [
        ("a burst, then an hour of quiet", |budget, start| {
            for i in 0..20_000u64 {
                budget.deposit(start + Duration::from_micros(50 * i));
            }
            start + secs(3601)
        }),
        ("a busy day", |budget, start| {
            for i in 0..86_400u64 {
                budget.deposit(start + secs(i));
            }
            start + secs(86_401)
        }),
        ("a burst, then 10 s of quiet", |budget, start| {
            for i in 0..20_000u64 {
                budget.deposit(start + Duration::from_micros(50 * i));
            }
            start + secs(11)
        }),
    ];
    for (name, history) in histories {
        let budget = RetryBudget::new();
        let outage_at = history(&budget, Instant::now());
        let per_call = outage(&budget, outage_at, secs(1), 400);
        let most = most_in_any(&per_call, 100);
        assert!(most <= 16, "{name}: {most} retries in 100 calls");
        let total: u32 = per_call.iter().sum();
        assert!(total <= 40 + 5 + 1, "{name}: {total} retries in 400 calls");
    }
}

// Hedges draw on the same tokens: after a busy spell, a hedge of every call of a
// slow dependency (one a second) is granted at most 10 % of the time, plus the
// reserve. On the old budget: every call, three times (4.00x).
// Can fail: a hedge granted on tokens the budget may no longer hold.
#[test]
fn hedges_after_a_busy_spell_are_held_to_the_same_bound() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    for i in 0..20_000u64 {
        budget.deposit(start + Duration::from_micros(50 * i));
    }
    let slow = start + secs(20);
    let hedges: Vec<u32> = (0..600)
        .map(|i| {
            let now = slow + secs(i);
            let sent = (0..3).take_while(|_| budget.withdraw_hedge(now)).count() as u32;
            // Each call succeeds (slowly) at its first attempt: a request.
            budget.deposit(now);
            sent
        })
        .collect();
    assert!(most_in_any(&hedges, 100) <= 16, "{:?}", &hedges[..20]);
}

// A function called once a minute whose dependency fails twice before each success:
// every call succeeds, on what a minute of quiet gives back. On the old budget, 1 of
// 30.
// Can fail: no refill with time (1 of 30), or one slower than 1.4 tokens a minute.
#[test]
fn a_caller_once_a_minute_gets_its_two_retries_every_time() {
    seed_thread_rng(9);
    let budget = RetryBudget::new();
    let start = Instant::now();
    let mut succeeded = 0;
    for minute in 0..30 {
        let now = start + secs(60 * minute);
        budget.deposit(now);
        if budget.withdraw(now) && budget.withdraw(now) {
            budget.retry_succeeded(now);
            succeeded += 1;
        }
    }
    assert_eq!(succeeded, 30);
}

// A lone call after an outage drained the budget and 3 minutes of quiet gets the
// whole reserve again; one minute in, a share of it; 10 s of quiet, nothing more.
// Can fail: a reserve refilled only by requests (1 retry), or at once (5 after 10 s).
#[test]
fn the_reserve_refills_with_quiet() {
    let drained = || {
        let budget = RetryBudget::new();
        let start = Instant::now();
        outage(&budget, start, secs(1), 100);
        (budget, start + secs(99))
    };
    let granted = |budget: &RetryBudget, now: Instant| {
        budget.deposit(now);
        (0..10).take_while(|_| budget.withdraw(now)).count()
    };
    let (budget, last) = drained();
    assert_eq!(granted(&budget, last + secs(180)), 5);
    let (budget, last) = drained();
    // 50 s beyond the first 10, of 170: 1.47 tokens, and the request's 0.1.
    let minute = granted(&budget, last + secs(60));
    assert!((1..=2).contains(&minute), "{minute}");
    let (budget, last) = drained();
    assert!(granted(&budget, last + secs(10)) <= 1);
}

// A ratio of its own bounds retries the same way: 25 % of 1,000 failing requests,
// plus the reserve, within one. Can fail: a ratio scaled wrongly (0.25 taken as
// millionths of a token, or added to a whole token per request) or read as no limit.
#[test]
fn a_ratio_of_its_own_bounds_retries_the_same_way() {
    seed_thread_rng(4);
    let budget = RetryBudget::new().with_ratio(0.25);
    let mut dependency = SmallRng::seed_from_u64(4);
    let start = Instant::now();
    for i in 0..1000 {
        assert_eq!(call(&budget, start + ms(i), 1.0, &mut dependency), None);
    }
    let snapshot = budget.snapshot(start);
    assert!(
        (snapshot.retries as f64 - 255.0).abs() <= 1.0,
        "{snapshot:?}"
    );
}

// A hedge is granted only while a whole token stays for a retry: with one and a
// half tokens, none is; the retry after it still is. Can fail: a hedge granted on
// a little more than one token, leaving half a token.
#[test]
fn a_hedge_leaves_a_whole_token() {
    let budget = RetryBudget::new().with_reserve(1).with_floor(1);
    let t = Instant::now();
    budget.deposit(t);
    assert!(budget.withdraw(t));
    for _ in 0..15 {
        budget.deposit(t);
    }
    assert!((budget.snapshot(t).tokens - 1.5).abs() < 1e-9);
    assert!(!budget.withdraw_hedge(t));
    assert!(budget.withdraw(t));
    assert!((budget.snapshot(t).tokens - 0.5).abs() < 1e-9);
}

// The bound with successes: retries <= reserve + ratio x requests + 1/2 x calls that
// succeeded after retrying, + 1. With half the attempts failing, the budget is short
// nearly always, so it spends what it earns: retries are that sum within one, less
// what it holds at the end, and less what it could not hold when full (a few tenths,
// in the rare runs of first-try successes that fill it).
// Can fail: a refund that is not paid (retries near 10 %, 1,000) or paid twice, or a
// budget that lets retries through beyond its tokens.
#[test]
fn retries_that_work_cost_half() {
    seed_thread_rng(2);
    let budget = RetryBudget::new();
    let mut dependency = SmallRng::seed_from_u64(2);
    let start = Instant::now();
    let n: u32 = 10_000;
    let mut retried_successes = 0u32;
    for i in 0..n {
        let outcome = call(&budget, start + ms(u64::from(i)), 0.5, &mut dependency);
        retried_successes += u32::from(outcome.is_some_and(|retries| retries > 0));
    }
    let snapshot = budget.snapshot(start + ms(u64::from(n)));
    // The reserve a fresh budget holds (5) is cut to the busy ceiling at the second
    // call if the first did not spend it: between the two.
    let earned = |held: f64| held + f64::from(n) * 0.1 + 0.5 * f64::from(retried_successes);
    let spent = snapshot.retries as f64 + snapshot.tokens;
    let earned = (earned(2.0), earned(5.0));
    assert!(
        spent <= earned.1 + 1e-9 && earned.0 - spent <= 1.0,
        "{snapshot:?}, {retried_successes} succeeded after retrying: earned {earned:?}"
    );
    // About 1,000 / (1 - 1/2 x 1/2) retries: more than the ratio alone would allow.
    assert!((1250..=1420).contains(&snapshot.retries), "{snapshot:?}");
}

// A fleet of small budgets earns its tokens in step (one request a second each); were
// a token granted only when whole, all of them would retry in the same second, every
// ten seconds. The last fraction is granted with its probability, so they spread.
// Can fail: grants of whole tokens only (1,000 in one second, none in the nine
// before), or a fraction granted always (the ratio no longer holds).
#[test]
fn budgets_that_earn_in_step_do_not_spend_in_step() {
    seed_thread_rng(3);
    let start = Instant::now();
    let budgets: Vec<RetryBudget> = (0..1000).map(|_| RetryBudget::new()).collect();
    for budget in &budgets {
        budget.deposit(start);
        while budget.withdraw(start) {}
    }
    let mut per_second = Vec::new();
    for second in 1..=60 {
        let now = start + Duration::from_secs(second);
        let granted = budgets
            .iter()
            .filter(|budget| {
                budget.deposit(now);
                budget.withdraw(now)
            })
            .count();
        per_second.push(granted);
    }
    let total: usize = per_second.iter().sum();
    // 61 requests each at 10 %: 6,100 retries, less the debt a budget may end in.
    assert!((5000..=6100).contains(&total), "{total}: {per_second:?}");
    let peak = per_second.iter().max().copied().unwrap_or(0);
    assert!(peak <= 300, "{per_second:?}");
}

// A budget busy at a request every 10 s (never quiet) earns its floor back from
// requests only; the floor and the reserve are each at least what they are set to.
#[test]
fn a_busy_budget_holds_its_floor() {
    let budget = RetryBudget::new();
    let now = Instant::now();
    budget.deposit(now);
    assert_eq!((0..9).filter(|_| budget.withdraw(now)).count(), 5);
    // Ten requests pay for one retry; a request every 10 s never fills it beyond the
    // floor.
    for i in 1..=100 {
        budget.deposit(now + Duration::from_secs(10 * i));
    }
    // Their share of the window gone, 2 s after the last.
    let later = now + Duration::from_secs(1002);
    assert_eq!(budget.snapshot(later).tokens, 2.0);
    assert!(budget.withdraw(later));
    assert!(budget.withdraw(later));
    assert!(!budget.withdraw(later));
    let snapshot = budget.snapshot(later);
    assert_eq!((snapshot.retries, snapshot.refusals), (7, 5));
    // A floor of zero is one; a reserve below the floor is the floor.
    let low = RetryBudget::new().with_floor(0).with_reserve(0);
    assert_eq!(low.snapshot(later).tokens, 1.0);
    assert_eq!(
        RetryBudget::new().with_reserve(1).snapshot(later).tokens,
        2.0
    );
    assert_eq!(
        RetryBudget::new().with_reserve(9).snapshot(later).tokens,
        9.0
    );
}

// A busy budget holds what the last second's requests earned (or its floor, if
// more): it can absorb a burst of failures. Requests spread thinner earn no more than
// the floor, and the burst's tokens are gone a window after it.
// Can fail: a capacity of the floor alone (2 retries out of a burst of 100 failures),
// or one that never forgets (an outage spends a long quiet spell's tokens at once).
#[test]
fn a_busy_budget_holds_a_window_of_requests() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    for i in 0..1000 {
        budget.deposit(start + ms(i / 2));
    }
    assert_eq!(budget.snapshot(start + ms(500)).tokens, 100.0);
    let withdrawn = (0..200)
        .filter(|_| budget.withdraw(start + ms(500)))
        .count();
    assert_eq!(withdrawn, 100);
    let later = start + Duration::from_secs(3);
    // Ten requests a second: one token a second, at most the floor.
    for i in 0..100 {
        budget.deposit(later + ms(100 * i));
    }
    assert_eq!(budget.snapshot(later + ms(9900)).tokens, 2.0);
    // Fifty at once, 2 s on: their 5 tokens, while they are in the window.
    for _ in 0..50 {
        budget.deposit(later + ms(12_000));
    }
    assert_eq!(budget.snapshot(later + ms(12_000)).tokens, 5.0);
    assert_eq!(budget.snapshot(later + ms(13_100)).tokens, 2.0);
}

// A batch of requests made over a long stretch counts in the window for its share
// of it: a thread's batches of 64 calls, one a second, hold a busy budget to its
// floor, not to the 6.4 tokens of 64 requests in its last second.
// Can fail: a batch counted as requests of the last second (6.4 tokens).
#[test]
fn a_batch_spread_over_a_minute_counts_for_its_share_of_the_window() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    budget.deposit(start);
    while budget.withdraw(start) {}
    let mut since = start;
    for k in 1..=10u64 {
        let now = start + secs(64 * k);
        budget.deposit_many(CompactInstant::new(now), 64, CompactInstant::new(since));
        since = now;
        let tokens = budget.snapshot(now).tokens;
        assert!(tokens <= 2.0 + 1e-9, "after batch {k}: {tokens}");
    }
    assert_eq!(budget.snapshot(since).requests, 641);
    assert_eq!(in_window(64, nanos(secs(64)), nanos(secs(1))), 1);
    assert_eq!(in_window(64, nanos(ms(500)), nanos(secs(1))), 64);
    assert_eq!(in_window(3, nanos(secs(2)), nanos(secs(1))), 2);
}

// The latest of a batch's requests is dated as far from the batch's end as its
// requests are apart: one request over the 30 s since the last is taken to be 15 s
// old, so the batch and the request made now after it each find 5 s of quiet beyond
// the first 10 (0.147 tokens each, with their tenths: 0.494).
// Can fail: the latest dated at the batch's start (no quiet for the batch, 20 s for
// the request: 0.788).
#[test]
fn a_batch_is_dated_by_the_spacing_of_its_requests() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    budget.deposit(start);
    while budget.withdraw(start) {}
    let drained = budget.snapshot(start).tokens;
    let now = start + secs(30);
    budget.deposit_many(CompactInstant::new(now), 1, CompactInstant::new(start));
    budget.deposit(now);
    let gained = budget.snapshot(now).tokens - drained;
    let expected = 2.0 * (0.1 + 5.0 * 5.0 / 170.0);
    assert!((gained - expected).abs() < 1e-5, "{gained} tokens");
}

// Requests at the same instant as the latest known are simultaneous with it: the
// quiet that came before holds for them too, and a fresh budget's second request at
// its first's instant leaves it its reserve.
// Can fail: a request at the same instant taken as one right after (the reserve cut
// to the floor of 2).
#[test]
fn requests_at_one_instant_share_the_quiet_before_them() {
    let budget = RetryBudget::new();
    let now = Instant::now();
    budget.deposit(now);
    budget.deposit(now);
    assert_eq!(budget.snapshot(now).tokens, 5.0);
    budget.deposit(now + ms(1));
    assert_eq!(budget.snapshot(now + ms(1)).tokens, 2.0);
}

// After a whole refill's quiet, a budget in debt is back at its full reserve.
// Can fail: a refill capped at the reserve, added to the debt (4.1 tokens).
#[test]
fn a_budget_in_debt_refills_to_its_whole_reserve() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    budget.deposit(start);
    while budget.withdraw(start) {}
    // Ten requests of a tenth each, then one on the last tenth: into debt.
    seed_thread_rng(21);
    let mut now = start;
    while budget.snapshot(now).tokens >= 0.0 {
        now += ms(1);
        budget.deposit(now);
        budget.withdraw(now);
    }
    assert!(budget.snapshot(now).tokens < 0.0);
    let later = now + secs(180);
    budget.deposit(later);
    assert_eq!(budget.snapshot(later).tokens, 5.0);
}

// A batch begun before the budget's first deposit keeps its length: 960 requests
// over the last 12 s count in the window for their twelfth (80, 8 tokens, and the
// request after them a tenth more), not as 960 of the last second.
// Can fail: a batch's start clamped to the budget's first deposit (96 tokens).
#[test]
fn a_batch_begun_before_the_first_deposit_keeps_its_length() {
    let budget = RetryBudget::new();
    let start = Instant::now();
    let now = start + secs(12);
    budget.deposit_many(CompactInstant::new(now), 960, CompactInstant::new(start));
    budget.deposit(now + ms(1));
    let tokens = budget.snapshot(now + ms(1)).tokens;
    assert!((tokens - 8.1).abs() < 1e-9, "{tokens} tokens");
}

// A retry granted before a reset and not made after it leaves the count at zero,
// not 2^64 - 1.
// Can fail: a count that wraps (18446744073709551615 retries).
#[test]
fn a_retry_not_made_after_a_reset_does_not_wrap_the_count() {
    let budget = RetryBudget::new();
    let now = Instant::now();
    budget.deposit(now);
    assert!(budget.withdraw(now));
    budget.reset();
    budget.retry_not_made(now);
    let snapshot = budget.snapshot(now);
    assert_eq!((snapshot.requests, snapshot.retries), (0, 0));
    assert_eq!(snapshot.tokens, 5.0);
}

#[test]
fn unlimited_never_refuses() {
    let budget = RetryBudget::unlimited();
    let now = Instant::now();
    assert!((0..100_000).all(|_| budget.withdraw(now)));
    assert_eq!(budget.snapshot(now).retries, 100_000);
}
