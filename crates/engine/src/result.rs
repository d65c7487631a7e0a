//! The result of a run: the JSON contract (see `schema/run-result.schema.json`), and the
//! one place where per-worker records are merged.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::{Arrival, CloseBy, LoadModel, Model, Protocol, RunConfig};
use crate::env::Environment;
use crate::error::{ErrorClass, ErrorCounts};
use crate::recorder::WorkerTotals;
use crate::records::{
    completion_histogram, decode_histogram, encode_histogram, histogram_text, merge_histogram,
    new_histogram, NameRecord, SessionTotals, GRPC_CODES, TOTAL_SIGFIG,
};
use crate::stats::{LatencyTrend, TrendSums};

/// Version of the result format; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// A worker thread busier than this fraction of its time is CPU-bound (of the time the
/// host left its CPUs: [`cpu_bound`]).
pub const CPU_BOUND: f64 = 0.9;

/// Whether a worker thread `utilization` busy (its CPU time over its wall time) was
/// CPU-bound, where a virtual machine's hypervisor took `steal_share` of its CPUs' wall
/// time: the thread's CPU time counts none of the stolen time, so a thread that wanted
/// its CPU all along reads `1 − steal_share` busy. It is judged against what the host left
/// (`utilization / (1 − steal_share)` over [`CPU_BOUND`]). Where other threads shared those
/// CPUs, some of the steal was theirs and the figure errs towards CPU-bound: the side on
/// which loadlab blames itself, not the server.
pub fn cpu_bound(utilization: f64, steal_share: Option<f64>) -> bool {
    let left = 1.0 - steal_share.unwrap_or(0.0).clamp(0.0, 1.0);
    utilization > CPU_BOUND * left
}

/// `(index, utilization)` of each worker thread [`cpu_bound`] under `steal_share`.
pub fn cpu_bound_workers(worker_cpu: &[f64], steal_share: Option<f64>) -> Vec<(usize, f64)> {
    worker_cpu
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, u)| cpu_bound(u, steal_share))
        .collect()
}

/// The run as configured: what a [`RunResult`] repeats of its configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunShape {
    /// Target URL (for gRPC, with the call's path).
    pub url: String,
    /// HTTP method as sent.
    pub method: String,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Open loop at a rate, or closed.
    pub load: LoadModel,
    /// Connections (see [`RunResult::connections`]).
    pub connections: u64,
    /// Ceiling of the pool.
    pub max_connections: u64,
    /// Requests or streams in flight, or their ceiling.
    pub concurrency: u64,
    /// Worker threads.
    pub threads: usize,
    /// Connections reused.
    pub keep_alive: bool,
    /// With keep-alive off, which side closed each connection.
    pub close_by: CloseBy,
    /// HTTP/1.1 pipeline depth.
    pub pipeline: u32,
    /// The interface plain HTTP/1.1 connections use.
    #[serde(default)]
    pub io: crate::config::IoUsed,
    /// Request timeout, ms.
    pub timeout_ms: f64,
    /// Warm-up, seconds.
    pub warmup_s: f64,
    /// Requests that vary: what the results say of them (absent for one fixed request).
    #[serde(default)]
    pub traffic: Option<Box<TrafficShape>>,
    /// WebSocket: the JSON pointer to each reply's send time (`--sent-at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    /// gRPC client streaming: the messages of each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_per_call: Option<u32>,
    /// gRPC bidirectional streaming: the field path each reply echoes (`--match-field`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_field: Option<String>,
    /// gRPC server streams opened at a rate: each one's lifetime, ms (`--stream-lifetime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_lifetime_ms: Option<f64>,
}

/// What a run's requests were, when they varied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrafficShape {
    /// Kinds of request (1 for one templated request).
    pub requests: usize,
    /// The names results are kept for, with each one's share of the requests; empty for one
    /// unnamed request.
    pub names: Vec<(String, f64)>,
    /// How the requests of a list were taken.
    pub order: crate::config::traffic::MixOrder,
    /// The data file as given, its rows (this machine's share) and how they were drawn.
    pub data: Option<(String, usize, crate::config::traffic::DataOrder)>,
    /// Notes for the reader (names merged, …).
    pub notes: Vec<String>,
    /// A flow: the requests one complete session sends (the names are its steps, and the
    /// run's rate counts sessions).
    #[serde(default)]
    pub requests_per_session: Option<u64>,
}

impl TrafficShape {
    /// The shape of compiled traffic.
    pub fn of(t: &crate::traffic::Traffic) -> TrafficShape {
        TrafficShape {
            requests: t.kinds.len(),
            names: t.names.iter().cloned().zip(t.name_shares()).collect(),
            order: t.order(),
            data: t
                .data()
                .map(|d| (d.file().to_string(), d.len(), t.data_order())),
            notes: t.notes.clone(),
            requests_per_session: t.flow.as_ref().map(|f| f.requests_per_session),
        }
    }
}

