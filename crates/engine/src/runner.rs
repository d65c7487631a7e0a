//! Runs a validated [`RunConfig`]: checks limits, starts one worker thread per
//! `threads`, collects per-second reports as they come, merges the workers' totals once at
//! the end and builds the [`RunResult`].

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::sync::Arc;

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::achieved::achieved;
use crate::clock::Clock;
use crate::config::{Arrival, CloseBy, LoadModel, Model, Protocol, RunConfig};
use crate::env::Environment;
use crate::error::{EngineError, ErrorClass, ErrorCounts};
use crate::recorder::{IntervalReport, WorkerTotals};
use crate::records::{decode_histogram, encode_histogram, new_histogram, INTERVAL_SIGFIG};
use crate::result::{
    cpu_bound_workers, merge, Histograms, LagStats, LatencyStats, Merged, RunResult, RunShape,
    SecondStats, StopReason, CPU_BOUND, SCHEMA_VERSION,
};
use crate::schedule::Window;
use crate::transport::Request;
use crate::worker::{run_worker, WorkerPlan, QUEUE_CAP_TOTAL};
use loadlab_grpc::GrpcStatus;
use loadlab_system::ports::{self, PortBudget};
use loadlab_system::{os, procfs};

/// Schedule lag p99 above this marks a run generator-limited (the doctor warns of a
/// machine whose wake-ups alone are later)...
pub const LAG_LIMIT_MS: f64 = loadlab_system::doctor::LAG_LIMIT_MS;
/// ...when at least this many sends were that late: with few samples p99 is the worst one
/// or two, and a single scheduler time slice on a busy machine would decide the run.
pub const MIN_LATE_SENDS: u64 = 5;
/// Sees each finished second and its encoded latency histogram.
pub type Progress<'a> = dyn FnMut(&SecondStats, &str) + 'a;

/// How the caller steers a run.
pub struct RunOptions<'a> {
    /// The command line, recorded in the environment.
    pub command: Vec<String>,
    /// Cancel to stop at once (Ctrl-C); what was measured is still returned.
    pub stop: CancellationToken,
    /// Called once per finished second of the measured window, with that second's
    /// latency histogram (encoded as the result format stores it).
    pub progress: Option<&'a mut Progress<'a>>,
    /// Begin the load (its warm-up, if any) at this wall-clock instant rather than at once:
    /// the steps of a distributed run start together.
    pub start_at: Option<SystemTime>,
}

impl Default for RunOptions<'_> {
    fn default() -> Self {
        RunOptions {
            command: Vec::new(),
            stop: CancellationToken::new(),
            progress: None,
            start_at: None,
        }
    }
}

/// Checks that the planned connections fit in the `nofile` limit, raising the soft limit
/// towards the hard one when that is enough.
pub fn check_fd_limit(cfg: &RunConfig) -> Result<(), EngineError> {
    ports::reserve_fds(cfg.max_connections).map_err(|s| EngineError::FdLimit {
        needed: s.needed,
        connections: s.connections,
        soft: s.soft,
        hard: s.hard,
    })
}

/// Problems predicted before the run starts (each a sentence for the user).
pub fn preflight(cfg: &RunConfig) -> Vec<String> {
    let mut out = Vec::new();
    let LoadModel::Open { rate, .. } = cfg.model else {
        return out;
    };
    // Connections the server closes leave their TIME_WAIT on the server's side.
    if cfg.transport.closes() != Some(CloseBy::Client) {
        return out;
    }
    let loopback = cfg.target.addrs[0].ip().is_loopback();
    let Some(budget) = PortBudget::read(loopback, cfg.source_addrs.len()) else {
        return out;
    };
    let window = cfg
        .duration
        .map_or(f64::INFINITY, |d| (d + cfg.warmup).as_secs_f64());
    if let Some(secs) = budget.seconds_until_exhausted(rate).filter(|s| *s < window) {
        out.push(format!(
            "predicted local port exhaustion: {rate:.0} new connections/s hold each port in TIME_WAIT for {}s, \
             so the {} ephemeral ports ({}-{} on {} source address(es)) run out after about {secs:.1}s; use \
             --keep-alive on, --source-addrs to add local addresses, or `sysctl -w net.ipv4.tcp_tw_reuse=1`",
            ports::TIME_WAIT_SECONDS,
            budget.ports(),
            budget.low,
            budget.high,
            budget.source_addrs,
        ));
    }
    out
}

fn share(total: u64, i: usize, n: usize) -> u64 {
    let n = n as u64;
    total / n + u64::from((i as u64) < total % n)
}

#[derive(Default)]
struct Pending {
    completed: u64,
    successful: u64,
    errors: u64,
    error_classes: [u64; ErrorClass::COUNT],
    latency: Option<Histogram<u64>>,
    names: Vec<crate::recorder::NameInterval>,
}

/// Runs the load and returns its result.
pub fn run(cfg: &RunConfig, opts: RunOptions<'_>) -> Result<RunResult, EngineError> {
    let environment = Environment::capture(opts.command.clone());
    let m = measure(cfg, opts)?;
    Ok(summarize(&RunShape::of(cfg), m, environment))
}

