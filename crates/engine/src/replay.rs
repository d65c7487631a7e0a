//! A timed replay: each request at the time a log made it, compressed `speed` times
//! ([`Replay`], `loadlab run --replay`).
//!
//! One thread reads the log ahead of the workers ([`start`]): global arrival `k` goes to
//! worker `k mod threads` (as a constant schedule's do), in batches through a bounded
//! channel each, so that a log of any size is replayed in little memory and the reading
//! (hundreds of thousands of lines per CPU-second) keeps far ahead of the sends. Each
//! arrival carries the index of its request in the run's list, which the worker plans it
//! with ([`crate::worker`]). The thread counts the log's arrivals per second of the
//! measured window, the workers the arrivals they released: [`Fidelity`] says how closely
//! the replay followed the log.

use std::fmt::Debug;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use hdrhistogram::Histogram;

use crate::records::{decode_histogram, encode_histogram, new_histogram};
use crate::schedule::Window;

/// A log's arrivals in order: ns of log time since its first replayed request, and the
/// index of the request among the run's requests ([`crate::config::traffic::Traffic`]).
pub trait ReplaySource: Send + Sync + Debug {
    /// The arrivals from the start, read as they are asked for; `Err`: why the log cannot
    /// be read.
    fn arrivals(&self) -> Result<Box<dyn Iterator<Item = (u64, u32)> + Send>, String>;
}

/// A timed replay of a log.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The log.
    pub source: Arc<dyn ReplaySource>,
    /// Its time compressed this many times (2: twice as fast).
    pub speed: f64,
    /// Where in the log the replay begins, ns of log time since its first request (a knee
    /// step replays the log's busiest stretch): the arrivals before it are passed over.
    pub from_ns: u64,
}

/// Arrivals handed to a worker at once.
pub(crate) type Batch = Vec<(u64, u32)>;

/// A worker's part of a replay: its arrivals, and where it adds up what it released.
pub type WorkerFeed = (Receiver<Batch>, Arc<Mutex<Tally>>);

/// A gap between two sends may differ from the log's by this much and still count as the
/// log's: five times the dispatcher's shortest sleep ([`crate::clock::MIN_WAKE_GAP_NS`]),
/// under which arrivals close together go out in one wake-up.
pub const GAP_ALLOWANCE_US: u64 = 1_000;

/// What the workers released of a replay in the measured window, all workers added.
#[derive(Debug)]
pub struct Tally {
    /// Arrivals released per second.
    pub(crate) per_second: Vec<u64>,
    /// The log's gap (its time compressed, µs) between consecutive arrivals one worker
    /// released.
    pub(crate) logged_gaps: Histogram<u64>,
    /// The gap between their releases (µs).
    pub(crate) released_gaps: Histogram<u64>,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            per_second: Vec::new(),
            logged_gaps: new_histogram(GAP_SIGFIG),
            released_gaps: new_histogram(GAP_SIGFIG),
        }
    }

    /// Counts an arrival meant for `intended` released at `now` (clock ns), after the
    /// worker's previous one (`prev`: its intended and release times) if any.
    pub(crate) fn release(
        &mut self,
        since_start_ns: u64,
        intended: u64,
        now: u64,
        prev: Option<(u64, u64)>,
    ) {
        add(&mut self.per_second, since_start_ns, 1);
        if let Some((i0, n0)) = prev {
            self.logged_gaps
                .saturating_record(intended.saturating_sub(i0) / 1_000);
            self.released_gaps
                .saturating_record(now.saturating_sub(n0) / 1_000);
        }
    }

    /// Adds another worker's tally.
    pub(crate) fn absorb(&mut self, other: &Tally) {
        for (i, n) in other.per_second.iter().enumerate() {
            add(&mut self.per_second, i as u64 * 1_000_000_000, *n);
        }
        // Same bounds: adding cannot fail.
        let _ = self.logged_gaps.add(&other.logged_gaps);
        let _ = self.released_gaps.add(&other.released_gaps);
    }
}

