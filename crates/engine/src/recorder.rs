//! Per-worker recording. Each worker owns a [`Recorder`] (no locks on the hot path); every
//! second it ships that second's interval histogram to the collector, and at the end it
//! hands back its totals, which are merged in one place ([`crate::result::merge`]).

use std::sync::mpsc::Sender;
use std::sync::Arc;

use hdrhistogram::Histogram;

use loadlab_grpc::GrpcStatus;

use crate::error::ErrorClass;
use crate::records::{
    completion_histogram, new_histogram, NameRecord, SessionTotals, GRPC_CODES, INTERVAL_SIGFIG,
    TOTAL_SIGFIG,
};
use crate::stats::TrendSums;

const NS_PER_SEC: u64 = 1_000_000_000;

/// A request's place in the run: when it was meant to be sent, which of the run's requests
/// it is (its kind: one request of a targets file or of a plan scenario's list) and the
/// data row it drew. Drawn when the request loop takes it, so a request that times out
/// waiting for a connection still counts under a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Intended send time (clock ns).
    pub intended: u64,
    /// Index of its request in the run's list (0 for a run of one request).
    pub kind: u32,
    /// Index of its data row, or [`Planned::NO_ROW`].
    pub row: u32,
}

impl Planned {
    /// No data row.
    pub const NO_ROW: u32 = u32::MAX;

    /// The run's only request, intended at `intended`.
    #[inline]
    pub const fn at(intended: u64) -> Planned {
        Planned {
            intended,
            kind: 0,
            row: Planned::NO_ROW,
        }
    }
}

/// Which name each kind of request counts under, for a run of named requests; empty for a
/// run whose requests have no names (results are then for the whole only).
#[derive(Clone, Debug, Default)]
pub struct NameMap {
    of_kind: Arc<[u32]>,
    count: usize,
}

impl NameMap {
    /// Kind `i` counts under name `of_kind[i]` (names numbered from 0).
    pub fn new(of_kind: Vec<u32>) -> NameMap {
        let count = of_kind.iter().map(|&n| n as usize + 1).max().unwrap_or(0);
        NameMap {
            of_kind: of_kind.into(),
            count,
        }
    }

    /// How many names.
    pub fn count(&self) -> usize {
        self.count
    }

    #[inline]
    fn of(&self, kind: u32) -> Option<usize> {
        self.of_kind.get(kind as usize).map(|&n| n as usize)
    }
}

/// One worker's record of one second of the measured window.
#[derive(Debug)]
pub struct IntervalReport {
    /// Worker index.
    pub worker: usize,
    /// Second since the start of the measured window.
    pub second: u64,
    /// The worker will send nothing more for seconds before this.
    pub next_second: u64,
    /// Responses received (any status).
    pub completed: u64,
    /// Successful responses (status below 400).
    pub successful: u64,
    /// Failed requests (any class).
    pub errors: u64,
    /// The failed requests by class (indexed by [`ErrorClass::index`]).
    pub error_classes: [u64; ErrorClass::COUNT],
    /// Latency (from intended send) of the responses, microseconds.
    pub latency: Histogram<u64>,
    /// A run of named requests: each name's part of the second, indexed as the names are
    /// (empty for one unnamed request).
    pub names: Vec<NameInterval>,
}

/// One name's part of one worker's second.
#[derive(Debug)]
pub struct NameInterval {
    /// Responses received (any status).
    pub completed: u64,
    /// Successful responses.
    pub successful: u64,
    /// Failed requests by class (indexed by [`ErrorClass::index`]).
    pub error_classes: [u64; ErrorClass::COUNT],
    /// Latency from intended send of its responses, µs.
    pub latency: Histogram<u64>,
}

impl NameInterval {
    fn new() -> NameInterval {
        NameInterval {
            completed: 0,
            successful: 0,
            error_classes: [0; ErrorClass::COUNT],
            latency: new_histogram(INTERVAL_SIGFIG),
        }
    }

    /// Failed requests (any class).
    pub fn errors(&self) -> u64 {
        self.error_classes.iter().sum()
    }

    /// Nothing counted.
    pub fn is_empty(&self) -> bool {
        self.completed == 0 && self.errors() == 0
    }

    /// Adds another worker's part of the same second.
    pub fn add(&mut self, o: &NameInterval) {
        self.completed += o.completed;
        self.successful += o.successful;
        for (a, b) in self.error_classes.iter_mut().zip(o.error_classes) {
            *a += b;
        }
        self.latency.add(&o.latency).expect("same bounds");
    }
}