/// What a run measured, before it is summarized into a [`RunResult`]: the form in which
/// runs on several machines travel and are merged ([`Measurement::merge`]). Times are
/// relative to the start of the measured window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    /// Every worker's totals, merged.
    pub totals: Merged,
    /// One entry per second of the measured window.
    pub per_second: Vec<SecondStats>,
    /// Each second's latency histogram, encoded.
    pub per_second_latency: Vec<String>,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// End of the measured window, ns after its start.
    pub window_ns: u64,
    /// Wall-clock time (Unix ns, this machine's clock) at which the measured window began.
    pub measure_start_unix_ns: u64,
    /// How much later than [`RunOptions::start_at`] the load began, ns (0 without one).
    pub start_late_ns: u64,
    /// CPU time of the process during the run, seconds.
    pub cpu_seconds: f64,
    /// Peak resident memory of the process, bytes.
    pub peak_rss_bytes: u64,
    /// The CPU time a virtual machine's hypervisor took during the run (steal) from the
    /// CPUs the workers could run on (`--cpus`, or the process's affinity), of those CPUs'
    /// time; the largest share of several machines. `None` where `/proc/stat` has no steal
    /// figure (or a measurement from an older agent).
    #[serde(default)]
    pub steal: Option<Steal>,
    /// What the reader should know, worded for the machine that ran the load.
    pub warnings: Vec<String>,
    /// Requests that vary: where the data rows and `${seq}` stood when the run ended (the
    /// next run of an experiment resumes there).
    #[serde(default)]
    pub resume: Option<crate::config::traffic::Resume>,
    /// A timed replay: how closely it followed its log.
    #[serde(default)]
    pub replay: Option<crate::replay::Fidelity>,
}

/// Runs the load and returns what it measured, unsummarized.
pub fn measure(cfg: &RunConfig, mut opts: RunOptions<'_>) -> Result<Measurement, EngineError> {
    check_fd_limit(cfg)?;
    let mut warnings = preflight(cfg);
    // Before the clock starts: the first run of a process reads the system's trust store.
    let (tls, tls_warning) = crate::conn::tls_config(cfg);
    warnings.extend(tls_warning);
    let (io, io_warning) = cfg.io_used();
    warnings.extend(io_warning);
    let cfg = Arc::new(cfg.clone());
    let clock = Clock::new();
    // A little head start so every worker is running before the first arrival, or the
    // instant the caller asked for (a distributed step starts everywhere at once).
    let head_start = Duration::from_millis(20);
    let (lead, start_late_ns) = match opts.start_at {
        None => (head_start, 0),
        Some(at) => match at.duration_since(SystemTime::now()) {
            Ok(d) => (
                d.max(head_start),
                head_start.saturating_sub(d).as_nanos() as u64,
            ),
            Err(e) => (head_start, (e.duration() + head_start).as_nanos() as u64),
        },
    };
    // The wall clock at the clock's origin, to report when the window began.
    let origin_unix_ns = unix_ns(SystemTime::now()).saturating_sub(clock.now());
    let start_ns = clock.now() + lead.as_nanos() as u64;
    let measure_start_ns = start_ns + cfg.warmup.as_nanos() as u64;
    let window = Window {
        start_ns,
        measure_start_ns,
        // `--requests` alone still ends: after the longest duration allowed.
        end_ns: measure_start_ns
            + cfg
                .duration
                .unwrap_or(crate::config::MAX_DURATION)
                .as_nanos() as u64,
        requests: cfg.requests,
    };
    // Validation already built the HTTP/2 template once: this cannot fail for a validated
    // configuration.
    let request = Request::encode(&cfg).map_err(|e| {
        EngineError::Config(crate::config::ConfigError::Value {
            field: crate::config::Field::Header,
            value: e,
            allowed: "header names and values valid in HTTP/2".into(),
        })
    })?;
    let tickets = Arc::new(AtomicU64::new(cfg.requests.unwrap_or(u64::MAX)));
    let (tx, rx) = mpsc::channel::<IntervalReport>();
    let cpu_before = os::process_cpu_seconds();
    // Steal is read on the CPUs the workers may run on: the machine's figure would dilute
    // it with the time of CPUs the server or nothing uses.
    let worker_cpus = if cfg.cpus.is_empty() {
        os::current_cpus()
    } else {
        cfg.cpus.clone()
    };
    let steal_before = procfs::steal_ticks_on(&worker_cpus);
    let threads = cfg.threads;
    let mut feed = match &cfg.replay {
        Some(r) => Some(crate::replay::start(r, threads, window).map_err(EngineError::Replay)?),
        None => None,
    };
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        // Request loops: one per connection over HTTP/1.1, one per stream over HTTP/2.
        let (tasks, max_tasks, h2_connections) = match cfg.transport.protocol() {
            Protocol::Http1 | Protocol::Ws | Protocol::Sse => (
                share(cfg.connections, index, threads),
                share(cfg.max_connections, index, threads).max(1),
                0,
            ),
            Protocol::Http2
            | Protocol::Grpc
            | Protocol::GrpcServerStream
            | Protocol::GrpcStreamOpens
            | Protocol::GrpcBidi
            | Protocol::GrpcClientStream => {
                let conns = share(cfg.connections, index, threads);
                let streams = share(cfg.concurrency, index, threads);
                match cfg.model {
                    LoadModel::Closed => (streams, streams, conns),
                    // Bidirectional streams are held, each with its turn of the arrivals.
                    LoadModel::Open { .. } if cfg.transport.held() => (streams, streams, conns),
                    LoadModel::Open { .. } => (conns, streams, conns),
                }
            }
        };
        let plan = WorkerPlan {
            index,
            threads,
            cfg: cfg.clone(),
            request: request.clone(),
            tls: tls.clone(),
            clock,
            window,
            tasks: tasks as usize,
            max_tasks: max_tasks as usize,
            h2_connections: h2_connections as usize,
            tickets: tickets.clone(),
            stop: opts.stop.clone(),
            tx: tx.clone(),
            io,
            replay: feed.as_mut().map(|f| {
                (
                    f.receivers[index].take().expect("one per worker"),
                    f.released.clone(),
                )
            }),
        };
        let h = std::thread::Builder::new()
            .name(format!("loadlab-worker-{index}"))
            .spawn(move || run_worker(plan))
            .map_err(EngineError::Worker)?;
        handles.push(h);
    }
    drop(tx);

    let names: Vec<String> = cfg
        .traffic
        .as_ref()
        .map(|t| t.names.clone())
        .unwrap_or_default();
    let (per_second, per_second_latency) =
        collect_seconds(rx, threads, &names, opts.progress.as_mut());
    let totals = join_workers(handles)?;
    let replay = feed.map(crate::replay::Feed::fidelity);
    let end_now = clock.now();
    let cpu_seconds = os::process_cpu_seconds() - cpu_before;
    let steal = Steal::between(steal_before, procfs::steal_ticks_on(&worker_cpus));
    let mut m = merge(totals);

    let rows_used_up = cfg.traffic.as_ref().is_some_and(|t| t.used_up());
    let stop_reason = if opts.stop.is_cancelled() {
        StopReason::Interrupted
    } else if rows_used_up {
        StopReason::RowsUsedUp
    } else if cfg.requests.is_some()
        && (cfg.duration.is_none() || m.last_completion_ns < window.end_ns)
    {
        StopReason::Requests
    } else {
        StopReason::Duration
    };
    let window_end = match stop_reason {
        StopReason::Duration => window.end_ns,
        StopReason::Requests | StopReason::RowsUsedUp => {
            m.last_completion_ns.max(measure_start_ns + 1)
        }
        StopReason::Interrupted => end_now.min(window.end_ns),
    };
    // From here on, times count from the start of the measured window.
    m.last_intended_ns = m.last_intended_ns.saturating_sub(measure_start_ns);
    m.last_completion_ns = m.last_completion_ns.saturating_sub(measure_start_ns);
    warnings.extend(outcome_warnings(&m));
    Ok(Measurement {
        totals: m,
        per_second,
        per_second_latency,
        stop_reason,
        window_ns: window_end.saturating_sub(measure_start_ns),
        measure_start_unix_ns: origin_unix_ns + measure_start_ns,
        start_late_ns,
        cpu_seconds,
        peak_rss_bytes: os::peak_rss_bytes(),
        steal,
        warnings,
        resume: cfg.traffic.as_ref().map(|t| t.resume()),
        replay,
    })
}

