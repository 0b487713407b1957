//! The breaker's state machine: its moves, stale probes, the spell numbers' wrap, and
//! probes taken from several threads.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn consecutive_failures_open_it_and_a_probe_closes_it() {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(3)
        .with_open_for(ms(1000));
    let t = Instant::now();
    for _ in 0..2 {
        let permit = b.admit(t).unwrap();
        assert_eq!(permit, Permit::CLOSED);
        assert!(!permit.is_probe());
        b.record(permit, false, t);
    }
    // A success resets the run.
    b.record(Permit::CLOSED, true, t);
    for _ in 0..2 {
        b.record(Permit::CLOSED, false, t);
    }
    assert_eq!(b.state(t), BreakerState::Closed);
    b.record(Permit::CLOSED, false, t);
    assert_eq!(b.state(t), BreakerState::Open);
    assert_eq!(b.admit(t + ms(400)).unwrap_err().retry_in(), ms(600));
    // After the open time: one probe.
    let later = t + ms(1000);
    assert_eq!(b.state(later), BreakerState::HalfOpen);
    let probe = b.admit(later).unwrap();
    assert!(probe.is_probe());
    assert!(b.admit(later).is_err());
    b.record(probe, true, later);
    assert_eq!(b.state(later), BreakerState::Closed);
    let snap = b.snapshot(later);
    assert_eq!(
        (snap.opened, snap.half_opened, snap.closed, snap.rejected),
        (1, 1, 1, 2)
    );
}

/// A breaker of one probe, opened by a failure now, for `open_for`; with the instant
/// it goes half-open.
fn opened_until(open_for: Duration) -> (CircuitBreaker, Instant) {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(1)
        .with_open_for(open_for);
    let t = Instant::now();
    b.record(Permit::CLOSED, false, t);
    (b, t + open_for)
}

#[test]
fn a_failed_probe_reopens_it() {
    let (b, t1) = opened_until(ms(100));
    let probe = b.admit(t1).unwrap();
    assert!(probe.is_probe());
    b.record(probe, false, t1);
    assert_eq!(b.state(t1 + ms(99)), BreakerState::Open);
    assert_eq!(b.state(t1 + ms(100)), BreakerState::HalfOpen);
}

#[test]
fn an_abandoned_probe_frees_its_place() {
    let (b, t1) = opened_until(ms(10));
    let permit = b.admit(t1).unwrap();
    assert!(b.admit(t1).is_err());
    b.abandon(permit);
    assert!(b.admit(t1).unwrap().is_probe());
}

#[test]
fn failure_rate_needs_its_minimum_of_calls() {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(0)
        .with_failure_rate(0.5, 10, Duration::from_secs(10));
    let t = Instant::now();
    for i in 0..9 {
        b.record(Permit::CLOSED, i % 2 == 0, t);
    }
    // 9 calls, 4 failed: below the minimum.
    assert_eq!(b.state(t), BreakerState::Closed);
    b.record(Permit::CLOSED, false, t);
    // 10 calls, 5 failed: 50 %.
    assert_eq!(b.state(t), BreakerState::Open);
}

// A success counted with a permit taken while the breaker was closed, reported after
// it opened, does not close it: only a probe decides, in half-open.
// Can fail: an `||` for the `&&` in `record` lets such a success close a half-open
// breaker while its probe is out.
#[test]
fn a_stale_success_does_not_close_an_open_or_half_open_breaker() {
    let breaker = CircuitBreaker::new()
        .with_consecutive_failures(2)
        .with_open_for(ms(10_000))
        .with_probes(1);
    let t0 = Instant::now();
    let stale = breaker.admit(t0).unwrap();
    let stale_too = breaker.admit(t0).unwrap();
    for _ in 0..2 {
        let permit = breaker.admit(t0).unwrap();
        breaker.record(permit, false, t0);
    }
    assert_eq!(breaker.state(t0), BreakerState::Open);
    assert_eq!(breaker.record(stale, true, t0), None);
    assert_eq!(breaker.state(t0), BreakerState::Open);
    let t1 = t0 + ms(10_000);
    let probe = breaker.admit(t1).unwrap();
    assert!(probe.is_probe());
    assert_eq!(breaker.record(stale_too, true, t1), None);
    assert_eq!(breaker.state(t1), BreakerState::HalfOpen);
    assert!(breaker.admit(t1).is_err(), "the one probe is still out");
    assert_eq!(breaker.record(probe, true, t1), Some(BreakerState::Closed));
}

