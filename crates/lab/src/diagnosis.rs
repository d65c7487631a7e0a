//! Why a step was not sustained: each rule turns the evidence a step recorded (the target's
//! CPU against the CPUs it may use, its file descriptors, memory and listen queue from the
//! probes; the engine's errors, latency and service time) into a finding with its figures,
//! or does not fire. A rule without its evidence never fires: when none does, the diagnosis
//! says so (`unknown`) with the figures that were looked at.
//!
//! The rules, in the README's words ("Why it broke"):
//! - `generator`, `agent_lost`, `crash`: loadlab fell behind, an agent was lost, the target
//!   exited. The first two are never blamed on the server.
//! - `cpu_bound`: the target used at least [`CPU_BOUND`] of the CPUs it may run on (its
//!   affinity, capped by its cgroup quota).
//! - `concurrency_bound`: the server served fewer requests at once than were offered, with
//!   its CPU below [`CPU_LOW`]: by Little's law achieved × the service-time floor (from the
//!   sustained steps) is the number in service; a matrix parameter within [`PARAM_MATCH`]
//!   of it is named (a `backlog` never: it bounds a queue; parameters equally close are all
//!   named, the matrix cannot tell them apart).
//! - `accept_queue`: the kernel's listen-queue overflows or drops grew during the step, before
//!   latency rose (or in numbers that matter: at least 1 % of the requests).
//! - `timeouts`: requests timed out with the target's CPU below [`CPU_LOW`].
//! - `client_ports`, `descriptors`: loadlab found no local port, or either side ran out of
//!   file descriptors (the target's against its own `nofile` limit).
//! - `memory_growth`: the target's RSS grew steadily through the step.
//! - `refused`: the server answered 5xx to at least half of the failed requests: it shed
//!   work it could not take (a full queue, mailbox or pool answering 503).
//!
//! Findings are ordered by when their signal first moved within the step.

use std::collections::BTreeMap;

use loadlab_engine::{CloseBy, ErrorClass, RunResult};
use loadlab_system::probe::{ProbeReport, ProbeSecond};
use serde::{Deserialize, Serialize};

use crate::bundle::StepRecord;
use crate::plan::Model;
use crate::verdict::Limit;

/// Version of the diagnosis format.
pub const DIAGNOSIS_VERSION: u32 = 1;
/// A target using at least this fraction of its CPUs is CPU-bound.
pub const CPU_BOUND: f64 = 0.9;
/// Below this fraction of its CPUs the target's CPU demand (used plus waited for) is "low".
pub const CPU_LOW: f64 = 0.5;
/// A target that waited at least this fraction of its CPUs' time for them, runnable, was
/// starved by other processes when it used less than [`CPU_BOUND`] itself.
pub const STARVED: f64 = 0.1;
/// A matrix parameter is named when within this fraction of the estimated concurrency.
pub const PARAM_MATCH: f64 = 0.2;
/// Memory growth below this many bytes is noise.
const MEMORY_GROWTH_MIN: f64 = 16.0 * 1024.0 * 1024.0;

/// What limited a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// loadlab fell behind.
    Generator,
    /// An agent of a distributed run was lost.
    AgentLost,
    /// A target exited.
    Crash,
    /// The target's CPUs were full.
    CpuBound,
    /// A pool (workers, threads, connections) was full with the CPU low.
    ConcurrencyBound,
    /// The listen queue overflowed.
    AcceptQueue,
    /// Requests timed out with the CPU low.
    Timeouts,
    /// loadlab found no local port.
    ClientPorts,
    /// A side ran out of file descriptors.
    Descriptors,
    /// The target's memory grew through the step.
    MemoryGrowth,
    /// The server answered with 5xx statuses: it shed work.
    Refused,
    /// No rule had its evidence.
    Unknown,
}

impl Bottleneck {
    /// Words for tables.
    pub fn label(self) -> &'static str {
        match self {
            Bottleneck::Generator => "generator-limited (not the server)",
            Bottleneck::AgentLost => "agent lost (not the server)",
            Bottleneck::Crash => "target crashed",
            Bottleneck::CpuBound => "CPU-bound",
            Bottleneck::ConcurrencyBound => "concurrency-bound",
            Bottleneck::AcceptQueue => "accept queue",
            Bottleneck::Timeouts => "timeouts with the CPU low",
            Bottleneck::ClientPorts => "client ports",
            Bottleneck::Descriptors => "file descriptors",
            Bottleneck::MemoryGrowth => "memory growth",
            Bottleneck::Refused => "server refused (5xx)",
            Bottleneck::Unknown => "unknown",
        }
    }
}

