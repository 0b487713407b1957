//! Property tests of the backoff schedule and of the retry state machine.
//!
//! Over random seeds and random policies (base up to 10 s, cap up to 60 s, multiplier in
//! `[1, 4]`, retry numbers up to 10 000) this file checks that:
//! - without jitter every wait is exactly `backoff::ceiling`, which is monotone in the
//!   retry number, never above `cap`, and saturates at `cap`;
//! - full, equal and decorrelated jitter keep every wait inside their documented ranges;
//! - full and equal jitter have the expected mean and spread (fixed-seed statistics);
//! - [`RetryState`] grants a retry only within the attempt backstop and only if the wait
//!   ends strictly before the deadline, gives up for the documented reason otherwise,
//!   always gives up on a permanent failure, and honours `Retry-After` as a lower bound:
//!   never a wait shorter than the server's, spread after it by up to a fifth of it (or
//!   `base`, if more), and always ending before the deadline.

use std::time::{Duration, Instant};

use persevere_runtime::backoff::ceiling;
use persevere_runtime::{Backoff, Class, Decision, GiveUp, Jitter, Policy, RetryState};
use proptest::prelude::*;
use rand::{SeedableRng, rngs::SmallRng};

const MS: u64 = 1_000_000;

/// The cases of each property test.
const CASES: u32 = 2000;

/// `CASES` cases, and no regression files written next to this file on a failure: the
/// failing input is printed instead.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A duration in `[0, max_ms]` milliseconds: to the nanosecond, in whole milliseconds,
/// or at the edges.
fn duration_up_to(max_ms: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0..=max_ms * MS).prop_map(Duration::from_nanos),
        4 => (0..=max_ms).prop_map(Duration::from_millis),
        1 => (0u64..=1000).prop_map(Duration::from_nanos),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::from_millis(max_ms)),
    ]
}

/// A multiplier in `[1, 4]`, with its edges and values just above 1.
fn multiplier() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => 1.0..=4.0f64,
        1 => 1.0..=1.001f64,
        1 => Just(1.0),
        1 => Just(1.0 + f64::EPSILON),
        1 => Just(2.0),
        1 => Just(4.0),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
    ]
}

/// A policy with a random schedule (base, cap, multiplier) and the given jitter.
fn schedule(jitter: Jitter) -> impl Strategy<Value = Policy> {
    (duration_up_to(10_000), duration_up_to(60_000), multiplier()).prop_map(
        move |(base, cap, multiplier)| {
            Policy::new()
                .with_base(base)
                .with_cap(cap)
                .with_multiplier(multiplier)
                .with_jitter(jitter)
        },
    )
}

/// A policy with everything random: schedule, jitter, deadline (up to 120 s), attempts
/// (1 to 20) and `max_retry_after` (up to 60 s).
fn full_policy() -> impl Strategy<Value = Policy> {
    let deadline = prop_oneof![
        (1..=120_000 * MS).prop_map(Duration::from_nanos),
        (1u64..=120_000).prop_map(Duration::from_millis),
        (1u64..=1000).prop_map(Duration::from_nanos),
    ];
    (
        jitter().prop_flat_map(schedule),
        deadline,
        1u32..=20,
        duration_up_to(60_000),
    )
        .prop_map(|(policy, deadline, attempts, max_retry_after)| {
            policy
                .with_deadline(deadline)
                .with_attempts(attempts)
                .with_max_retry_after(max_retry_after)
        })
}

/// How many waits to draw from a schedule: mostly short walks, sometimes up to 10 000.
fn walk_length() -> impl Strategy<Value = u32> {
    prop_oneof![3 => 0u32..=64, 1 => 0u32..=10_000]
}

/// A failure as the state machine sees it, mostly retryable.
fn class() -> impl Strategy<Value = Class> {
    prop_oneof![
        4 => Just(Class::Transient),
        2 => Just(Class::Unsent),
        1 => Just(Class::NotApplied),
        3 => duration_up_to(70_000).prop_map(Class::RetryAfter),
        1 => Just(Class::Permanent),
    ]
}

/// The time between two failures: none, short, or long.
fn gap() -> impl Strategy<Value = Duration> {
    prop_oneof![
        1 => Just(Duration::ZERO),
        3 => (0..=100 * MS).prop_map(Duration::from_nanos),
        3 => (0..=5_000 * MS).prop_map(Duration::from_nanos),
        1 => (0..=60_000 * MS).prop_map(Duration::from_nanos),
    ]
}