// A probe given back after another probe closed the breaker leaves the closed
// breaker as it is: its run of failures still counts toward opening it again.
// Can fail: an `||` for the `&&` in `abandon`, which took one failure off the run.
#[test]
fn a_probe_abandoned_after_the_breaker_closed_leaves_it_alone() {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(3)
        .with_open_for(ms(100))
        .with_probes(2);
    let t = Instant::now();
    for _ in 0..3 {
        b.record(Permit::CLOSED, false, t);
    }
    let t1 = t + ms(100);
    let first = b.admit(t1).unwrap();
    let second = b.admit(t1).unwrap();
    assert!(first.is_probe() && second.is_probe());
    assert_eq!(b.record(first, true, t1), Some(BreakerState::Closed));
    // Closed again: two failures in a row, then the second probe is given back.
    for _ in 0..2 {
        b.record(b.admit(t1).unwrap(), false, t1);
    }
    b.abandon(second);
    assert_eq!(b.state(t1), BreakerState::Closed);
    // The third failure in a row opens it.
    assert_eq!(
        b.record(b.admit(t1).unwrap(), false, t1),
        Some(BreakerState::Open)
    );
}

/// A breaker of two probes, open for 100 ms: opened, half-open at 100 ms with both
/// probes out, closed by one of them and opened again, all at 100 ms; with the other
/// probe, now of an ended spell, and that instant.
fn reopened_with_a_stale_probe_out() -> (CircuitBreaker, Permit, Instant) {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(1)
        .with_open_for(ms(100))
        .with_probes(2);
    let t = Instant::now();
    b.record(Permit::CLOSED, false, t);
    let t1 = t + ms(100);
    let (first, stale) = (b.admit(t1).unwrap(), b.admit(t1).unwrap());
    assert_eq!(b.record(first, true, t1), Some(BreakerState::Closed));
    assert_eq!(
        b.record(b.admit(t1).unwrap(), false, t1),
        Some(BreakerState::Open)
    );
    (b, stale, t1)
}

// A probe from an earlier half-open spell, given back when the breaker is half-open
// again and holds no probe, changes nothing: two probes may still go, and the
// breaker has gone half-open twice. Can fail: giving it back took the count of
// probes below zero, into the state's bits (the breaker read as open again).
#[test]
fn a_stale_probe_given_back_to_a_half_open_breaker_holding_none_changes_nothing() {
    let (b, stale, t1) = reopened_with_a_stale_probe_out();
    // Half-open at 200 ms: a probe taken and given back.
    let t2 = t1 + ms(100);
    b.abandon(b.admit(t2).unwrap());
    b.abandon(stale);
    assert!(b.admit(t2).is_ok());
    assert!(b.admit(t2).is_ok());
    assert!(b.admit(t2).is_err());
    assert_eq!(b.snapshot(t2).half_opened, 2);
}

