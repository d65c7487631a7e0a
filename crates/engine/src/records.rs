//! The records a worker keeps that merge exactly, and how the result format writes them:
//! histograms with loadlab's bounds (as base64 text in JSON), a request name's record, the
//! totals of a flow's sessions. The recorder ([`crate::recorder`]) fills them, the result
//! ([`crate::result`]) merges and reports them; neither is needed to read them.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error::ErrorClass;
use crate::stats::TrendSums;

/// Largest value histograms hold: one hour, in microseconds.
pub const HIST_MAX_US: u64 = 3_600_000_000;
/// Largest completion offset recorded (for achieved throughput): ten hours, in µs.
pub const COMPLETION_MAX_US: u64 = 36_000_000_000;
/// Significant digits of the run's total histograms.
pub const TOTAL_SIGFIG: u8 = 3;
/// Significant digits of per-second histograms (smaller, so long runs stay small).
pub const INTERVAL_SIGFIG: u8 = 2;
/// Number of gRPC status codes (0 OK to 16 UNAUTHENTICATED).
pub const GRPC_CODES: usize = 17;

/// A histogram of microseconds with loadlab's bounds.
pub fn new_histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, sigfig).expect("static histogram bounds are valid")
}

/// A histogram of completion times (µs after the start of the measured window).
pub fn completion_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, COMPLETION_MAX_US, TOTAL_SIGFIG)
        .expect("static histogram bounds are valid")
}

/// A request name's histogram of completion times: only its quartiles are read, so two
/// significant digits keep a name's record small (a run may have many names).
pub fn name_completion_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, COMPLETION_MAX_US, INTERVAL_SIGFIG)
        .expect("static histogram bounds are valid")
}

/// Adds `from` to `into`; fails only on histograms of other bounds (a record from another
/// loadlab build).
pub(crate) fn merge_histogram(
    into: &mut Histogram<u64>,
    from: &Histogram<u64>,
) -> Result<(), String> {
    into.add(from)
        .map_err(|e| format!("histograms do not merge: {e:?}"))
}

/// Encodes a histogram as the result format stores it.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Decodes a histogram stored by [`encode_histogram`].
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("bad base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("bad histogram: {e:?}"))
}

/// A histogram as JSON text, in the result format's encoding.
pub(crate) mod histogram_text {
    use hdrhistogram::Histogram;
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::encode_histogram(h))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        super::decode_histogram(&text).map_err(D::Error::custom)
    }
}

/// One request name's part of a record (a run of named requests: a targets file, or a plan
/// scenario's requests): what the results per name are computed from, kept per worker and
/// merged exactly like the whole. Every measured request counts under exactly one name, so
/// the names' counts add up to the whole's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NameRecord {
    /// Latency from the intended send time, µs.
    #[serde(with = "histogram_text")]
    pub latency: Histogram<u64>,
    /// When successful responses completed, µs after the window's start (fewer digits than
    /// the whole's: it only gives the quartiles of completion times).
    #[serde(with = "histogram_text")]
    pub success_done: Histogram<u64>,
    /// Latency trend sums of its successful requests.
    pub trend: TrendSums,
    /// Responses received (any status).
    pub responses: u64,
    /// Of which successful.
    pub successful: u64,
    /// Latest intended send of a measured request of this name (same clock as the whole's).
    pub last_intended_ns: u64,
    /// Failures per class.
    pub errors: [u64; ErrorClass::COUNT],
    /// Responses per status code, the codes seen only (code, count), in order of first sight.
    pub status: Vec<(u16, u64)>,
    /// gRPC status counts.
    pub grpc: [u64; GRPC_CODES],
}

impl NameRecord {
    /// Nothing recorded yet.
    pub fn empty() -> NameRecord {
        NameRecord {
            latency: new_histogram(TOTAL_SIGFIG),
            success_done: name_completion_histogram(),
            trend: TrendSums::default(),
            responses: 0,
            successful: 0,
            last_intended_ns: 0,
            errors: [0; ErrorClass::COUNT],
            status: Vec::new(),
            grpc: [0; GRPC_CODES],
        }
    }