/// One bottleneck, with its evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What.
    pub bottleneck: Bottleneck,
    /// One sentence with the figures.
    pub evidence: String,
    /// What to try.
    pub advice: String,
    /// The figures, by name (for tools).
    pub figures: BTreeMap<String, f64>,
    /// The matrix parameter named, `name=value`.
    #[serde(default)]
    pub parameter: Option<String>,
    /// Seconds into the measured window when the signal first moved, when known.
    pub onset_s: Option<f64>,
}

/// Mean latency of a step split by where it was spent, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySplit {
    /// The step's load.
    pub load: f64,
    /// Mean latency from the intended send time.
    pub latency_ms: f64,
    /// Waiting in loadlab before the request was written (for a connection, or behind the
    /// schedule): latency minus service time, less the connect share.
    pub queued_ms: f64,
    /// Connect time, spread over the requests (new connections × their mean connect time).
    pub connect_ms: f64,
    /// From the write of the request to the last byte of the response: the server's part.
    pub service_ms: f64,
}

impl LatencySplit {
    /// The split of one result (`None` without a latency).
    pub fn of(load: f64, r: &RunResult) -> Option<LatencySplit> {
        let latency = r.latency_ms.mean?;
        let service = r.service_time_ms.mean.unwrap_or(0.0);
        let connect = if r.latency_ms.count > 0 {
            r.connect_time_ms.mean.unwrap_or(0.0) * r.connect_time_ms.count as f64
                / r.latency_ms.count as f64
        } else {
            0.0
        };
        let connect = connect.min((latency - service).max(0.0));
        Some(LatencySplit {
            load,
            latency_ms: latency,
            queued_ms: (latency - service - connect).max(0.0),
            connect_ms: connect,
            service_ms: service,
        })
    }
}

/// The diagnosis of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// [`DIAGNOSIS_VERSION`].
    pub version: u32,
    /// The bottlenecks found, in the order they appeared (at least one: `unknown` when no
    /// rule had its evidence).
    pub findings: Vec<Finding>,
    /// Where the latency went: the scenario's first step, then this one.
    pub latency_split: Vec<LatencySplit>,
    /// One sentence on which part of the latency grew from the first step to this one.
    pub latency_note: Option<String>,
}

impl Diagnosis {
    /// The first finding's label (for tables).
    pub fn headline(&self) -> &'static str {
        self.findings
            .first()
            .map_or("unknown", |f| f.bottleneck.label())
    }
}

/// What a step is judged against besides itself.
pub struct Context<'a> {
    /// The configuration's matrix parameters.
    pub params: &'a [(String, String)],
    /// The lowest service-time median of the sustained steps of this scenario and
    /// configuration so far, ms.
    pub service_floor_ms: Option<f64>,
    /// The scenario's first step in this configuration.
    pub first: Option<&'a StepRecord>,
    /// `net.core.somaxconn`.
    pub somaxconn: Option<u64>,
    /// Ephemeral ports in the local range.
    pub ports: Option<u64>,
}

