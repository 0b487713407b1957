//! The backoff schedule: the waits between attempts, as a plain value.
//!
//! A [`Backoff`] needs no runtime, no clock and no sleeping: it turns a [`Policy`] and a
//! source of randomness into a sequence of waits, so a schedule can be printed, tested
//! or simulated on its own.

use std::time::Duration;

use rand::Rng;

use crate::schedule::policy::{Jitter, Policy};

/// Where one call is in its policy's schedule of waits: the wait before retry 0, retry 1,
/// and so on.
///
/// A `Backoff` holds only the position (the retry number and the previous wait, which
/// decorrelated jitter grows from); the [`Policy`] is passed to each step, which keeps
/// the state of a call small. [`Backoff::delays`] pairs the two into an iterator.
///
/// ```
/// use std::time::Duration;
/// use persevere::{Backoff, Jitter, Policy};
/// use rand::{SeedableRng, rngs::SmallRng};
///
/// let policy = Policy::new()
///     .with_base(Duration::from_millis(100))
///     .with_cap(Duration::from_secs(1))
///     .with_jitter(Jitter::None);
/// let waits: Vec<_> = Backoff::new(&policy)
///     .delays(policy, SmallRng::seed_from_u64(7))
///     .take(6)
///     .map(|d| d.as_millis())
///     .collect();
/// assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    retry: u32,
    /// The previous wait in nanoseconds (saturating at 584 years): half the size of a
    /// `Duration`, which keeps a call's state small.
    previous: u64,
}

impl Backoff {
    /// The position before the first retry of `policy`'s schedule.
    pub const fn new(policy: &Policy) -> Self {
        let _ = policy;
        Self {
            retry: 0,
            // The base until the first retry: read from the policy then, which keeps
            // the start of a call to two stores.
            previous: 0,
        }
    }

    /// How many waits this schedule has produced so far.
    pub const fn retries(&self) -> u32 {
        self.retry
    }

    /// The wait before the next retry of `policy`, jitter applied, drawing randomness
    /// from `rng`.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, policy: &Policy, rng: &mut R) -> Duration {
        let n = self.retry;
        self.retry = self.retry.saturating_add(1);
        let delay = match policy.jitter() {
            Jitter::None => ceiling(policy, n),
            Jitter::Full => uniform(rng, Duration::ZERO, ceiling(policy, n)),
            Jitter::Equal => {
                let ceiling = ceiling(policy, n);
                let half = ceiling / 2;
                // `ceiling - half` rather than `half` keeps the top of the range at
                // `ceiling` when it is an odd number of nanoseconds.
                half + uniform(rng, Duration::ZERO, ceiling - half)
            }
            Jitter::Decorrelated => {
                let previous = if n == 0 {
                    saturating_nanos(policy.base())
                } else {
                    self.previous
                };
                let top = Duration::from_nanos(previous.saturating_mul(3)).max(policy.base());
                uniform(rng, policy.base(), top).min(policy.cap())
            }
        };
        self.previous = saturating_nanos(delay);
        delay
    }

    /// The endless sequence of `policy`'s waits from this position, drawing randomness
    /// from `rng`.
    pub fn delays<R: Rng>(self, policy: Policy, rng: R) -> Delays<R> {
        Delays {
            backoff: self,
            policy,
            rng,
        }
    }
}

/// The wait before retry `n` (from 0) before jitter: `min(cap, base * multiplier^n)`.
///
/// Saturating for every `n`: a huge `n` gives `cap`, never an overflow or a panic.
///
/// ```
/// use std::time::Duration;
/// use persevere::{Policy, backoff::ceiling};
///
/// let policy = Policy::new().with_cap(Duration::from_secs(20));
/// assert_eq!(ceiling(&policy, 1), Duration::from_millis(400));
/// assert_eq!(ceiling(&policy, 10_000), Duration::from_secs(20));
/// ```
pub fn ceiling(policy: &Policy, n: u32) -> Duration {
    exponential(policy.base(), policy.cap(), policy.multiplier(), n)
}

/// The waits of a [`Backoff`] as an [`Iterator`]; made by [`Backoff::delays`].
#[derive(Clone, Debug)]
pub struct Delays<R> {
    backoff: Backoff,
    policy: Policy,
    rng: R,
}

impl<R: Rng> Iterator for Delays<R> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.backoff.next_delay(&self.policy, &mut self.rng))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

/// `min(cap, base * multiplier^n)`, computed in nanoseconds as a float so that no `n`
/// can overflow: an infinite product is simply larger than `cap`.
fn exponential(base: Duration, cap: Duration, multiplier: f64, n: u32) -> Duration {
    if base >= cap {
        return cap;
    }
    let exponent = i32::try_from(n).unwrap_or(i32::MAX);
    let nanos = base.as_nanos() as f64 * multiplier.powi(exponent);
    if nanos >= cap.as_nanos() as f64 {
        cap
    } else {
        // Below `cap`, which is itself a `Duration`, so it fits; `as` saturates anyway.
        Duration::from_nanos(nanos as u64)
    }
}