impl RunShape {
    /// The shape of a validated configuration.
    pub fn of(cfg: &RunConfig) -> RunShape {
        RunShape {
            url: cfg.target.url.clone(),
            method: cfg.method.clone(),
            protocol: cfg.transport.protocol(),
            load: cfg.model,
            connections: cfg.connections,
            max_connections: cfg.max_connections,
            concurrency: cfg.concurrency,
            threads: cfg.threads,
            keep_alive: cfg.transport.keep_alive(),
            close_by: match cfg.transport {
                crate::config::Transport::Http1 { close_by, .. } => close_by,
                _ => CloseBy::Server,
            },
            pipeline: cfg.transport.pipeline(),
            io: cfg.io_used().0,
            timeout_ms: cfg.timeout.as_secs_f64() * 1000.0,
            warmup_s: cfg.warmup.as_secs_f64(),
            traffic: cfg
                .traffic
                .as_deref()
                .map(|t| Box::new(TrafficShape::of(t))),
            sent_at: cfg.transport.sent_at().map(str::to_string),
            messages_per_call: cfg
                .transport
                .grpc()
                .filter(|c| c.client_streaming)
                .map(|c| c.messages_per_call.max(1)),
            match_field: cfg
                .transport
                .grpc()
                .filter(|c| c.bidirectional)
                .and_then(|c| c.match_field.as_ref())
                .map(|m| m.reply.pointer.clone()),
            stream_lifetime_ms: cfg
                .transport
                .stream_lifetime()
                .map(|d| d.as_secs_f64() * 1000.0),
        }
    }
}

/// Distribution of a latency-like quantity, milliseconds. Figures are `null` when nothing
/// was recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile (absent from results written before it was added).
    #[serde(default)]
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
}

impl LatencyStats {
    /// Summarizes a histogram of microseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> LatencyStats {
        if h.is_empty() {
            return LatencyStats::default();
        }
        let ms = |us: u64| Some(us as f64 / 1000.0);
        LatencyStats {
            count: h.len(),
            mean: Some(h.mean() / 1000.0),
            min: ms(h.min()),
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// How late the schedule released arrivals, milliseconds (0 in closed loop).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagStats {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl LagStats {
    /// Summarizes a histogram of microseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> LagStats {
        if h.is_empty() {
            return LagStats::default();
        }
        LagStats {
            p50: h.value_at_quantile(0.5) as f64 / 1000.0,
            p99: h.value_at_quantile(0.99) as f64 / 1000.0,
            max: h.max() as f64 / 1000.0,
            mean: h.mean() / 1000.0,
        }
    }
}

/// One second of the measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondStats {
    /// Seconds since the start of the measured window.
    pub second: u64,
    /// Responses received (any status).
    pub completed: u64,
    /// Responses with a status below 400 (gRPC: and `grpc-status` OK).
    pub successful: u64,
    /// Failed requests (any class).
    pub errors: u64,
    /// The failed requests by class (absent from the JSON when there were none).
    #[serde(default, skip_serializing_if = "ErrorCounts::is_zero")]
    pub errors_by_class: ErrorCounts,
    /// Median latency of this second's responses, ms.
    pub latency_p50_ms: Option<f64>,
    /// 99th-percentile latency of this second's responses, ms.
    pub latency_p99_ms: Option<f64>,
    /// A run of named requests: each name's part of the second (names with nothing in it
    /// left out); empty, and absent from the JSON, for one unnamed request. The parts add
    /// up to the second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_name: Vec<NameSecond>,
    /// Live only, never serialized: the agents' own parts of a second a coordinator merged
    /// from them (empty for a run on one machine and in results).
    #[serde(skip)]
    pub agents: Vec<AgentSecond>,
}

/// One request name's part of one second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameSecond {
    /// The request name.
    pub name: String,
    /// Responses received (any status).
    pub completed: u64,
    /// Successful responses.
    pub successful: u64,
    /// Failed requests (any class).
    pub errors: u64,
    /// The failed requests by class (absent from the JSON when there were none).
    #[serde(default, skip_serializing_if = "ErrorCounts::is_zero")]
    pub errors_by_class: ErrorCounts,
    /// The second's latency histogram of this name, encoded as [`Histograms`] are.
    pub latency: String,
}

/// One agent's part of a second of a distributed step (live only).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSecond {
    /// The agent's name.
    pub agent: String,
    /// Its second (its own `by_name` included).
    pub stats: SecondStats,
    /// Its latency histogram of the second, encoded as [`Histograms`] are.
    pub latency: String,
}