/// Significant figures of the gap histograms.
const GAP_SIGFIG: u8 = 3;
const BATCH: usize = 512;
/// Batches a worker may have waiting.
const AHEAD: usize = 16;

/// A replay under way: each worker's arrivals, and the counts its [`Fidelity`] is made of.
pub(crate) struct Feed {
    /// Worker `i`'s arrivals (taken by it).
    pub receivers: Vec<Option<Receiver<Batch>>>,
    /// What the workers released in the measured window, every worker's added.
    pub released: Arc<Mutex<Tally>>,
    reader: std::thread::JoinHandle<Vec<u64>>,
    speed: f64,
}

/// Starts reading `replay`'s log for `threads` workers within `window` (clock ns).
pub(crate) fn start(replay: &Replay, threads: usize, window: Window) -> Result<Feed, String> {
    let arrivals = replay.source.arrivals()?;
    let threads = threads.max(1);
    let (senders, receivers): (Vec<SyncSender<Batch>>, Vec<_>) =
        (0..threads).map(|_| sync_channel::<Batch>(AHEAD)).unzip();
    let (speed, from_ns) = (replay.speed, replay.from_ns);
    let reader = std::thread::Builder::new()
        .name("loadlab-replay".into())
        .spawn(move || feed(arrivals, senders, speed, from_ns, window))
        .map_err(|e| format!("cannot start the replay's reading thread: {e}"))?;
    Ok(Feed {
        receivers: receivers.into_iter().map(Some).collect(),
        released: Arc::new(Mutex::new(Tally::new())),
        reader,
        speed,
    })
}

/// The reading thread: arrivals to their workers until the window ends (or every worker
/// is gone); the log's arrivals per second of the measured window.
fn feed(
    arrivals: Box<dyn Iterator<Item = (u64, u32)> + Send>,
    senders: Vec<SyncSender<Batch>>,
    speed: f64,
    from_ns: u64,
    window: Window,
) -> Vec<u64> {
    let threads = senders.len();
    let mut logged: Vec<u64> = Vec::new();
    let mut batches: Vec<Batch> = (0..threads).map(|_| Vec::with_capacity(BATCH)).collect();
    let mut live = vec![true; threads];
    let arrivals = arrivals.filter(|(offset, _)| *offset >= from_ns);
    for (k, (offset, kind)) in arrivals.enumerate() {
        let t = window.start_ns + ((offset - from_ns) as f64 / speed) as u64;
        if t >= window.end_ns {
            break;
        }
        if t >= window.measure_start_ns {
            add(&mut logged, t - window.measure_start_ns, 1);
        }
        let w = k % threads;
        batches[w].push((t, kind));
        if batches[w].len() >= BATCH && live[w] {
            let full = std::mem::replace(&mut batches[w], Vec::with_capacity(BATCH));
            live[w] = senders[w].send(full).is_ok();
            if !live.iter().any(|&l| l) {
                return logged;
            }
        }
    }
    for (w, b) in batches.into_iter().enumerate() {
        if !b.is_empty() && live[w] {
            senders[w].send(b).ok();
        }
    }
    logged
}

/// Adds `n` to the second of `since_start_ns` in `per_second`.
pub(crate) fn add(per_second: &mut Vec<u64>, since_start_ns: u64, n: u64) {
    let i = (since_start_ns / 1_000_000_000) as usize;
    if per_second.len() <= i {
        per_second.resize(i + 1, 0);
    }
    per_second[i] += n;
}