fn fig(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

fn num(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Per-interval CPU use of the targets (CPUs), with the interval's end (probe seconds).
fn cpu_series(p: &ProbeReport) -> Vec<(f64, f64)> {
    let with: Vec<(&ProbeSecond, f64)> = p
        .samples
        .iter()
        .filter_map(|s| {
            let pr = s.process.as_ref()?;
            Some((s, pr.cpu_user_s + pr.cpu_system_s))
        })
        .collect();
    with.windows(2)
        .filter_map(|w| {
            let dt = w[1].0.t_s - w[0].0.t_s;
            (dt > 0.05).then(|| (w[1].0.t_s, ((w[1].1 - w[0].1) / dt).max(0.0)))
        })
        .collect()
}

/// When the kernel's overflow or drop counters first grew (probe seconds): the start of the
/// first interval in which they did (the earliest the overflow can have happened).
fn overflow_onset(p: &ProbeReport) -> Option<f64> {
    p.samples.windows(2).find_map(|w| {
        let grew = w[1].kernel.listen_overflows > w[0].kernel.listen_overflows
            || w[1].kernel.listen_drops > w[0].kernel.listen_drops;
        grew.then_some(w[0].t_s)
    })
}

/// When latency rose within the measured window: the first second whose p99 exceeded twice
/// the baseline (the p99 of the scenario's first step, else this step's first second) and
/// the baseline plus 1 ms, in window seconds.
fn latency_onset(r: &RunResult, baseline_p99_ms: Option<f64>) -> Option<f64> {
    let first = baseline_p99_ms.or_else(|| r.per_second.iter().find_map(|s| s.latency_p99_ms))?;
    let bound = (2.0 * first).max(first + 1.0);
    r.per_second
        .iter()
        .find(|s| s.latency_p99_ms.is_some_and(|p| p > bound))
        .map(|s| s.second as f64)
}

/// The first second of the measured window with a failed request.
fn first_error_second(r: &RunResult) -> Option<f64> {
    r.per_second
        .iter()
        .find(|s| s.errors > 0)
        .map(|s| s.second as f64)
}

/// The resident memory of the targets through the step: (probe seconds, bytes).
fn rss_series(p: &ProbeReport) -> Vec<(f64, f64)> {
    p.samples
        .iter()
        .filter_map(|s| Some((s.t_s, s.process.as_ref()?.rss_bytes as f64)))
        .collect()
}

/// Follows the steps of an experiment to diagnose each one against the earlier steps of its
/// configuration and scenario (the first step, the lowest service time).
#[derive(Default)]
pub struct Tracker {
    firsts: BTreeMap<(String, String), StepRecord>,
    floors: BTreeMap<(String, String), f64>,
    /// `net.core.somaxconn`.
    pub somaxconn: Option<u64>,
    /// Ephemeral ports in the local range.
    pub ports: Option<u64>,
}

impl Tracker {
    /// A tracker with this machine's `somaxconn` and port range.
    pub fn for_this_machine() -> Tracker {
        Tracker {
            somaxconn: loadlab_system::procfs::sysctl("net.core.somaxconn")
                .and_then(|v| v.trim().parse().ok()),
            ports: loadlab_system::procfs::ephemeral_port_range()
                .map(|(a, b)| u64::from(b) - u64::from(a) + 1),
            ..Tracker::default()
        }
    }

    /// Records a step (in the order they ran) and diagnoses it if it was not sustained.
    pub fn step(&mut self, rec: &StepRecord) -> Option<Diagnosis> {
        let key = (rec.config.clone(), rec.scenario.clone());
        // The floor comes from steps the server sustained: a saturated step's service time
        // includes the time queued inside the server.
        if rec.verdict.sustained && rec.result.successful > 0 {
            if let Some(p50) = rec.result.service_time_ms.p50 {
                let floor = self.floors.entry(key.clone()).or_insert(p50);
                *floor = floor.min(p50);
            }
        }
        self.firsts
            .entry(key.clone())
            .or_insert_with(|| rec.clone());
        let ctx = Context {
            params: &rec.params,
            service_floor_ms: self.floors.get(&key).copied(),
            first: self.firsts.get(&key),
            somaxconn: self.somaxconn,
            ports: self.ports,
        };
        diagnose(rec, &ctx)
    }
}

/// Diagnoses a step that was not sustained (`None` for a sustained one).
pub fn diagnose(step: &StepRecord, ctx: &Context<'_>) -> Option<Diagnosis> {
    if step.verdict.sustained {
        return None;
    }
    let r = &step.result;
    // Probe seconds run from the step's start, warm-up included; window seconds after it.
    let warmup = r.warmup_s;
    let baseline = ctx
        .first
        .filter(|f| f.index != step.index || f.load != step.load)
        .and_then(|f| f.result.latency_ms.p99);
    let mut findings: Vec<Finding> = Vec::new();
    let mut looked_at: Vec<String> = Vec::new();
    let limits = &step.verdict.limits;

    // A lag the verdict found too small to explain the failure is not a finding: the
    // verdict says so (`generator_excused`).
    if limits.contains(&Limit::GeneratorLimited) {
        findings.push(Finding {
            bottleneck: Bottleneck::Generator,
            evidence: format!(
                "loadlab fell behind its own schedule: {}",
                r.generator_notes.join("; ")
            ),
            advice: "the step says nothing about the server: give loadlab more cores (--threads, \
                     load.cpus apart from the target's) or more machines (--agents)"
                .into(),
            figures: fig(&[("schedule_lag_p99_ms", r.schedule_lag_ms.p99)]),
            parameter: None,
            onset_s: None,
        });
    }
    if let Some(lost) = r.agents.iter().find(|a| a.lost.is_some()) {
        findings.push(Finding {
            bottleneck: Bottleneck::AgentLost,
            evidence: format!(
                "agent {} was lost during the step ({}): its share is missing",
                lost.name,
                lost.lost.as_deref().unwrap_or("")
            ),
            advice: "the step says nothing about the server: run it again with every agent".into(),
            figures: BTreeMap::new(),
            parameter: None,
            onset_s: None,
        });
    }
    if let Some(c) = &step.crashed {
        let tail: Vec<&str> = c.log_tail.lines().rev().take(3).collect();
        findings.push(Finding {
            bottleneck: Bottleneck::Crash,
            evidence: format!(
                "target {} exited during the step ({}){}",
                c.target,
                c.status,
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; its last log lines: {}",
                        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                    )
                }
            ),
            advice: "see the target's log in logs/".into(),
            figures: c
                .code
                .map_or_else(BTreeMap::new, |code| fig(&[("exit_code", f64::from(code))])),
            parameter: None,
            onset_s: None,
        });
    }

    let probes = step.probes.as_ref();
    // CPU used, and CPU wanted but waited for (runnable behind other processes or its own
    // threads), both in CPUs, against the CPUs the target may run on.
    let cpu = probes.and_then(|p| {
        let l = p.limits.as_ref()?;
        Some((
            p.delta.cpu_percent / 100.0,
            p.delta.cpu_wait_percent / 100.0,
            l.cpus,
            l.cpus_from.clone(),
        ))
    });
    match &cpu {
        Some((used, wait, cpus, from)) => looked_at.push(format!(
            "target CPU {} of its {} CPU{} ({from}), {} waiting for it",
            pct(used / cpus),
            num(*cpus),
            if *cpus == 1.0 { "" } else { "s" },
            pct(wait / cpus)
        )),
        None => looked_at.push("target CPU not probed".into()),
    }
    // What the target wanted of its CPUs: what it used plus what it waited for, at most all.
    let demand = cpu
        .as_ref()
        .map(|(used, wait, cpus, _)| ((used + wait) / cpus).min(1.0));
    let load_words = match step.model {
        Model::Open => format!("{} req/s", num(step.load)),
        Model::Closed => format!("{} in flight", num(step.load)),
    };

    // CPU-bound: the target used its CPUs, or wanted them and waited behind other
    // processes (a CPU it shares is still the limit, but not one its handlers alone fill).
    if let (Some((used, wait, cpus, from)), Some(p), Some(demand)) = (&cpu, probes, demand) {
        let util = used / cpus;
        let waited = wait / cpus;
        let starved = util < CPU_BOUND && waited >= STARVED;
        if util >= CPU_BOUND || (starved && demand >= CPU_BOUND) {
            let onset = cpu_series(p)
                .into_iter()
                .find(|(_, c)| c / cpus >= CPU_BOUND)
                .map(|(t, _)| (t - warmup).max(0.0));
            let cpu_words = format!(
                "{} CPU{} ({from})",
                num(*cpus),
                if *cpus == 1.0 { "" } else { "s" }
            );
            findings.push(Finding {
                bottleneck: Bottleneck::CpuBound,
                evidence: if starved {
                    format!(
                        "the target used {} of its {cpu_words} and waited {} of the time for \
                         them, runnable behind other processes, at {load_words}: CPU-bound on \
                         CPUs it shares",
                        pct(util),
                        pct(waited)
                    )
                } else {
                    format!(
                        "the target used {} of its {cpu_words} at {load_words}: CPU-bound",
                        pct(util)
                    )
                },
                advice: if starved {
                    "keep other processes off the target's CPUs (pin loadlab and the rest \
                     elsewhere), or give it more cores"
                } else {
                    "more cores for the target, or cheaper handlers"
                }
                .into(),
                figures: fig(&[
                    ("cpu_used", *used),
                    ("cpu_wait", *wait),
                    ("cpus", *cpus),
                    ("utilization", util),
                    ("demand", demand),
                ]),
                parameter: None,
                onset_s: onset,
            });
        }
    }
    // Low CPU means low demand: a target starved of its CPUs is not idle.
    let cpu_low = demand.is_some_and(|d| d < CPU_LOW);

    // Concurrency-bound: fewer in service than offered, CPU low.
    if let (true, Some(floor)) = (cpu_low, ctx.service_floor_ms.filter(|f| *f > 0.0)) {
        let in_service = r.achieved_rps * floor / 1000.0;
        let offered_in_service = match step.model {
            Model::Open => step.load * floor / 1000.0,
            Model::Closed => step.load,
        };
        let held_back = match step.model {
            Model::Open => r.achieved_rps < 0.95 * step.load,
            // Closed loop: the server had fewer in service than loadlab kept in flight.
            Model::Closed => in_service < 0.8 * step.load,
        };
        looked_at.push(format!(
            "≈{} requests in service (achieved {} req/s × service-time floor {} ms)",
            num(in_service),
            num(r.achieved_rps),
            num(floor)
        ));
        let latency_or_throughput = limits
            .iter()
            .any(|l| matches!(l, Limit::Latency | Limit::Throughput | Limit::Errors));
        if held_back
            && latency_or_throughput
            && in_service >= 1.0
            && offered_in_service > in_service * 1.1
        {
            // A backlog bounds a queue, not the requests in service: never named here.
            let candidates: Vec<(f64, &String, &String)> = ctx
                .params
                .iter()
                .filter(|(k, _)| !k.contains("backlog"))
                .filter_map(|(k, v)| {
                    let n: f64 = v.parse().ok()?;
                    let off = (n - in_service).abs() / n;
                    (n > 0.0 && off <= PARAM_MATCH).then_some((off, k, v))
                })
                .collect();
            let best = candidates.iter().map(|c| c.0).reduce(f64::min);
            // Parameters equally close cannot be told apart: all are named.
            let tied: Vec<(String, String)> = candidates
                .iter()
                .filter(|c| Some(c.0) == best)
                .map(|(_, k, v)| ((*k).clone(), (*v).clone()))
                .collect();
            let parameter = (!tied.is_empty()).then(|| {
                (
                    tied.iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join("` or the `"),
                    tied[0].1.clone(),
                )
            });
            let (u, _, c, _) = cpu.as_ref().expect("cpu_low implies a CPU figure");
            let evidence = match &parameter {
                Some((k, v)) => format!(
                    "≈{} requests in service at once (achieved {} req/s × service-time floor {} ms) with {} CPU: the {v} `{k}` are the limit",
                    num(in_service),
                    num(r.achieved_rps),
                    num(floor),
                    pct(u / c)
                ),
                None => format!(
                    "≈{} requests in service at once (achieved {} req/s × service-time floor {} ms) with {} CPU: a pool of about that size (workers, threads, connections) is the limit",
                    num(in_service),
                    num(r.achieved_rps),
                    num(floor),
                    pct(u / c)
                ),
            };
            findings.push(Finding {
                bottleneck: Bottleneck::ConcurrencyBound,
                evidence,
                advice: "raise that pool, or make each request hold its slot for less time (async \
                         handlers instead of blocking ones)"
                    .into(),
                figures: fig(&[
                    ("in_service", in_service),
                    ("achieved_rps", r.achieved_rps),
                    ("service_floor_ms", floor),
                    ("utilization", u / c),
                ]),
                parameter: (!tied.is_empty()).then(|| {
                    tied.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
                onset_s: latency_onset(r, baseline),
            });
        }
    }

    // Accept queue.
    if let Some(p) = probes {
        let d = &p.delta;
        looked_at.push(format!(
            "{} listen-queue overflows, {} drops",
            d.listen_overflows, d.listen_drops
        ));
        if d.listen_overflows + d.listen_drops > 0 {
            let onset = overflow_onset(p).map(|t| (t - warmup).max(0.0));
            let lat = latency_onset(r, baseline);
            let before = match (onset, lat) {
                (Some(o), Some(l)) => Some(o <= l + 1.0),
                (Some(_), None) => Some(true),
                _ => None,
            };
            let requests = (r.requests + r.errors_total).max(1) as f64;
            let many = (d.listen_overflows + d.listen_drops) as f64 >= 0.01 * requests;
            if before != Some(false) || many {
                let backlog = ctx
                    .params
                    .iter()
                    .find(|(k, _)| k.contains("backlog"))
                    .map(|(k, v)| format!("the plan set {k}={v}"))
                    .unwrap_or_else(|| "the plan set no backlog".into());
                findings.push(Finding {
                    bottleneck: Bottleneck::AcceptQueue,
                    evidence: format!(
                        "the listen queue overflowed {} times ({} drops) {}; {backlog}, somaxconn is {}",
                        d.listen_overflows,
                        d.listen_drops,
                        match before {
                            Some(true) => "before latency rose",
                            Some(false) => "after latency had risen",
                            None => "during the step",
                        },
                        ctx.somaxconn.map_or("unknown".into(), |s| s.to_string())
                    ),
                    advice: "raise the backlog (and net.core.somaxconn, which caps it), or accept \
                             faster (more acceptor threads)"
                        .into(),
                    figures: fig(&[
                        ("listen_overflows", d.listen_overflows as f64),
                        ("listen_drops", d.listen_drops as f64),
                    ]),
                    parameter: None,
                    onset_s: onset,
                });
            }
        }
    }

    // Timeouts with the CPU low.
    let timeouts = r
        .errors
        .sum_of(&[ErrorClass::RequestTimeout, ErrorClass::ConnectTimeout]);
    looked_at.push(format!("{timeouts} timeouts"));
    if timeouts > 0 && cpu_low {
        let (u, _, c, _) = cpu.as_ref().expect("cpu_low implies a CPU figure");
        findings.push(Finding {
            bottleneck: Bottleneck::Timeouts,
            evidence: format!(
                "{timeouts} requests timed out (after {} ms) while the target used {} of its CPUs: \
                 requests waited for a pool or a downstream, not for the CPU",
                num(r.timeout_ms),
                pct(u / c)
            ),
            advice: "find the pool the requests wait for (threads, actors, connections to a \
                     backend) and size it to rate × service time"
                .into(),
            figures: fig(&[("timeouts", timeouts as f64), ("utilization", u / c)]),
            parameter: None,
            onset_s: first_error_second(r),
        });
    }

    // Client ports and descriptors.
    let port_errors = r.errors.sum_of(&[ErrorClass::LocalPortExhaustion]);
    let tw = probes.map_or(0, |p| p.delta.time_wait_max);
    // TIME_WAIT counts every socket of the namespace: it holds loadlab's ports only when
    // loadlab closed the connections (a server that closes keeps the TIME_WAIT itself).
    let client_closed = r.close_by == Some(CloseBy::Client);
    if port_errors > 0 || (client_closed && ctx.ports.is_some_and(|n| tw as f64 >= 0.9 * n as f64))
    {
        findings.push(Finding {
            bottleneck: Bottleneck::ClientPorts,
            evidence: format!(
                "loadlab found no free local port {port_errors} times, with {tw} sockets in TIME_WAIT \
                 for {} ephemeral ports{}",
                ctx.ports.map_or("?".into(), |n| n.to_string()),
                if client_closed {
                    "; loadlab closed each connection itself (close_by = client), so each held its port for 60 s"
                } else {
                    ""
                }
            ),
            advice: "the client ran out, not the server: keep-alive, more source addresses \
                     (--source-addrs), or net.ipv4.tcp_tw_reuse=1"
                .into(),
            figures: fig(&[("port_errors", port_errors as f64), ("time_wait", tw as f64)]),
            parameter: None,
            onset_s: first_error_second(r),
        });
    }
    let fd_errors = r.errors.sum_of(&[ErrorClass::FdExhaustion]);
    let target_fds = probes.map(|p| {
        (
            p.delta.fds_max,
            p.limits.as_ref().and_then(|l| l.nofile_soft),
        )
    });
    let target_full =
        target_fds.is_some_and(|(n, lim)| lim.is_some_and(|l| n as f64 >= 0.9 * l as f64));
    if fd_errors > 0 || target_full {
        let (n, lim) = target_fds.unwrap_or((0, None));
        findings.push(Finding {
            bottleneck: Bottleneck::Descriptors,
            evidence: format!(
                "{fd_errors} requests failed for want of a file descriptor in loadlab; the target held \
                 up to {n} descriptors against its nofile limit of {}",
                lim.map_or("?".into(), |l| l.to_string())
            ),
            advice: "raise nofile (ulimit -n, LimitNOFILE=) on the side that ran out".into(),
            figures: fig(&[("client_fd_errors", fd_errors as f64), ("target_fds", n as f64)]),
            parameter: None,
            onset_s: None,
        });
    }

    // Memory growth.
    if let Some(p) = probes {
        let rss = rss_series(p);
        if let (Some(&(t0, a)), Some(&(t1, b))) = (rss.first(), rss.last()) {
            let grew = b - a;
            let rising = rss.windows(2).filter(|w| w[1].1 >= w[0].1).count();
            let steady = rss.len() >= 3 && rising * 5 >= (rss.len() - 1) * 4;
            looked_at.push(format!(
                "RSS {} → {} MB",
                num(a / 1048576.0),
                num(b / 1048576.0)
            ));
            if grew >= MEMORY_GROWTH_MIN && grew >= 0.2 * a && steady && t1 > t0 {
                let per_s = grew / (t1 - t0);
                findings.push(Finding {
                    bottleneck: Bottleneck::MemoryGrowth,
                    evidence: format!(
                        "the target's memory grew steadily from {} to {} MB (+{} MB/s) through the step: \
                         work is queueing inside it (an unbounded queue or mailbox)",
                        num(a / 1048576.0),
                        num(b / 1048576.0),
                        num(per_s / 1048576.0)
                    ),
                    advice: "bound the queue (back-pressure), or serve faster than work arrives".into(),
                    figures: fig(&[("rss_start_bytes", a), ("rss_end_bytes", b), ("bytes_per_s", per_s)]),
                    parameter: None,
                    onset_s: None,
                });
            }
        }
    }

    // The server shed work: 5xx answers are most of the failures.
    let server_errors = r.errors.sum_of(&[ErrorClass::Http5xx]);
    looked_at.push(format!("{server_errors} 5xx answers"));
    if server_errors > 0 && server_errors * 2 >= r.errors_total {
        let codes: Vec<String> = r
            .status_codes
            .iter()
            .filter(|(c, _)| c.starts_with('5'))
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        findings.push(Finding {
            bottleneck: Bottleneck::Refused,
            evidence: format!(
                "the server answered {server_errors} of {} requests with an error status ({}){}: it refused \
                 work it could not take (a full queue, mailbox or pool)",
                r.requests,
                codes.join(", "),
                cpu.as_ref().map_or(String::new(), |(u, _, c, _)| format!(" at {} CPU", pct(u / c)))
            ),
            advice: "see what the status means in the server's log, and raise the capacity behind it"
                .into(),
            figures: fig(&[("http_5xx", server_errors as f64), ("requests", r.requests as f64)]),
            parameter: None,
            onset_s: first_error_second(r),
        });
    }

    if findings.is_empty() {
        findings.push(Finding {
            bottleneck: Bottleneck::Unknown,
            evidence: format!(
                "no rule had its evidence; looked at: {}",
                looked_at.join(", ")
            ),
            advice: "look at the per-second series and the target's own metrics".into(),
            figures: BTreeMap::new(),
            parameter: None,
            onset_s: None,
        });
    }
    // Not the server's doing first, then in the order the signals moved.
    findings.sort_by(|a, b| {
        let rank = |f: &Finding| f.bottleneck <= Bottleneck::Crash;
        rank(b).cmp(&rank(a)).then(match (a.onset_s, b.onset_s) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        })
    });

    let this = LatencySplit::of(step.load, r);
    let first = ctx
        .first
        .filter(|f| f.index != step.index || f.config != step.config)
        .and_then(|f| LatencySplit::of(f.load, &f.result));
    let latency_note = match (&first, &this) {
        (Some(a), Some(b)) if b.latency_ms > a.latency_ms => {
            let grew = b.latency_ms - a.latency_ms;
            let service = b.service_ms - a.service_ms;
            let queued = b.queued_ms - a.queued_ms;
            let connect = b.connect_ms - a.connect_ms;
            let part = |x: f64| pct((x / grew).clamp(0.0, 1.0));
            Some(format!(
                "from {} to {}, mean latency grew {} ms: {} in service time (the server), {} queued in \
                 loadlab before sending (waiting for a connection or the schedule), {} connecting",
                num(a.load),
                num(b.load),
                num(grew),
                part(service),
                part(queued),
                part(connect)
            ))
        }
        _ => None,
    };
    Some(Diagnosis {
        version: DIAGNOSIS_VERSION,
        findings,
        latency_split: first.into_iter().chain(this).collect(),
        latency_note,
    })
}