/// Nanoseconds since the Unix epoch.
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Measurement {
    /// Merges the measurements of runs that started together (a distributed step) exactly:
    /// totals added ([`Merged::absorb`]), seconds aligned by wall clock from the earliest
    /// window start (`measure_start_unix_ns` in one clock: the caller corrects each
    /// machine's offset first), each second's histograms added, the longest window kept.
    /// Warnings are the caller's to word. Fails only on histograms of another build.
    pub fn merge(parts: &[Measurement]) -> Result<Measurement, String> {
        let start = parts
            .iter()
            .map(|p| p.measure_start_unix_ns)
            .min()
            .unwrap_or(0);
        let mut totals = Merged::empty();
        let mut seconds: Vec<(SecondStats, Histogram<u64>)> = Vec::new();
        for p in parts {
            totals.absorb(&p.totals)?;
            let shift = ((p.measure_start_unix_ns - start) as f64 / 1e9).round() as u64;
            for (s, h) in p.per_second.iter().zip(&p.per_second_latency) {
                let i = (s.second + shift) as usize;
                while seconds.len() <= i {
                    seconds.push((
                        SecondStats::empty(seconds.len() as u64),
                        new_histogram(INTERVAL_SIGFIG),
                    ));
                }
                let (sum, hist) = &mut seconds[i];
                sum.absorb(s)?;
                hist.add(decode_histogram(h)?)
                    .map_err(|e| format!("per-second histograms do not merge: {e:?}"))?;
            }
        }
        let (per_second, per_second_latency) = seconds
            .into_iter()
            .map(|(mut s, h)| {
                (s.latency_p50_ms, s.latency_p99_ms) = second_quantiles(&h);
                (s, encode_histogram(&h))
            })
            .unzip();
        let reasons = || parts.iter().map(|p| p.stop_reason);
        let stop_reason = if reasons().any(|r| r == StopReason::Interrupted) {
            StopReason::Interrupted
        } else if reasons().any(|r| r == StopReason::RowsUsedUp) {
            StopReason::RowsUsedUp
        } else if !parts.is_empty() && reasons().all(|r| r == StopReason::Requests) {
            StopReason::Requests
        } else {
            StopReason::Duration
        };
        Ok(Measurement {
            totals,
            per_second,
            per_second_latency,
            stop_reason,
            window_ns: parts.iter().map(|p| p.window_ns).max().unwrap_or(0),
            measure_start_unix_ns: start,
            start_late_ns: parts.iter().map(|p| p.start_late_ns).max().unwrap_or(0),
            cpu_seconds: parts.iter().map(|p| p.cpu_seconds).sum(),
            peak_rss_bytes: parts.iter().map(|p| p.peak_rss_bytes).max().unwrap_or(0),
            steal: parts
                .iter()
                .filter_map(|p| p.steal)
                .max_by(|a, b| a.share().total_cmp(&b.share())),
            warnings: Vec::new(),
            // Each machine resumes where it stood; the caller keeps them apart.
            resume: None,
            replay: None,
        })
    }
}