impl SecondStats {
    /// A second with nothing in it.
    pub fn empty(second: u64) -> SecondStats {
        SecondStats {
            second,
            completed: 0,
            successful: 0,
            errors: 0,
            errors_by_class: ErrorCounts::default(),
            latency_p50_ms: None,
            latency_p99_ms: None,
            by_name: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// Adds another part of the same second (another machine's): its counts, and its names'
    /// parts to the names of the same name. The quantiles are the caller's to set from the
    /// merged histogram. Fails only on a histogram of another build.
    pub fn absorb(&mut self, o: &SecondStats) -> Result<(), String> {
        self.completed += o.completed;
        self.successful += o.successful;
        self.errors += o.errors;
        self.errors_by_class.add(&o.errors_by_class);
        for n in &o.by_name {
            match self.by_name.iter_mut().find(|m| m.name == n.name) {
                Some(m) => m.absorb(n)?,
                None => self.by_name.push(n.clone()),
            }
        }
        Ok(())
    }
}

impl NameSecond {
    /// Adds another part of the same name's second.
    pub fn absorb(&mut self, o: &NameSecond) -> Result<(), String> {
        self.completed += o.completed;
        self.successful += o.successful;
        self.errors += o.errors;
        self.errors_by_class.add(&o.errors_by_class);
        let mut h = decode_histogram(&self.latency)?;
        h.add(decode_histogram(&o.latency)?)
            .map_err(|e| format!("per-second histograms do not merge: {e:?}"))?;
        self.latency = encode_histogram(&h);
        Ok(())
    }
}

/// How a bidirectional call's replies were matched to their messages (`--match-field`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatchedBy {
    /// The field path each reply echoes from its request.
    pub field: String,
    /// Replies that matched no message waiting.
    pub unmatched: u64,
}

/// A server stream's messages by what their wait was (`latency_ms` holds both).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamTiming {
    /// Time to first message: from the moment loadlab began to open a stream (the
    /// connection if it was not up, the stream) to its first message, one per stream that
    /// sent one.
    pub first_message_ms: LatencyStats,
    /// The gaps between a stream's messages: each later message's wait since the one
    /// before.
    pub gap_ms: LatencyStats,
    /// Stream-seconds held in the measured window (each stream held, for each second it
    /// ran in it); 0 from a loadlab that did not count them.
    #[serde(default)]
    pub stream_seconds: u64,
    /// The stream-seconds in which a stream missed a message (a wait that timed out or
    /// ended in an error overlapped the second): a starved stream fails each second it is
    /// held. The error clause weighs these against `stream_seconds`.
    #[serde(default)]
    pub failed_stream_seconds: u64,
    /// Streams opened at a rate (`grpc_stream_opens`): their lifetime and how the measured
    /// ones that had a first message ended. Absent for streams held at a count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened: Option<OpenedStreams>,
}

/// Streams opened at a rate, each for a lifetime ([`StreamTiming::opened`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenedStreams {
    /// Each stream's lifetime, ms (`--stream-lifetime`): from its first message.
    pub lifetime_ms: f64,
    /// How the measured streams that had a first message ended (`lived`, `ended`,
    /// `broken` beside `lifetime_ms`).
    #[serde(flatten)]
    pub ends: crate::recorder::StreamEnds,
}

impl StreamTiming {
    /// Failed stream-seconds of those held, when any were counted.
    pub fn starved(&self) -> Option<(u64, u64)> {
        (self.stream_seconds > 0).then_some((self.failed_stream_seconds, self.stream_seconds))
    }
}

/// The delay from the time a reply says the server sent it to its arrival.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerDelay {
    /// The JSON pointer read in each reply (`--sent-at`).
    pub pointer: String,
    /// The delay of each reply stamped before its arrival, ms.
    pub delay_ms: LatencyStats,
    /// Replies without a number at the pointer.
    pub missing: u64,
    /// Replies stamped after their arrival (the clocks disagree): no delay recorded.
    pub ahead: u64,
}

/// Serialized histograms, mergeable later (HdrHistogram V2 + deflate, base64).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histograms {
    /// Encoding of every string below.
    pub encoding: String,
    /// Unit of the recorded values.
    pub unit: String,
    /// Latency from intended send time.
    pub latency: String,
    /// Service time from actual send.
    pub service_time: String,
    /// TCP (and TLS) connect time of new connections.
    pub connect_time: String,
    /// Schedule lag: release time minus intended send time.
    pub schedule_lag: String,
    /// Latency per second of the measured window (index = `per_second[i].second`).
    pub per_second_latency: Vec<String>,
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The measured duration elapsed (`--duration`, a plan's step duration, or 10 s).
    Duration,
    /// The request count was reached.
    Requests,
    /// Stopped by the user (Ctrl-C) or the caller.
    Interrupted,
    /// Every row of the data file was sent once (`--data-order unique`): the run ends there,
    /// its window at its last request.
    RowsUsedUp,
}