/// What a worker measured over the whole run.
#[derive(Debug, Clone)]
pub struct WorkerTotals {
    /// Latency from intended send time, µs.
    pub latency: Histogram<u64>,
    /// Service time from actual send, µs.
    pub service: Histogram<u64>,
    /// TCP (+TLS) connect time, µs.
    pub connect: Histogram<u64>,
    /// Schedule lag (release time minus intended time), µs.
    pub lag: Histogram<u64>,
    /// Responses received in the measured window (any status).
    pub responses: u64,
    /// Responses with a status below 400.
    pub successful: u64,
    /// Latest intended send time of a measured request (clock ns), 0 if none.
    pub last_intended_ns: u64,
    /// The longest a measured request that got a reply waited between its intended send
    /// time and its send (ns): its release's lateness, a wait for a free connection in
    /// loadlab's queue, and over epoll its connect.
    pub before_send_max_ns: u64,
    /// Latency of successful requests against their intended send time (the trend).
    pub trend: TrendSums,
    /// When successful responses completed, µs after the start of the measured window.
    pub success_done: Histogram<u64>,
    /// Failures per [`ErrorClass`] index.
    pub errors: [u64; ErrorClass::COUNT],
    /// Count per status code (index = code, 0..=999).
    pub status: Vec<u64>,
    /// gRPC calls per status code (index = code, 0..=16).
    pub grpc: [u64; GRPC_CODES],
    /// WebSocket: connections the server closed, per close code (codes seen only).
    pub ws_close: Vec<(u16, u64)>,
    /// Replies that carry the server's send time: the delay from it to their arrival.
    pub server_delay: ServerDelayRecord,
    /// Server streams (gRPC, event streams): each message's wait, as the first on its
    /// stream or a gap after the one before.
    pub stream: StreamRecord,
    /// WebSocket and event streams: connections still open when their loop ended with the
    /// run (held to the end).
    pub held_at_end: u64,
    /// Connections opened (whole run).
    pub connections_opened: u64,
    /// Measured requests re-sent because the server closed gracefully (or refused them)
    /// without processing them.
    pub resent_unprocessed: u64,
    /// Connections the server closed gracefully (whole run).
    pub server_closes: u64,
    /// Requests the server answered on those connections before closing them.
    pub server_close_requests: u64,
    /// Measured messages of a bidirectional or client-streaming call that the server's
    /// HTTP/2 flow-control window held back when they were to go.
    pub window_stalls: u64,
    /// Replies of a bidirectional call that matched no message waiting (`--match-field`).
    pub unmatched: u64,
    /// Latest completion time seen (clock ns), 0 if none.
    pub last_completion_ns: u64,
    /// Measured arrivals never sent (open loop).
    pub unsent: Unsent,
    /// Open loop: measured arrivals intended inside the window but released at or after
    /// its end (the load that slipped out of the window by loadlab's lateness).
    pub sent_after_end: u64,
    /// This worker thread's CPU seconds (user + system).
    pub thread_cpu_seconds: f64,
    /// Wall seconds the worker thread was running its load.
    pub thread_wall_seconds: f64,
    /// Per request name (empty when the run's requests are not named).
    pub names: Vec<NameRecord>,
    /// A flow's sessions (`None`: independent requests).
    pub sessions: Option<SessionTotals>,
}

impl WorkerTotals {
    fn new(names: usize) -> WorkerTotals {
        WorkerTotals {
            latency: new_histogram(TOTAL_SIGFIG),
            service: new_histogram(TOTAL_SIGFIG),
            connect: new_histogram(TOTAL_SIGFIG),
            lag: new_histogram(TOTAL_SIGFIG),
            responses: 0,
            successful: 0,
            last_intended_ns: 0,
            before_send_max_ns: 0,
            trend: TrendSums::default(),
            success_done: completion_histogram(),
            errors: [0; ErrorClass::COUNT],
            status: vec![0; 1000],
            grpc: [0; GRPC_CODES],
            ws_close: Vec::new(),
            server_delay: ServerDelayRecord::default(),
            stream: StreamRecord::default(),
            held_at_end: 0,
            connections_opened: 0,
            resent_unprocessed: 0,
            server_closes: 0,
            server_close_requests: 0,
            window_stalls: 0,
            unmatched: 0,
            last_completion_ns: 0,
            unsent: Unsent::default(),
            sent_after_end: 0,
            thread_cpu_seconds: 0.0,
            thread_wall_seconds: 0.0,
            names: (0..names).map(|_| NameRecord::empty()).collect(),
            sessions: None,
        }
    }
}

/// Replies that say when the server sent them (`--sent-at`): the delay from that time to
/// their arrival, µs, and the replies it could not be read from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ServerDelayRecord {
    /// The delay of each reply that carried a time before its arrival, µs.
    #[serde(with = "crate::records::histogram_text")]
    pub delay: Histogram<u64>,
    /// Replies without a number at the pointer (not JSON, no such field, not a number).
    pub missing: u64,
    /// Replies whose time is after their arrival: the two clocks disagree by more than the
    /// delay (another host's clock), so no delay is recorded for them.
    pub ahead: u64,
}

impl Default for ServerDelayRecord {
    fn default() -> Self {
        ServerDelayRecord {
            delay: new_histogram(TOTAL_SIGFIG),
            missing: 0,
            ahead: 0,
        }
    }
}

impl ServerDelayRecord {
    /// Adds another record exactly (histograms added, counts summed).
    pub fn absorb(&mut self, o: &ServerDelayRecord) -> Result<(), String> {
        crate::records::merge_histogram(&mut self.delay, &o.delay)?;
        self.missing += o.missing;
        self.ahead += o.ahead;
        Ok(())
    }
}