impl Replay {
    /// Deals the arrivals a run of `span` (warm-up and measured window) replays to machines
    /// with these `weights` (agents' threads), each its part in proportion to its weight:
    /// an arrival goes to the machine furthest behind its part (the first on ties), so
    /// together they send every request of the stretch once, each at its logged time.
    pub fn deal(&self, span: Duration, weights: &[usize]) -> Result<Vec<ReplayShare>, String> {
        let weights: Vec<f64> = match weights {
            [] => vec![1.0],
            w => w.iter().map(|&w| w.max(1) as f64).collect(),
        };
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let part: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let mut shares: Vec<ReplayShare> = (0..n)
            .map(|_| ReplayShare {
                speed: self.speed,
                gaps_ns: Vec::new(),
                kinds: Vec::new(),
            })
            .collect();
        let mut last = vec![0u64; n];
        let span_ns = span.as_nanos() as u64;
        let arrivals = self.source.arrivals()?;
        for (k, (offset, kind)) in arrivals.filter(|(o, _)| *o >= self.from_ns).enumerate() {
            let t = offset - self.from_ns;
            // As the reading thread cuts it ([`feed`]): at the window's end.
            if (t as f64 / self.speed) as u64 >= span_ns {
                break;
            }
            let behind = |i: usize| part[i] * (k + 1) as f64 - shares[i].kinds.len() as f64;
            let mut to = 0;
            for i in 1..n {
                if behind(i) > behind(to) {
                    to = i;
                }
            }
            shares[to].gaps_ns.push(t.saturating_sub(last[to]));
            shares[to].kinds.push(kind);
            last[to] = t.max(last[to]);
        }
        Ok(shares)
    }
}

/// One machine's part of a timed replay shared by agents ([`Replay::deal`]): the
/// arrivals of the step's stretch dealt to it, at their log times, sent with the step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayShare {
    /// The log's time compressed this many times.
    pub speed: f64,
    /// ns of log time from the stretch's start to this part's first arrival, then between
    /// its consecutive arrivals.
    pub gaps_ns: Vec<u64>,
    /// Each arrival's request, an index among the run's requests.
    pub kinds: Vec<u32>,
}

impl ReplayShare {
    /// The replay this part sends, from its stretch's start.
    pub fn replay(self) -> Replay {
        Replay {
            speed: self.speed,
            from_ns: 0,
            source: Arc::new(self),
        }
    }
}

impl ReplaySource for ReplayShare {
    fn arrivals(&self) -> Result<Box<dyn Iterator<Item = (u64, u32)> + Send>, String> {
        // Offsets summed as the workers take them, not collected first.
        let at = self.gaps_ns.clone().into_iter().scan(0u64, |t, g| {
            *t += g;
            Some(*t)
        });
        Ok(Box::new(at.zip(self.kinds.clone())))
    }
}

impl Feed {
    /// How closely the replay followed the log, once every worker is done.
    pub(crate) fn fidelity(self) -> Fidelity {
        let logged = self.reader.join().unwrap_or_default();
        let released = std::mem::replace(
            &mut *self.released.lock().expect("not poisoned"),
            Tally::new(),
        );
        Fidelity::new(self.speed, logged, released)
    }
}

/// How closely a timed replay followed its log, over the measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// The log's time compressed this many times.
    pub speed: f64,
    /// The log's requests in the window.
    pub logged: u64,
    /// The requests loadlab released to be sent (the rest fell more than the timeout
    /// behind and were never sent).
    pub released: u64,
    /// Per second of the window: the log's requests (its time compressed).
    pub logged_per_second: Vec<u64>,
    /// Per second of the window: the requests released in it.
    pub released_per_second: Vec<u64>,
    /// The largest difference between the two in one second.
    pub max_second_difference: u64,
    /// The share of the log's requests released in another second than the log's
    /// (half the summed differences over the logged count).
    pub moved_share: f64,
    /// Gaps compared: between consecutive requests one worker released in the window.
    #[serde(default)]
    pub gaps: u64,
    /// The inter-arrival shape: the largest difference between the distribution of the
    /// gaps between releases and that of the log's gaps between the same requests (a
    /// Kolmogorov–Smirnov distance, each gap allowed [`GAP_ALLOWANCE_US`] of timer
    /// jitter): 0 is the log's shape kept, 0.1 a tenth of the gaps shifted; `None` without
    /// gaps to compare.
    #[serde(default)]
    pub gap_distance: Option<f64>,
    /// The two gap histograms (the log's, the releases'), encoded, for the coordinator to
    /// merge its agents' ([`Fidelity::merge`]); left out of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_histograms: Option<[String; 2]>,
}

