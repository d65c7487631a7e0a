//! `--prometheus-rw URL`: each finished second of a run pushed to a Prometheus remote
//! write 1.0 receiver, from a thread of its own, so that the run never waits on it.
//!
//! Layout: [`Pusher`] owns the background thread; a [`Feed`] is one stream of seconds
//! (a run, or one step of a lab) with its labels, handed to the progress callback;
//! `latency` turns the seconds' HdrHistograms into Prometheus histograms; `wire` is the
//! protobuf messages and their snappy body; `http` the endpoint and one POST.
//!
//! What is pushed, per label set, each cumulative over the run (Prometheus counters):
//! `loadlab_requests_total` (responses, any status, as the result's `requests`),
//! `loadlab_errors_total{class}` (failures by class; summed, the result's `errors_total`),
//! `loadlab_latency_seconds` (latency from the intended send time) as a native histogram,
//! or classic `_bucket{le}`/`_sum`/`_count` series once the server refused a native one;
//! and the gauge `loadlab_offered_rps` (open loop) or `loadlab_offered_concurrency`
//! (closed loop). Timestamps are the wall clock at each second's end. A second is pushed
//! as its parts ([`parts`]): one label set per request name (`name`) of a named mix and
//! per agent (`agent`) of a distributed step, never the whole beside them, so that a
//! `sum()` over the parts is the run's; the offered load is the feed's, once.
//!
//! The path from the run is a bounded channel (a second that does not fit is dropped and
//! counted); the thread keeps each label set's totals and queues one snapshot per second
//! (at most [`OUTBOX`]: the oldest is dropped and counted, a later snapshot holds its
//! counts). A failed push is counted, not retried: the next snapshot carries the totals.
//! [`Pusher::finish`] gives the last pushes [`FLUSH`] at most, then warns with the
//! numbers of pushes failed, dropped and not sent.

mod http;
mod lab;
mod latency;
mod wire;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loadlab_engine::{ErrorCounts, SecondStats};

pub use http::Endpoint;
use http::PushError;
pub use lab::LabPush;
use latency::Latency;

/// Seconds waiting between the run and the thread.
const CHANNEL: usize = 256;
/// Snapshots waiting to be pushed.
pub const OUTBOX: usize = 30;
/// How long [`Pusher::finish`] waits for the last pushes.
pub const FLUSH: Duration = Duration::from_secs(2);

/// A series' labels besides `__name__`, by name (empty values left out).
pub type Labels = BTreeMap<&'static str, String>;

/// The load a step offered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offered {
    /// Open loop, requests/s.
    Rate(f64),
    /// Closed loop, connections or streams in flight.
    Concurrency(f64),
}

/// One finished second, as the thread gets it: the feed's labels, and its parts.
struct Second {
    /// The feed's labels (the offered gauge's).
    labels: Arc<Labels>,
    /// Wall clock at the second's end, ms.
    timestamp: i64,
    /// Each label set's part: the whole run, or one per request name, agent, or both.
    parts: Vec<Part>,
    offered: Option<Offered>,
}