/// A server stream's messages (gRPC server streaming, server-sent events) split by what
/// their wait was: the first message of a stream (from the moment loadlab began to open
/// it: the connection if it was not up, the stream, the message) or the gap after the
/// message before on the same stream.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamRecord {
    /// Time to first message, µs.
    #[serde(with = "crate::records::histogram_text")]
    pub first: Histogram<u64>,
    /// Gaps between a stream's messages, µs.
    #[serde(with = "crate::records::histogram_text")]
    pub gap: Histogram<u64>,
    /// Stream-seconds held in the measured window: every request loop holding a stream,
    /// for every second of the window it ran in.
    #[serde(default)]
    pub seconds: u64,
    /// The stream-seconds in which the stream missed a message: a wait of it that ended
    /// in a failure (a timeout, an error status, a reset, a close) overlapped the second.
    /// A starved stream fails every second it is held, a fed one none: the error clause
    /// weighs these, where counting failed waits weighed a starved stream one timeout
    /// against a fed one's message every gap.
    #[serde(default)]
    pub failed_seconds: u64,
    /// Streams opened at a rate (`--stream-lifetime`), measured, that had their first
    /// message, by how they ended: held to their lifetime (or to a timeout past the window's end) and
    /// reset by loadlab; ended by the server (OK) before it; broken before it (a gap past
    /// the timeout, an error status, a reset).
    #[serde(default)]
    pub ends: StreamEnds,
}

/// How measured streams opened at a rate ended after their first message
/// ([`StreamRecord::ends`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamEnds {
    /// Held to their lifetime, or to a timeout past the window's end, then reset by loadlab.
    pub lived: u64,
    /// Ended by the server with OK before their lifetime.
    pub ended: u64,
    /// Broken before their lifetime: a gap longer than the timeout, an error status, a
    /// reset or a lost connection.
    pub broken: u64,
}

impl Default for StreamRecord {
    fn default() -> Self {
        StreamRecord {
            first: new_histogram(TOTAL_SIGFIG),
            gap: new_histogram(TOTAL_SIGFIG),
            seconds: 0,
            failed_seconds: 0,
            ends: StreamEnds::default(),
        }
    }
}

impl StreamRecord {
    /// Adds another record exactly (histograms added, stream-seconds summed).
    pub fn absorb(&mut self, o: &StreamRecord) -> Result<(), String> {
        crate::records::merge_histogram(&mut self.first, &o.first)?;
        crate::records::merge_histogram(&mut self.gap, &o.gap)?;
        self.seconds += o.seconds;
        self.failed_seconds += o.failed_seconds;
        self.ends.lived += o.ends.lived;
        self.ends.ended += o.ends.ended;
        self.ends.broken += o.ends.broken;
        Ok(())
    }
}

/// One request loop's stream-seconds ([`crate::config::Transport::server_streams`]): the
/// seconds of the measured window in which one of its waits failed, each counted once.
#[derive(Debug, Default)]
pub struct StreamSeconds {
    failed: u64,
    /// The last second (from the measured window's start) counted failed.
    marked: Option<u64>,
}

impl StreamSeconds {
    /// A wait from `from_ns` to `to_ns` failed: the seconds of the window `[start, end)` it
    /// overlapped are failed (spans come in time order on one loop).
    pub fn fail(&mut self, from_ns: u64, to_ns: u64, start: u64, end: u64) {
        let from = from_ns.max(start);
        let to = to_ns.min(end.saturating_sub(1));
        if to < from || end <= start {
            return;
        }
        let last = (to - start) / NS_PER_SEC;
        let first = match self.marked {
            Some(m) => ((from - start) / NS_PER_SEC).max(m + 1),
            None => (from - start) / NS_PER_SEC,
        };
        if last >= first {
            self.failed += last - first + 1;
            self.marked = Some(last);
        }
    }

    /// The seconds this loop held its stream in the window `[start, end)` when it ended at
    /// `now` (a second begun counts), and the failed ones among them.
    pub fn counts(&self, now: u64, start: u64, end: u64) -> (u64, u64) {
        let held = now.min(end).saturating_sub(start).div_ceil(NS_PER_SEC);
        (held, self.failed.min(held))
    }

    /// One stream held from `from_ns` to `to_ns` (a stream opened at a rate): the seconds
    /// of the window `[start, end)` it overlapped, each counted once, and the failed ones
    /// among them.
    pub fn span(&self, from_ns: u64, to_ns: u64, start: u64, end: u64) -> (u64, u64) {
        let from = from_ns.max(start);
        let to = to_ns.min(end);
        if to <= from {
            return (0, 0);
        }
        let held = (to - 1 - start) / NS_PER_SEC - (from - start) / NS_PER_SEC + 1;
        (held, self.failed.min(held))
    }
}

/// Open loop: measured arrivals loadlab never put on the wire, by why. They are counted
/// once each, in bulk, and are not errors of the server: the run is generator-limited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unsent {
    /// The dispatcher fell more than the timeout behind its schedule: these arrivals' deadlines
    /// had passed before they could be released (a rate the generator cannot keep).
    pub late: u64,
    /// Released while the queue of arrivals waiting for a free connection was full.
    pub queue_full: u64,
}

impl Unsent {
    /// Both causes together.
    pub fn total(&self) -> u64 {
        self.late + self.queue_full
    }

    /// Adds another count.
    pub fn add(&mut self, o: Unsent) {
        self.late += o.late;
        self.queue_full += o.queue_full;
    }
}