/// The result of `loadlab run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// [`SCHEMA_VERSION`] of the loadlab that wrote it.
    pub schema_version: u32,
    /// Target URL as given; for gRPC, with the call's path appended.
    pub url: String,
    /// HTTP method as sent: upper-cased, `POST` for gRPC.
    pub method: String,
    /// Wire protocol: `http1`, `http2` or `grpc`.
    #[serde(default)]
    pub protocol: Protocol,
    /// `open` or `closed`.
    pub model: Model,
    /// Arrival spacing (open loop).
    pub arrival: Option<Arrival>,
    /// Offered requests/s (open loop), null in closed loop.
    pub offered_rps: Option<f64>,
    /// `--connections`: all of them in closed loop and over HTTP/2, else the initial pool.
    pub connections: u64,
    /// Ceiling of the pool (equal to `connections` in closed loop and over HTTP/2).
    pub max_connections: u64,
    /// Requests in flight (closed loop) or their ceiling (open loop); over HTTP/2, streams.
    #[serde(default)]
    pub concurrency: u64,
    /// Worker threads (`--threads` or one per core); at most `connections` in closed loop, HTTP/2.
    pub threads: usize,
    /// Connections reused (`false`: `--keep-alive off`, one connection per request).
    pub keep_alive: bool,
    /// With keep-alive off, which side closed each connection (`--close-by`); absent with
    /// keep-alive on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_by: Option<CloseBy>,
    /// HTTP/1.1 requests written back to back per connection (1: no pipelining).
    pub pipeline: u32,
    /// The interface HTTP/1.1 connections used: `epoll` or `uring` (`--io`).
    #[serde(default)]
    pub io: crate::config::IoUsed,
    /// Request timeout, ms.
    pub timeout_ms: f64,
    /// Warm-up, seconds.
    pub warmup_s: f64,
    /// Measured window, seconds.
    pub duration_s: f64,
    /// When the measured window began, Unix ms on this machine's clock (the coordinator's
    /// for a distributed run): where an HdrHistogram log's `StartTime` and a server's
    /// metrics line up with the per-second series. `None` in a result of an older loadlab.
    #[serde(default)]
    pub window_start_unix_ms: Option<f64>,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// Responses received in the measured window (any status).
    pub requests: u64,
    /// Successful responses (status below 400).
    pub successful: u64,
    /// Successful responses per second: the successes of the requests intended in the
    /// measured window over the window; when the latency trend is resolved (the server
    /// fell behind), at most the rate at which the middle half of them completed.
    pub achieved_rps: f64,
    /// How the latency of successful requests moved across the window (least squares on
    /// intended send time); `null` with fewer than 10 successes.
    #[serde(default)]
    pub latency_trend: Option<LatencyTrend>,
    /// Latency from the intended send time (coordinated omission corrected).
    pub latency_ms: LatencyStats,
    /// Time from the actual write of the request to the last byte of the response.
    pub service_time_ms: LatencyStats,
    /// Connect time of new connections.
    pub connect_time_ms: LatencyStats,
    /// How late the open-loop schedule released requests; zeros in closed loop.
    pub schedule_lag_ms: LagStats,
    /// Failures by class (every class listed).
    pub errors: ErrorCounts,
    /// Sum of `errors`.
    pub errors_total: u64,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// gRPC calls by status (`OK`, `DEADLINE_EXCEEDED`, ...), codes seen only; empty
    /// unless the protocol is gRPC.
    #[serde(default)]
    pub grpc_status: BTreeMap<String, u64>,
    /// WebSocket: the connections the server closed, by close code (`1000` normal, `1001`
    /// going away, `1011` server error, `1005` a close frame without a code, `1006` no close
    /// frame at all...), codes seen only; empty unless the protocol is ws.
    #[serde(default)]
    pub ws_close_codes: BTreeMap<String, u64>,
    /// WebSocket replies that say when the server sent them (`--sent-at`): the delay from
    /// that time to their arrival. Absent unless asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_delay: Option<ServerDelay>,
    /// Server streams (gRPC server streaming, server-sent events): each message's wait split
    /// into the first of its stream and the gaps after it. Absent for other protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_timing: Option<StreamTiming>,
    /// WebSocket and server-sent events: the connections (streams) still open when the run
    /// ended, of `connections` held (a gate's `connections>=N`). Absent for other protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_held: Option<u64>,
    /// gRPC client streaming: the messages each call sent before its side ended (the run's
    /// last calls may carry fewer). Absent for other protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_per_call: Option<u32>,
    /// Connections opened over the whole run, warm-up included.
    pub connections_opened: u64,
    /// Requests the server never processed (written behind a `Connection: close` response
    /// or an idle close, HTTP/2 streams above a `GOAWAY` or refused) that loadlab sent again
    /// on another connection, latency still charged from the first intended send time.
    #[serde(default)]
    pub resent_unprocessed: u64,
    /// Connections the server closed gracefully (`Connection: close`, a clean close after
    /// a complete response, or `GOAWAY`).
    #[serde(default)]
    pub server_closes: u64,
    /// Requests the server answered per gracefully closed connection, on average; `null`
    /// when it closed none.
    #[serde(default)]
    pub requests_per_server_close: Option<f64>,
    /// A bidirectional or client-streaming call: the measured messages the server's HTTP/2
    /// flow-control window held back when they were to go (its stream's or its
    /// connection's window used up), each sent as the server granted more; their wait is
    /// in their latency. Absent for other protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_stalls: Option<u64>,
    /// A bidirectional call with `--match-field`: the field path read, and the replies that
    /// matched no message waiting on their stream (passed over: an echo of a number loadlab
    /// did not send, or of one forgotten four timeouts after its send). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_by: Option<MatchedBy>,
    /// Open loop: measured arrivals loadlab never sent, because it fell more than the
    /// timeout behind its schedule or its queue of arrivals waiting for a connection was
    /// full. Not errors of the server: a run with any is generator-limited.
    #[serde(default)]
    pub unsent: u64,
    /// Open loop: measured arrivals intended inside the window that loadlab released only
    /// after its end, late: load planned for the step that the server did not see in it.
    /// `null` in closed loop and in results of a loadlab that did not count them.
    #[serde(default)]
    pub sent_after_window: Option<u64>,
    /// The generator, not the server, may have limited this run.
    pub generator_limited: bool,
    /// Why `generator_limited` is set.
    pub generator_notes: Vec<String>,
    /// loadlab's CPU time (user + system) during the run, seconds.
    pub generator_cpu_seconds: f64,
    /// loadlab's peak resident memory, bytes.
    pub generator_peak_rss_bytes: u64,
    /// Each worker thread's CPU time over its wall time.
    pub worker_cpu_utilization: Vec<f64>,
    /// The longest a measured request that got a reply waited in loadlab between its
    /// intended send time and its send, ms: the lateness of its release (the schedule lag),
    /// a wait for a free connection in loadlab's queue, and over epoll its connect; a request
    /// sent again after the server closed its connection unanswered counts to its first send
    /// (the time between was the server's). What loadlab's side can have added to a latency
    /// (see docs/src/verdicts.md). `null` in
    /// results of a loadlab that did not measure it.
    #[serde(default)]
    pub before_send_ms_max: Option<f64>,
    /// The share of the wall time of the CPUs loadlab's workers could run on that a virtual
    /// machine's hypervisor took (steal) during the run; the largest of several machines.
    /// A thread's CPU time counts none of it, so a worker's utilization is read against
    /// what the host left ([`RunResult::cpu_bound_workers`]). `null` where `/proc/stat` has
    /// no steal figure, and in results of a loadlab that did not read it.
    #[serde(default)]
    pub generator_steal_share: Option<f64>,
    /// Things the reader should know (port exhaustion, all requests failed, ...).
    pub warnings: Vec<String>,
    /// One entry per second of the measured window.
    pub per_second: Vec<SecondStats>,
    /// The distributions above as HdrHistograms in µs, mergeable across runs and machines.
    pub histograms: Histograms,
    /// Where the run happened (the coordinator's machine in a distributed run).
    pub environment: Environment,
    /// A distributed run: each agent's share and its own figures (absent from local runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentShare>,
    /// Requests that vary: how they were made (absent for one fixed request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<TrafficInfo>,
    /// A run of named requests (a targets file, a plan scenario's requests): each name's
    /// own figures, in the order of the list. Its counts add up to the whole's exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_name: Vec<NameResult>,
    /// A flow: its sessions (the rate, `offered_rps`, then counts sessions started per
    /// second, and `by_name` holds its steps). Absent for independent requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsResult>,
}

