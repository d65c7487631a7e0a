//! Latency over the run, as Prometheus histograms: the seconds' HdrHistograms (µs) added
//! into a native histogram's exponential buckets, and into classic `le` buckets for a
//! server that refuses native ones. Both are cumulative over the run (a counter
//! histogram), so `rate()` over them gives the latency of any window.

use std::collections::BTreeMap;

use hdrhistogram::Histogram as Hdr;

use super::wire;

/// Native histogram resolution: 2^3 = 8 buckets per power of two, each boundary 2^(1/8)
/// ≈ 1.09 times the previous (a bucket is at most 9 % wide).
pub const SCHEMA: i32 = 3;

/// Observations at most this many seconds go to the zero bucket: below the 1 µs
/// resolution of loadlab's histograms, so only a recorded 0 lands there.
pub const ZERO_THRESHOLD: f64 = 1e-9;

/// Classic bucket upper bounds, seconds (`+Inf` follows).
pub const CLASSIC_BOUNDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The index of the native bucket holding `v` (> 0) at `schema` > 0: bucket `i` holds
/// (2^((i-1)/2^schema), 2^(i/2^schema)]. Computed as Prometheus does, from the binary
/// exponent and the fraction, so exact powers of two land where Prometheus puts them.
pub fn bucket_index(v: f64, schema: i32) -> i32 {
    debug_assert!(v > 0.0 && schema > 0);
    let (frac, exp) = frexp(v);
    let per_octave = 1i32 << schema;
    // The first boundary of the octave at least `frac` (in [0.5, 1)).
    let within = (0..per_octave)
        .find(|&j| 0.5 * f64::powf(2.0, f64::from(j) / f64::from(per_octave)) >= frac)
        .unwrap_or(per_octave);
    within + (exp - 1) * per_octave
}

/// `v` as `frac * 2^exp` with `frac` in [0.5, 1) (C's `frexp`), for finite `v` > 0.
fn frexp(v: f64) -> (f64, i32) {
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Subnormal: scale into the normal range first.
        let (f, e) = frexp(v * f64::powi(2.0, 64));
        return (f, e - 64);
    }
    let frac = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (frac, biased - 1022)
}

/// Latency observed so far: native buckets, classic buckets, count and sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    /// Native bucket index to observations.
    buckets: BTreeMap<i32, u64>,
    /// Observations of 0.
    zero: u64,
    /// Observations per classic bucket, not cumulative; the last is `+Inf`.
    classic: [u64; CLASSIC_BOUNDS.len() + 1],
    /// Observations.
    count: u64,
    /// Their sum, seconds.
    sum: f64,
}

impl Latency {
    /// Adds a histogram of microseconds (one second of the run). Each recorded value is
    /// taken as the highest value HdrHistogram holds as equivalent to it, as its
    /// percentiles are.
    pub fn add(&mut self, h: &Hdr<u64>) {
        for v in h.iter_recorded() {
            self.observe(v.value_iterated_to() as f64 / 1e6, v.count_at_value());
        }
    }