/// A worker's recorder.
pub struct Recorder {
    worker: usize,
    measure_start_ns: u64,
    /// The held connections were counted ([`Recorder::held_at_end`]).
    held_counted: bool,
    /// The end of the window arrivals are intended in ([`Recorder::set_window_end`]).
    window_end_ns: u64,
    /// The intended send time of the last measured request that failed
    /// ([`Recorder::failed_last`]).
    last_failure: Option<u64>,
    names: NameMap,
    totals: WorkerTotals,
    second: u64,
    interval: IntervalCounts,
    tx: Sender<IntervalReport>,
}

struct IntervalCounts {
    completed: u64,
    successful: u64,
    errors: u64,
    error_classes: [u64; ErrorClass::COUNT],
    latency: Histogram<u64>,
    names: Vec<NameInterval>,
}

impl IntervalCounts {
    fn new(names: usize) -> IntervalCounts {
        IntervalCounts {
            completed: 0,
            successful: 0,
            errors: 0,
            error_classes: [0; ErrorClass::COUNT],
            latency: new_histogram(INTERVAL_SIGFIG),
            names: (0..names).map(|_| NameInterval::new()).collect(),
        }
    }
}

#[inline]
fn us(ns: u64) -> u64 {
    ns / 1_000
}

impl Recorder {
    /// A recorder for `worker`, measuring requests intended at or after `measure_start_ns`,
    /// each also under its name when `names` has any.
    pub fn new(
        worker: usize,
        measure_start_ns: u64,
        tx: Sender<IntervalReport>,
        names: NameMap,
    ) -> Recorder {
        Recorder {
            worker,
            measure_start_ns,
            window_end_ns: u64::MAX,
            held_counted: false,
            last_failure: None,
            totals: WorkerTotals::new(names.count()),
            second: 0,
            interval: IntervalCounts::new(names.count()),
            names,
            tx,
        }
    }

    /// The end of the window arrivals are intended in (open loop): an arrival released at
    /// or after it counts in [`WorkerTotals::sent_after_end`].
    pub fn set_window_end(&mut self, end_ns: u64) {
        self.window_end_ns = end_ns;
    }

    /// Counts sessions of a flow of `steps` steps (as written).
    pub fn count_sessions(&mut self, steps: usize) {
        self.totals.sessions = Some(SessionTotals::new(steps));
    }

    /// A measured session started.
    pub fn session_started(&mut self) {
        if let Some(s) = &mut self.totals.sessions {
            s.started += 1;
        }
    }

    /// An arrival intended at `intended_ns` found every session loop busy.
    pub fn session_waited(&mut self, intended_ns: u64) {
        if !self.measured(intended_ns) {
            return;
        }
        if let Some(s) = &mut self.totals.sessions {
            s.waited_for_loop += 1;
        }
    }

    /// A measured session ended.
    pub fn session_ended(&mut self, ended: crate::records::Ended) {
        use crate::records::Ended;
        let Some(s) = &mut self.totals.sessions else {
            return;
        };
        match ended {
            Ended::Completed {
                duration_ns,
                active_ns,
            } => {
                s.completed += 1;
                s.duration.saturating_record(us(duration_ns));
                s.active.saturating_record(us(active_ns));
            }
            Ended::Aborted(step) => {
                if let Some(n) = s.aborted_by_step.get_mut(step) {
                    *n += 1;
                }
            }
            Ended::Running => s.running_at_end += 1,
        }
    }

    /// A response of status `status` that fails for a reason of the client's checks (an
    /// extract rule found nothing): counted as a response and as a failure of `class`.
    pub fn failed_response(
        &mut self,
        p: Planned,
        sent_ns: u64,
        done_ns: u64,
        status: u16,
        class: ErrorClass,
    ) {
        self.reply(p, sent_ns, sent_ns, done_ns, status, Some(class));
    }

    /// Whether a request intended at `intended_ns` is measured (not warm-up).
    #[inline]
    pub fn measured(&self, intended_ns: u64) -> bool {
        intended_ns >= self.measure_start_ns
    }

    /// A response arrived at `done_ns` for the request `p`, written at `sent_ns`.
    pub fn response(&mut self, p: Planned, sent_ns: u64, done_ns: u64, status: u16) {
        self.response_resent(p, sent_ns, sent_ns, done_ns, status);
    }

    /// A response arrived at `done_ns` for the request `p`, written at `sent_ns` after its
    /// first send at `first_sent_ns` went unanswered on a connection the server closed: the
    /// time between the two sends was spent at the server, not waiting in loadlab.
    pub fn response_resent(
        &mut self,
        p: Planned,
        first_sent_ns: u64,
        sent_ns: u64,
        done_ns: u64,
        status: u16,
    ) {
        let failure = match status {
            400..=499 => Some(ErrorClass::Http4xx),
            500..=999 => Some(ErrorClass::Http5xx),
            _ => None,
        };
        self.reply(p, first_sent_ns, sent_ns, done_ns, status, failure);
    }

    /// A gRPC reply with HTTP status 200 and `grpc-status` `code` arrived at `done_ns`.
    pub fn grpc_reply(&mut self, p: Planned, sent_ns: u64, done_ns: u64, code: GrpcStatus) {
        if !self.measured(p.intended) {
            return;
        }
        self.totals.grpc[usize::from(code.code())] += 1;
        if let Some(n) = self.name(p.kind) {
            n.grpc[usize::from(code.code())] += 1;
        }
        let failure = (!code.is_ok()).then_some(ErrorClass::GrpcStatus);
        self.reply(p, sent_ns, sent_ns, done_ns, 200, failure);
    }