/// A uniform random duration in `[low, high]`, to the nanosecond.
fn uniform<R: Rng + ?Sized>(rng: &mut R, low: Duration, high: Duration) -> Duration {
    let low = saturating_nanos(low);
    let high = saturating_nanos(high);
    if high <= low {
        return Duration::from_nanos(low);
    }
    Duration::from_nanos(rng.random_range(low..=high))
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::SmallRng};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn policy(jitter: Jitter) -> Policy {
        Policy::new()
            .with_base(ms(100))
            .with_cap(ms(1000))
            .with_jitter(jitter)
    }

    #[test]
    fn no_jitter_doubles_up_to_the_cap() {
        let p = policy(Jitter::None);
        let waits: Vec<_> = Backoff::new(&p)
            .delays(p, SmallRng::seed_from_u64(1))
            .take(7)
            .collect();
        assert_eq!(
            waits,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1000),
                ms(1000),
                ms(1000)
            ]
        );
    }

    #[test]
    fn huge_retry_numbers_saturate_at_the_cap() {
        let p = policy(Jitter::None);
        assert_eq!(ceiling(&p, 10_000), ms(1000));
        assert_eq!(ceiling(&p, u32::MAX), ms(1000));
        let huge = Policy::new()
            .with_base(Duration::MAX / 2)
            .with_cap(Duration::MAX)
            .with_multiplier(1e300);
        assert_eq!(ceiling(&huge, u32::MAX), Duration::MAX);
    }

    #[test]
    fn fractional_multiplier() {
        let p = policy(Jitter::None).with_multiplier(1.5);
        assert_eq!(ceiling(&p, 0), ms(100));
        assert_eq!(ceiling(&p, 1), ms(150));
        assert_eq!(ceiling(&p, 2), ms(225));
    }

    #[test]
    fn cap_below_base_means_every_wait_is_cap() {
        let p = Policy::new()
            .with_base(ms(500))
            .with_cap(ms(300))
            .with_jitter(Jitter::None);
        let waits: Vec<_> = Backoff::new(&p)
            .delays(p, SmallRng::seed_from_u64(1))
            .take(3)
            .collect();
        assert_eq!(waits, [ms(300); 3]);
    }

    #[test]
    fn zero_base_gives_zero_waits() {
        let p = Policy::new().with_base(Duration::ZERO);
        for jitter in [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated,
        ] {
            let p = p.with_jitter(jitter);
            let mut b = Backoff::new(&p);
            let mut rng = SmallRng::seed_from_u64(3);
            for _ in 0..5 {
                assert_eq!(b.next_delay(&p, &mut rng), Duration::ZERO, "{jitter:?}");
            }
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let run = |seed| -> Vec<Duration> {
            let p = policy(Jitter::Decorrelated);
            Backoff::new(&p)
                .delays(p, SmallRng::seed_from_u64(seed))
                .take(20)
                .collect()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn retries_are_counted() {
        let p = policy(Jitter::Full);
        let mut b = Backoff::new(&p);
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(b.retries(), 0);
        b.next_delay(&p, &mut rng);
        b.next_delay(&p, &mut rng);
        assert_eq!(b.retries(), 2);
    }

    // The delays never run out, and say so: an adapter that sizes a buffer from the
    // hint (`take(n).collect()`) gets `n`, and `len`-style code cannot mistake the
    // schedule for a finite one.
    #[test]
    fn the_delays_are_endless_and_say_so() {
        let p = policy(Jitter::None);
        let delays = Backoff::new(&p).delays(p, SmallRng::seed_from_u64(0));
        assert_eq!(delays.size_hint(), (usize::MAX, None));
        assert_eq!(delays.skip(1000).take(3).count(), 3);
    }

    // A wait drawn between bounds beyond 584 years (the most nanoseconds a `u64` holds)
    // saturates there rather than wrapping to a short one.
    #[test]
    fn waits_beyond_the_nanoseconds_of_a_u64_saturate() {
        let mut rng = SmallRng::seed_from_u64(0);
        let most = Duration::from_nanos(u64::MAX);
        // 1,268 years: its nanoseconds, wrapped, would be 98 years.
        let beyond = Duration::from_secs(40_000_000_000);
        assert_eq!(uniform(&mut rng, beyond, beyond), most);
        assert_eq!(uniform(&mut rng, most, Duration::MAX), most);
        let p = Policy::new()
            .with_base(beyond)
            .with_cap(beyond)
            .with_jitter(Jitter::Equal);
        let wait = Backoff::new(&p).next_delay(&p, &mut rng);
        assert!(wait >= most / 2, "{wait:?}");
    }
}