/// The range a `Retry-After` of `requested` may be spread into under `policy`: from the
/// request itself to a fifth more, or `base` more if that is more (before the deadline
/// cuts it).
fn retry_after_bounds(requested: Duration, policy: &Policy) -> (Duration, Duration) {
    (requested, requested + (requested / 5).max(policy.base()))
}

proptest! {
    #![proptest_config(config())]

    /// Without jitter, wait `n` is exactly `ceiling(n)`, which never decreases and never
    /// exceeds `cap`.
    #[test]
    fn no_jitter_waits_are_exactly_the_ceiling(
        policy in schedule(Jitter::None),
        seed in any::<u64>(),
        len in walk_length(),
    ) {
        let mut previous = Duration::ZERO;
        let waits = Backoff::new(&policy).delays(policy, SmallRng::seed_from_u64(seed));
        for (n, wait) in (0..=len).zip(waits) {
            let top = ceiling(&policy, n);
            prop_assert_eq!(wait, top, "retry {}", n);
            prop_assert!(top <= policy.cap(), "retry {}: {:?} above the cap", n, top);
            prop_assert!(top >= previous, "retry {}: {:?} after {:?}", n, top, previous);
            previous = top;
        }
    }

    /// `ceiling(n)` is `min(cap, base * multiplier^n)`: it starts at `min(base, cap)`,
    /// never decreases, never exceeds `cap`, and matches the formula where it is below
    /// `cap`.
    #[test]
    fn ceiling_is_monotone_capped_and_exponential(
        policy in jitter().prop_flat_map(schedule),
        n in 0u32..=10_000,
    ) {
        let (base, cap) = (policy.base(), policy.cap());
        prop_assert_eq!(ceiling(&policy, 0), base.min(cap));
        let here = ceiling(&policy, n);
        let next = ceiling(&policy, n + 1);
        prop_assert!(here <= next, "ceiling({}) = {:?} > ceiling({}) = {:?}", n, here, n + 1, next);
        prop_assert!(next <= cap);
        prop_assert!(here <= ceiling(&policy, u32::MAX));
        prop_assert!(ceiling(&policy, u32::MAX - 1) <= ceiling(&policy, u32::MAX));
        prop_assert!(ceiling(&policy, u32::MAX) <= cap);

        // Compare with the formula in the log domain, away from the cap where rounding
        // could go either way.
        if !base.is_zero() && base < cap {
            let log_exact = (base.as_nanos() as f64).ln() + f64::from(n) * policy.multiplier().ln();
            let log_cap = (cap.as_nanos() as f64).ln();
            if log_exact > log_cap + 1e-9 {
                prop_assert_eq!(here, cap, "ceiling({}) should have reached the cap", n);
            } else if log_exact < log_cap - 1e-9 {
                let exact = log_exact.exp();
                let got = here.as_nanos() as f64;
                prop_assert!(
                    (got - exact).abs() <= 1.0 + exact * 1e-9,
                    "ceiling({}) = {} ns, base * multiplier^n = {} ns", n, got, exact
                );
            }
        }
    }

    /// With `base > 0` and a multiplier that grows fast enough to pass 60 s from 1 ns,
    /// huge retry numbers give exactly `cap`. (A multiplier a hair above 1 need not reach
    /// the cap by retry 10 000: `(1 + 1e-9)^10000 * base` is still about `base`.)
    #[test]
    fn huge_retry_numbers_give_the_cap(
        base in (1..=10_000 * MS).prop_map(Duration::from_nanos),
        cap in duration_up_to(60_000),
        fast in 1.01..=4.0f64,
        slow in 1.000_001..=4.0f64,
    ) {
        let policy = Policy::new().with_base(base).with_cap(cap);
        let fast_policy = policy.with_multiplier(fast);
        prop_assert_eq!(ceiling(&fast_policy, 10_000), cap);
        prop_assert_eq!(ceiling(&fast_policy, u32::MAX), cap);
        prop_assert_eq!(ceiling(&policy.with_multiplier(slow), u32::MAX), cap);
    }

    /// Full jitter: wait `n` is in `[0, ceiling(n)]`.
    #[test]
    fn full_jitter_stays_below_the_ceiling(
        policy in schedule(Jitter::Full),
        seed in any::<u64>(),
        len in walk_length(),
    ) {
        let waits = Backoff::new(&policy).delays(policy, SmallRng::seed_from_u64(seed));
        for (n, wait) in (0..=len).zip(waits) {
            let top = ceiling(&policy, n);
            prop_assert!(wait <= top, "retry {}: {:?} above {:?}", n, wait, top);
        }
    }

    /// Equal jitter: wait `n` is in `[ceiling(n) / 2, ceiling(n)]`, the half rounded down
    /// to the nanosecond.
    #[test]
    fn equal_jitter_keeps_at_least_half_the_ceiling(
        policy in schedule(Jitter::Equal),
        seed in any::<u64>(),
        len in walk_length(),
    ) {
        let waits = Backoff::new(&policy).delays(policy, SmallRng::seed_from_u64(seed));
        for (n, wait) in (0..=len).zip(waits) {
            let top = ceiling(&policy, n);
            let half = Duration::from_nanos(u64::try_from(top.as_nanos() / 2).unwrap());
            prop_assert!(
                half <= wait && wait <= top,
                "retry {}: {:?} outside [{:?}, {:?}]", n, wait, half, top
            );
        }
    }

    /// Decorrelated jitter: each wait is in
    /// `[min(base, cap), min(cap, max(base, 3 * previous))]`, `previous` starting at
    /// `base`; the multiplier plays no part.
    #[test]
    fn decorrelated_jitter_grows_from_the_previous_wait(
        policy in schedule(Jitter::Decorrelated),
        seed in any::<u64>(),
        len in walk_length(),
    ) {
        let (base, cap) = (policy.base(), policy.cap());
        let low = base.min(cap);
        let mut previous = base;
        let waits = Backoff::new(&policy).delays(policy, SmallRng::seed_from_u64(seed));
        for (n, wait) in (0..=len).zip(waits) {
            let high = cap.min(base.max(previous * 3));
            prop_assert!(
                low <= wait && wait <= high,
                "retry {}: {:?} outside [{:?}, {:?}] (previous {:?})", n, wait, low, high, previous
            );
            previous = wait;
        }
        // The same seed with another multiplier gives the same waits.
        let other = policy.with_multiplier(if policy.multiplier() == 2.0 { 3.0 } else { 2.0 });
        let a = Backoff::new(&policy).delays(policy, SmallRng::seed_from_u64(seed));
        let b = Backoff::new(&other).delays(other, SmallRng::seed_from_u64(seed));
        prop_assert!(a.take(16).eq(b.take(16)));
    }

    /// Drives a [`RetryState`] through a random sequence of failures at increasing times
    /// and checks every step against the rules:
    /// - a permanent failure gives up at once, and changes nothing;
    /// - with the attempts used up, it gives up with `AttemptsExhausted`;
    /// - a transient or unsent failure waits the next wait of the policy's own backoff
    ///   schedule (a server-requested wait does not advance that schedule) if it ends
    ///   strictly before the deadline, and gives up with `DeadlineExceeded` otherwise;
    /// - a `Retry-After` beyond `max_retry_after` gives up with `RetryAfterTooLong`; one
    ///   within it waits 0.8 to 1.2 times the request, if that ends before the deadline;
    /// - every retry happens with attempts to spare and ends before `start + deadline`.
    #[test]
    fn retry_state_grants_retries_only_within_attempts_and_deadline(
        policy in full_policy(),
        seed in any::<u64>(),
        failures in prop::collection::vec((class(), gap()), 0..=30),
    ) {
        let start = Instant::now();
        let deadline = start + policy.deadline();
        let mut state = RetryState::new(&policy, start);
        prop_assert_eq!(state.deadline(), Some(deadline));
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut schedule = Backoff::new(&policy);
        let mut now = start;

        // Every failure that does not end the call is retried, so failure `i` follows
        // attempt `i + 1`.
        for (attempts, (class, gap)) in (1u32..).zip(failures) {
            now += gap;
            let remaining = deadline.saturating_duration_since(now);
            prop_assert_eq!(state.attempts(), attempts);
            prop_assert_eq!(state.remaining(now), remaining);

            // A permanent failure at this point would end the call and change nothing.
            let mut probe = state;
            prop_assert_eq!(
                probe.on_failure(Class::Permanent, now, &mut rng.clone()),
                Decision::GiveUp(GiveUp::Permanent)
            );
            prop_assert_eq!(probe.attempts(), attempts);

            // The wait the backoff schedule would give next, drawn from the same
            // randomness as the state machine is about to draw from.
            let mut next_schedule = schedule;
            let scheduled = next_schedule.next_delay(&policy, &mut rng.clone());

            let decision = state.on_failure(class, now, &mut rng);
            let context = format!("attempt {attempts} failed ({class:?}) at {:?}: {decision:?}", now - start);

            if let Decision::Retry(wait) = decision {
                prop_assert!(attempts < policy.attempts(), "{}: no attempts left", context);
                prop_assert!(now + wait < deadline, "{}: the wait reaches the deadline", context);
            }

            match class {
                Class::Permanent => {
                    prop_assert_eq!(decision, Decision::GiveUp(GiveUp::Permanent), "{}", context);
                    break;
                }
                _ if attempts >= policy.attempts() => {
                    prop_assert_eq!(decision, Decision::GiveUp(GiveUp::AttemptsExhausted), "{}", context);
                    break;
                }
                Class::Transient | Class::Unsent | Class::NotApplied => {
                    schedule = next_schedule;
                    if scheduled < remaining {
                        prop_assert_eq!(decision, Decision::Retry(scheduled), "{}", context);
                    } else {
                        prop_assert_eq!(decision, Decision::GiveUp(GiveUp::DeadlineExceeded), "{}", context);
                        break;
                    }
                }
                // Not generated: its own limit is checked by the state machine's unit
                // tests.
                Class::Uncertain => unreachable!("uncertain failures are not generated"),
                Class::RetryAfter(requested) => {
                    if requested > policy.max_retry_after() {
                        prop_assert_eq!(decision, Decision::GiveUp(GiveUp::RetryAfterTooLong), "{}", context);
                        break;
                    }
                    let (low, high) = retry_after_bounds(requested, &policy);
                    match decision {
                        Decision::Retry(wait) => prop_assert!(
                            low <= wait && wait <= high && wait < remaining,
                            "{}: outside [{:?}, {:?}] or past {:?} left", context, low, high, remaining
                        ),
                        Decision::GiveUp(GiveUp::DeadlineExceeded) => {
                            prop_assert!(requested >= remaining, "{}: the wait fitted", context);
                            break;
                        }
                        Decision::GiveUp(_) => prop_assert!(false, "{}: wrong reason", context),
                    }
                }
            }
            prop_assert_eq!(state.attempts(), attempts + 1, "{}", context);
        }
    }

    /// At a fixed instant, a run of transient failures gets at most `attempts - 1`
    /// retries; exactly that many, in a row, when every possible wait (at most `cap`)
    /// fits before the deadline.
    #[test]
    fn transient_retries_never_exceed_attempts_minus_one(
        policy in full_policy(),
        seed in any::<u64>(),
        offset in prop_oneof![Just(Duration::ZERO), duration_up_to(150_000)],
        unsent in any::<bool>(),
    ) {
        let class = if unsent { Class::Unsent } else { Class::Transient };
        let start = Instant::now();
        let now = start + offset;
        let mut state = RetryState::new(&policy, start);
        let mut rng = SmallRng::seed_from_u64(seed);
        let calls = policy.attempts() + 5;
        let steps: Vec<Decision> = (0..calls).map(|_| state.on_failure(class, now, &mut rng)).collect();
        let retries = steps.iter().filter(|s| matches!(s, Decision::Retry(_))).count();
        let granted = usize::try_from(policy.attempts() - 1).unwrap();
        prop_assert!(retries <= granted, "{} retries: {:?}", retries, steps);
        prop_assert_eq!(state.attempts() as usize, retries + 1);
        if policy.cap() < state.remaining(now) {
            prop_assert!(
                steps[..granted].iter().all(|s| matches!(s, Decision::Retry(_))),
                "every wait fitted: {:?}", steps
            );
            prop_assert!(
                steps[granted..].iter().all(|s| *s == Decision::GiveUp(GiveUp::AttemptsExhausted)),
                "{:?}", steps
            );
        }
    }

    /// A permanent failure gives up at once, whatever came before and whenever it
    /// happens, even past the deadline.
    #[test]
    fn permanent_failures_always_give_up(
        policy in full_policy(),
        seed in any::<u64>(),
        before in prop::collection::vec((class(), gap()), 0..=10),
        late in duration_up_to(200_000),
    ) {
        let start = Instant::now();
        let mut state = RetryState::new(&policy, start);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut now = start;
        for (class, gap) in before {
            now += gap;
            if class != Class::Permanent {
                let _ = state.on_failure(class, now, &mut rng);
            }
        }
        let attempts = state.attempts();
        for at in [now, now + late] {
            prop_assert_eq!(
                state.on_failure(Class::Permanent, at, &mut rng),
                Decision::GiveUp(GiveUp::Permanent)
            );
            prop_assert_eq!(state.attempts(), attempts);
        }
    }

    /// A `Retry-After` within `max_retry_after` that ends before the deadline is always
    /// honoured, with a wait no shorter than it, spread after it within its bounds and
    /// before the deadline; one that reaches the deadline never is.
    #[test]
    fn retry_after_is_a_lower_bound_spread_within_the_deadline(
        policy in full_policy(),
        seed in any::<u64>(),
        requested in duration_up_to(70_000),
        offset in prop_oneof![Just(Duration::ZERO), duration_up_to(120_000)],
    ) {
        let start = Instant::now();
        let now = start + offset;
        let mut rng = SmallRng::seed_from_u64(seed);
        let (low, high) = retry_after_bounds(requested, &policy);
        let mut state = RetryState::new(&policy, start);
        let remaining = state.remaining(now);
        let decision = state.on_failure(Class::RetryAfter(requested), now, &mut rng);
        if policy.attempts() == 1 {
            prop_assert_eq!(decision, Decision::GiveUp(GiveUp::AttemptsExhausted));
        } else if requested > policy.max_retry_after() {
            prop_assert_eq!(decision, Decision::GiveUp(GiveUp::RetryAfterTooLong));
        } else if requested < remaining {
            match decision {
                Decision::Retry(wait) => prop_assert!(
                    low <= wait && wait <= high && wait < remaining,
                    "{:?} for {:?}: outside [{:?}, {:?}] or past {:?} left", wait, requested, low, high, remaining
                ),
                other => prop_assert!(false, "{:?} for {:?} with {:?} left", other, requested, remaining),
            }
        } else {
            prop_assert_eq!(decision, Decision::GiveUp(GiveUp::DeadlineExceeded));
        }
    }
}