    /// WebSocket: the server closed the connection of message `p` with `code` (1005: a close
    /// frame without one; 1006: no close frame, the TCP connection ended).
    pub fn ws_closed(&mut self, p: Planned, code: u16) {
        if self.measured(p.intended) {
            add_code(&mut self.totals.ws_close, code, 1);
        }
    }

    /// The reply to `p` arrived at `arrived_real_ns` (`CLOCK_REALTIME`) and says the server
    /// sent it at `sent_real_ns` (`None`: it carries no such time).
    pub fn server_delay(&mut self, p: Planned, arrived_real_ns: u64, sent_real_ns: Option<u64>) {
        if !self.measured(p.intended) {
            return;
        }
        let d = &mut self.totals.server_delay;
        match sent_real_ns {
            None => d.missing += 1,
            Some(sent) if sent > arrived_real_ns => d.ahead += 1,
            Some(sent) => d.delay.saturating_record(us(arrived_real_ns - sent)),
        }
    }

    /// A server stream's message that answered `p` came after `wait_ns`: the first on its
    /// stream (`first`, timed from when loadlab began to open the stream) or a gap since
    /// the one before. Recorded beside the reply itself ([`Recorder::grpc_reply`],
    /// [`Recorder::response`]).
    pub fn stream_message(&mut self, p: Planned, wait_ns: u64, first: bool) {
        if !self.measured(p.intended) {
            return;
        }
        let h = if first {
            &mut self.totals.stream.first
        } else {
            &mut self.totals.stream.gap
        };
        h.saturating_record(us(wait_ns));
    }

    /// A request loop holding a stream ended: its stream-seconds held in the measured
    /// window, and those in which it missed a message.
    pub fn stream_seconds(&mut self, held: u64, failed: u64) {
        self.totals.stream.seconds += held;
        self.totals.stream.failed_seconds += failed;
    }

    /// A measured stream opened at a rate ended after its first message: held to its
    /// lifetime (`None`), or ended by the server early (`Some(true)`: OK, `Some(false)`:
    /// broken).
    pub fn stream_ended(&mut self, p: Planned, early: Option<bool>) {
        if !self.measured(p.intended) {
            return;
        }
        let e = &mut self.totals.stream.ends;
        match early {
            None => e.lived += 1,
            Some(true) => e.ended += 1,
            Some(false) => e.broken += 1,
        }
    }

    /// Whether the last measured request recorded as failed was the one intended at
    /// `intended_ns`: a request loop asks right after its exchange returned (in the same
    /// turn, so no other loop recorded anything since), wherever the exchange recorded
    /// the failure (a timeout, an error status, a close).
    pub fn failed_last(&self, intended_ns: u64) -> bool {
        self.last_failure == Some(intended_ns)
    }

    /// `n` held connections (WebSocket, event streams) were open and answering when the
    /// run ended: the first count given is kept (the later ones follow closes at the end).
    pub fn held_at_end(&mut self, n: u64) {
        if !self.held_counted {
            self.totals.held_at_end = n;
            self.held_counted = true;
        }
    }

    /// A gRPC call `p` ended at `done_ns` without a reply, with the status a gRPC client
    /// reports for it (DEADLINE_EXCEEDED when the deadline passed).
    pub fn grpc_error(&mut self, p: Planned, done_ns: u64, code: GrpcStatus) {
        if self.measured(p.intended) {
            self.totals.grpc[usize::from(code.code())] += 1;
            if let Some(n) = self.name(p.kind) {
                n.grpc[usize::from(code.code())] += 1;
            }
        }
        self.error(p, done_ns, ErrorClass::GrpcStatus);
    }

    /// The record of the name request kind `kind` counts under, if the run names its requests.
    #[inline]
    fn name(&mut self, kind: u32) -> Option<&mut NameRecord> {
        let i = self.names.of(kind)?;
        self.totals.names.get_mut(i)
    }