/// Steal time over a run: what a virtual machine's hypervisor took of the machine's CPU
/// time (every CPU) while its CPUs were ready to run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Steal {
    /// CPU time stolen, ms.
    pub stolen_ms: f64,
    /// The machine's CPU time over the run (every CPU), ms.
    pub total_ms: f64,
}

impl Steal {
    /// From `/proc/stat`'s `(steal, total)` ticks before and after; `None` without both
    /// or with no time between them.
    pub fn between(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<Steal> {
        let ((s0, t0), (s1, t1)) = (before?, after?);
        let tick_ms = 1000.0 / os::clock_ticks_per_second() as f64;
        (t1 > t0).then(|| Steal {
            stolen_ms: s1.saturating_sub(s0) as f64 * tick_ms,
            total_ms: (t1 - t0) as f64 * tick_ms,
        })
    }

    /// Stolen over total.
    pub fn share(&self) -> f64 {
        if self.total_ms > 0.0 {
            self.stolen_ms / self.total_ms
        } else {
            0.0
        }
    }
}

/// A second's median and 99th percentile, ms (`None` when it recorded nothing).
fn second_quantiles(h: &Histogram<u64>) -> (Option<f64>, Option<f64>) {
    let q = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0);
    (q(0.5), q(0.99))
}

/// Summarizes a measurement: achieved throughput and its trend, latency figures, whether
/// the generator limited the run, errors and status codes.
pub fn summarize(shape: &RunShape, ms: Measurement, environment: Environment) -> RunResult {
    let m = ms.totals;
    let (achieved_rps, latency_trend) = achieved(shape.load, &m, ms.stop_reason, 0, ms.window_ns);
    let by_name = by_name(shape, &m, ms.stop_reason, ms.window_ns);
    let traffic = shape.traffic.as_ref().map(|t| crate::result::TrafficInfo {
        requests: t.requests,
        order: t.order,
        data_file: t.data.as_ref().map(|d| d.0.clone()),
        data_rows: t.data.as_ref().map(|d| d.1 as u64),
        data_order: t.data.as_ref().map(|d| d.2),
        resume: ms.resume.unwrap_or_default(),
        notes: t.notes.clone(),
        replay: ms.replay.clone().map(crate::replay::Fidelity::public),
    });
    let lag = LagStats::from_histogram(&m.lag);
    let generator_notes = generator_notes(&m, &lag, ms.steal);
    let errors = crate::error::ErrorCounts::from_array(m.errors);
    let errors_total = errors.total();
    let status_codes = m
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code.to_string(), n))
        .collect();
    let grpc_status = GrpcStatus::ALL
        .iter()
        .filter(|c| m.grpc[usize::from(c.code())] > 0)
        .map(|c| (c.name().to_string(), m.grpc[usize::from(c.code())]))
        .collect();
    let (model, arrival, offered_rps) = match shape.load {
        LoadModel::Open { rate, arrival } => (Model::Open, Some(arrival), Some(rate)),
        LoadModel::Closed => (Model::Closed, None::<Arrival>, None),
    };
    RunResult {
        schema_version: SCHEMA_VERSION,
        url: shape.url.clone(),
        method: shape.method.clone(),
        protocol: shape.protocol,
        model,
        arrival,
        offered_rps,
        connections: shape.connections,
        max_connections: shape.max_connections,
        concurrency: shape.concurrency,
        threads: shape.threads,
        keep_alive: shape.keep_alive,
        close_by: (!shape.keep_alive).then_some(shape.close_by),
        pipeline: shape.pipeline,
        io: shape.io,
        timeout_ms: shape.timeout_ms,
        warmup_s: shape.warmup_s,
        duration_s: ms.window_ns as f64 / 1e9,
        window_start_unix_ms: (ms.measure_start_unix_ns > 0)
            .then(|| ms.measure_start_unix_ns as f64 / 1e6),
        stop_reason: ms.stop_reason,
        requests: m.responses,
        successful: m.successful,
        achieved_rps,
        latency_trend,
        latency_ms: LatencyStats::from_histogram(&m.latency),
        service_time_ms: LatencyStats::from_histogram(&m.service),
        connect_time_ms: LatencyStats::from_histogram(&m.connect),
        schedule_lag_ms: lag,
        errors,
        errors_total,
        status_codes,
        grpc_status,
        ws_close_codes: m
            .ws_close
            .iter()
            .map(|(code, n)| (code.to_string(), *n))
            .collect(),
        messages_per_call: shape.messages_per_call,
        // A client-streaming call's stream lasts one call, one opened at a rate its
        // lifetime: none is held to the end.
        connections_held: (matches!(shape.protocol, Protocol::Ws | Protocol::Sse)
            || (shape.protocol.grpc_stream()
                && !matches!(
                    shape.protocol,
                    Protocol::GrpcClientStream | Protocol::GrpcStreamOpens
                )))
        .then_some(m.held_at_end),
        server_delay: shape
            .sent_at
            .as_ref()
            .map(|pointer| crate::result::ServerDelay {
                pointer: pointer.clone(),
                delay_ms: LatencyStats::from_histogram(&m.server_delay.delay),
                missing: m.server_delay.missing,
                ahead: m.server_delay.ahead,
            }),
        // WebSocket push records them too (its other modes do not), starved or not.
        stream_timing: (matches!(
            shape.protocol,
            Protocol::GrpcServerStream | Protocol::GrpcStreamOpens | Protocol::Sse
        ) || m.stream.first.len() + m.stream.gap.len() + m.stream.seconds > 0)
            .then(|| crate::result::StreamTiming {
                first_message_ms: LatencyStats::from_histogram(&m.stream.first),
                gap_ms: LatencyStats::from_histogram(&m.stream.gap),
                stream_seconds: m.stream.seconds,
                failed_stream_seconds: m.stream.failed_seconds,
                opened: shape
                    .stream_lifetime_ms
                    .map(|lifetime_ms| crate::result::OpenedStreams {
                        lifetime_ms,
                        ends: m.stream.ends,
                    }),
            }),
        connections_opened: m.connections_opened,
        resent_unprocessed: m.resent_unprocessed,
        server_closes: m.server_closes,
        requests_per_server_close: (m.server_closes > 0)
            .then(|| m.server_close_requests as f64 / m.server_closes as f64),
        window_stalls: matches!(
            shape.protocol,
            Protocol::GrpcBidi | Protocol::GrpcClientStream
        )
        .then_some(m.window_stalls),
        matched_by: shape
            .match_field
            .as_ref()
            .map(|field| crate::result::MatchedBy {
                field: field.clone(),
                unmatched: m.unmatched,
            }),
        unsent: m.unsent.total(),
        sent_after_window: match shape.load {
            LoadModel::Open { .. } => m.sent_after_end,
            LoadModel::Closed => None,
        },
        generator_limited: !generator_notes.is_empty(),
        generator_notes,
        generator_cpu_seconds: ms.cpu_seconds,
        generator_peak_rss_bytes: ms.peak_rss_bytes,
        worker_cpu_utilization: m.worker_cpu.clone(),
        before_send_ms_max: m.before_send_max_ns.map(|ns| ns as f64 / 1e6),
        generator_steal_share: ms.steal.map(|s| s.share()),
        warnings: ms.warnings,
        per_second: ms.per_second,
        histograms: Histograms {
            encoding: "hdrhistogram-v2-deflate-base64".into(),
            unit: "us".into(),
            latency: encode_histogram(&m.latency),
            service_time: encode_histogram(&m.service),
            connect_time: encode_histogram(&m.connect),
            schedule_lag: encode_histogram(&m.lag),
            per_second_latency: ms.per_second_latency,
        },
        environment,
        agents: Vec::new(),
        sessions: m.sessions.as_ref().map(|s| {
            crate::result::SessionsResult::of(
                s,
                shape,
                crate::achieved::window_seconds(shape.load, &m, ms.stop_reason, 0, ms.window_ns),
            )
        }),
        traffic,
        by_name,
    }
}