/// One label set's part of a second.
struct Part {
    /// The feed's labels, with `name` and `agent` where the part is one's.
    labels: Arc<Labels>,
    /// Responses (any status).
    completed: u64,
    /// Failures by class (`None`: every class together).
    errors: Vec<(Option<&'static str>, u64)>,
    /// The part's latency histogram, as the engine encodes it.
    latency: String,
}

/// Failures of a second by class, for `loadlab_errors_total{class}`: every class, zeros
/// included, so that `sum(loadlab_errors_total)` is the run's `errors_total` from the first
/// second and a class appearing later has a series to `rate()` over.
fn errors_by_class(e: &ErrorCounts) -> Vec<(Option<&'static str>, u64)> {
    e.iter().map(|(class, n)| (Some(class.name()), n)).collect()
}

/// A second's parts, each with its own labels: one per agent of a distributed step, and
/// within it one per request name of a named mix; the whole second for one unnamed
/// request on one machine. The parts add up to the second, so `sum()` over `name` and
/// `agent` is the run's.
fn parts(base: &Arc<Labels>, s: &SecondStats, latency: &str) -> Vec<Part> {
    let with = |extra: &[(&'static str, &str)]| -> Arc<Labels> {
        if extra.is_empty() {
            return base.clone();
        }
        let mut l = (**base).clone();
        for (k, v) in extra {
            l.insert(k, (*v).to_string());
        }
        Arc::new(l)
    };
    let of = |s: &SecondStats, latency: &str, agent: Option<&str>| -> Vec<Part> {
        let agent: Vec<(&'static str, &str)> = agent.map(|a| ("agent", a)).into_iter().collect();
        if s.by_name.is_empty() {
            return vec![Part {
                labels: with(&agent),
                completed: s.completed,
                errors: errors_by_class(&s.errors_by_class),
                latency: latency.to_string(),
            }];
        }
        s.by_name
            .iter()
            .map(|n| {
                let mut extra = agent.clone();
                extra.push(("name", &n.name));
                Part {
                    labels: with(&extra),
                    completed: n.completed,
                    errors: errors_by_class(&n.errors_by_class),
                    latency: n.latency.clone(),
                }
            })
            .collect()
    };
    if s.agents.is_empty() {
        of(s, latency, None)
    } else {
        s.agents
            .iter()
            .flat_map(|a| of(&a.stats, &a.latency, Some(&a.agent)))
            .collect()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One stream of seconds (a run, or a step of a lab): its labels, and the wall clock of
/// its second 0, taken from the first second reported.
pub struct Feed {
    tx: SyncSender<Second>,
    shared: Arc<Shared>,
    labels: Arc<Labels>,
    offered: Option<Offered>,
    /// Wall clock (ms) at the start of the measured window.
    start_ms: Option<i64>,
}

impl Feed {
    /// One finished second with its latency histogram (encoded as the result stores it).
    /// Never blocks: a second that does not fit in the channel is dropped and counted.
    pub fn second(&mut self, s: &SecondStats, latency: &str) {
        let now = now_ms();
        let since_start = (s.second as i64 + 1) * 1000;
        let start = *self.start_ms.get_or_insert(now - since_start);
        let second = Second {
            labels: self.labels.clone(),
            // A second reported late (the last ones come together) keeps its own time;
            // none is stamped in the future.
            timestamp: (start + since_start).min(now),
            parts: parts(&self.labels, s, latency),
            offered: self.offered,
        };
        if self.tx.try_send(second).is_err() {
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the thread counted.
#[derive(Debug, Default)]
struct Tally {
    /// Pushes tried (a native histogram refused and sent again as classic buckets counts
    /// once).
    pushes: u64,
    /// Pushes that failed.
    failed: u64,
    /// The last failure.
    last_error: Option<String>,
    /// Snapshots dropped from a full queue.
    dropped: u64,
    /// Snapshots still queued when the flush time ran out.
    unsent: u64,
}

/// Between the run, the thread and [`Pusher::finish`].
#[derive(Default)]
struct Shared {
    /// Set by [`Pusher::finish`]: push what is left until then, then stop.
    finish_by: Mutex<Option<Instant>>,
    tally: Mutex<Tally>,
    /// Seconds dropped because the channel was full.
    lost: AtomicU64,
}

/// Makes [`Feed`]s into one [`Pusher`].
#[derive(Clone)]
pub struct Feeds {
    tx: SyncSender<Second>,
    shared: Arc<Shared>,
}

impl Feeds {
    /// A stream of seconds labelled `labels`, offering `offered`.
    pub fn feed(&self, labels: Labels, offered: Option<Offered>) -> Feed {
        Feed {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
            labels: Arc::new(labels.into_iter().filter(|(_, v)| !v.is_empty()).collect()),
            offered,
            start_ms: None,
        }
    }
}

/// The background thread pushing to one endpoint.
pub struct Pusher {
    endpoint: Endpoint,
    tx: SyncSender<Second>,
    shared: Arc<Shared>,
    done: Receiver<()>,
}

impl Pusher {
    /// Starts the thread. Nothing is sent before the first second.
    pub fn start(endpoint: Endpoint) -> Pusher {
        let (tx, rx) = mpsc::sync_channel(CHANNEL);
        let (done_tx, done) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let worker = Worker {
            endpoint: endpoint.clone(),
            shared: shared.clone(),
            series: BTreeMap::new(),
            outbox: VecDeque::new(),
            classic: false,
        };
        std::thread::Builder::new()
            .name("loadlab-promrw".into())
            .spawn(move || {
                worker.run(&rx);
                let _ = done_tx.send(());
            })
            .expect("spawning the remote write thread");
        Pusher {
            endpoint,
            tx,
            shared,
            done,
        }
    }

    /// A stream of seconds labelled `labels`, offering `offered`.
    pub fn feed(&self, labels: Labels, offered: Option<Offered>) -> Feed {
        self.feeds().feed(labels, offered)
    }

    /// What makes feeds, for a caller that starts one per step.
    pub fn feeds(&self) -> Feeds {
        Feeds {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }

    /// Pushes what is left, for [`FLUSH`] at most, and warns if any push failed or any
    /// second did not reach the endpoint.
    pub fn finish(self) {
        let deadline = Instant::now() + FLUSH;
        *self.shared.finish_by.lock().expect("promrw state") = Some(deadline);
        drop(self.tx);
        // A little past the deadline: the thread stops its last push there itself.
        let finished = self
            .done
            .recv_timeout(FLUSH + Duration::from_millis(500))
            .is_ok();
        let t = self.shared.tally.lock().expect("promrw state");
        let lost = self.shared.lost.load(Ordering::Relaxed);
        if let Some(w) = warning(&self.endpoint.url, &t, lost, finished) {
            eprintln!("loadlab: warning: {w}");
        }
    }
}

/// The warning at the end, if anything went wrong.
fn warning(url: &str, t: &Tally, lost: u64, finished: bool) -> Option<String> {
    if t.failed == 0 && t.dropped == 0 && t.unsent == 0 && lost == 0 && finished {
        return None;
    }
    let mut parts = vec![format!("{} of {} pushes failed", t.failed, t.pushes)];
    if let Some(e) = &t.last_error {
        parts[0].push_str(&format!(" (last: {e})"));
    }
    if t.dropped + lost > 0 {
        parts.push(format!("{} dropped from a full queue", t.dropped + lost));
    }
    if t.unsent > 0 || !finished {
        parts.push(format!(
            "{} not sent within the {} s given at the end{}",
            t.unsent,
            FLUSH.as_secs(),
            if finished {
                ""
            } else {
                " (the last push was still waiting)"
            }
        ));
    }
    Some(format!(
        "--prometheus-rw {url}: {}; Prometheus misses those seconds (its counters catch up at the next push that succeeded); the run and its results are not affected",
        parts.join(", ")
    ))
}

/// One label set's totals so far.
#[derive(Clone, Default)]
struct Totals {
    requests: u64,
    errors: BTreeMap<Option<&'static str>, u64>,
    latency: Latency,
}

/// One feed's label sets so far, and the time of its last snapshot.
#[derive(Default)]
struct FeedTotals {
    parts: BTreeMap<Arc<Labels>, Totals>,
    last_ms: i64,
}

/// What one push sends for one feed: every label set of it so far, with its totals.
#[derive(Clone)]
struct Snapshot {
    /// The feed's labels.
    labels: Arc<Labels>,
    timestamp: i64,
    parts: Vec<(Arc<Labels>, Totals)>,
    offered: Option<Offered>,
}

/// The background thread's state.
struct Worker {
    endpoint: Endpoint,
    shared: Arc<Shared>,
    series: BTreeMap<Arc<Labels>, FeedTotals>,
    outbox: VecDeque<Snapshot>,
    /// The server refused a native histogram: classic buckets from then on.
    classic: bool,
}

impl Worker {
    fn run(mut self, rx: &Receiver<Second>) {
        let mut open = true;
        loop {
            let finish_by = *self.shared.finish_by.lock().expect("promrw state");
            // Wait for a second only when there is nothing to push.
            if open && self.outbox.is_empty() && finish_by.is_none() {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(s) => self.add(s),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => open = false,
                }
            }
            while open {
                match rx.try_recv() {
                    Ok(s) => self.add(s),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            if !open && finish_by.is_none() {
                // Dropped without finish (the run failed): nobody waits for the rest.
                return;
            }
            let deadline = match finish_by {
                Some(by) => {
                    self.keep_latest();
                    if self.outbox.is_empty() {
                        break;
                    }
                    if Instant::now() >= by {
                        self.tally().unsent += self.outbox.len() as u64;
                        break;
                    }
                    by.min(Instant::now() + http::PUSH_TIMEOUT)
                }
                None => Instant::now() + http::PUSH_TIMEOUT,
            };
            if let Some(snap) = self.outbox.pop_front() {
                self.push(&snap, deadline);
            }
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.shared.tally.lock().expect("promrw state")
    }

    /// Adds a second's parts to their label sets' totals and queues the feed's snapshot (a
    /// label set's first second is preceded by zeros a second before, so `rate()` sees it
    /// whole).
    fn add(&mut self, s: Second) {
        let feed = self.series.entry(s.labels.clone()).or_default();
        let timestamp = s.timestamp.max(feed.last_ms + 1);
        let new: Vec<(Arc<Labels>, Totals)> = s
            .parts
            .iter()
            .filter(|p| !feed.parts.contains_key(&p.labels))
            .map(|p| {
                let zero = Totals {
                    errors: p.errors.iter().map(|(c, _)| (*c, 0)).collect(),
                    ..Totals::default()
                };
                (p.labels.clone(), zero)
            })
            .collect();
        let first = feed.last_ms == 0;
        if !new.is_empty() || first {
            // The offered gauge only with the feed's first zeros: a later one would fall
            // before its last sample, which Prometheus refuses as out of order.
            let zeros = Snapshot {
                labels: s.labels.clone(),
                timestamp: timestamp - 1000,
                parts: new.clone(),
                offered: s.offered.filter(|_| first),
            };
            Self::queue(&mut self.outbox, &self.shared, zeros);
        }
        feed.parts.extend(new);
        feed.last_ms = timestamp;
        for p in &s.parts {
            let t = feed.parts.entry(p.labels.clone()).or_default();
            t.requests += p.completed;
            for (class, n) in &p.errors {
                *t.errors.entry(*class).or_default() += n;
            }
            if let Ok(h) = loadlab_engine::records::decode_histogram(&p.latency) {
                t.latency.add(&h);
            }
        }
        let snap = Snapshot {
            labels: s.labels,
            timestamp,
            parts: feed
                .parts
                .iter()
                .map(|(l, t)| (l.clone(), t.clone()))
                .collect(),
            offered: s.offered,
        };
        Self::queue(&mut self.outbox, &self.shared, snap);
    }

    fn queue(outbox: &mut VecDeque<Snapshot>, shared: &Shared, snap: Snapshot) {
        if outbox.len() >= OUTBOX {
            outbox.pop_front();
            shared.tally.lock().expect("promrw state").dropped += 1;
        }
        outbox.push_back(snap);
    }

    /// At the end only each feed's first and latest snapshots still queued matter: the
    /// latest holds the totals, and the first may be the zeros `rate()` starts from (a
    /// server slow to take the first pushes must not lose the run's beginning).
    fn keep_latest(&mut self) {
        keep_ends(&mut self.outbox);
    }

    fn push(&mut self, snap: &Snapshot, deadline: Instant) {
        let mut result = http::post(
            &self.endpoint,
            &wire::encode(&request(snap, self.classic)),
            deadline,
        );
        if !self.classic && refused_native(&result) {
            self.classic = true;
            eprintln!(
                "loadlab: warning: --prometheus-rw {}: the server refused a native histogram ({}); latency goes as classic buckets, loadlab_latency_seconds_bucket{{le=...}} with _sum and _count (start Prometheus with --enable-feature=native-histograms for native ones)",
                self.endpoint.url,
                result.as_ref().err().map(ToString::to_string).unwrap_or_default()
            );
            result = http::post(
                &self.endpoint,
                &wire::encode(&request(snap, true)),
                deadline,
            );
        }
        let mut t = self.tally();
        t.pushes += 1;
        if let Err(e) = result {
            t.failed += 1;
            if t.failed == 1 {
                eprintln!(
                    "loadlab: warning: --prometheus-rw {}: a push failed ({e}); the run goes on, and the failures are counted at its end",
                    self.endpoint.url
                );
            }
            t.last_error = Some(e.to_string());
        }
    }
}

/// Keeps each feed's first and latest snapshot of `outbox`, in time order.
fn keep_ends(outbox: &mut VecDeque<Snapshot>) {
    let mut ends: BTreeMap<Arc<Labels>, (Snapshot, Option<Snapshot>)> = BTreeMap::new();
    for s in outbox.drain(..) {
        match ends.get_mut(&s.labels) {
            Some((_, latest)) => *latest = Some(s),
            None => {
                ends.insert(s.labels.clone(), (s, None));
            }
        }
    }
    let mut kept: Vec<Snapshot> = ends
        .into_values()
        .flat_map(|(first, latest)| std::iter::once(first).chain(latest))
        .collect();
    kept.sort_by_key(|s| s.timestamp);
    outbox.extend(kept);
}

/// Whether a push failed because the server does not take native histograms (Prometheus
/// without `--enable-feature=native-histograms`: "native histograms are disabled", a 400
/// or 500 by version).
fn refused_native(r: &Result<(), PushError>) -> bool {
    matches!(r, Err(PushError::Status { code, body })
        if (400..600).contains(code) && body.to_ascii_lowercase().contains("histogram"))
}

/// The write request for one snapshot: each label set's counters and latency (native or
/// classic), and the feed's offered load.
fn request(s: &Snapshot, classic: bool) -> wire::WriteRequest {
    let series = |labels: &Labels, name: &str, extra: &[(&str, &str)]| -> Vec<wire::Label> {
        let mut l: Vec<wire::Label> = std::iter::once(("__name__", name))
            .chain(labels.iter().map(|(k, v)| (*k, v.as_str())))
            .chain(extra.iter().copied())
            .map(|(name, value)| wire::Label {
                name: name.into(),
                value: value.into(),
            })
            .collect();
        l.sort();
        l
    };
    let sample = |labels, value: f64| wire::TimeSeries {
        labels,
        samples: vec![wire::Sample {
            value,
            timestamp: s.timestamp,
        }],
        histograms: Vec::new(),
    };
    let mut out = Vec::new();
    for (labels, t) in &s.parts {
        out.push(sample(
            series(labels, "loadlab_requests_total", &[]),
            t.requests as f64,
        ));
        for (class, n) in &t.errors {
            let extra: Vec<(&str, &str)> = class.iter().map(|c| ("class", *c)).collect();
            out.push(sample(
                series(labels, "loadlab_errors_total", &extra),
                *n as f64,
            ));
        }
        if classic {
            for (le, n) in t.latency.classic() {
                out.push(sample(
                    series(labels, "loadlab_latency_seconds_bucket", &[("le", &le)]),
                    n as f64,
                ));
            }
            out.push(sample(
                series(labels, "loadlab_latency_seconds_sum", &[]),
                t.latency.sum(),
            ));
            out.push(sample(
                series(labels, "loadlab_latency_seconds_count", &[]),
                t.latency.count() as f64,
            ));
        } else {
            out.push(wire::TimeSeries {
                labels: series(labels, "loadlab_latency_seconds", &[]),
                samples: Vec::new(),
                histograms: vec![t.latency.native(s.timestamp)],
            });
        }
    }
    match s.offered {
        Some(Offered::Rate(r)) => {
            out.push(sample(series(&s.labels, "loadlab_offered_rps", &[]), r))
        }
        Some(Offered::Concurrency(c)) => {
            out.push(sample(
                series(&s.labels, "loadlab_offered_concurrency", &[]),
                c,
            ));
        }
        None => {}
    }
    wire::WriteRequest { timeseries: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let mut latency = Latency::default();
        latency.observe(0.002, 3);
        let labels = Arc::new(Labels::from([("scenario", "api".to_string())]));
        let totals = Totals {
            requests: 10,
            errors: BTreeMap::from([(None, 2), (Some("timeout"), 1)]),
            latency,
        };
        Snapshot {
            labels: labels.clone(),
            timestamp: 1000,
            parts: vec![(labels, totals)],
            offered: Some(Offered::Rate(50.0)),
        }
    }

    fn names(r: &wire::WriteRequest) -> Vec<String> {
        r.timeseries
            .iter()
            .map(|t| {
                t.labels
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.value))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    }

    #[test]
    fn the_end_keeps_each_feeds_first_and_latest_snapshot() {
        let at = |labels: &str, timestamp: i64| Snapshot {
            labels: Arc::new(Labels::from([("scenario", labels.to_string())])),
            timestamp,
            ..snapshot()
        };
        let mut outbox = VecDeque::from([
            at("a", 1000),
            at("a", 2000),
            at("b", 2500),
            at("a", 3000),
            at("a", 4000),
            at("c", 1500),
            at("c", 3500),
        ]);
        keep_ends(&mut outbox);
        let kept: Vec<(String, i64)> = outbox
            .iter()
            .map(|s| (s.labels["scenario"].clone(), s.timestamp))
            .collect();
        let want = [
            ("a", 1000),
            ("c", 1500),
            ("b", 2500),
            ("c", 3500),
            ("a", 4000),
        ];
        assert_eq!(kept, want.map(|(l, t)| (l.to_string(), t)));
    }

    #[test]
    fn native_request_has_counters_histogram_and_gauge() {
        let r = request(&snapshot(), false);
        assert_eq!(
            names(&r),
            [
                "__name__=loadlab_requests_total,scenario=api",
                "__name__=loadlab_errors_total,scenario=api",
                "__name__=loadlab_errors_total,class=timeout,scenario=api",
                "__name__=loadlab_latency_seconds,scenario=api",
                "__name__=loadlab_offered_rps,scenario=api",
            ]
        );
        assert_eq!(r.timeseries[0].samples[0].value, 10.0);
        assert_eq!(r.timeseries[3].histograms[0].count_int, Some(3));
        assert!(r.timeseries[3].samples.is_empty());
    }

    #[test]
    fn classic_request_has_buckets_sum_and_count() {
        let r = request(&snapshot(), true);
        let n = names(&r);
        assert!(n.contains(&"__name__=loadlab_latency_seconds_bucket,le=+Inf,scenario=api".into()));
        assert!(n.contains(&"__name__=loadlab_latency_seconds_count,scenario=api".into()));
        assert!(r.timeseries.iter().all(|t| t.histograms.is_empty()));
        let le = |b: &str| {
            r.timeseries
                .iter()
                .find(|t| t.labels.iter().any(|l| l.name == "le" && l.value == b))
                .unwrap()
                .samples[0]
                .value
        };
        assert_eq!(le("0.001"), 0.0);
        assert_eq!(le("0.0025"), 3.0);
    }

    #[test]
    fn a_refusal_of_native_histograms_is_recognized() {
        let refusal = Err(PushError::Status {
            code: 400,
            body: "native histograms are disabled".into(),
        });
        assert!(refused_native(&refusal));
        let other = Err(PushError::Status {
            code: 400,
            body: "out of order sample".into(),
        });
        assert!(!refused_native(&other));
        assert!(!refused_native(&Err(PushError::Io("refused".into()))));
    }

    #[test]
    fn the_warning_counts_what_went_wrong() {
        let t = Tally {
            pushes: 5,
            failed: 3,
            last_error: Some("connecting: refused".into()),
            dropped: 1,
            unsent: 0,
        };
        let w = warning("http://x/w", &t, 0, true).unwrap();
        assert!(
            w.contains("3 of 5 pushes failed (last: connecting: refused)"),
            "{w}"
        );
        assert!(w.contains("1 dropped"), "{w}");
        assert!(warning("http://x/w", &Tally::default(), 0, true).is_none());
    }
}
