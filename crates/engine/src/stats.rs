//! The statistics behind honest verdicts: how much evidence a step holds.
//!
//! - [`TrendSums`]: per worker, the running least-squares sums of latency against intended
//!   send time over successful requests (merged once, like the histograms). Its slope is
//!   how many seconds of latency the server added per second of arrivals: 0 for a server
//!   that keeps pace, whatever its latency spread; `R/K - 1` for a server of capacity `K`
//!   offered `R` that answers in arrival order (less for one that answers out of order),
//!   whose queue grows through the step.
//! - [`resolvably_above`] and [`min_resolvable`]: whether a count of bad events (failures,
//!   responses slower than a bound) shows a rate above a bound at [`CONFIDENCE`], or could
//!   be chance; a clause that cannot tell is reported as unresolved, never as failed.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal, StudentsT};

/// One-sided confidence a difference must reach before loadlab reports it (99.9 %: a
/// healthy step is wrongly judged at most once in a thousand tries).
pub const CONFIDENCE: f64 = 0.999;

/// Least-squares sums of `y` (latency, s) on `x` (intended send time since the start of
/// the measured window, s), kept as means and co-moments (Welford), so that long runs keep
/// their precision and workers merge exactly (Chan et al.).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrendSums {
    n: u64,
    mean_x: f64,
    mean_y: f64,
    m2_x: f64,
    m2_y: f64,
    c_xy: f64,
}

impl TrendSums {
    /// Adds one successful request.
    #[inline]
    pub fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        let n = self.n as f64;
        let dx = x - self.mean_x;
        let dy = y - self.mean_y;
        self.mean_x += dx / n;
        self.mean_y += dy / n;
        self.m2_x += dx * (x - self.mean_x);
        self.m2_y += dy * (y - self.mean_y);
        self.c_xy += dx * (y - self.mean_y);
    }

    /// Adds another worker's sums.
    pub fn merge(&mut self, o: &TrendSums) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        let (na, nb) = (self.n as f64, o.n as f64);
        let n = na + nb;
        let dx = o.mean_x - self.mean_x;
        let dy = o.mean_y - self.mean_y;
        self.m2_x += o.m2_x + dx * dx * na * nb / n;
        self.m2_y += o.m2_y + dy * dy * na * nb / n;
        self.c_xy += o.c_xy + dx * dy * na * nb / n;
        self.mean_x += dx * nb / n;
        self.mean_y += dy * nb / n;
        self.n += o.n;
    }

    /// Requests added.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The fitted trend; `None` with fewer than [`MIN_TREND_SAMPLES`] requests or no
    /// spread of send times.
    pub fn fit(&self) -> Option<LatencyTrend> {
        if self.n < MIN_TREND_SAMPLES || self.m2_x <= 0.0 {
            return None;
        }
        let slope = self.c_xy / self.m2_x;
        let df = (self.n - 2) as f64;
        let residual = (self.m2_y - slope * self.c_xy).max(0.0) / df;
        let stderr = (residual / self.m2_x).sqrt();
        let critical = t_critical(self.n - 2, CONFIDENCE);
        Some(LatencyTrend {
            slope,
            stderr,
            samples: self.n,
            resolved: slope > critical * stderr && slope >= MIN_SLOPE,
            pace: 1.0,
        })
    }
}

/// A smaller slope is not falling behind in any way a verdict could see: the queue grows
/// by less than 1 % of the time elapsed.
pub const MIN_SLOPE: f64 = 0.01;

/// Fewer successful requests than this fit no trend (the step is then judged on its counts).
pub const MIN_TREND_SAMPLES: u64 = 10;

/// How the latency of successful requests moved across the measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyTrend {
    /// Seconds of latency added per second of intended send time (least squares).
    pub slope: f64,
    /// Standard error of `slope`.
    pub stderr: f64,
    /// Successful requests fitted.
    pub samples: u64,
    /// `slope` is above zero at [`CONFIDENCE`] (one-sided, Student's t) and at least
    /// [`MIN_SLOPE`]: latency grew
    /// with the send time, as it does when work queues up in a server that answers
    /// roughly in arrival order; healthy latency, however spread, does not grow, and slow
    /// first requests (connection set-up, warm-up) make it fall. The slope is evidence,
    /// not a measure of how far the server fell behind (that is `pace`). A server that
    /// answers the newest requests first hides its queue from the slope: its latency
    /// clause and timeouts show it instead.
    pub resolved: bool,
    /// The fraction of the successes' arrival rate the server delivered them at: achieved
    /// throughput over successes per second of the window (1 unless `resolved`). Set by
    /// the runner, which knows the completions.
    #[serde(default = "one")]
    pub pace: f64,
}