// A probe from an earlier half-open spell, still out when the breaker has closed,
// opened and gone half-open again, decides nothing: its success does not close the
// breaker, its failure does not reopen it, and given back it frees no place of the
// new spell's probes. Can fail: a probe told apart only by the state (the stale
// success closed the breaker while the new probe was out).
#[test]
fn a_probe_from_an_earlier_half_open_spell_decides_nothing() {
    let (b, stale, t1) = reopened_with_a_stale_probe_out();
    // The stale probe's failure does not restart the open time.
    assert_eq!(b.record(stale, false, t1 + ms(99)), None);
    // Half-open at 200 ms, with both its probes out.
    let t2 = t1 + ms(100);
    let (probe, other) = (b.admit(t2).unwrap(), b.admit(t2).unwrap());
    assert_eq!(b.record(stale, true, t2), None);
    assert_eq!(b.record(stale, false, t2), None);
    b.abandon(stale);
    assert_eq!(b.state(t2), BreakerState::HalfOpen);
    assert!(b.admit(t2).is_err(), "both places are still taken");
    // The spell's own probes still decide it.
    b.abandon(other);
    assert_eq!(b.record(probe, false, t2), Some(BreakerState::Open));
    assert_eq!(b.snapshot(t2).half_opened, 2);
}

// Spell numbers wrap (a probe's fits in a byte): past the wrap, each spell's probe is
// still a probe, and still decides its own spell. Can fail: a spell number that
// overflowed the probe's byte (read as a closed breaker's permit).
#[test]
fn probes_decide_their_spell_past_the_wrap_of_spell_numbers() {
    let b = CircuitBreaker::new()
        .with_consecutive_failures(1)
        .with_open_for(ms(1));
    let mut t = Instant::now();
    b.record(Permit::CLOSED, false, t);
    for _ in 0..SPELLS + 2 {
        t += ms(1);
        let probe = b.admit(t).unwrap();
        assert!(probe.is_probe());
        assert_eq!(b.record(probe, false, t), Some(BreakerState::Open));
    }
    t += ms(1);
    let probe = b.admit(t).unwrap();
    assert_eq!(format!("{probe:?}"), "Permit { probe_of_spell: 3 }");
    assert_eq!(b.record(probe, true, t), Some(BreakerState::Closed));
    assert_eq!(b.snapshot(t).half_opened, SPELLS + 3);
    assert_eq!(format!("{:?}", b.admit(t).unwrap()), "Permit::CLOSED");
}

// Threads that take probes, and record or give them back, while spells come and go
// (no open time): never more probes of one spell out than allowed, and at the end
// none held. A probe of an ended spell may still be out beside the new spell's, so
// probes are counted by spell, over fewer spells than the numbers' wrap.
// Can fail: a lost update of the count, or a probe freed twice.
#[test]
fn probes_in_flight_stay_within_their_number_across_threads() {
    for _ in 0..20 {
        probes_in_flight_within_their_number();
    }
}

fn probes_in_flight_within_their_number() {
    use std::sync::atomic::AtomicU32;
    let b = CircuitBreaker::new()
        .with_consecutive_failures(1)
        .with_open_for(Duration::ZERO)
        .with_probes(2);
    let out: [AtomicU32; SPELLS as usize] = [const { AtomicU32::new(0) }; SPELLS as usize];
    let most = AtomicU32::new(0);
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let (b, out, most) = (&b, &out, &most);
            scope.spawn(move || {
                // Each thread starts at most one spell past the check: 4 past it.
                // Bounded, so that a breaker that stops moving fails, not hangs.
                for i in thread..thread + 1_000_000 {
                    if b.half_opened.load(Ordering::Relaxed) >= SPELLS - 10 {
                        break;
                    }
                    let now = Instant::now();
                    let Ok(permit) = b.admit(now) else { continue };
                    let Some(spell) = permit.spell() else {
                        b.record(permit, false, now);
                        continue;
                    };
                    // Counted here after the breaker counts it, and let go here
                    // before the breaker does: never more here than there.
                    let out = &out[spell as usize];
                    most.fetch_max(out.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    std::thread::yield_now();
                    out.fetch_sub(1, Ordering::SeqCst);
                    match i % 3 {
                        0 => b.abandon(permit),
                        1 => drop(b.record(permit, false, now)),
                        _ => drop(b.record(permit, true, now)),
                    }
                }
            });
        }
    });
    assert!(b.half_opened.load(Ordering::Relaxed) >= SPELLS - 10);
    let most = most.load(Ordering::SeqCst);
    assert!(
        (1..=2).contains(&most),
        "{most} probes of one spell out at once"
    );
    let current = b.state.load(Ordering::Acquire);
    if state_of(current) == HALF_OPEN {
        assert_eq!(count_of(current), 0, "a probe still counted");
    }
}

