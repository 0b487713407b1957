//! A streaming sketch of a function's recent attempt latencies, from which a hedged
//! function (`hedge = "p95"`) reads the percentile after which it sends a hedge.
//!
//! Lock-free and allocation-free: a log-linear histogram of atomic counters (16 buckets
//! per power of two of microseconds, so a percentile is read to within 1/16 of its
//! value), in two windows of [`WINDOW`] samples each. Samples go into the newer window;
//! when it is full the older one is emptied and takes its place, so a percentile is
//! read over the last `WINDOW` to `2 * WINDOW` samples and follows a dependency that
//! slows down or recovers. Until the two windows hold [`MIN_SAMPLES`] samples, there is
//! no percentile, and the function sends no hedge.
//!
//! Samples recorded while the windows rotate may land in the window being emptied and
//! be lost: a sketch read for a threshold, not an exact count.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Samples the windows must hold between them before a percentile is read.
pub const MIN_SAMPLES: u32 = 100;

/// Samples a window holds before the older one is emptied and takes its place.
pub const WINDOW: u32 = 1024;

/// Sub-buckets per power of two: the relative width of a bucket is at most 1/16.
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;

/// The largest latency told apart, in microseconds (about 71 minutes); longer ones are
/// counted in the last bucket.
const MAX_MICROS: u64 = (1 << 32) - 1;

/// Values below `SUB` microseconds have a bucket each; above, each power of two from
/// `SUB` to `2^32` has `SUB`.
const BUCKETS: usize = (SUB + (32 - SUB_BITS as u64) * SUB) as usize;

/// How many samples may be recorded between two readings of the percentile: it is read
/// again after this many.
const STALE_AFTER: u64 = 16;

/// No percentile cached.
const NONE: u64 = u64::MAX;

/// Recent attempt latencies of one function, and the percentile `quantile` of them.
#[derive(Debug)]
pub struct LatencySketch {
    quantile: f64,
    counts: [[AtomicU32; BUCKETS]; 2],
    /// Samples recorded into each window.
    filled: [AtomicU32; 2],
    /// The newer window is `epoch % 2`.
    epoch: AtomicU32,
    /// Samples ever recorded.
    recorded: AtomicU64,
    /// `recorded` when the cached percentile was read.
    read_at: AtomicU64,
    /// The percentile last read, in microseconds; `NONE` if there was none.
    cached: AtomicU64,
}

impl LatencySketch {
    /// An empty sketch that reads the percentile `quantile`, a fraction strictly between
    /// 0 and 1 (0.95 for p95).
    pub const fn new(quantile: f64) -> Self {
        assert!(
            quantile > 0.0 && quantile < 1.0,
            "a percentile is strictly between p0 and p100"
        );
        Self {
            quantile,
            counts: [
                [const { AtomicU32::new(0) }; BUCKETS],
                [const { AtomicU32::new(0) }; BUCKETS],
            ],
            filled: [const { AtomicU32::new(0) }; 2],
            epoch: AtomicU32::new(0),
            recorded: AtomicU64::new(0),
            read_at: AtomicU64::new(0),
            cached: AtomicU64::new(NONE),
        }
    }