impl Fidelity {
    fn new(speed: f64, logged: Vec<u64>, tally: Tally) -> Fidelity {
        let released = tally.per_second;
        let gaps = tally.logged_gaps.len();
        let n = logged.len().max(released.len());
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let diffs: Vec<u64> = (0..n)
            .map(|i| at(&logged, i).abs_diff(at(&released, i)))
            .collect();
        let total: u64 = logged.iter().sum();
        Fidelity {
            speed,
            logged: total,
            released: released.iter().sum(),
            max_second_difference: diffs.iter().copied().max().unwrap_or(0),
            moved_share: if total == 0 {
                0.0
            } else {
                diffs.iter().sum::<u64>() as f64 / 2.0 / total as f64
            },
            logged_per_second: logged,
            released_per_second: released,
            gaps,
            gap_distance: (gaps > 0).then(|| {
                shape_distance(&tally.logged_gaps, &tally.released_gaps, GAP_ALLOWANCE_US)
            }),
            gap_histograms: (gaps > 0).then(|| {
                [
                    encode_histogram(&tally.logged_gaps),
                    encode_histogram(&tally.released_gaps),
                ]
            }),
        }
    }

    /// As the result shows it: without the gap histograms.
    #[must_use]
    pub fn public(mut self) -> Fidelity {
        self.gap_histograms = None;
        self
    }

    /// The fidelity of machines that shared one replay ([`Replay::deal`]): their counts
    /// per second added (`None` without any).
    pub fn merge<'a>(parts: impl IntoIterator<Item = &'a Fidelity>) -> Option<Fidelity> {
        let mut speed = None;
        let mut logged = Vec::new();
        let mut all = Tally::new();
        for p in parts {
            speed = Some(p.speed);
            for (i, n) in p.logged_per_second.iter().enumerate() {
                add(&mut logged, i as u64 * 1_000_000_000, *n);
            }
            let mut tally = Tally::new();
            tally.per_second = p.released_per_second.clone();
            if let Some([l, r]) = &p.gap_histograms {
                if let (Ok(l), Ok(r)) = (decode_histogram(l), decode_histogram(r)) {
                    tally.logged_gaps = l;
                    tally.released_gaps = r;
                }
            }
            all.absorb(&tally);
        }
        Some(Fidelity::new(speed?, logged, all))
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        let unsent = self.logged.saturating_sub(self.released);
        format!(
            "replayed at ×{}: {} of the log's {} requests in the window released{}; per second, at most {} away from the log's count ({:.2} % of the requests in another second than the log's){}",
            crate::format::load(self.speed),
            self.released,
            self.logged,
            if unsent > 0 {
                format!(" ({unsent} never sent: loadlab fell behind the log)")
            } else {
                String::new()
            },
            self.max_second_difference,
            100.0 * self.moved_share,
            match self.gap_distance {
                Some(d) => format!(
                    "; the gaps between sends {:.1} % from the log's in distribution ({} ms of jitter allowed)",
                    100.0 * d,
                    crate::format::load(GAP_ALLOWANCE_US as f64 / 1e3)
                ),
                None => String::new(),
            }
        )
    }
}

