//! Arrival schedules: when each request of an open-loop run is *intended* to be sent.
//!
//! The offered rate is split across workers without bursts: with a constant schedule the
//! global arrival `k` (at `start + k/rate`) belongs to worker `k mod threads`, so the
//! union of all workers' arrivals is evenly spaced. With Poisson arrivals each worker runs
//! an independent Poisson process at `rate/threads` (their superposition is Poisson at
//! `rate`).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::config::Arrival;

/// The window and limits shared by all workers' schedules (clock nanoseconds).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// First arrival (warm-up starts here).
    pub start_ns: u64,
    /// Arrivals at or after this are measured.
    pub measure_start_ns: u64,
    /// No arrival at or after this.
    pub end_ns: u64,
    /// At most this many measured arrivals, summed over workers.
    pub requests: Option<u64>,
}

/// One worker's share of an open-loop schedule. Yields intended send times in order.
#[derive(Debug)]
pub struct WorkerSchedule {
    window: Window,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Constant {
        interval_ns: f64,
        /// Next global arrival index that belongs to this worker.
        next_k: u64,
        step: u64,
        /// Global index limit (exclusive) from the request count.
        limit_k: u64,
    },
    Poisson {
        rng: SmallRng,
        mean_gap_ns: f64,
        t_ns: f64,
        measured: u64,
        limit: u64,
    },
}

impl WorkerSchedule {
    /// Worker `worker` of `threads`, at `rate` requests/s in total.
    pub fn new(
        arrival: Arrival,
        rate: f64,
        worker: usize,
        threads: usize,
        window: Window,
        seed: u64,
    ) -> WorkerSchedule {
        let threads = threads.max(1) as u64;
        let worker = worker as u64;
        let kind = match arrival {
            Arrival::Constant => {
                let interval_ns = 1e9 / rate;
                let warm = window.measure_start_ns.saturating_sub(window.start_ns) as f64;
                // Global arrivals before the measured window.
                let warm_k = (warm / interval_ns).ceil() as u64;
                let limit_k = window
                    .requests
                    .map_or(u64::MAX, |n| warm_k.saturating_add(n));
                Kind::Constant {
                    interval_ns,
                    next_k: worker,
                    step: threads,
                    limit_k,
                }
            }
            Arrival::Poisson => {
                let share = window
                    .requests
                    .map_or(u64::MAX, |n| n / threads + u64::from(worker < n % threads));
                Kind::Poisson {
                    rng: SmallRng::seed_from_u64(
                        seed ^ (worker.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    ),
                    mean_gap_ns: 1e9 * threads as f64 / rate,
                    t_ns: window.start_ns as f64,
                    measured: 0,
                    limit: share,
                }
            }
        };
        WorkerSchedule { window, kind }
    }
}

impl Iterator for WorkerSchedule {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let w = self.window;
        let t = match &mut self.kind {
            Kind::Constant {
                interval_ns,
                next_k,
                step,
                limit_k,
            } => {
                if *next_k >= *limit_k {
                    return None;
                }
                let t = w.start_ns + (*next_k as f64 * *interval_ns).round() as u64;
                *next_k += *step;
                t
            }
            Kind::Poisson {
                rng,
                mean_gap_ns,
                t_ns,
                measured,
                limit,
            } => {
                if *measured >= *limit {
                    return None;
                }
                // Inverse transform sampling of an exponential gap; 1-u avoids ln(0).
                let u: f64 = rng.gen();
                *t_ns += -(1.0 - u).ln() * *mean_gap_ns;
                let t = *t_ns as u64;
                if t >= w.measure_start_ns {
                    *measured += 1;
                }
                t
            }
        };
        (t < w.end_ns).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(secs: u64) -> Window {
        Window {
            start_ns: 1_000,
            measure_start_ns: 1_000,
            end_ns: 1_000 + secs * 1_000_000_000,
            requests: None,
        }
    }

    #[test]
    fn constant_is_evenly_spaced_across_workers() {
        let threads = 3;
        let mut all: Vec<u64> = (0..threads)
            .flat_map(|w| WorkerSchedule::new(Arrival::Constant, 1000.0, w, threads, window(1), 0))
            .collect();
        assert_eq!(all.len(), 1000);
        all.sort();
        for pair in all.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((999_000..=1_001_000).contains(&gap), "gap {gap}");
        }
        // Each worker alone is spaced threads/rate apart: no bursts.
        let one: Vec<u64> =
            WorkerSchedule::new(Arrival::Constant, 1000.0, 1, threads, window(1), 0).collect();
        for pair in one.windows(2) {
            assert!((2_999_000..=3_001_000).contains(&(pair[1] - pair[0])));
        }
    }

    #[test]
    fn request_limit_counts_only_measured_arrivals() {
        let mut w = window(100);
        w.measure_start_ns = w.start_ns + 500_000_000; // half a second of warm-up
        w.requests = Some(250);
        let total: Vec<u64> = (0..2)
            .flat_map(|i| WorkerSchedule::new(Arrival::Constant, 1000.0, i, 2, w, 0))
            .collect();
        let measured = total.iter().filter(|&&t| t >= w.measure_start_ns).count();
        assert_eq!(measured, 250);
        assert_eq!(total.len() - measured, 500);
    }

    #[test]
    fn poisson_mean_rate_is_close() {
        let n: usize = (0..2)
            .map(|i| WorkerSchedule::new(Arrival::Poisson, 2000.0, i, 2, window(10), 42).count())
            .sum();
        // 20000 expected; the standard deviation is about 141.
        assert!((19_300..=20_700).contains(&n), "{n}");
        // Gaps are not constant.
        let v: Vec<u64> =
            WorkerSchedule::new(Arrival::Poisson, 2000.0, 0, 2, window(1), 7).collect();
        let gaps: Vec<u64> = v.windows(2).map(|p| p[1] - p[0]).collect();
        let min = *gaps.iter().min().unwrap();
        let max = *gaps.iter().max().unwrap();
        assert!(max > 4 * min.max(1));
    }

    #[test]
    fn poisson_request_limit_is_split_exactly() {
        let mut w = window(1000);
        w.requests = Some(101);
        let n: usize = (0..4)
            .map(|i| WorkerSchedule::new(Arrival::Poisson, 500.0, i, 4, w, 1).count())
            .sum();
        assert_eq!(n, 101);
    }
}