    /// `first_sent_ns`: when loadlab first sent the request (what it waited before, its
    /// `before_send`); `sent_ns`: the send the reply answered (its service time's start).
    fn reply(
        &mut self,
        p: Planned,
        first_sent_ns: u64,
        sent_ns: u64,
        done_ns: u64,
        status: u16,
        failure: Option<ErrorClass>,
    ) {
        let intended_ns = p.intended;
        if !self.measured(intended_ns) {
            return;
        }
        self.roll(done_ns);
        let latency = us(done_ns.saturating_sub(intended_ns));
        let x = (intended_ns - self.measure_start_ns) as f64 / NS_PER_SEC as f64;
        let y = done_ns.saturating_sub(intended_ns) as f64 / NS_PER_SEC as f64;
        let done_us = us(done_ns.saturating_sub(self.measure_start_ns));
        let t = &mut self.totals;
        t.latency.saturating_record(latency);
        t.service
            .saturating_record(us(done_ns.saturating_sub(sent_ns)));
        t.responses += 1;
        t.status[usize::from(status).min(999)] += 1;
        t.last_completion_ns = t.last_completion_ns.max(done_ns);
        t.last_intended_ns = t.last_intended_ns.max(intended_ns);
        t.before_send_max_ns = t
            .before_send_max_ns
            .max(first_sent_ns.saturating_sub(intended_ns));
        self.interval.completed += 1;
        self.interval.latency.saturating_record(latency);
        match failure {
            Some(class) => {
                self.last_failure = Some(intended_ns);
                self.count_error(class)
            }
            None => {
                self.totals.successful += 1;
                self.totals.trend.add(x, y);
                self.totals.success_done.saturating_record(done_us);
                self.interval.successful += 1;
            }
        }
        if let Some(i) = self.names.of(p.kind) {
            if let Some(n) = self.totals.names.get_mut(i) {
                n.latency.saturating_record(latency);
                n.responses += 1;
                n.count_status(status.min(999));
                n.last_intended_ns = n.last_intended_ns.max(intended_ns);
                match failure {
                    Some(class) => n.errors[class.index()] += 1,
                    None => {
                        n.successful += 1;
                        n.trend.add(x, y);
                        n.success_done.saturating_record(done_us);
                    }
                }
            }
            if let Some(n) = self.interval.names.get_mut(i) {
                n.completed += 1;
                n.latency.saturating_record(latency);
                match failure {
                    Some(class) => n.error_classes[class.index()] += 1,
                    None => n.successful += 1,
                }
            }
        }
    }

    /// A request `p` failed at `done_ns` without a response.
    pub fn error(&mut self, p: Planned, done_ns: u64, class: ErrorClass) {
        let intended_ns = p.intended;
        if !self.measured(intended_ns) {
            return;
        }
        self.roll(done_ns);
        self.totals.last_completion_ns = self.totals.last_completion_ns.max(done_ns);
        self.totals.last_intended_ns = self.totals.last_intended_ns.max(intended_ns);
        self.last_failure = Some(intended_ns);
        self.count_error(class);
        if let Some(i) = self.names.of(p.kind) {
            if let Some(n) = self.totals.names.get_mut(i) {
                n.last_intended_ns = n.last_intended_ns.max(intended_ns);
                n.errors[class.index()] += 1;
            }
            if let Some(n) = self.interval.names.get_mut(i) {
                n.error_classes[class.index()] += 1;
            }
        }
    }

    fn count_error(&mut self, class: ErrorClass) {
        self.totals.errors[class.index()] += 1;
        self.interval.errors += 1;
        self.interval.error_classes[class.index()] += 1;
    }

    /// A connection was opened in `ns`.
    pub fn connect(&mut self, ns: u64) {
        self.totals.connections_opened += 1;
        self.totals.connect.saturating_record(us(ns));
    }

    /// A request intended at `intended_ns` that the server never processed is sent again.
    pub fn resent(&mut self, intended_ns: u64) {
        if self.measured(intended_ns) {
            self.totals.resent_unprocessed += 1;
        }
    }

    /// A message intended at `intended_ns` waited for the server's flow-control window:
    /// its stream's or its connection's was used up when it was to go.
    pub fn window_stall(&mut self, intended_ns: u64) {
        if self.measured(intended_ns) {
            self.totals.window_stalls += 1;
        }
    }

    /// A reply echoed a number no message waiting on its stream held (`--match-field`):
    /// passed over. Counted whenever it came (a reply carries no intended time).
    pub fn unmatched_reply(&mut self) {
        self.totals.unmatched += 1;
    }

    /// The server closed a connection gracefully after answering `requests` on it.
    pub fn server_close(&mut self, requests: u64) {
        self.totals.server_closes += 1;
        self.totals.server_close_requests += requests;
    }

    /// An arrival intended at `intended_ns` was released by the schedule at `released_ns`.
    pub fn lag(&mut self, intended_ns: u64, released_ns: u64) {
        if self.measured(intended_ns) {
            self.totals
                .lag
                .saturating_record(us(released_ns.saturating_sub(intended_ns)));
            if intended_ns < self.window_end_ns && released_ns >= self.window_end_ns {
                self.totals.sent_after_end += 1;
            }
        }
    }

    /// `measured` arrivals were skipped because their deadline passed before release.
    pub fn unsent_late(&mut self, measured: u64) {
        self.totals.unsent.late += measured;
    }

    /// An arrival intended at `intended_ns` found the queue of waiting arrivals full.
    pub fn unsent_queue_full(&mut self, intended_ns: u64) {
        if self.measured(intended_ns) {
            self.totals.unsent.queue_full += 1;
        }
    }

    /// Ships the current second if the clock has moved past it.
    pub fn tick(&mut self, now_ns: u64) {
        self.roll(now_ns);
    }

    fn roll(&mut self, now_ns: u64) {
        if now_ns < self.measure_start_ns {
            return;
        }
        let sec = (now_ns - self.measure_start_ns) / NS_PER_SEC;
        if sec > self.second {
            self.ship(sec);
        }
    }

    fn ship(&mut self, next_second: u64) {
        let counts = std::mem::replace(
            &mut self.interval,
            IntervalCounts::new(self.totals.names.len()),
        );
        // The collector may be gone if the run was abandoned; nothing to do then.
        let _ = self.tx.send(IntervalReport {
            worker: self.worker,
            second: self.second,
            next_second,
            completed: counts.completed,
            successful: counts.successful,
            errors: counts.errors,
            error_classes: counts.error_classes,
            latency: counts.latency,
            names: counts.names,
        });
        self.second = next_second;
    }

