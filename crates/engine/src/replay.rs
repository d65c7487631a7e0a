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

use serde::{Deserialize, Serialize};

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

/// A worker's part of a replay: its arrivals, and where it adds the ones it released per
/// second of the measured window.
pub type WorkerFeed = (Receiver<Batch>, Arc<Mutex<Vec<u64>>>);
const BATCH: usize = 512;
/// Batches a worker may have waiting.
const AHEAD: usize = 16;

/// A replay under way: each worker's arrivals, and the counts its [`Fidelity`] is made of.
pub(crate) struct Feed {
    /// Worker `i`'s arrivals (taken by it).
    pub receivers: Vec<Option<Receiver<Batch>>>,
    /// Released arrivals per second of the measured window, every worker's added.
    pub released: Arc<Mutex<Vec<u64>>>,
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
        released: Arc::new(Mutex::new(Vec::new())),
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

impl Feed {
    /// How closely the replay followed the log, once every worker is done.
    pub(crate) fn fidelity(self) -> Fidelity {
        let logged = self.reader.join().unwrap_or_default();
        let released = std::mem::take(&mut *self.released.lock().expect("not poisoned"));
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
}

impl Fidelity {
    fn new(speed: f64, logged: Vec<u64>, released: Vec<u64>) -> Fidelity {
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
        }
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        let unsent = self.logged.saturating_sub(self.released);
        format!(
            "replayed at ×{}: {} of the log's {} requests in the window released{}; per second, at most {} away from the log's count ({:.2} % of the requests in another second than the log's)",
            crate::format::load(self.speed),
            self.released,
            self.logged,
            if unsent > 0 {
                format!(" ({unsent} never sent: loadlab fell behind the log)")
            } else {
                String::new()
            },
            self.max_second_difference,
            100.0 * self.moved_share
        )
    }
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
        feed.released.lock().unwrap().extend([19, 10]);
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
}