/// Each request name's figures, in the list's order (empty when the requests have no
/// names): counted, estimated and summarized as the whole is, over the whole's window.
fn by_name(
    shape: &RunShape,
    m: &Merged,
    stop_reason: StopReason,
    window_ns: u64,
) -> Vec<crate::result::NameResult> {
    let Some(t) = &shape.traffic else {
        return Vec::new();
    };
    let window_s = crate::achieved::window_seconds(shape.load, m, stop_reason, 0, window_ns);
    t.names
        .iter()
        .zip(&m.names)
        .map(|((name, share), n)| {
            let (achieved_rps, latency_trend) = crate::achieved::achieved_over(
                shape.load,
                window_s,
                crate::achieved::Tally::of_name(n),
            );
            let errors = crate::error::ErrorCounts::from_array(n.errors);
            let mut status: Vec<_> = n.status.clone();
            status.sort_unstable();
            crate::result::NameResult {
                name: name.clone(),
                share: *share,
                offered_rps: match shape.load {
                    // A flow's rate counts sessions: a step is offered as often per second
                    // as sessions start times its turns in one session.
                    LoadModel::Open { rate, .. } => {
                        Some(rate * share * t.requests_per_session.unwrap_or(1) as f64)
                    }
                    LoadModel::Closed => None,
                },
                requests: n.responses,
                successful: n.successful,
                achieved_rps,
                latency_trend,
                latency_ms: LatencyStats::from_histogram(&n.latency),
                errors_total: errors.total(),
                errors,
                status_codes: status
                    .into_iter()
                    .map(|(code, k)| (code.to_string(), k))
                    .collect(),
                grpc_status: GrpcStatus::ALL
                    .iter()
                    .filter(|c| n.grpc[usize::from(c.code())] > 0)
                    .map(|c| (c.name().to_string(), n.grpc[usize::from(c.code())]))
                    .collect(),
                latency_histogram: encode_histogram(&n.latency),
            }
        })
        .collect()
}