    /// Ships the last second and returns the totals.
    pub fn finish(mut self) -> WorkerTotals {
        let has_data = self.interval.completed + self.interval.errors > 0;
        if has_data {
            self.ship(u64::MAX);
        } else {
            // Only a watermark: no data for this second.
            let _ = self.tx.send(IntervalReport {
                worker: self.worker,
                second: self.second,
                next_second: u64::MAX,
                completed: 0,
                successful: 0,
                errors: 0,
                error_classes: [0; ErrorClass::COUNT],
                latency: new_histogram(INTERVAL_SIGFIG),
                names: Vec::new(),
            });
        }
        self.totals
    }
}

/// Adds `n` to `code`'s count in a list of the codes seen.
pub(crate) fn add_code(codes: &mut Vec<(u16, u64)>, code: u16, n: u64) {
    match codes.iter_mut().find(|(c, _)| *c == code) {
        Some((_, m)) => *m += n,
        None => codes.push((code, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_seconds_count_each_second_a_failed_wait_overlapped_once() {
        let s = NS_PER_SEC;
        // The window [10 s, 15 s): five seconds.
        let (start, end) = (10 * s, 15 * s);
        let mut fed = StreamSeconds::default();
        // A wait in the warm-up, and one past the window's end, count nothing of it.
        fed.fail(5 * s, 9 * s, start, end);
        fed.fail(16 * s, 17 * s, start, end);
        assert_eq!(fed.counts(15 * s + s / 2, start, end), (5, 0));
        // A starved stream: a timeout every second, the first begun in the warm-up.
        let mut starved = StreamSeconds::default();
        for k in 9..15 {
            starved.fail(k * s + s / 2, (k + 1) * s + s / 2, start, end);
        }
        assert_eq!(starved.counts(16 * s, start, end), (5, 5));
        // Two failures in one second count it once; a wait spanning two seconds counts
        // both; a loop that ended early held only the seconds it began.
        let mut some = StreamSeconds::default();
        some.fail(10 * s + 100, 10 * s + 200, start, end);
        some.fail(10 * s + 300, 10 * s + 400, start, end);
        some.fail(11 * s + s / 2, 12 * s + s / 2, start, end);
        assert_eq!(some.counts(12 * s + s / 2, start, end), (3, 3));
        assert_eq!(some.counts(13 * s + 1, start, end), (4, 3));
    }

    #[test]
    fn a_stream_opened_at_a_rate_holds_the_seconds_of_its_own_span() {
        let s = NS_PER_SEC;
        let (start, end) = (10 * s, 15 * s);
        let fed = StreamSeconds::default();
        // Within one second; across two; begun in the warm-up; past the window's end;
        // wholly outside it; ending exactly on a second's start.
        assert_eq!(fed.span(10 * s + 100, 10 * s + 900, start, end), (1, 0));
        assert_eq!(fed.span(11 * s + s / 2, 12 * s + s / 2, start, end), (2, 0));
        assert_eq!(fed.span(9 * s, 10 * s + s / 2, start, end), (1, 0));
        assert_eq!(fed.span(14 * s + s / 2, 17 * s, start, end), (1, 0));
        assert_eq!(fed.span(16 * s, 17 * s, start, end), (0, 0));
        assert_eq!(fed.span(11 * s, 12 * s, start, end), (1, 0));
        // Broken half-way through its third second: that second failed, the two before
        // held.
        let mut broken = StreamSeconds::default();
        broken.fail(12 * s + s / 4, 12 * s + s / 2, start, end);
        assert_eq!(
            broken.span(10 * s + s / 2, 12 * s + s / 2, start, end),
            (3, 1)
        );
    }

    #[test]
    fn the_last_failure_is_the_requests_that_failed_last() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let ms = 1_000_000;
        let mut r = Recorder::new(0, 1_000 * ms, tx, NameMap::default());
        r.error(Planned::at(900 * ms), 950 * ms, ErrorClass::RequestTimeout);
        assert!(!r.failed_last(900 * ms), "not measured");
        r.response(Planned::at(1_100 * ms), 1_100 * ms, 1_150 * ms, 503);
        assert!(r.failed_last(1_100 * ms));
        r.response(Planned::at(1_200 * ms), 1_200 * ms, 1_250 * ms, 200);
        assert!(r.failed_last(1_100 * ms), "a success is not a failure");
        r.error(
            Planned::at(1_300 * ms),
            1_400 * ms,
            ErrorClass::RequestTimeout,
        );
        assert!(!r.failed_last(1_100 * ms) && r.failed_last(1_300 * ms));
    }

    #[test]
    fn records_measured_only_and_ships_seconds() {
        let (tx, rx) = std::sync::mpsc::channel();
        let ms = 1_000_000;
        let mut r = Recorder::new(0, 1_000 * ms, tx, NameMap::default());
        r.response(Planned::at(500 * ms), 500 * ms, 510 * ms, 200); // warm-up
        r.response(Planned::at(1_000 * ms), 1_001 * ms, 1_020 * ms, 200);
        r.response(Planned::at(1_500 * ms), 1_500 * ms, 1_505 * ms, 503);
        r.error(
            Planned::at(2_100 * ms),
            2_200 * ms,
            ErrorClass::ConnectRefused,
        );
        let t = r.finish();
        assert!(t.names.is_empty());
        assert_eq!(t.responses, 2);
        assert_eq!(t.successful, 1);
        assert_eq!(t.errors[ErrorClass::Http5xx.index()], 1);
        assert_eq!(t.errors[ErrorClass::ConnectRefused.index()], 1);
        assert_eq!(t.status[503], 1);
        assert_eq!(t.latency.len(), 2);
        assert_eq!(t.service.max(), t.service.highest_equivalent(19_000));
        let reports: Vec<_> = rx.try_iter().collect();
        assert_eq!(reports.len(), 2);
        assert_eq!(
            (reports[0].second, reports[0].completed, reports[0].errors),
            (0, 2, 1)
        );
        assert_eq!(
            (reports[1].second, reports[1].errors, reports[1].next_second),
            (1, 1, u64::MAX)
        );
    }

    #[test]
    fn arrivals_released_after_the_window_are_counted_once_each() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let ms = 1_000_000;
        let mut r = Recorder::new(0, 1_000 * ms, tx, NameMap::default());
        r.set_window_end(3_000 * ms);
        r.lag(900 * ms, 3_100 * ms); // warm-up: not measured
        r.lag(2_000 * ms, 2_010 * ms); // late, inside the window
        r.lag(2_990 * ms, 2_999 * ms); // late, still inside
        r.lag(2_995 * ms, 3_000 * ms); // released at the end: outside
        r.lag(2_999 * ms, 3_020 * ms); // slipped out
        let t = r.finish();
        assert_eq!(t.sent_after_end, 2);
        assert_eq!(t.lag.len(), 4);
    }

    #[test]
    fn each_request_counts_under_its_name_and_the_names_add_up_to_the_whole() {
        let (tx, rx) = std::sync::mpsc::channel();
        let ms = 1_000_000;
        // Kinds 0 and 2 share name 0; kind 1 is name 1.
        let mut r = Recorder::new(0, 1_000 * ms, tx, NameMap::new(vec![0, 1, 0]));
        let at = |t: u64, kind: u32| Planned {
            intended: t * ms,
            kind,
            row: Planned::NO_ROW,
        };
        r.response(at(900, 1), 900 * ms, 905 * ms, 200); // warm-up: nowhere
        r.response(at(1_000, 0), 1_000 * ms, 1_010 * ms, 200);
        r.response(at(1_001, 2), 1_001 * ms, 1_031 * ms, 404);
        r.response(at(1_002, 1), 1_002 * ms, 1_502 * ms, 200);
        r.error(at(1_003, 1), 1_100 * ms, ErrorClass::RequestTimeout);
        r.grpc_error(at(1_004, 2), 1_100 * ms, GrpcStatus::Unavailable);
        let t = r.finish();
        assert_eq!(t.names.len(), 2);
        let (a, b) = (&t.names[0], &t.names[1]);
        assert_eq!((a.responses, a.successful), (2, 1));
        assert_eq!((b.responses, b.successful), (1, 1));
        assert_eq!(a.status, vec![(200, 1), (404, 1)]);
        assert_eq!(a.errors[ErrorClass::Http4xx.index()], 1);
        assert_eq!(a.errors[ErrorClass::GrpcStatus.index()], 1);
        assert_eq!(a.grpc[usize::from(GrpcStatus::Unavailable.code())], 1);
        assert_eq!(b.errors[ErrorClass::RequestTimeout.index()], 1);
        assert_eq!(b.latency.max(), b.latency.highest_equivalent(500_000));
        assert_eq!(a.responses + b.responses, t.responses);
        assert_eq!(a.latency.len() + b.latency.len(), t.latency.len());
        let errors = |n: &NameRecord| n.errors.iter().sum::<u64>();
        assert_eq!(errors(a) + errors(b), t.errors.iter().sum::<u64>());
        assert_eq!(a.successful + b.successful, t.successful);
        // The second's report (all of them fall in second 0, from 1.0 s) has the same
        // split, and its names add up to it.
        let reports: Vec<IntervalReport> = rx.try_iter().collect();
        assert_eq!(reports.len(), 1);
        let s0 = &reports[0];
        assert_eq!(s0.names.len(), 2);
        let (a, b) = (&s0.names[0], &s0.names[1]);
        assert_eq!((a.completed, a.successful, a.errors()), (2, 1, 2));
        assert_eq!(a.error_classes[ErrorClass::Http4xx.index()], 1);
        assert_eq!(a.error_classes[ErrorClass::GrpcStatus.index()], 1);
        assert_eq!((b.completed, b.successful, b.errors()), (1, 1, 1));
        assert_eq!(b.error_classes[ErrorClass::RequestTimeout.index()], 1);
        assert_eq!(b.latency.max(), b.latency.highest_equivalent(500_000));
        assert_eq!(a.completed + b.completed, s0.completed);
        assert_eq!(a.errors() + b.errors(), s0.errors);
        assert_eq!(a.latency.len() + b.latency.len(), s0.latency.len());
    }
}
