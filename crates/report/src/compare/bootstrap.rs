//! The bootstrap behind every "beyond the noise" of `loadlab compare`: resample the seconds
//! of each side with replacement, recompute the figure, and read the interval of the ratio
//! other ÷ baseline off the resampled ratios (percentile method).
//!
//! A second is the block: latency within a second is correlated (a queue, a pause), seconds
//! much less so, and each second's histogram is kept in the bundle, so resampling seconds
//! and merging their histograms is exact (histograms merge by adding counts).

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Resamples per interval: at 99.9 % two-sided confidence each tail holds 10 of them.
pub const RESAMPLES: u32 = 20_000;

/// Whether `a` seconds against `b` can resolve anything at `confidence` (two-sided): even
/// when every second of one side lies beyond every second of the other, chance orders
/// exchangeable seconds so once in `C(a + b, a) / 2` draws (the smallest p-value of a rank
/// test). A bootstrap of fewer seconds would claim more than any test of them could (its
/// percentile interval then spans little more than the most extreme single seconds), so
/// such figures are left untested rather than called.
pub fn resolvable(a: usize, b: usize, confidence: f64) -> bool {
    if a < 2 || b < 2 {
        return false;
    }
    // C(a + b, a) = Π (b + i) / i, in floating point (it overflows to infinity, which is fine).
    let (small, large) = (a.min(b), a.max(b));
    let orderings = (1..=small).fold(1.0f64, |c, i| c * (large + i) as f64 / i as f64);
    2.0 / orderings <= 1.0 - confidence
}

/// Responses a side must have beyond a quantile before that quantile is compared: with
/// fewer, the p99 is one of a handful of slowest responses (of 90 responses, the slowest
/// itself), which one stray request moves, and the bootstrap is known to fail for such
/// extreme order statistics (a second holding the one slow request is drawn in most
/// resamples, so a single outlier reads as a resolved change). 10 beyond the p99 means
/// 1,000 responses.
pub const MIN_TAIL: u64 = 10;

/// Whether `responses` hold [`MIN_TAIL`] beyond the `q` quantile.
pub fn tail_testable(responses: u64, q: f64) -> bool {
    (responses as f64 * (1.0 - q) + 1e-9).floor() >= MIN_TAIL as f64
}

/// The fewest seconds, as many on each side, that [`resolvable`] accepts: 7 at 99.9 %.
pub fn min_seconds(confidence: f64) -> usize {
    (2..)
        .find(|&n| resolvable(n, n, confidence))
        .expect("some n resolves")
}

/// The resampling is seeded, so the same bundles always give the same intervals.
const SEED: u64 = 0x10ad_1ab5;

/// What the comparison keeps of a histogram: its recorded buckets as (highest equivalent
/// value, count), ascending. A second of latency holds a few dozen of them, where the
/// decoded histogram holds thousands of counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(Vec<(u64, u64)>);

impl Counts {
    /// The recorded buckets of `h`.
    pub fn of(h: &Histogram<u64>) -> Counts {
        Counts(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        )
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Values recorded.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|p| p.1).sum()
    }

    /// Several of them added (exact for histograms of one precision, as loadlab's are).
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a Counts>) -> Counts {
        let mut pairs: Vec<(u64, u64)> =
            all.into_iter().flat_map(|c| c.0.iter().copied()).collect();
        pairs.sort_unstable_by_key(|p| p.0);
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(pairs.len());
        for (v, n) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == v => last.1 += n,
                _ => out.push((v, n)),
            }
        }
        Counts(out)
    }

    /// The `q` quantile as HdrHistogram's `value_at_quantile` gives it (for `q` above 0): the
    /// smallest recorded value with at least ⌈q·N⌉ values at or below it.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        self.at_rank(((q * total as f64).ceil() as u64).max(1))
    }

    /// The `rank`-th smallest value recorded (from 1; the largest past the last), `None`
    /// when nothing was recorded.
    pub fn at_rank(&self, rank: u64) -> Option<u64> {
        let mut seen = 0;
        for &(v, n) in &self.0 {
            seen += n;
            if seen >= rank {
                return Some(v);
            }
        }
        self.0.last().map(|p| p.0)
    }
}