/// Collects the workers' per-second reports until every worker has finished. A second is
/// final (reported to `progress`) once every worker has moved past it. Returns the series,
/// with seconds nobody reported filled in, and each second's encoded latency histogram.
fn collect_seconds(
    rx: mpsc::Receiver<IntervalReport>,
    threads: usize,
    names: &[String],
    mut progress: Option<&mut &mut Progress<'_>>,
) -> (Vec<SecondStats>, Vec<String>) {
    let mut watermark = vec![0u64; threads];
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut seconds: Vec<(SecondStats, String)> = Vec::new();
    let mut finalize = |sec: u64, p: Pending, seconds: &mut Vec<(SecondStats, String)>| {
        let h = p.latency.unwrap_or_else(|| new_histogram(INTERVAL_SIGFIG));
        let (latency_p50_ms, latency_p99_ms) = second_quantiles(&h);
        let by_name = names
            .iter()
            .zip(&p.names)
            .filter(|(_, n)| !n.is_empty())
            .map(|(name, n)| crate::result::NameSecond {
                name: name.clone(),
                completed: n.completed,
                successful: n.successful,
                errors: n.errors(),
                errors_by_class: ErrorCounts::from_array(n.error_classes),
                latency: encode_histogram(&n.latency),
            })
            .collect();
        let stats = SecondStats {
            second: sec,
            completed: p.completed,
            successful: p.successful,
            errors: p.errors,
            errors_by_class: ErrorCounts::from_array(p.error_classes),
            latency_p50_ms,
            latency_p99_ms,
            by_name,
            agents: Vec::new(),
        };
        let encoded = encode_histogram(&h);
        if let Some(cb) = progress.as_mut() {
            cb(&stats, &encoded);
        }
        seconds.push((stats, encoded));
    };
    while let Ok(r) = rx.recv() {
        if r.completed + r.errors > 0 {
            let p = pending.entry(r.second).or_default();
            p.completed += r.completed;
            p.successful += r.successful;
            p.errors += r.errors;
            for (a, b) in p.error_classes.iter_mut().zip(r.error_classes) {
                *a += b;
            }
            match &mut p.latency {
                Some(h) => h.add(&r.latency).expect("same bounds"),
                None => p.latency = Some(r.latency),
            }
            if p.names.is_empty() {
                p.names = r.names;
            } else {
                for (a, b) in p.names.iter_mut().zip(&r.names) {
                    a.add(b);
                }
            }
        }
        watermark[r.worker] = watermark[r.worker].max(r.next_second);
        let low = *watermark.iter().min().expect("at least one worker");
        while let Some(entry) = pending.first_entry() {
            if *entry.key() >= low {
                break;
            }
            let (sec, p) = entry.remove_entry();
            finalize(sec, p, &mut seconds);
        }
    }
    for (sec, p) in std::mem::take(&mut pending) {
        finalize(sec, p, &mut seconds);
    }
    // Fill seconds nobody reported (no completions anywhere) so the series is continuous.
    seconds.sort_by_key(|(s, _)| s.second);
    let empty = encode_histogram(&new_histogram(INTERVAL_SIGFIG));
    let mut per_second = Vec::with_capacity(seconds.len());
    let mut latency = Vec::with_capacity(seconds.len());
    for (s, h) in seconds {
        for second in per_second.len() as u64..s.second {
            per_second.push(SecondStats::empty(second));
            latency.push(empty.clone());
        }
        per_second.push(s);
        latency.push(h);
    }
    (per_second, latency)
}

/// Waits for every worker thread and returns their totals.
fn join_workers(
    handles: Vec<std::thread::JoinHandle<std::io::Result<WorkerTotals>>>,
) -> Result<Vec<WorkerTotals>, EngineError> {
    let mut totals = Vec::with_capacity(handles.len());
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => totals.push(t),
            Ok(Err(e)) => return Err(EngineError::Worker(e)),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                return Err(EngineError::WorkerPanic(msg));
            }
        }
    }
    Ok(totals)
}