    /// Counts one response of status `code`.
    #[inline]
    pub fn count_status(&mut self, code: u16) {
        self.add_status(code, 1);
    }

    /// Counts `n` responses of status `code`.
    #[inline]
    fn add_status(&mut self, code: u16, n: u64) {
        match self.status.iter_mut().find(|(c, _)| *c == code) {
            Some((_, m)) => *m += n,
            None => self.status.push((code, n)),
        }
    }

    /// Adds another record of the same name exactly.
    pub fn absorb(&mut self, o: &NameRecord) -> Result<(), String> {
        merge_histogram(&mut self.latency, &o.latency)?;
        merge_histogram(&mut self.success_done, &o.success_done)?;
        self.trend.merge(&o.trend);
        self.responses += o.responses;
        self.successful += o.successful;
        self.last_intended_ns = self.last_intended_ns.max(o.last_intended_ns);
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        for &(code, n) in &o.status {
            self.add_status(code, n);
        }
        for (a, b) in self.grpc.iter_mut().zip(o.grpc.iter()) {
            *a += b;
        }
        Ok(())
    }
}

/// What a worker counted of the sessions that started in the measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionTotals {
    /// Sessions started.
    pub started: u64,
    /// Sessions that sent every step and had every response.
    pub completed: u64,
    /// Sessions ended by a failed request, by the step (as written) that failed.
    pub aborted_by_step: Vec<u64>,
    /// Sessions still running when the run ended (their next step was due after the
    /// window, or the run was interrupted).
    pub running_at_end: u64,
    /// Open loop: arrivals that found every session loop busy (the pool ceiling,
    /// `max_connections`, reached by sessions sending or thinking) and waited for one: the
    /// generator's limit, not the server's.
    #[serde(default)]
    pub waited_for_loop: u64,
    /// Completed sessions' duration, first intended send to last response, think times
    /// included, µs.
    #[serde(with = "histogram_text")]
    pub duration: Histogram<u64>,
    /// Completed sessions' time waiting for responses (each request from its intended send
    /// time to its response), think times left out, µs.
    #[serde(with = "histogram_text")]
    pub active: Histogram<u64>,
}

impl SessionTotals {
    /// Nothing counted, for a flow of `steps` steps as written.
    pub fn new(steps: usize) -> SessionTotals {
        SessionTotals {
            started: 0,
            completed: 0,
            aborted_by_step: vec![0; steps],
            running_at_end: 0,
            waited_for_loop: 0,
            duration: new_histogram(TOTAL_SIGFIG),
            active: new_histogram(TOTAL_SIGFIG),
        }
    }

    /// Sessions aborted, all steps together.
    pub fn aborted(&self) -> u64 {
        self.aborted_by_step.iter().sum()
    }

    /// Adds another worker's (or machine's) counts exactly.
    pub fn absorb(&mut self, o: &SessionTotals) -> Result<(), String> {
        if o.aborted_by_step.len() != self.aborted_by_step.len() {
            return Err(format!(
                "sessions of flows of {} and {} steps do not merge",
                self.aborted_by_step.len(),
                o.aborted_by_step.len()
            ));
        }
        self.started += o.started;
        self.completed += o.completed;
        self.running_at_end += o.running_at_end;
        self.waited_for_loop += o.waited_for_loop;
        for (a, b) in self.aborted_by_step.iter_mut().zip(&o.aborted_by_step) {
            *a += b;
        }
        merge_histogram(&mut self.duration, &o.duration)?;
        merge_histogram(&mut self.active, &o.active)?;
        Ok(())
    }
}

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every step answered.
    Completed {
        /// First intended send to last response, ns.
        duration_ns: u64,
        /// The requests' latencies summed, ns.
        active_ns: u64,
    },
    /// A request of this step (as written) failed.
    Aborted(usize),
    /// Its next step was due after the window's end.
    Running,
}