fn one() -> f64 {
    1.0
}

/// The `p` quantile of Student's t with `df` degrees of freedom.
pub fn t_critical(df: u64, p: f64) -> f64 {
    if df > 1000 {
        return Normal::standard().inverse_cdf(p);
    }
    StudentsT::new(0.0, 1.0, df.max(1) as f64)
        .expect("valid t distribution")
        .inverse_cdf(p)
}

/// Whether `k` bad events in `n` trials show a rate above `p` at [`CONFIDENCE`]: the
/// chance of `k` or more at rate exactly `p` is below `1 - CONFIDENCE`.
pub fn resolvably_above(k: u64, n: u64, p: f64) -> bool {
    if n == 0 || k == 0 || k as f64 <= p * n as f64 {
        return false;
    }
    if p <= 0.0 {
        return true;
    }
    if p >= 1.0 {
        return false;
    }
    let b = Binomial::new(p, n).expect("valid binomial");
    b.sf(k - 1) < 1.0 - CONFIDENCE
}

/// The fewest bad events in `n` trials that would show a rate above `p`; `None` if even
/// `n` would not.
pub fn min_resolvable(n: u64, p: f64) -> Option<u64> {
    if !resolvably_above(n, n, p) {
        return None;
    }
    let (mut lo, mut hi) = (0u64, n);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if resolvably_above(mid, n, p) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn slope_of_a_growing_queue_and_of_spread_latency() {
        // Capacity 200/s offered 250/s: request i completes at i/200, intended at i/250.
        let mut q = TrendSums::default();
        for i in 0..500 {
            let x = i as f64 / 250.0;
            q.add(x, i as f64 / 200.0 - x + 0.001);
        }
        let t = q.fit().unwrap();
        assert!((t.slope - 0.25).abs() < 1e-9, "{t:?}");
        assert!(t.resolved);
        // Latency uniform 0..300 ms, no trend: slope near 0, not resolved.
        let mut rng = SmallRng::seed_from_u64(1);
        let mut s = TrendSums::default();
        for i in 0..400 {
            s.add(i as f64 / 200.0, rng.gen_range(0.0..0.3));
        }
        let t = s.fit().unwrap();
        assert!(t.slope.abs() < 4.0 * t.stderr, "{t:?}");
        assert!(!t.resolved);
    }

    #[test]
    fn merging_equals_one_pass() {
        let mut rng = SmallRng::seed_from_u64(9);
        let pts: Vec<(f64, f64)> = (0..1000)
            .map(|i| (i as f64 * 0.01, rng.gen_range(0.0..1.0) + i as f64 * 0.001))
            .collect();
        let mut one = TrendSums::default();
        let mut parts = [TrendSums::default(); 3];
        for (i, (x, y)) in pts.iter().enumerate() {
            one.add(*x, *y);
            parts[i % 3].add(*x, *y);
        }
        let mut merged = TrendSums::default();
        for p in &parts {
            merged.merge(p);
        }
        let (a, b) = (one.fit().unwrap(), merged.fit().unwrap());
        assert_eq!(a.samples, b.samples);
        assert!((a.slope - b.slope).abs() < 1e-12 && (a.stderr - b.stderr).abs() < 1e-12);
    }

    #[test]
    fn too_few_samples_fit_nothing() {
        let mut s = TrendSums::default();
        for i in 0..(MIN_TREND_SAMPLES - 1) {
            s.add(i as f64, i as f64);
        }
        assert!(s.fit().is_none());
    }

    #[test]
    fn counts_resolve_only_with_enough_evidence() {
        // 1 failure in 20 is 5 %, but a 1 % rate gives one or more 18 % of the time, and
        // three or more 0.1004 % of the time: four are needed.
        assert!(!resolvably_above(1, 20, 0.01));
        assert!(!resolvably_above(3, 20, 0.01));
        assert_eq!(min_resolvable(20, 0.01), Some(4));
        // At 10,000 requests a 1 % bound is resolved a little above 1 %.
        let k = min_resolvable(10_000, 0.01).unwrap();
        assert_eq!(k, 133);
        // A zero bound: any failure counts.
        assert!(resolvably_above(1, 5, 0.0));
        // A count at or under the bound never does.
        assert!(!resolvably_above(100, 10_000, 0.01));
        // Nothing can show a rate above 100 %.
        assert_eq!(min_resolvable(50, 1.0), None);
    }
}