/// A flow's sessions over a run: those that started in the measured window.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SessionsResult {
    /// Requests one complete session sends.
    pub requests_per_session: u64,
    /// Sessions started.
    pub started: u64,
    /// Sessions that sent every step and had every response.
    pub completed: u64,
    /// Completed sessions per second of the window.
    pub completed_per_s: f64,
    /// Sessions ended by a failed request (no response, a 4xx or 5xx, or an extract rule
    /// that found nothing).
    pub aborted: u64,
    /// Aborted sessions by the step that failed, steps as written (those with none left
    /// out); why each step failed is in its `by_name` errors.
    pub aborted_by_step: Vec<StepAborts>,
    /// Sessions whose next step was due after the window (or the run was interrupted).
    pub running_at_end: u64,
    /// Open loop: arriving sessions that waited for a free session loop (the generator's
    /// pool ceiling, not the server).
    pub waited_for_loop: u64,
    /// Completed sessions, first intended send to last response, think times included, ms.
    pub duration_ms: LatencyStats,
    /// Completed sessions' time waiting for responses, think times left out, ms.
    pub active_ms: LatencyStats,
    /// The two as histograms (µs), encoded as the others are.
    pub duration_histogram: String,
    /// See `duration_histogram`.
    pub active_histogram: String,
}

/// Sessions a step ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StepAborts {
    /// The step's name.
    pub step: String,
    /// Sessions it ended.
    pub sessions: u64,
}

impl SessionsResult {
    /// The result of merged session counts, over a window of `window_s` seconds.
    pub fn of(s: &SessionTotals, shape: &RunShape, window_s: f64) -> SessionsResult {
        let names = shape.traffic.as_ref().map(|t| &t.names);
        SessionsResult {
            requests_per_session: shape
                .traffic
                .as_ref()
                .and_then(|t| t.requests_per_session)
                .unwrap_or(0),
            started: s.started,
            completed: s.completed,
            completed_per_s: if window_s > 0.0 {
                s.completed as f64 / window_s
            } else {
                0.0
            },
            aborted: s.aborted(),
            aborted_by_step: s
                .aborted_by_step
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| StepAborts {
                    step: names
                        .and_then(|n| n.get(i))
                        .map_or_else(|| format!("step {}", i + 1), |(name, _)| name.clone()),
                    sessions: n,
                })
                .collect(),
            running_at_end: s.running_at_end,
            waited_for_loop: s.waited_for_loop,
            duration_ms: LatencyStats::from_histogram(&s.duration),
            active_ms: LatencyStats::from_histogram(&s.active),
            duration_histogram: encode_histogram(&s.duration),
            active_histogram: encode_histogram(&s.active),
        }
    }
}

/// Requests attempted: `responses` plus the `failures` that had no response (a 4xx or
/// 5xx is both a response and an error).
fn attempts(responses: u64, failures: u64, errors: &ErrorCounts) -> u64 {
    responses + failures - errors.sum_of(&[ErrorClass::Http4xx, ErrorClass::Http5xx])
}