    /// Records one attempt's latency.
    pub fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let epoch = self.epoch.load(Ordering::Acquire);
        let newer = (epoch % 2) as usize;
        self.counts[newer][bucket(micros)].fetch_add(1, Ordering::Relaxed);
        self.recorded.fetch_add(1, Ordering::Relaxed);
        // The one sample that fills the window rotates the two.
        if self.filled[newer].fetch_add(1, Ordering::AcqRel) + 1 == WINDOW {
            let older = 1 - newer;
            for count in &self.counts[older] {
                count.store(0, Ordering::Relaxed);
            }
            self.filled[older].store(0, Ordering::Release);
            self.epoch.store(epoch.wrapping_add(1), Ordering::Release);
        }
    }

    /// Samples the two windows hold.
    #[cfg(test)]
    fn samples(&self) -> u32 {
        self.filled
            .iter()
            .map(|filled| filled.load(Ordering::Acquire))
            .sum()
    }

    /// The percentile of the recent samples (the upper edge of the bucket it falls in),
    /// or `None` while they are fewer than [`MIN_SAMPLES`]. Read again from the
    /// histogram once [`STALE_AFTER`] samples have been recorded since the last reading,
    /// or as soon as the minimum is reached; cached in between.
    pub fn percentile(&self) -> Option<Duration> {
        let recorded = self.recorded.load(Ordering::Relaxed);
        let read_at = self.read_at.load(Ordering::Relaxed);
        let minimum = u64::from(MIN_SAMPLES);
        // Stale after `STALE_AFTER` samples, and at once when the minimum is reached.
        let stale = recorded.wrapping_sub(read_at) >= STALE_AFTER
            || (read_at < minimum && recorded >= minimum);
        let micros = if stale
            && self
                .read_at
                .compare_exchange(read_at, recorded, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let micros = self.read().unwrap_or(NONE);
            self.cached.store(micros, Ordering::Relaxed);
            micros
        } else {
            self.cached.load(Ordering::Relaxed)
        };
        (micros != NONE).then(|| Duration::from_micros(micros))
    }

    /// The percentile, read from the histogram, in microseconds.
    fn read(&self) -> Option<u64> {
        let counts: [u32; BUCKETS] = std::array::from_fn(|i| {
            self.counts[0][i].load(Ordering::Relaxed) + self.counts[1][i].load(Ordering::Relaxed)
        });
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if total < u64::from(MIN_SAMPLES) {
            return None;
        }
        // The rank of the percentile among the samples, 1-based.
        let rank = ((self.quantile * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, &count) in counts.iter().enumerate() {
            seen += u64::from(count);
            if seen >= rank {
                return Some(upper_edge(i));
            }
        }
        Some(MAX_MICROS)
    }
}

/// The bucket of a latency of `micros` microseconds.
fn bucket(micros: u64) -> usize {
    let micros = micros.min(MAX_MICROS);
    if micros < SUB {
        return micros as usize;
    }
    let power = 63 - micros.leading_zeros();
    let shift = power - SUB_BITS;
    let sub = (micros >> shift) - SUB;
    (SUB + u64::from(shift) * SUB + sub) as usize
}