/// 100 000 waits of `jitter` with every ceiling equal to `ceiling`, from a fixed seed.
fn fixed_ceiling_draws(jitter: Jitter, ceiling: Duration) -> Vec<f64> {
    let policy = Policy::new()
        .with_base(ceiling)
        .with_cap(ceiling)
        .with_jitter(jitter);
    Backoff::new(&policy)
        .delays(policy, SmallRng::seed_from_u64(0x5eed_1e55))
        .take(100_000)
        .map(|wait| wait.as_nanos() as f64)
        .collect()
}

/// An odd number of nanoseconds, so that halving it rounds.
const FIXED_CEILING: Duration = Duration::from_nanos(1_234_567_891);

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Full jitter's waits average half the ceiling, are spread over the whole range, and
/// fill it evenly.
#[test]
fn full_jitter_statistics() {
    let c = FIXED_CEILING.as_nanos() as f64;
    let draws = fixed_ceiling_draws(Jitter::Full, FIXED_CEILING);
    let m = mean(&draws);
    assert!(
        (m - c / 2.0).abs() <= 0.02 * c / 2.0,
        "mean {m} ns, expected about {} ns",
        c / 2.0
    );
    assert!(draws.iter().all(|&d| (0.0..=c).contains(&d)));
    let (min, max) = draws.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &d| {
        (lo.min(d), hi.max(d))
    });
    assert!(
        min < 0.01 * c && max > 0.99 * c,
        "waits span only [{min}, {max}] of [0, {c}]"
    );
    let mut distinct = draws.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    assert!(distinct.len() > 99_000, "{} distinct waits", distinct.len());
    // Ten equal buckets each hold about a tenth (sd ~95 draws, so ±1000 is ~10 sd).
    let mut buckets = [0u32; 10];
    for d in &draws {
        buckets[((d / c * 10.0) as usize).min(9)] += 1;
    }
    assert!(
        buckets.iter().all(|&b| (9_000..=11_000).contains(&b)),
        "uneven spread: {buckets:?}"
    );
}

/// Equal jitter's waits average three quarters of the ceiling, and spread over its upper
/// half.
#[test]
fn equal_jitter_statistics() {
    let c = FIXED_CEILING.as_nanos() as f64;
    let half = (FIXED_CEILING.as_nanos() / 2) as f64;
    let draws = fixed_ceiling_draws(Jitter::Equal, FIXED_CEILING);
    let m = mean(&draws);
    assert!(
        (m - 0.75 * c).abs() <= 0.02 * 0.75 * c,
        "mean {m} ns, expected about {} ns",
        0.75 * c
    );
    assert!(draws.iter().all(|&d| (half..=c).contains(&d)));
    let (min, max) = draws.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &d| {
        (lo.min(d), hi.max(d))
    });
    assert!(
        min < 0.51 * c && max > 0.99 * c,
        "waits span only [{min}, {max}] of [{half}, {c}]"
    );
}