/// How a run's requests varied.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficInfo {
    /// Kinds of request sent (1: one templated request).
    pub requests: usize,
    /// How a list was taken: `round_robin` or `random`.
    pub order: crate::config::traffic::MixOrder,
    /// The data file as given, if any.
    pub data_file: Option<String>,
    /// Its rows (this run's share in a distributed run: every agent's added).
    pub data_rows: Option<u64>,
    /// How rows were drawn: `sequential`, `random` or `unique`.
    pub data_order: Option<crate::config::traffic::DataOrder>,
    /// Where the rows and `${seq}` stood at the end of this run, counted from the start of
    /// the experiment (warm-up included): `next_row` rows taken in order (`sequential`
    /// wraps around past `data_rows`; 0 for `random`), `next_seq` sequence numbers handed
    /// out. The next step of an experiment resumes there.
    pub resume: crate::config::traffic::Resume,
    /// Notes for the reader.
    pub notes: Vec<String>,
    /// A timed replay (`--replay`): how closely the sends followed the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::replay::Fidelity>,
}

/// One request name's part of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameResult {
    /// The name (its own, or the method and path as written).
    pub name: String,
    /// Its share of the requests sent (from the weights).
    pub share: f64,
    /// Its share of the offered rate (open loop), requests/s.
    pub offered_rps: Option<f64>,
    /// Responses received in the measured window (any status).
    pub requests: u64,
    /// Successful responses.
    pub successful: u64,
    /// Successful responses per second, estimated as the whole's.
    pub achieved_rps: f64,
    /// How its latency moved across the window.
    pub latency_trend: Option<LatencyTrend>,
    /// Latency from the intended send time.
    pub latency_ms: LatencyStats,
    /// Failures by class.
    pub errors: ErrorCounts,
    /// Sum of `errors`.
    pub errors_total: u64,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// gRPC calls by status (codes seen only).
    #[serde(default)]
    pub grpc_status: BTreeMap<String, u64>,
    /// Its latency histogram (µs, the encoding of `histograms`).
    pub latency_histogram: String,
}

impl NameResult {
    /// Requests attempted: the responses plus the failures without one.
    pub fn attempts(&self) -> u64 {
        attempts(self.requests, self.errors_total, &self.errors)
    }

    /// Its failures by class, `class n` each, the classes with none left out:
    /// `extract_failed 20, http_4xx 3`.
    pub fn failures_text(&self) -> String {
        self.errors
            .iter()
            .filter(|&(_, n)| n > 0)
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One agent's part of a distributed step: what it was given and what it measured alone.
/// The step's own figures are these agents' records merged exactly (histograms added).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentShare {
    /// The agent's name (`--name`, or its host name).
    pub name: String,
    /// Address the agent connected from, as the coordinator saw it.
    pub address: String,
    /// Worker threads the agent runs (the split's weight).
    pub threads: usize,
    /// Its share of the offered rate (open loop).
    pub offered_rps: Option<f64>,
    /// Its share of the connections.
    pub connections: u64,
    /// Its share of the concurrency (HTTP/2 streams, or the open-loop ceiling).
    pub concurrency: u64,
    /// Its share of the request count, when the step has one.
    pub request_limit: Option<u64>,
    /// Responses it received in the measured window.
    pub requests: u64,
    /// Of which successful.
    pub successful: u64,
    /// Its failed requests.
    pub errors_total: u64,
    /// Its achieved successes per second (its own window and trend).
    pub achieved_rps: f64,
    /// Its latency median, ms.
    pub latency_p50_ms: Option<f64>,
    /// Its latency 99th percentile, ms.
    pub latency_p99_ms: Option<f64>,
    /// Its clock minus the coordinator's, measured at join (four timestamps, best of
    /// several round trips), ms.
    pub clock_offset_ms: f64,
    /// Round trip of that measurement, ms (the offset is known to ± half of it).
    pub clock_rtt_ms: f64,
    /// When its measured window began, minus the step's planned start, in the coordinator's
    /// clock, ms.
    pub start_skew_ms: f64,
    /// Its CPU time over the step, seconds.
    pub cpu_seconds: f64,
    /// It limited its own share (see its notes).
    pub generator_limited: bool,
    /// Why.
    pub generator_notes: Vec<String>,
    /// Set when the agent was lost during the step (its figures are then missing): why.
    #[serde(default)]
    pub lost: Option<String>,
}

impl RunResult {
    /// True when no request succeeded.
    pub fn all_failed(&self) -> bool {
        self.successful == 0
    }

    /// The worker threads that were CPU-bound: `(index, utilization)` of each busier than
    /// [`CPU_BOUND`] of the time the host left their CPUs
    /// ([`cpu_bound`]).
    pub fn cpu_bound_workers(&self) -> Vec<(usize, f64)> {
        cpu_bound_workers(&self.worker_cpu_utilization, self.generator_steal_share)
    }

    /// The rate of requests offered (open loop): `offered_rps`, which for a flow counts
    /// sessions, times the requests of one session. Compare achieved with this, not with
    /// `offered_rps`.
    pub fn offered_requests_rps(&self) -> Option<f64> {
        let per_session = self
            .sessions
            .as_ref()
            .map_or(1, |s| s.requests_per_session.max(1));
        self.offered_rps.map(|o| o * per_session as f64)
    }