/// The first latency, in microseconds, above bucket `i`: the bucket holds the values
/// below it and at or above the edge of the bucket before.
fn upper_edge(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i + 1;
    }
    let shift = (i - SUB) / SUB;
    let sub = (i - SUB) % SUB;
    (SUB + sub + 1) << shift
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The percentile, read from the histogram.
    fn read(sketch: &LatencySketch) -> Option<Duration> {
        sketch.read().map(Duration::from_micros)
    }

    #[test]
    fn each_latency_falls_below_its_buckets_upper_edge_and_at_or_above_the_last() {
        for micros in (0..100_000).chain([MAX_MICROS - 1, MAX_MICROS]) {
            let i = bucket(micros);
            assert!(micros < upper_edge(i), "{micros} in bucket {i}");
            if i > 0 {
                assert!(micros >= upper_edge(i - 1), "{micros} in bucket {i}");
            }
            // A bucket is at most 1/16 of its values wide.
            let width = upper_edge(i) - if i > 0 { upper_edge(i - 1) } else { 0 };
            assert!(
                width <= 1.max(upper_edge(i) / 16),
                "bucket {i} is {width} wide"
            );
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(MAX_MICROS), BUCKETS - 1);
    }

    #[test]
    fn no_percentile_until_the_minimum_of_samples() {
        let sketch = LatencySketch::new(0.95);
        for _ in 0..MIN_SAMPLES - 1 {
            sketch.record(Duration::from_millis(2));
        }
        assert_eq!(read(&sketch), None);
        assert_eq!(sketch.percentile(), None);
        sketch.record(Duration::from_millis(2));
        assert!(read(&sketch).is_some());
    }

    #[test]
    fn the_percentile_is_within_a_sixteenth_above_the_exact_one() {
        let sketch = LatencySketch::new(0.95);
        // 1, 2, ..., 1000 ms: the exact p95 is 950 ms.
        for ms in 1..=1000 {
            sketch.record(Duration::from_millis(ms));
        }
        let p95 = read(&sketch).expect("enough samples");
        assert!(
            p95 >= Duration::from_millis(950) && p95 <= Duration::from_millis(950 * 17 / 16),
            "{p95:?}"
        );
        let median = LatencySketch::new(0.5);
        for ms in 1..=1000 {
            median.record(Duration::from_millis(ms));
        }
        let p50 = read(&median).expect("enough samples");
        assert!(
            p50 >= Duration::from_millis(500) && p50 <= Duration::from_millis(500 * 17 / 16),
            "{p50:?}"
        );
    }

    #[test]
    fn a_slow_tail_above_the_percentile_does_not_move_it() {
        let sketch = LatencySketch::new(0.95);
        for i in 0..1000 {
            let ms = if i % 50 == 0 { 1000 } else { 2 };
            sketch.record(Duration::from_millis(ms));
        }
        let p95 = read(&sketch).expect("enough samples");
        assert!(p95 <= Duration::from_micros(2125), "{p95:?}");
        assert!(p95 > Duration::from_millis(2), "{p95:?}");
    }

    #[test]
    fn old_samples_are_forgotten_after_two_windows() {
        let sketch = LatencySketch::new(0.5);
        for _ in 0..WINDOW {
            sketch.record(Duration::from_millis(100));
        }
        assert_eq!(sketch.samples(), WINDOW);
        for _ in 0..WINDOW {
            sketch.record(Duration::from_millis(1));
        }
        // The older window went: the samples are the second window's, and the first
        // window (emptied) is filling.
        assert_eq!(sketch.samples(), WINDOW);
        assert!(read(&sketch).unwrap() <= Duration::from_micros(1063));
        // Half of them at 100 ms again: the median moves up with the recent samples.
        for _ in 0..WINDOW {
            sketch.record(Duration::from_millis(100));
        }
        sketch.record(Duration::from_millis(100));
        assert!(read(&sketch).unwrap() >= Duration::from_millis(100));
    }

    // Can fail: a percentile read from the histogram at every ask (the cache ignored),
    // which the fifteen slow samples below would move at once.
    #[test]
    fn the_percentile_is_read_again_after_sixteen_samples() {
        let sketch = LatencySketch::new(0.9);
        for _ in 0..MIN_SAMPLES - 1 {
            sketch.record(Duration::from_millis(10));
        }
        assert_eq!(sketch.percentile(), None);
        // Read at once when the minimum is reached.
        sketch.record(Duration::from_millis(10));
        let first = sketch.percentile().expect("enough samples");
        assert!(first >= Duration::from_millis(10) && first < Duration::from_millis(11));
        // Cached: fifteen slow samples, which would make the p90 1 s, do not move it yet...
        for _ in 0..STALE_AFTER - 1 {
            sketch.record(Duration::from_secs(1));
        }
        assert_eq!(sketch.percentile(), Some(first));
        assert!(read(&sketch).unwrap() >= Duration::from_secs(1));
        // ...the sixteenth does.
        sketch.record(Duration::from_secs(1));
        assert!(sketch.percentile().unwrap() >= Duration::from_secs(1));
    }

    #[test]
    fn samples_from_many_threads_are_all_counted() {
        let sketch = LatencySketch::new(0.9);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let sketch = &sketch;
                scope.spawn(move || {
                    for i in 0..200 {
                        sketch.record(Duration::from_micros(t * 1000 + i));
                    }
                });
            }
        });
        assert_eq!(sketch.samples(), 800);
        assert_eq!(sketch.recorded.load(Ordering::Relaxed), 800);
    }
}