/// The per-second latency histograms of one side, arranged so that the quantile of any
/// resample (any multiset of seconds) costs a binary search, not a merge: the distinct
/// values recorded in any second, and for each second how many of its values are at or
/// below each of them.
pub struct QuantileTable {
    /// Distinct values (µs, the highest equivalent value of each recorded bucket), ascending.
    values: Vec<u64>,
    /// Per second (only seconds that recorded something), cumulative counts over `values`.
    cumulative: Vec<Vec<u64>>,
}

impl QuantileTable {
    /// Arranges these seconds; empty ones are left out (they hold no latency).
    pub fn new<'a>(seconds: impl IntoIterator<Item = &'a Counts>) -> QuantileTable {
        let seconds: Vec<&Counts> = seconds.into_iter().filter(|c| !c.is_empty()).collect();
        let mut values: Vec<u64> = seconds
            .iter()
            .flat_map(|c| c.0.iter().map(|p| p.0))
            .collect();
        values.sort_unstable();
        values.dedup();
        let cumulative = seconds
            .iter()
            .map(|c| {
                let mut counts = vec![0u64; values.len()];
                for &(v, n) in &c.0 {
                    let i = values.binary_search(&v).expect("every value was collected");
                    counts[i] += n;
                }
                let mut total = 0;
                for c in &mut counts {
                    total += *c;
                    *c = total;
                }
                counts
            })
            .collect();
        QuantileTable { values, cumulative }
    }

    /// Values recorded in all the seconds.
    pub fn total(&self) -> u64 {
        self.cumulative.iter().filter_map(|c| c.last()).sum()
    }

    /// Seconds that recorded something.
    pub fn len(&self) -> usize {
        self.cumulative.len()
    }

    /// True when no second recorded anything.
    pub fn is_empty(&self) -> bool {
        self.cumulative.is_empty()
    }

    /// The `q` quantile (µs) of the seconds taken `weights[i]` times each, as HdrHistogram
    /// defines it: the smallest recorded value with at least ⌈q·N⌉ values at or below it.
    pub fn quantile(&self, weights: &[u32], q: f64) -> Option<u64> {
        let at = |d: usize| -> u64 {
            self.cumulative
                .iter()
                .zip(weights)
                .map(|(c, &w)| u64::from(w) * c[d])
                .sum()
        };
        let last = self.values.len().checked_sub(1)?;
        let total = at(last);
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        // The smallest index whose cumulative count reaches the rank.
        let (mut lo, mut hi) = (0usize, last);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if at(mid) >= rank {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(self.values[lo])
    }

    /// The `q` quantile of a resample as a figure for [`relative_interval`].
    pub fn figure(&self, q: f64) -> impl Fn(&[u32]) -> Option<f64> + '_ {
        move |w| self.quantile(w, q).map(|v| v as f64)
    }
}