    /// Requests that were attempted and ended one way or another: the responses plus the
    /// failures that had no response (a 4xx or 5xx is both a response and an error).
    pub fn attempts(&self) -> u64 {
        attempts(self.requests, self.errors_total, &self.errors)
    }

    /// Failures by class, largest first, zeros left out.
    pub fn nonzero_errors(&self) -> Vec<(ErrorClass, u64)> {
        let mut v: Vec<_> = self.errors.iter().filter(|&(_, n)| n > 0).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v
    }
}

/// Worker totals merged into one; also what one machine sends to be merged with others
/// (see [`crate::runner::Measurement`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Merged {
    /// Latency, µs.
    #[serde(with = "histogram_text")]
    pub latency: Histogram<u64>,
    /// Service time, µs.
    #[serde(with = "histogram_text")]
    pub service: Histogram<u64>,
    /// Connect time, µs.
    #[serde(with = "histogram_text")]
    pub connect: Histogram<u64>,
    /// Schedule lag, µs.
    #[serde(with = "histogram_text")]
    pub lag: Histogram<u64>,
    /// Responses received in the measured window (any status).
    pub responses: u64,
    /// Of which status below 400 (gRPC: and `grpc-status` OK).
    pub successful: u64,
    /// Latest intended send of a measured request: clock ns from the workers, ns after the
    /// start of the measured window in a [`crate::runner::Measurement`].
    pub last_intended_ns: u64,
    /// Latency trend sums of successful requests.
    pub trend: TrendSums,
    /// When successful responses completed, µs after the window's start.
    #[serde(with = "histogram_text")]
    pub success_done: Histogram<u64>,
    /// Errors per class.
    pub errors: [u64; ErrorClass::COUNT],
    /// Responses per status code (index = code, 0..=999).
    pub status: Vec<u64>,
    /// gRPC status counts.
    pub grpc: [u64; GRPC_CODES],
    /// WebSocket: the server's closes per close code (codes seen only).
    #[serde(default)]
    pub ws_close: Vec<(u16, u64)>,
    /// Replies carrying the server's send time (`--sent-at`).
    #[serde(default)]
    pub server_delay: crate::recorder::ServerDelayRecord,
    /// Server streams' first messages and gaps (empty from a loadlab that did not split
    /// them).
    #[serde(default)]
    pub stream: crate::recorder::StreamRecord,
    /// Held connections still open at the end.
    #[serde(default)]
    pub held_at_end: u64,
    /// Connections opened over the whole run, warm-up included.
    pub connections_opened: u64,
    /// Requests re-sent after a graceful close.
    pub resent_unprocessed: u64,
    /// Graceful closes by the server, and the requests answered on those connections.
    pub server_closes: u64,
    /// Requests answered on connections the server closed gracefully.
    pub server_close_requests: u64,
    /// Messages the server's flow-control window held back (`0` from a loadlab that did
    /// not count them).
    #[serde(default)]
    pub window_stalls: u64,
    /// Replies that matched no message waiting (`--match-field`).
    #[serde(default)]
    pub unmatched: u64,
    /// Latest completion time seen, 0 if none (same clock as `last_intended_ns`).
    pub last_completion_ns: u64,
    /// The longest a measured request that got a reply waited in loadlab before its send,
    /// ns (`None` from a loadlab that did not measure it).
    #[serde(default)]
    pub before_send_max_ns: Option<u64>,
    /// Open loop: measured arrivals never sent.
    #[serde(default)]
    pub unsent: crate::recorder::Unsent,
    /// Open loop: measured arrivals intended inside the window and released after its end
    /// (`None` from a loadlab that did not count them).
    #[serde(default)]
    pub sent_after_end: Option<u64>,
    /// CPU utilization of each worker thread.
    pub worker_cpu: Vec<f64>,
    /// Per request name, in the run's order of names (empty when its requests are not
    /// named).
    #[serde(default)]
    pub names: Vec<NameRecord>,
    /// A flow's sessions (`None`: independent requests).
    #[serde(default)]
    pub sessions: Option<SessionTotals>,
}

impl Merged {
    /// Nothing recorded yet.
    pub fn empty() -> Merged {
        Merged {
            latency: new_histogram(TOTAL_SIGFIG),
            service: new_histogram(TOTAL_SIGFIG),
            connect: new_histogram(TOTAL_SIGFIG),
            lag: new_histogram(TOTAL_SIGFIG),
            responses: 0,
            successful: 0,
            last_intended_ns: 0,
            trend: TrendSums::default(),
            success_done: completion_histogram(),
            errors: [0; ErrorClass::COUNT],
            status: vec![0; 1000],
            grpc: [0; GRPC_CODES],
            ws_close: Vec::new(),
            server_delay: Default::default(),
            stream: Default::default(),
            held_at_end: 0,
            connections_opened: 0,
            resent_unprocessed: 0,
            server_closes: 0,
            server_close_requests: 0,
            window_stalls: 0,
            unmatched: 0,
            last_completion_ns: 0,
            before_send_max_ns: Some(0),
            unsent: crate::recorder::Unsent::default(),
            sent_after_end: Some(0),
            worker_cpu: Vec::new(),
            names: Vec::new(),
            sessions: None,
        }
    }