/// The largest difference between the distributions of `a` and `b` when each value may
/// move by `allowance` (a Kolmogorov–Smirnov distance with a tolerance, the Lévy distance's
/// idea on the values alone): `b` shifted by at most `allowance` from `a` is 0 away.
pub fn shape_distance(a: &Histogram<u64>, b: &Histogram<u64>, allowance: u64) -> f64 {
    /// Values and the share at or below each, ascending.
    fn cdf(h: &Histogram<u64>) -> Vec<(u64, f64)> {
        let n = h.len().max(1) as f64;
        let mut seen = 0u64;
        h.iter_recorded()
            .map(|v| {
                seen += v.count_at_value();
                (h.highest_equivalent(v.value_iterated_to()), seen as f64 / n)
            })
            .collect()
    }
    fn at(c: &[(u64, f64)], x: u64) -> f64 {
        match c.partition_point(|(v, _)| *v <= x) {
            0 => 0.0,
            i => c[i - 1].1,
        }
    }
    let (ca, cb) = (cdf(a), cdf(b));
    let mut d: f64 = 0.0;
    for &(x, fa) in &ca {
        d = d.max(fa - at(&cb, x.saturating_add(allowance)));
    }
    for &(x, fb) in &cb {
        d = d.max(fb - at(&ca, x.saturating_add(allowance)));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(Vec<(u64, u32)>);

    impl ReplaySource for Fixed {
        fn arrivals(&self) -> Result<Box<dyn Iterator<Item = (u64, u32)> + Send>, String> {
            Ok(Box::new(self.0.clone().into_iter()))
        }
    }

    #[test]
    fn arrivals_go_to_workers_in_turn_compressed_and_counted_per_second() {
        // Arrivals every 100 ms of log time for 5 s, at ×2: 2.5 s, the last half second
        // cut by the window's end at 2 s; the first half second is warm-up.
        let log: Vec<(u64, u32)> = (0..50).map(|i| (i * 100_000_000, i as u32)).collect();
        let replay = Replay {
            source: Arc::new(Fixed(log.clone())),
            speed: 2.0,
            from_ns: 0,
        };
        let window = Window {
            start_ns: 1_000,
            measure_start_ns: 1_000 + 500_000_000,
            end_ns: 1_000 + 2_000_000_000,
            requests: None,
        };
        let mut feed = start(&replay, 3, window).unwrap();
        let mut got: Vec<Vec<(u64, u32)>> = Vec::new();
        for r in feed.receivers.iter_mut() {
            got.push(r.take().unwrap().iter().flatten().collect());
        }
        // 40 arrivals before 2 s, in turn: worker 0 has 0, 3, 6, …
        assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 40);
        assert_eq!(got[1][0], (1_000 + 50_000_000, 1));
        assert!(got[0].iter().all(|(_, k)| k % 3 == 0));
        feed.released.lock().unwrap().per_second.extend([19, 10]);
        let f = feed.fidelity();
        // Every 50 ms from 0.5 s to 2 s: 20 in the window's first second, 10 in its half.
        assert_eq!(f.logged_per_second, vec![20, 10]);
        assert_eq!(f.logged, 30);
        assert_eq!(f.released, 29);
        assert_eq!(f.max_second_difference, 1);
        assert!((f.moved_share - 1.0 / 60.0).abs() < 1e-9, "{f:?}");
        // From 3 s of log time on: its 20 arrivals, the first at the window's start.
        let from = Replay {
            source: Arc::new(Fixed(log)),
            speed: 1.0,
            from_ns: 3_000_000_000,
        };
        let mut feed = start(&from, 1, window).unwrap();
        let got: Vec<(u64, u32)> = feed.receivers[0].take().unwrap().iter().flatten().collect();
        assert_eq!(got.len(), 20);
        assert_eq!(got[0], (1_000, 30));
        assert_eq!(got[19], (1_000 + 1_900_000_000, 49));
    }

    #[test]
    fn a_dealt_replay_sends_each_arrival_once_at_its_time_in_proportion_to_the_weights() {
        // Every 100 ms for 5 s, from 1 s on, at ×2 over a 2 s window: the 40 arrivals of
        // 1 s to 5 s of log time.
        let log: Vec<(u64, u32)> = (0..50).map(|i| (i * 100_000_000, i as u32)).collect();
        let replay = Replay {
            source: Arc::new(Fixed(log)),
            speed: 2.0,
            from_ns: 1_000_000_000,
        };
        let shares = replay.deal(Duration::from_secs(2), &[1, 2]).unwrap();
        assert_eq!(shares.len(), 2);
        let sent: Vec<Vec<(u64, u32)>> = shares
            .iter()
            .map(|s| s.arrivals().unwrap().collect())
            .collect();
        // A third and two thirds, within one.
        assert_eq!(sent[0].len() + sent[1].len(), 40);
        assert!((13..=14).contains(&sent[0].len()), "{:?}", sent[0]);
        // Together: every arrival once, each at its time from the stretch's start.
        let mut all: Vec<(u64, u32)> = sent.concat();
        all.sort();
        let want: Vec<(u64, u32)> = (10..50)
            .map(|i| ((i - 10) * 100_000_000, i as u32))
            .collect();
        assert_eq!(all, want);
        // A share replays from its own start, at the log's speed.
        let r = shares[1].clone().replay();
        assert_eq!((r.speed, r.from_ns), (2.0, 0));
        // The machines' fidelities add up, second by second.
        let f = |logged: Vec<u64>, released: Vec<u64>| {
            let mut tally = Tally::new();
            tally.per_second = released;
            Fidelity::new(2.0, logged, tally)
        };
        let merged =
            Fidelity::merge([&f(vec![7, 3], vec![7, 2]), &f(vec![13, 7], vec![13, 8])]).unwrap();
        assert_eq!(merged.logged_per_second, vec![20, 10]);
        assert_eq!(merged.released_per_second, vec![20, 10]);
        assert_eq!((merged.logged, merged.released), (30, 30));
        assert_eq!(merged.max_second_difference, 0);
        assert!(Fidelity::merge([]).is_none());
    }

    #[test]
    fn the_gap_shape_is_kept_under_jitter_and_lost_when_sends_clump() {
        let hist = |values: &[u64]| {
            let mut h = new_histogram(GAP_SIGFIG);
            for v in values {
                h.record(*v).unwrap();
            }
            h
        };
        // The log: a request every 10 ms, and a burst at 1 ms.
        let log: Vec<u64> = (0..900)
            .map(|i| if i % 3 == 0 { 1_000 } else { 10_000 })
            .collect();
        // Sent with 0.7 ms of jitter either way: the shape kept.
        let jittered: Vec<u64> = log
            .iter()
            .enumerate()
            .map(|(i, g)| if i % 2 == 0 { g + 700 } else { g - 700 })
            .collect();
        let (a, b) = (hist(&log), hist(&jittered));
        assert_eq!(shape_distance(&a, &b, GAP_ALLOWANCE_US), 0.0);
        // Without the allowance the jitter shows: a third of the distribution moved.
        assert!((shape_distance(&a, &b, 0) - 1.0 / 3.0).abs() < 0.01);
        // Sent in clumps of two (the second at once, the first after twice the gap): the
        // distance says so (a third of the distribution moved), whatever the counts per
        // second.
        let clumped: Vec<u64> = log
            .iter()
            .enumerate()
            .map(|(i, g)| if i % 2 == 0 { 0 } else { 2 * g })
            .collect();
        let d = shape_distance(&a, &hist(&clumped), GAP_ALLOWANCE_US);
        assert!((d - 1.0 / 3.0).abs() < 0.01, "{d}");
        // Symmetric, and the same histograms are 0 apart.
        assert_eq!(d, shape_distance(&hist(&clumped), &a, GAP_ALLOWANCE_US));
        assert_eq!(shape_distance(&a, &a, 0), 0.0);
        // A fidelity reads it, and merging two machines' keeps it.
        let mut tally = Tally::new();
        tally.per_second = vec![900];
        tally.logged_gaps = a;
        tally.released_gaps = hist(&clumped);
        let f = Fidelity::new(1.0, vec![900], tally);
        assert_eq!(f.gaps, 900);
        assert_eq!(f.gap_distance, Some(d));
        let merged = Fidelity::merge([&f, &f]).unwrap();
        assert_eq!(merged.gaps, 1_800);
        assert_eq!(merged.gap_distance, Some(d));
        assert!(
            f.describe().contains("the gaps between sends"),
            "{}",
            f.describe()
        );
        assert!(f.clone().public().gap_histograms.is_none());
    }
}
