//! A function's hedging, as its `static` says: when to send a copy of a slow attempt
//! (after a fixed delay, or after a percentile of recent latencies), and how many.

use std::time::Duration;

use crate::hedge::latency::LatencySketch;

/// The most hedges (copies beyond the first) a call may have sent at once.
pub const MAX_HEDGES: u32 = 3;

/// When a slow attempt is hedged. (The sketch is kept inline, not boxed: a `Hedge` is a
/// `static`, made in `const` context.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Delay {
    /// After this long.
    After(Duration),
    /// After the sketch's percentile of recent latencies.
    Percentile(LatencySketch),
}

/// A function's hedging: when to send a copy of a slow attempt, and how many. One
/// static per hedged function, written by `#[retry(hedge = ..., hedges = ...)]`.
#[derive(Debug)]
pub struct Hedge {
    delay: Delay,
    hedges: u32,
}

impl Hedge {
    /// Hedges an attempt that has not finished after `delay`, once.
    pub const fn after(delay: Duration) -> Self {
        assert!(
            !delay.is_zero(),
            "a hedge after no delay sends every request twice"
        );
        Self {
            delay: Delay::After(delay),
            hedges: 1,
        }
    }

    /// Hedges an attempt that has run longer than the `quantile` of the function's
    /// recent attempt latencies (0.95 for p95), once; no hedge until
    /// [`MIN_SAMPLES`](crate::hedge::latency::MIN_SAMPLES) latencies are known.
    pub const fn percentile(quantile: f64) -> Self {
        Self {
            delay: Delay::Percentile(LatencySketch::new(quantile)),
            hedges: 1,
        }
    }

    /// Sends up to `hedges` copies (1 to [`MAX_HEDGES`]), each a delay after the last.
    pub const fn with_hedges(mut self, hedges: u32) -> Self {
        assert!(
            hedges >= 1 && hedges <= MAX_HEDGES,
            "`hedges` is from 1 to 3"
        );
        self.hedges = hedges;
        self
    }

    /// How long an attempt runs before it is hedged, if it is to be.
    pub fn delay(&self) -> Option<Duration> {
        match &self.delay {
            Delay::After(delay) => Some(*delay),
            Delay::Percentile(sketch) => sketch.percentile(),
        }
    }

    /// The most copies a call sends beside its attempt.
    pub fn hedges(&self) -> u32 {
        self.hedges
    }

    /// Learns that an attempt took `latency`: one that succeeded, or a first attempt
    /// that had run this long when a copy won (a lower bound of its latency, and above
    /// the delay, which is what the percentile must know of it).
    pub(crate) fn learn(&self, latency: Duration) {
        if let Delay::Percentile(sketch) = &self.delay {
            sketch.record(latency);
        }
    }
}
