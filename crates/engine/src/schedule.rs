//! Arrival schedules: when each request of an open-loop run is *intended* to be sent.
//!
//! The offered rate is split across workers without bursts: with a constant schedule the
//! global arrival `k` (at `start + k/rate`) belongs to worker `k mod threads`, so the
//! union of all workers' arrivals is evenly spaced. With Poisson arrivals each worker runs
//! an independent Poisson process at `rate/threads` (their superposition is Poisson at
//! `rate`).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson};

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
        /// First global index in the measured window.
        warm_k: u64,
    },
    Poisson {
        rng: SmallRng,
        mean_gap_ns: f64,
        t_ns: f64,
        measured: u64,
        limit: u64,
    },
    /// A timed replay: the arrivals its reading thread hands this worker
    /// ([`crate::replay`]), each with its request.
    Replay {
        rx: std::sync::mpsc::Receiver<crate::replay::Batch>,
        batch: std::vec::IntoIter<(u64, u32)>,
        /// One taken and not yet yielded (by [`WorkerSchedule::skip_before`]).
        pending: Option<(u64, u32)>,
        /// The request of the arrival yielded last.
        kind: u32,
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
                    warm_k,
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

    /// A worker's share of a timed replay: the arrivals `rx` hands it.
    pub fn replay(
        rx: std::sync::mpsc::Receiver<crate::replay::Batch>,
        window: Window,
    ) -> WorkerSchedule {
        WorkerSchedule {
            window,
            kind: Kind::Replay {
                rx,
                batch: Vec::new().into_iter(),
                pending: None,
                kind: 0,
            },
        }
    }

    /// A timed replay: the log's request of the arrival yielded last (`None` otherwise).
    #[inline]
    pub fn replay_kind(&self) -> Option<u32> {
        match &self.kind {
            Kind::Replay { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// A replay's next arrival: the one put back, the batch's next, or (waiting for the reading
/// thread, which keeps far ahead) the next batch's first; `None` when the log is done.
fn replay_next(
    rx: &std::sync::mpsc::Receiver<crate::replay::Batch>,
    batch: &mut std::vec::IntoIter<(u64, u32)>,
    pending: &mut Option<(u64, u32)>,
) -> Option<(u64, u32)> {
    if let Some(a) = pending.take() {
        return Some(a);
    }
    loop {
        if let Some(a) = batch.next() {
            return Some(a);
        }
        *batch = rx.recv().ok()?.into_iter();
    }
}

/// Arrivals passed over by [`WorkerSchedule::skip_before`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// All of them.
    pub total: u64,
    /// Those in the measured window.
    pub measured: u64,
}

impl WorkerSchedule {
    /// Passes over every arrival intended before `t_ns` in constant time, whatever the
    /// rate, and says how many there were. For Poisson arrivals the count is drawn from
    /// the Poisson distribution of the interval, and the process restarts at `t_ns`: by
    /// the memorylessness of exponential gaps, the schedule that follows is distributed
    /// exactly as if every skipped arrival had been drawn.
    pub fn skip_before(&mut self, t_ns: u64) -> Skipped {
        let w = self.window;
        let t_ns = t_ns.min(w.end_ns);
        match &mut self.kind {
            Kind::Constant {
                interval_ns,
                next_k,
                step,
                limit_k,
                warm_k,
            } => {
                if t_ns <= w.start_ns || *next_k >= *limit_k {
                    return Skipped::default();
                }
                // The first global index intended at or after `t_ns`.
                let first_k = ((t_ns - w.start_ns) as f64 / *interval_ns).ceil() as u64;
                let stop_k = first_k.min(*limit_k);
                if stop_k <= *next_k {
                    return Skipped::default();
                }
                // This worker's indices in [next_k, stop_k): next_k, next_k + step, ...
                let count = |from: u64| -> u64 {
                    let from = from.max(*next_k);
                    if from >= stop_k {
                        return 0;
                    }
                    // Align `from` up to this worker's residue.
                    let offset = (from - *next_k).div_ceil(*step) * *step;
                    let from = *next_k + offset;
                    if from >= stop_k {
                        0
                    } else {
                        (stop_k - from).div_ceil(*step)
                    }
                };
                let skipped = Skipped {
                    total: count(*next_k),
                    measured: count(*warm_k),
                };
                *next_k += skipped.total * *step;
                skipped
            }
            Kind::Poisson {
                rng,
                mean_gap_ns,
                t_ns: at,
                measured,
                limit,
            } => {
                let t = t_ns as f64;
                if t <= *at || *measured >= *limit {
                    return Skipped::default();
                }
                let mut draw = |from: f64, to: f64| -> u64 {
                    let mean = (to - from) / *mean_gap_ns;
                    match Poisson::new(mean) {
                        Ok(p) => p.sample(rng) as u64,
                        Err(_) => 0,
                    }
                };
                let split = (w.measure_start_ns as f64).clamp(*at, t);
                let warm = draw(*at, split);
                let in_window = draw(split, t).min(*limit - *measured);
                *measured += in_window;
                *at = t;
                Skipped {
                    total: warm + in_window,
                    measured: in_window,
                }
            }
            Kind::Replay {
                rx, batch, pending, ..
            } => {
                let mut skipped = Skipped::default();
                while let Some((t, k)) = replay_next(rx, batch, pending) {
                    if t >= t_ns {
                        *pending = Some((t, k));
                        break;
                    }
                    skipped.total += 1;
                    skipped.measured += u64::from(t >= w.measure_start_ns);
                }
                skipped
            }
        }
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
                ..
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
            Kind::Replay {
                rx,
                batch,
                pending,
                kind,
            } => {
                let (t, k) = replay_next(rx, batch, pending)?;
                *kind = k;
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
    fn skipping_counts_what_iterating_would_have_yielded() {
        let mut w = window(2);
        w.measure_start_ns = w.start_ns + 500_000_000;
        for threads in [1usize, 3] {
            for worker in 0..threads {
                let all: Vec<u64> =
                    WorkerSchedule::new(Arrival::Constant, 1000.0, worker, threads, w, 0).collect();
                for cut in [
                    w.start_ns,
                    w.start_ns + 1,
                    w.measure_start_ns + 7_777_777,
                    w.end_ns + 5,
                ] {
                    let mut s =
                        WorkerSchedule::new(Arrival::Constant, 1000.0, worker, threads, w, 0);
                    let skipped = s.skip_before(cut);
                    let before: Vec<&u64> = all.iter().filter(|&&t| t < cut).collect();
                    let measured = before.iter().filter(|&&&t| t >= w.measure_start_ns).count();
                    assert_eq!(skipped.total as usize, before.len(), "cut {cut}");
                    assert_eq!(skipped.measured as usize, measured, "cut {cut}");
                    // The rest of the schedule is unchanged.
                    let rest: Vec<u64> = s.collect();
                    assert_eq!(rest, all[before.len()..].to_vec());
                }
            }
        }
    }

    #[test]
    fn skipping_a_huge_schedule_takes_constant_time() {
        // 1e12 arrivals would take hours to iterate; skipping them is arithmetic.
        let w = window(1000);
        let mut c = WorkerSchedule::new(Arrival::Constant, 1e9, 0, 2, w, 0);
        let s = c.skip_before(w.end_ns);
        assert_eq!(s.total, 500_000_000_000);
        assert_eq!(c.next(), None);
        let mut p = WorkerSchedule::new(Arrival::Poisson, 1e9, 0, 2, w, 3);
        let s = p.skip_before(w.end_ns);
        // Mean 5e11, standard deviation about 7e5.
        assert!(
            (499_990_000_000..=500_010_000_000).contains(&s.total),
            "{s:?}"
        );
        assert_eq!(s.total, s.measured);
        assert_eq!(p.next(), None);
    }

    #[test]
    fn poisson_skip_keeps_the_rate_and_the_request_limit() {
        let w = window(10);
        let mut n = 0;
        let mut skipped = 0;
        for i in 0..2 {
            let mut s = WorkerSchedule::new(Arrival::Poisson, 2000.0, i, 2, w, 42);
            skipped += s.skip_before(w.start_ns + 5_000_000_000).total;
            n += s.count() as u64;
        }
        // 20000 expected in all; the standard deviation is about 141.
        assert!(
            (19_300..=20_700).contains(&(n + skipped)),
            "{n} + {skipped}"
        );
        assert!((9_300..=10_700).contains(&skipped), "{skipped}");
        let mut lw = window(1000);
        lw.requests = Some(100);
        let mut s = WorkerSchedule::new(Arrival::Poisson, 500.0, 0, 1, lw, 1);
        let k = s.skip_before(lw.start_ns + 60_000_000_000);
        assert_eq!(k.measured, 100);
        assert_eq!(s.next(), None);
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