    /// Adds `n` observations of `secs`.
    pub fn observe(&mut self, secs: f64, n: u64) {
        if n == 0 {
            return;
        }
        if secs <= ZERO_THRESHOLD {
            self.zero += n;
        } else {
            *self.buckets.entry(bucket_index(secs, SCHEMA)).or_default() += n;
        }
        let slot = CLASSIC_BOUNDS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(CLASSIC_BOUNDS.len());
        self.classic[slot] += n;
        self.count += n;
        self.sum += secs * n as f64;
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum, seconds.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// The native histogram at `timestamp` (ms): spans over the buckets in use, and each
    /// bucket's count as a delta from the previous one's.
    pub fn native(&self, timestamp: i64) -> wire::Histogram {
        let mut spans: Vec<wire::BucketSpan> = Vec::new();
        let mut deltas = Vec::with_capacity(self.buckets.len());
        let mut next: Option<i32> = None;
        let mut previous = 0i64;
        for (&i, &n) in &self.buckets {
            match next {
                Some(e) if e == i => spans.last_mut().expect("a span is open").length += 1,
                Some(e) => spans.push(wire::BucketSpan {
                    offset: i - e,
                    length: 1,
                }),
                None => spans.push(wire::BucketSpan {
                    offset: i,
                    length: 1,
                }),
            }
            next = Some(i + 1);
            deltas.push(n as i64 - previous);
            previous = n as i64;
        }
        wire::Histogram {
            count_int: Some(self.count),
            sum: self.sum,
            schema: SCHEMA,
            zero_threshold: ZERO_THRESHOLD,
            zero_count_int: Some(self.zero),
            positive_spans: spans,
            positive_deltas: deltas,
            reset_hint: 0,
            timestamp,
        }
    }

    /// The classic buckets: each `le` bound (as Prometheus writes it, `+Inf` last) with
    /// the observations at most that.
    pub fn classic(&self) -> Vec<(String, u64)> {
        let mut total = 0;
        let mut out = Vec::with_capacity(self.classic.len());
        for (i, n) in self.classic.iter().enumerate() {
            total += n;
            let le = CLASSIC_BOUNDS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| format!("{b}"));
            out.push((le, total));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_indices_at_schema_3() {
        // Bucket i holds (2^((i-1)/8), 2^(i/8)]: 1 is the upper bound of bucket 0, 2 of 8.
        assert_eq!(bucket_index(1.0, 3), 0);
        assert_eq!(bucket_index(2.0, 3), 8);
        assert_eq!(bucket_index(0.5, 3), -8);
        // Just above 1: bucket 1, (1, 1.0905].
        assert_eq!(bucket_index(1.0001, 3), 1);
        // 1.1: log2 = 0.1375, times 8 = 1.1, so bucket 2 = (1.0905, 1.1892].
        assert_eq!(bucket_index(1.1, 3), 2);
        // 1 ms: log2(0.001) = -9.9658, times 8 = -79.73: bucket -79.
        assert_eq!(bucket_index(0.001, 3), -79);
        // 250 µs: log2 = -11.9658, times 8 = -95.73: bucket -95.
        assert_eq!(bucket_index(0.00025, 3), -95);
        // 3 s: log2 = 1.585, times 8 = 12.68: bucket 13.
        assert_eq!(bucket_index(3.0, 3), 13);
        // Schema 1 (two buckets per octave): 3 is in (2^1.5, 2^2] = (2.83, 4]: bucket 4.
        assert_eq!(bucket_index(3.0, 1), 4);
    }

    #[test]
    fn bucket_index_agrees_with_the_logarithm() {
        let mut v: f64 = 1e-6;
        while v < 100.0 {
            let exact = (v.log2() * 8.0).ceil() as i32;
            let got = bucket_index(v, 3);
            // Off by one only when v sits on a boundary to within rounding.
            assert!(
                got == exact || ((v.log2() * 8.0) - (v.log2() * 8.0).round()).abs() < 1e-9,
                "{v}: {got} vs {exact}"
            );
            v *= 1.0137;
        }
    }

    #[test]
    fn frexp_matches_c() {
        assert_eq!(frexp(1.0), (0.5, 1));
        assert_eq!(frexp(0.75), (0.75, 0));
        assert_eq!(frexp(6.0), (0.75, 3));
        assert_eq!(frexp(f64::MIN_POSITIVE / 4.0), (0.5, -1023));
    }

    #[test]
    fn native_spans_and_deltas() {
        let mut l = Latency::default();
        l.observe(1.0, 2); // bucket 0
        l.observe(1.05, 3); // bucket 1
        l.observe(2.0, 1); // bucket 8
        l.observe(0.0, 4); // zero bucket
        let h = l.native(42);
        assert_eq!(
            h.positive_spans,
            vec![
                wire::BucketSpan {
                    offset: 0,
                    length: 2
                },
                wire::BucketSpan {
                    offset: 6,
                    length: 1
                },
            ]
        );
        assert_eq!(h.positive_deltas, vec![2, 1, -2]);
        assert_eq!(h.count_int, Some(10));
        assert_eq!(h.zero_count_int, Some(4));
        assert_eq!(h.schema, 3);
        assert_eq!(h.timestamp, 42);
        assert!((h.sum - (2.0 + 3.15 + 2.0)).abs() < 1e-12);
    }

    #[test]
    fn first_span_starts_at_a_negative_index() {
        let mut l = Latency::default();
        l.observe(0.001, 1);
        let h = l.native(0);
        assert_eq!(
            h.positive_spans,
            vec![wire::BucketSpan {
                offset: -79,
                length: 1
            }]
        );
        assert_eq!(h.positive_deltas, vec![1]);
    }

    #[test]
    fn classic_buckets_are_cumulative() {
        let mut l = Latency::default();
        l.observe(0.0003, 1); // le 0.0005
        l.observe(0.001, 2); // le 0.001 (bounds are inclusive)
        l.observe(20.0, 1); // +Inf only
        let c = l.classic();
        let get = |le: &str| c.iter().find(|(b, _)| b == le).unwrap().1;
        assert_eq!(get("0.00025"), 0);
        assert_eq!(get("0.0005"), 1);
        assert_eq!(get("0.001"), 3);
        assert_eq!(get("10"), 3);
        assert_eq!(get("+Inf"), 4);
        assert_eq!(c.last().unwrap().0, "+Inf");
    }

    #[test]
    fn adds_an_hdr_histogram_of_microseconds() {
        let mut h = Hdr::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        h.record_n(1000, 5).unwrap(); // 1 ms
        h.record_n(2000, 5).unwrap(); // 2 ms
        let mut l = Latency::default();
        l.add(&h);
        assert_eq!(l.count(), 10);
        assert!((l.sum() - 0.015).abs() < 1e-5, "{}", l.sum());
        let n = l.native(0);
        // 1 ms in bucket -79, 2 ms (exactly 8 buckets up) in -71.
        assert_eq!(
            n.positive_spans,
            vec![
                wire::BucketSpan {
                    offset: -79,
                    length: 1
                },
                wire::BucketSpan {
                    offset: 7,
                    length: 1
                },
            ]
        );
        assert_eq!(n.positive_deltas, vec![5, 0]);
    }
}