/// The interval of a ratio other ÷ baseline, relative to the ratio of the figures computed
/// on all the seconds: `[0.93, 1.08]` means the ratio is known to within -7 % and +8 % of
/// its own value at the given confidence.
///
/// `baseline(w)` and `other(w)` compute the figure of a resample whose `i`-th second is
/// taken `w[i]` times (`None`: the resample holds nothing to compute it on, and is drawn
/// again). Returns `None` when the seconds are too few to resolve anything at this
/// confidence ([`resolvable`]) or a figure is undefined on the full sample.
pub fn relative_interval(
    baseline_seconds: usize,
    other_seconds: usize,
    baseline: &dyn Fn(&[u32]) -> Option<f64>,
    other: &dyn Fn(&[u32]) -> Option<f64>,
    confidence: f64,
    resamples: u32,
) -> Option<[f64; 2]> {
    if !resolvable(baseline_seconds, other_seconds, confidence) {
        return None;
    }
    let full_ratio = other(&vec![1; other_seconds])? / baseline(&vec![1; baseline_seconds])?;
    if !full_ratio.is_finite() || full_ratio <= 0.0 {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(SEED);
    let mut draw = |n: usize, w: &mut Vec<u32>| {
        w.clear();
        w.resize(n, 0);
        for _ in 0..n {
            w[rng.gen_range(0..n)] += 1;
        }
    };
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let mut ratios = Vec::with_capacity(resamples as usize);
    // A resample whose figure is undefined (every drawn second empty) is drawn again, up to
    // as many extra draws as resamples.
    let mut attempts = 0u32;
    while ratios.len() < resamples as usize && attempts < 2 * resamples {
        attempts += 1;
        draw(baseline_seconds, &mut wa);
        draw(other_seconds, &mut wb);
        if let (Some(a), Some(b)) = (baseline(&wa), other(&wb)) {
            if a > 0.0 && (b / a).is_finite() {
                ratios.push(b / a / full_ratio);
            }
        }
    }
    if ratios.len() < resamples as usize / 2 {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let m = ratios.len();
    let lo = ((tail * m as f64).floor() as usize).min(m - 1);
    let hi = (((1.0 - tail) * m as f64).ceil() as usize)
        .saturating_sub(1)
        .min(m - 1);
    Some([ratios[lo], ratios[hi]])
}

/// The mean of per-second counts, weighted by how often each second was drawn.
pub fn weighted_mean(counts: &[u64], weights: &[u32]) -> Option<f64> {
    let n: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if n == 0 {
        return None;
    }
    let sum: u64 = counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| c * u64::from(w))
        .sum();
    Some(sum as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_engine::stats::CONFIDENCE;
    use rand::rngs::SmallRng;

    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap()
    }

    /// `n` seconds of `per_second` latencies each, log-normal around `median_us` with a
    /// spread that varies from second to second.
    fn seconds(seed: u64, n: usize, per_second: usize, median_us: f64) -> Vec<Histogram<u64>> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let mut h = histogram();
                let sigma = rng.gen_range(0.2..0.4);
                for _ in 0..per_second {
                    // Box-Muller.
                    let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen());
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    h.record((median_us * (sigma * z).exp()) as u64).unwrap();
                }
                h
            })
            .collect()
    }

    fn table(seconds: &[Histogram<u64>]) -> QuantileTable {
        let counts: Vec<Counts> = seconds.iter().map(Counts::of).collect();
        QuantileTable::new(&counts)
    }

    fn p99_interval(a: &[Histogram<u64>], b: &[Histogram<u64>]) -> Option<[f64; 2]> {
        let (ta, tb) = (table(a), table(b));
        let (fa, fb) = (ta.figure(0.99), tb.figure(0.99));
        relative_interval(ta.len(), tb.len(), &fa, &fb, CONFIDENCE, RESAMPLES)
    }

    fn merged_p99(seconds: &[Histogram<u64>]) -> f64 {
        let mut all = histogram();
        for h in seconds {
            all.add(h).unwrap();
        }
        all.value_at_quantile(0.99) as f64
    }

    #[test]
    fn the_table_gives_the_quantile_of_the_merged_histograms() {
        let s = seconds(1, 7, 300, 10_000.0);
        let t = table(&s);
        let mut merged = histogram();
        for h in &s {
            merged.add(h).unwrap();
        }
        let counts: Vec<Counts> = s.iter().map(Counts::of).collect();
        let merged_counts = Counts::merged(&counts);
        assert_eq!(merged_counts, Counts::of(&merged));
        // (q = 0 is the one HdrHistogram reads as the lowest equivalent value instead.)
        for q in [0.001, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let expected = Some(merged.value_at_quantile(q));
            assert_eq!(t.quantile(&[1; 7], q), expected, "q {q}");
            assert_eq!(merged_counts.quantile(q), expected, "q {q}");
        }
        // Weights count a second that many times; zero leaves it out.
        let mut twice = histogram();
        twice.add(&s[0]).unwrap();
        twice.add(&s[0]).unwrap();
        twice.add(&s[3]).unwrap();
        let w = [2, 0, 0, 1, 0, 0, 0];
        assert_eq!(t.quantile(&w, 0.99), Some(twice.value_at_quantile(0.99)));
        assert_eq!(t.quantile(&[0; 7], 0.99), None);
        // Empty seconds are left out of the table.
        let with_empty = vec![s[0].clone(), histogram(), s[1].clone()];
        assert_eq!(table(&with_empty).len(), 2);
        assert_eq!(table(&with_empty).total(), 600);
        assert_eq!(Counts::default().quantile(0.99), None);
    }

    #[test]
    fn a_known_difference_is_found_and_its_size_is_inside_the_interval() {
        // 30 % slower throughout: the interval holds 1.3 × and excludes 1.
        let a = seconds(2, 20, 200, 10_000.0);
        let b = seconds(3, 20, 200, 13_000.0);
        let rel = p99_interval(&a, &b).unwrap();
        let ratio = merged_p99(&b) / merged_p99(&a);
        let ci = [ratio * rel[0], ratio * rel[1]];
        assert!(ci[0] > 1.0, "{ci:?}");
        assert!(ci[0] < 1.3 && ci[1] > 1.3, "{ci:?} should hold 1.3");
    }

    #[test]
    fn identical_processes_are_within_the_noise() {
        // Same distribution, other draws: the interval holds 1, over many seeds.
        for seed in 0..20 {
            let a = seconds(100 + seed, 10, 100, 10_000.0);
            let b = seconds(200 + seed, 10, 100, 10_000.0);
            let rel = p99_interval(&a, &b).unwrap();
            let ratio = merged_p99(&b) / merged_p99(&a);
            assert!(
                ratio * rel[0] <= 1.0 && ratio * rel[1] >= 1.0,
                "seed {seed}: {:?}",
                [ratio * rel[0], ratio * rel[1]]
            );
        }
        // The very same seconds: exactly no change, and an interval around it.
        let a = seconds(7, 10, 100, 10_000.0);
        let rel = p99_interval(&a, &a).unwrap();
        assert!(rel[0] < 1.0 && rel[1] > 1.0, "{rel:?}");
    }

    #[test]
    fn seconds_too_few_for_the_confidence_are_not_resampled() {
        // 6 against 6: every one of B's seconds above A's happens once in 924 / 2 orderings
        // by chance, too often for 99.9 %; 7 against 7, once in 1716.
        assert!(!resolvable(6, 6, CONFIDENCE));
        assert!(resolvable(7, 7, CONFIDENCE));
        assert_eq!(min_seconds(CONFIDENCE), 7);
        assert_eq!(min_seconds(0.95), 4);
        // Few on one side need many on the other: C(17, 4) = 2380.
        assert!(!resolvable(4, 12, CONFIDENCE));
        assert!(resolvable(4, 13, CONFIDENCE));
        assert!(!resolvable(1, 1_000_000, CONFIDENCE));
        assert!(resolvable(30, 30, CONFIDENCE));
        // A p99 is tested from 1,000 responses: 10 beyond it.
        assert!(!tail_testable(999, 0.99));
        assert!(tail_testable(1000, 0.99));
        assert!(tail_testable(100, 0.9));

        // 3 against 10: C(13, 3) = 286.
        let a = seconds(4, 3, 100, 10_000.0);
        let b = seconds(5, 10, 100, 10_000.0);
        assert_eq!(p99_interval(&a, &b), None);
        assert_eq!(p99_interval(&b, &a), None);
    }

    #[test]
    fn counts_per_second_resample_to_a_rate() {
        let a = [100u64, 98, 102, 100, 99, 101, 100, 100];
        let b = [150u64, 149, 151, 150, 152, 148, 150, 150];
        let rel = relative_interval(
            a.len(),
            b.len(),
            &|w| weighted_mean(&a, w),
            &|w| weighted_mean(&b, w),
            CONFIDENCE,
            RESAMPLES,
        )
        .unwrap();
        // The ratio is 1.5 to within a few percent.
        assert!(rel[0] > 0.95 && rel[1] < 1.05, "{rel:?}");
        assert_eq!(weighted_mean(&a, &[0; 8]), None);
        assert_eq!(weighted_mean(&[10, 20], &[3, 1]), Some(12.5));
    }
}