/// Why loadlab itself may have limited the run (empty: it did not).
fn generator_notes(m: &Merged, lag: &LagStats, steal: Option<Steal>) -> Vec<String> {
    let mut notes = Vec::new();
    let limit_us = (LAG_LIMIT_MS * 1000.0) as u64;
    let late = if m.lag.is_empty() {
        0
    } else {
        m.lag.count_between(limit_us + 1, u64::MAX)
    };
    if lag.p99 > LAG_LIMIT_MS && late >= MIN_LATE_SENDS {
        notes.push(format!(
            "schedule lag p99 is {:.2} ms (limit {LAG_LIMIT_MS} ms; {late} sends later than that): \
             loadlab released requests late{}",
            lag.p99,
            woken_late(&m.worker_cpu, steal)
        ));
    }
    if m.unsent.late > 0 {
        notes.push(format!(
            "{} arrivals were never sent: loadlab fell more than the timeout behind its schedule \
             (a rate this machine cannot generate); add --threads or cores, lower --rate, or spread \
             the load with --agents",
            m.unsent.late
        ));
    }
    if let Some(s) = m.sessions.as_ref().filter(|s| s.waited_for_loop > 0) {
        notes.push(format!(
            "{} arriving sessions waited for a free session loop: every one of --max-connections \
             was busy with a session (sending or thinking); raise --max-connections above the \
             sessions in progress (rate × session duration)",
            s.waited_for_loop
        ));
    }
    if m.unsent.queue_full > 0 {
        notes.push(format!(
            "{} arrivals were never sent: the queue of arrivals waiting for a free connection was \
             full ({QUEUE_CAP_TOTAL} across workers); raise --max-connections (or --concurrency) or \
             lower --timeout",
            m.unsent.queue_full
        ));
    }
    let share = steal.map(|s| s.share());
    for (i, u) in cpu_bound_workers(&m.worker_cpu, share) {
        let left = match share {
            // A thread's CPU time counts none of what the host took.
            Some(s) if u <= CPU_BOUND => format!(
                ", {} of what the host left its CPUs: a virtual machine's hypervisor took {} of \
                 their time, which no thread's CPU time counts",
                crate::format::pct_abs(u / (1.0 - s)),
                crate::format::pct_abs(s)
            ),
            _ => String::new(),
        };
        notes.push(format!(
            "worker thread {i} was CPU-bound ({} busy{left}): add --threads or cores, or pin the server elsewhere",
            crate::format::pct_abs(u)
        ));
    }
    notes
}

/// A worker thread at most this busy (a fraction of its time over the run) that still
/// released requests late was most likely not held up by its own work.
pub const IDLE_BUSY: f64 = 0.1;

/// Why a run's releases were late when its worker threads were mostly idle (`worker_cpu`,
/// each thread's busy fraction; every one at most [`IDLE_BUSY`]): most likely woken late from
/// their sleep, by the machine, rather than held up by their own work (an average over the
/// run cannot rule out a burst of it, hence "most likely"). Empty otherwise, or without
/// figures. With the run's `steal`, says what the hypervisor took: evidence of a busy host
/// when some, and that it was not the host when none.
///
/// At 200 req/s a worker sleeps 5 ms between releases; on this project's virtual machine a
/// plain `clock_nanosleep` to an absolute deadline woke 1.2 to 2.9 ms late at p99, and loadlab
/// at that rate marked itself generator-limited in 4 runs of 6, 1 to 3 % busy: the note said
/// "loadlab released requests late", true, and read as loadlab's work, which it was not.
fn woken_late(worker_cpu: &[f64], steal: Option<Steal>) -> String {
    if worker_cpu.is_empty() || worker_cpu.iter().any(|u| u.is_nan() || *u > IDLE_BUSY) {
        return String::new();
    }
    let busiest = worker_cpu.iter().copied().fold(0.0, f64::max);
    let host = match steal {
        Some(s) if s.stolen_ms > 0.0 => format!(
            "; the hypervisor took {:.0} ms of the {:.0} ms of CPU time of the CPUs the workers \
             ran on during the run ({}, steal time: a busy host)",
            s.stolen_ms,
            s.total_ms,
            crate::format::pct_abs(s.share())
        ),
        Some(s) => format!(
            "; no steal time during the run ({:.0} ms of CPU time), so not a virtual machine's host",
            s.total_ms
        ),
        None => String::new(),
    };
    format!(
        ", with its worker threads at most {:.0} % busy over the run: most likely not held up \
         by its own work but woken late from their sleep (another process on their core, or \
         the wake-up latency of a core or a virtual machine), and the latency includes that \
         lateness, which matters most against a fast server{host}",
        busiest * 100.0
    )
}