    /// Adds another record exactly: histograms added, counts summed, latest times kept,
    /// trend sums merged, worker utilizations listed after ours. Fails only on histograms
    /// of other bounds (a record from another loadlab build).
    pub fn absorb(&mut self, o: &Merged) -> Result<(), String> {
        merge_histogram(&mut self.latency, &o.latency)?;
        merge_histogram(&mut self.service, &o.service)?;
        merge_histogram(&mut self.connect, &o.connect)?;
        merge_histogram(&mut self.lag, &o.lag)?;
        merge_histogram(&mut self.success_done, &o.success_done)?;
        self.responses += o.responses;
        self.successful += o.successful;
        self.last_intended_ns = self.last_intended_ns.max(o.last_intended_ns);
        self.trend.merge(&o.trend);
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(o.status.iter()) {
            *a += b;
        }
        for (a, b) in self.grpc.iter_mut().zip(o.grpc.iter()) {
            *a += b;
        }
        for &(code, n) in &o.ws_close {
            crate::recorder::add_code(&mut self.ws_close, code, n);
        }
        self.server_delay.absorb(&o.server_delay)?;
        self.stream.absorb(&o.stream)?;
        self.held_at_end += o.held_at_end;
        self.connections_opened += o.connections_opened;
        self.resent_unprocessed += o.resent_unprocessed;
        self.server_closes += o.server_closes;
        self.server_close_requests += o.server_close_requests;
        self.window_stalls += o.window_stalls;
        self.unmatched += o.unmatched;
        self.last_completion_ns = self.last_completion_ns.max(o.last_completion_ns);
        self.before_send_max_ns = self
            .before_send_max_ns
            .zip(o.before_send_max_ns)
            .map(|(a, b)| a.max(b));
        self.unsent.add(o.unsent);
        self.sent_after_end = self
            .sent_after_end
            .zip(o.sent_after_end)
            .map(|(a, b)| a + b);
        self.worker_cpu.extend_from_slice(&o.worker_cpu);
        match (&mut self.sessions, &o.sessions) {
            (Some(a), Some(b)) => a.absorb(b)?,
            (None, Some(b)) => self.sessions = Some(b.clone()),
            (_, None) => {}
        }
        if self.names.is_empty() {
            self.names = o.names.clone();
        } else if o.names.len() == self.names.len() {
            for (a, b) in self.names.iter_mut().zip(&o.names) {
                a.absorb(b)?;
            }
        } else if !o.names.is_empty() {
            return Err(format!(
                "records of {} and {} request names do not merge",
                self.names.len(),
                o.names.len()
            ));
        }
        Ok(())
    }
}

/// Merges per-worker totals (the only place that does; records of several machines are
/// added with [`Merged::absorb`]).
pub fn merge(workers: Vec<WorkerTotals>) -> Merged {
    let mut m = Merged::empty();
    for w in workers {
        let one = Merged {
            latency: w.latency,
            service: w.service,
            connect: w.connect,
            lag: w.lag,
            responses: w.responses,
            successful: w.successful,
            last_intended_ns: w.last_intended_ns,
            trend: w.trend,
            success_done: w.success_done,
            errors: w.errors,
            status: w.status,
            grpc: w.grpc,
            ws_close: w.ws_close,
            server_delay: w.server_delay,
            stream: w.stream,
            held_at_end: w.held_at_end,
            connections_opened: w.connections_opened,
            resent_unprocessed: w.resent_unprocessed,
            server_closes: w.server_closes,
            server_close_requests: w.server_close_requests,
            window_stalls: w.window_stalls,
            unmatched: w.unmatched,
            last_completion_ns: w.last_completion_ns,
            before_send_max_ns: Some(w.before_send_max_ns),
            unsent: w.unsent,
            sent_after_end: Some(w.sent_after_end),
            worker_cpu: vec![if w.thread_wall_seconds > 0.0 {
                (w.thread_cpu_seconds / w.thread_wall_seconds).min(1.0)
            } else {
                0.0
            }],
            names: w.names,
            sessions: w.sessions,
        };
        // Same bounds everywhere, so adding cannot fail.
        m.absorb(&one).expect("same bounds");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_and_merge_losslessly() {
        let mut a = new_histogram(TOTAL_SIGFIG);
        let mut b = new_histogram(TOTAL_SIGFIG);
        for v in 1..=1000u64 {
            a.record(v * 10).unwrap();
            b.record(v * 1000).unwrap();
        }
        let da = decode_histogram(&encode_histogram(&a)).unwrap();
        let db = decode_histogram(&encode_histogram(&b)).unwrap();
        assert_eq!(da, a);
        let mut merged = da.clone();
        merged.add(&db).unwrap();
        let mut direct = a.clone();
        direct.add(&b).unwrap();
        assert_eq!(merged.len(), 2000);
        assert_eq!(
            merged.value_at_quantile(0.99),
            direct.value_at_quantile(0.99)
        );
        assert_eq!(merged.max(), direct.max());
    }

    #[test]
    fn stats_are_null_when_empty() {
        let s = LatencyStats::from_histogram(&new_histogram(3));
        assert_eq!(s.count, 0);
        assert!(s.p99.is_none() && s.mean.is_none());
        let mut h = new_histogram(3);
        h.record(2_000).unwrap();
        let s = LatencyStats::from_histogram(&h);
        assert_eq!(s.p50, Some(2.0));
    }
}