// A probe given back twice (a misuse) frees its place once it holds none: the count
// stays at zero, and the next probe goes through and decides the spell. Can fail: a
// count taken below zero, into the spell's number (the breaker then refused every
// probe, half-open for good).
#[test]
fn a_probe_given_back_twice_leaves_the_breaker_working() {
    let (b, t1) = opened_until(ms(100));
    let probe = b.admit(t1).unwrap();
    b.abandon(probe);
    b.abandon(probe);
    let next = b.admit(t1).unwrap();
    assert!(next.is_probe());
    assert!(b.admit(t1).is_err(), "one probe at a time");
    assert_eq!(b.record(next, true, t1), Some(BreakerState::Closed));
}

// One test opens a shared breaker an hour into its paused clock; the next test's
// clock starts earlier. Reset, the breaker is closed at once, has seen nothing, and a
// probe taken before the reset decides nothing. Can fail: a reset that leaves the
// opening's time (the breaker open for the rest of that hour) or the probe's spell.
#[test]
fn reset_closes_it_and_forgets_what_it_saw() {
    let (b, t1) = opened_until(ms(10_000));
    let late = t1 + Duration::from_secs(3600);
    b.record(b.admit(late).unwrap(), false, late);
    let probe = b.admit(late + ms(10_000)).unwrap();
    let next_test = t1 + ms(60_000);
    assert!(
        b.admit(next_test).is_err(),
        "open, as the hour has not passed here"
    );
    // Results of attempts that did not ask, counted in the window of failure rates.
    b.record(Permit::CLOSED, true, next_test);
    b.record(Permit::CLOSED, false, next_test);
    let seen = b.snapshot(next_test);
    assert_eq!((seen.calls, seen.failures), (2, 1));
    b.reset();
    assert_eq!(b.admit(next_test), Ok(Permit::CLOSED));
    assert_eq!(b.record(probe, false, next_test), None);
    assert_eq!(
        b.snapshot(next_test),
        BreakerSnapshot {
            state: BreakerState::Closed,
            calls: 0,
            failures: 0,
            opened: 0,
            half_opened: 0,
            closed: 0,
            rejected: 0,
        }
    );
    // It opens again as a new one would, and goes half-open after its open time.
    b.record(Permit::CLOSED, false, next_test);
    assert_eq!(b.state(next_test + ms(9_999)), BreakerState::Open);
    assert_eq!(b.state(next_test + ms(10_000)), BreakerState::HalfOpen);
}

// A breaker counts consecutive failures without end when that rule is off: the
// count stops at the top of its bits and does not spill into the spell's number,
// so a later probe's result still counts. Can fail: an unbounded count.
#[test]
fn consecutive_failures_saturate_below_the_spell_number() {
    let b = CircuitBreaker::new().with_consecutive_failures(0);
    b.state
        .store(word(CLOSED, 5, COUNT_MASK), Ordering::Release);
    let t = Instant::now();
    assert_eq!(b.record(Permit::CLOSED, false, t), None);
    let current = b.state.load(Ordering::Acquire);
    assert_eq!(
        (state_of(current), spell_of(current), count_of(current)),
        (CLOSED, 5, COUNT_MASK)
    );
}

// What an open breaker's refusal says.
#[test]
fn an_open_breaker_says_when_it_will_probe() {
    let open = CircuitOpen {
        retry_in: Duration::from_millis(1500),
    };
    assert_eq!(
        open.to_string(),
        "the circuit breaker is open; the next probe in 1.5s"
    );
    assert_eq!(open.retry_in(), Duration::from_millis(1500));
}