/// What the errors mean for the user: nothing succeeded, ports or descriptors ran out.
fn outcome_warnings(m: &Merged) -> Vec<String> {
    let mut warnings = Vec::new();
    let count = |c: ErrorClass| m.errors[c.index()];
    let errors_total: u64 = m.errors.iter().sum();
    if m.successful == 0 {
        let attempts =
            m.responses + errors_total - count(ErrorClass::Http4xx) - count(ErrorClass::Http5xx);
        warnings.push(format!(
            "no request succeeded ({attempts} attempted): see the errors"
        ));
    }
    if count(ErrorClass::LocalPortExhaustion) > 0 {
        // IPv4 and IPv6 alike, from the kernel's counter (see `procfs::time_wait`).
        let tw = procfs::time_wait();
        let range = procfs::ephemeral_port_range()
            .map(|(a, b)| format!("{a}-{b}, {} ports", u32::from(b) - u32::from(a) + 1))
            .unwrap_or_else(|| "unknown".into());
        warnings.push(format!(
            "{} requests failed because no local port was free (EADDRNOTAVAIL): {tw} sockets are in TIME_WAIT \
             (ephemeral range {range}); use --keep-alive on to reuse connections, --source-addrs to spread \
             connections over more local addresses, or `sysctl -w net.ipv4.tcp_tw_reuse=1`",
            count(ErrorClass::LocalPortExhaustion)
        ));
    }
    if count(ErrorClass::FdExhaustion) > 0 {
        let (soft, hard) = os::nofile_limits();
        warnings.push(format!(
            "{} requests failed because the process ran out of file descriptors (EMFILE/ENFILE): nofile is {soft} \
             (hard {hard}); raise it with `ulimit -n` or lower --max-connections",
            count(ErrorClass::FdExhaustion)
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::cpu_bound;

    #[test]
    fn late_releases_of_idle_workers_are_put_on_their_wake_ups() {
        let mut m = Merged::empty();
        for us in [100, 200, 3_000, 4_000, 5_000, 6_000, 7_000] {
            m.lag.record(us).unwrap();
        }
        let lag = LagStats {
            p99: 7.0,
            ..LagStats::default()
        };
        m.worker_cpu = vec![0.03, 0.02];
        let notes = generator_notes(&m, &lag, None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("released requests late, with its worker threads at most 3 % busy over the run: most likely not held up by its own work but woken late"), "{}", notes[0]);
        assert!(notes[0].ends_with("against a fast server"), "{}", notes[0]);
        // With the run's steal time: a busy host named with its figure, or ruled out.
        let stole = Steal {
            stolen_ms: 120.0,
            total_ms: 4000.0,
        };
        let notes = generator_notes(&m, &lag, Some(stole));
        assert!(notes[0].ends_with("against a fast server; the hypervisor took 120 ms of the 4000 ms of CPU time of the CPUs the workers ran on during the run (3 %, steal time: a busy host)"), "{}", notes[0]);
        let none = Steal {
            stolen_ms: 0.0,
            total_ms: 4000.0,
        };
        let notes = generator_notes(&m, &lag, Some(none));
        assert!(notes[0].ends_with("; no steal time during the run (4000 ms of CPU time), so not a virtual machine's host"), "{}", notes[0]);
        // Busy workers: their own work may be what made them late; no cause is claimed.
        for busy in [vec![0.03, 0.2], vec![0.95]] {
            m.worker_cpu = busy;
            let notes = generator_notes(&m, &lag, Some(stole));
            assert!(
                notes[0].ends_with("loadlab released requests late"),
                "{notes:?}"
            );
        }
        m.worker_cpu = Vec::new();
        assert!(generator_notes(&m, &lag, None)[0].ends_with("loadlab released requests late"));
    }

    #[test]
    fn a_worker_is_cpu_bound_against_what_the_host_left_it() {
        // 85 % busy: not CPU-bound on a machine of its own; where the host took a fifth of
        // its CPU's time, it was busy 106 % of what was left (it wanted the CPU throughout).
        assert!(!cpu_bound(0.85, None));
        assert!(!cpu_bound(0.85, Some(0.0)));
        assert!(cpu_bound(0.85, Some(0.2)));
        // Just under and over 90 % of what was left.
        assert!(!cpu_bound(0.71, Some(0.2)));
        assert!(cpu_bound(0.73, Some(0.2)));
        assert!(cpu_bound(0.95, None));
        assert_eq!(
            cpu_bound_workers(&[0.3, 0.85, 0.95], Some(0.2)),
            vec![(1, 0.85), (2, 0.95)]
        );
        // The note says both figures for a thread the steal made CPU-bound.
        let mut m = Merged::empty();
        m.worker_cpu = vec![0.85, 0.95];
        let stole = Steal {
            stolen_ms: 800.0,
            total_ms: 4000.0,
        };
        let notes = generator_notes(&m, &LagStats::default(), Some(stole));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(notes[0], "worker thread 0 was CPU-bound (85 % busy, 106 % of what the host left its CPUs: a virtual machine's hypervisor took 20 % of their time, which no thread's CPU time counts): add --threads or cores, or pin the server elsewhere");
        assert_eq!(notes[1], "worker thread 1 was CPU-bound (95 % busy): add --threads or cores, or pin the server elsewhere");
        assert!(generator_notes(&m, &LagStats::default(), None).len() == 1);
    }

    #[test]
    fn steal_is_counted_between_two_readings_of_proc_stat() {
        let tick = 1000.0 / os::clock_ticks_per_second() as f64;
        let s = Steal::between(Some((10, 1000)), Some((13, 1400))).unwrap();
        assert_eq!((s.stolen_ms, s.total_ms), (3.0 * tick, 400.0 * tick));
        assert!((s.share() - 0.0075).abs() < 1e-12);
        // No time between them, or a reading missing: nothing claimed.
        assert_eq!(Steal::between(Some((10, 1000)), Some((10, 1000))), None);
        assert_eq!(Steal::between(None, Some((10, 1000))), None);
    }

    #[test]
    fn shares_add_up() {
        for total in [1u64, 7, 64, 1000] {
            for n in [1usize, 2, 3, 8] {
                let s: u64 = (0..n).map(|i| share(total, i, n)).sum();
                assert_eq!(s, total);
            }
        }
    }
}
