//! Why a step was not sustained.
//!
//! # Layout
//! - [`evidence`]: one [`Evidence`] value per step, computed once from the step's result,
//!   its probes (the target's process tree, its cgroup, the kernel) and its verdict: the
//!   CPU against the CPUs the target may use, the requests in service by Little's law, the
//!   signs that the server was saturated, when latency rose and errors began.
//! - [`rules`]: the table of rules, [`rules::RULES`], one file per bottleneck. Each reads
//!   the evidence and fires with a [`Finding`] (one sentence with its figures, what to
//!   try), rules its bottleneck out with what it saw, or says which evidence it lacked.
//!   The README's and the report's lists of rules are generated from the table
//!   ([`rules::markdown_table`]).
//! - this module: the findings and the [`Diagnosis`], and the [`Tracker`] that follows the
//!   steps of an experiment so that each is judged against the earlier steps of its
//!   configuration and scenario (the first step's latency, the lowest service time).
//!
//! A rule without its evidence never fires. When none fires, the diagnosis is `unknown`,
//! and says what ruled out each bottleneck and what was not probed. Findings are ordered:
//! what is not the server's doing first (loadlab fell behind, an agent was lost, the
//! target crashed), then by when their signal first moved within the step, and last what a
//! VM's host took (`host_steal`), which says how far the server's figures can be trusted.

pub mod bottleneck;
mod evidence;
pub mod rules;
mod waits;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::verdict::Limit;
pub use bottleneck::Bottleneck;
pub use evidence::{Cpu, Evidence, Saturation, StepFacts, Throttling, THROTTLED_SHARE};
use rules::Check;

/// Version of the diagnosis format.
pub const DIAGNOSIS_VERSION: u32 = 1;
/// A target using at least this fraction of its CPUs is CPU-bound.
pub const CPU_BOUND: f64 = 0.9;
/// Below this fraction of its CPUs the target's CPU demand (used, plus waited for behind
/// other processes: [`evidence::Cpu::demand`]) is "low".
pub const CPU_LOW: f64 = 0.5;
/// CPUs idle at least this share of the time requests queued had room for them (over the
/// time the target's threads waited to run, [`Cpu::idle`], or the time its timed-out
/// requests waited, [`Evidence::timeouts_idle`]): the scheduler leaves no CPU idle while a
/// thread allowed on it is runnable, so those requests waited for something else (a pool,
/// a lock, a downstream), whatever share of its CPUs the target used.
pub const CPU_ROOM: f64 = 0.25;
/// A target that waited at least this fraction of its CPUs' time for them, runnable, was
/// starved by other processes when it used less than [`CPU_BOUND`] itself.
pub const STARVED: f64 = 0.1;
/// A VM's host that took at least this share of the time the machine's CPUs wanted to run
/// (steal) is named beside, or instead of, the server's limit.
pub const HOST_STEAL: f64 = 0.2;
/// A matrix parameter is named when within this fraction of the estimated concurrency.
pub const PARAM_MATCH: f64 = 0.2;
/// Service times are skewed when the mean of the step that set the service-time floor is at
/// least this many times its median: the requests in service are then counted over both.
pub const SKEWED: f64 = 1.5;

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

impl Finding {
    /// A finding without a parameter or onset.
    pub fn new(
        bottleneck: Bottleneck,
        evidence: String,
        advice: &str,
        figures: &[(&str, f64)],
    ) -> Finding {
        Finding {
            bottleneck,
            evidence,
            advice: advice.to_string(),
            figures: figures
                .iter()
                .map(|(k, v)| ((*k).to_string(), *v))
                .collect(),
            parameter: None,
            onset_s: None,
        }
    }

    /// The same, with the second its signal first moved.
    #[must_use]
    pub fn at(mut self, onset_s: Option<f64>) -> Finding {
        self.onset_s = onset_s;
        self
    }
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
    pub fn of(load: f64, r: &loadlab_engine::RunResult) -> Option<LatencySplit> {
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
    /// What each rule that did not fire saw, `bottleneck: why not` (absent in older
    /// bundles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ruled_out: Vec<String>,
}

impl Diagnosis {
    /// The first finding's label (for tables).
    pub fn headline(&self) -> &'static str {
        self.findings
            .first()
            .map_or("unknown", |f| f.bottleneck.label())
    }
}

pub(crate) use loadlab_engine::format::{num, pct_whole as pct};

/// What the first step of a configuration and scenario left for the later ones.
#[derive(Clone, Debug)]
struct FirstStep {
    index: u32,
    config: String,
    load: f64,
    latency_p99_ms: Option<f64>,
    split: Option<LatencySplit>,
    latency: Option<FirstLatency>,
}

/// What a step is judged against besides itself.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The lowest service-time median of the sustained steps of this scenario and
    /// configuration so far, ms.
    pub service_floor_ms: Option<f64>,
    /// The service-time mean of the step that set that floor, ms: above the median where
    /// service times are skewed (a few slow requests), and Little's law counts with means.
    pub service_floor_mean_ms: Option<f64>,
    /// A mix of named requests: each name's floor, the lowest latency median of the name
    /// in the sustained steps so far, ms (a sustained step's latency is its service time).
    pub name_floors_ms: BTreeMap<String, f64>,
    /// The p99 latency of the scenario's first step in this configuration (when it is not
    /// this step), ms.
    pub baseline_p99_ms: Option<f64>,
    /// The latency split of that first step.
    pub first_split: Option<LatencySplit>,
    /// `net.core.somaxconn`.
    pub somaxconn: Option<u64>,
    /// Ephemeral ports in the local range.
    pub ports: Option<u64>,
    /// The plan's latency bounds, (percentile, ms), in percentile order.
    pub latency_bounds: Vec<(f64, f64)>,
    /// The latency of the scenario's first step in this configuration (this one's when it
    /// is the first): its lowest load.
    pub first_latency: Option<FirstLatency>,
}

/// The latency at a scenario's first (lowest) load, against which a bound is read.
#[derive(Clone, Debug, PartialEq)]
pub struct FirstLatency {
    /// The step's load.
    pub load: f64,
    /// Its fastest answer, ms.
    pub min_ms: f64,
    /// Its median, ms.
    pub p50_ms: Option<f64>,
    /// Its latency at each bound's percentile: (percentile, ms).
    pub at_bounds: Vec<(f64, f64)>,
    /// It kept pace with the arrivals (not limited by throughput or errors): its latency
    /// is the server's at rest, not a queue's.
    pub kept_pace: bool,
}

/// Follows the steps of an experiment to diagnose each one against the earlier steps of its
/// configuration and scenario (the first step, the lowest service time).
#[derive(Default)]
pub struct Tracker {
    firsts: BTreeMap<(String, String), FirstStep>,
    /// Per configuration and scenario, the service-time floor (median) and the mean of the
    /// step that set it.
    floors: BTreeMap<(String, String), (f64, Option<f64>)>,
    /// Per configuration and scenario, each request name's floor.
    name_floors: BTreeMap<(String, String), BTreeMap<String, f64>>,
    /// `net.core.somaxconn`.
    pub somaxconn: Option<u64>,
    /// Ephemeral ports in the local range.
    pub ports: Option<u64>,
    /// The plan's latency bounds, (percentile, ms).
    pub latency_bounds: Vec<(f64, f64)>,
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

    /// The same, reading a step's latency against `bounds` (percentile, ms): the plan's.
    #[must_use]
    pub fn with_latency_bounds(mut self, bounds: Vec<(f64, f64)>) -> Tracker {
        self.latency_bounds = bounds;
        self
    }

    /// Records a step (in the order they ran) and diagnoses it if it was not sustained.
    pub fn step<'a>(&mut self, step: impl Into<StepFacts<'a>>) -> Option<Diagnosis> {
        let step = step.into();
        let key = (step.config.to_string(), step.scenario.to_string());
        // The floor comes from steps the server sustained: a saturated step's service time
        // includes the time queued inside the server.
        if step.verdict.sustained && step.result.successful > 0 {
            let st = &step.result.service_time_ms;
            if let Some(p50) = st.p50 {
                let floor = self.floors.entry(key.clone()).or_insert((p50, st.mean));
                if p50 < floor.0 {
                    *floor = (p50, st.mean);
                }
            }
            let names = self.name_floors.entry(key.clone()).or_default();
            for n in &step.result.by_name {
                if let (Some(p50), true) = (n.latency_ms.p50, n.successful > 0) {
                    let floor = names.entry(n.name.clone()).or_insert(p50);
                    *floor = floor.min(p50);
                }
            }
        }
        let first = self.firsts.entry(key.clone()).or_insert_with(|| FirstStep {
            index: step.index,
            config: step.config.to_string(),
            load: step.load,
            latency_p99_ms: step.result.latency_ms.p99,
            split: LatencySplit::of(step.load, step.result),
            latency: first_latency(&step, &self.latency_bounds),
        });
        let is_first = first.index == step.index && first.load == step.load;
        let ctx = Context {
            service_floor_ms: self.floors.get(&key).map(|f| f.0),
            service_floor_mean_ms: self.floors.get(&key).and_then(|f| f.1),
            name_floors_ms: self.name_floors.get(&key).cloned().unwrap_or_default(),
            baseline_p99_ms: first.latency_p99_ms.filter(|_| !is_first),
            first_split: first
                .split
                .clone()
                .filter(|_| first.index != step.index || first.config != step.config),
            somaxconn: self.somaxconn,
            ports: self.ports,
            latency_bounds: self.latency_bounds.clone(),
            first_latency: first
                .latency
                .clone()
                .filter(|_| first.config == step.config),
        };
        diagnose(&step, &ctx)
    }
}

/// The latency of a scenario's first step, read at each of `bounds`' percentiles.
fn first_latency(step: &StepFacts<'_>, bounds: &[(f64, f64)]) -> Option<FirstLatency> {
    let r = step.result;
    let figures = crate::gate::Figures::of_run(r);
    Some(FirstLatency {
        load: step.load,
        min_ms: r.latency_ms.min?,
        p50_ms: r.latency_ms.p50,
        at_bounds: bounds
            .iter()
            .filter_map(|&(q, _)| Some((q, crate::verdict::percentile_of(&figures, q)?)))
            .collect(),
        kept_pace: !step
            .verdict
            .limits
            .iter()
            .any(|l| matches!(l, Limit::Throughput | Limit::Errors)),
    })
}

/// A limit reached (descriptors, the cgroup's processes or memory) caps what the server
/// has in service: the pool, timeouts or refusals that followed are said to be its
/// consequence, and their advice to raise the limit first, not the pool.
fn caused_by_limit(findings: &mut [Finding]) {
    let Some(limit) = findings
        .iter()
        .find(|f| f.bottleneck.tier() == 1 && f.bottleneck != Bottleneck::CpuThrottled)
        .map(|f| f.bottleneck)
    else {
        return;
    };
    for f in findings.iter_mut().filter(|f| {
        matches!(
            f.bottleneck,
            Bottleneck::ConcurrencyBound | Bottleneck::Timeouts | Bottleneck::Refused
        )
    }) {
        let words = match limit {
            Bottleneck::Descriptors => "descriptor limit (nofile)",
            Bottleneck::PidsLimit => "process limit (pids.max)",
            _ => "memory limit (memory.max)",
        };
        f.evidence.push_str(&format!(
            "; likely a consequence of the {words} reached above, which caps what the server can take in"
        ));
        f.advice = format!("raise the {words} first; then {}", f.advice);
    }
}

/// Diagnoses a step that was not sustained (`None` for a sustained one).
pub fn diagnose(step: &StepFacts<'_>, ctx: &Context) -> Option<Diagnosis> {
    if step.verdict.sustained {
        return None;
    }
    let e = Evidence::of(step, ctx);
    let mut findings = Vec::new();
    let mut ruled_out = Vec::new();
    let mut unprobed = Vec::new();
    for rule in rules::RULES {
        match (rule.check)(&e) {
            Check::Fired(f) => findings.push(f),
            Check::RuledOut(why) => ruled_out.push(format!("{}: {why}", rule.bottleneck.label())),
            Check::NoEvidence(what) => {
                if !unprobed.contains(&what) {
                    unprobed.push(what)
                }
            }
            Check::NotApplicable => {}
        }
    }
    if findings.is_empty() {
        let mut parts = Vec::new();
        if !ruled_out.is_empty() {
            parts.push(format!("ruled out: {}", ruled_out.join("; ")));
        }
        if !unprobed.is_empty() {
            parts.push(format!("Not seen: {}", unprobed.join("; ")));
        }
        findings.push(Finding::new(
            Bottleneck::Unknown,
            format!("no rule had its evidence; {}", parts.join(". ")),
            "look at the per-second series and the target's own metrics; probe the target \
             (--probe-pid, --probe-cgroup, --probe-container, or `loadlab probe` on its host) \
             if it was not probed",
            &[],
        ));
    }
    // Not the server's doing first, then the limits reached, then in the order the signals
    // moved ([`Bottleneck::tier`]).
    findings.sort_by(|a, b| {
        a.bottleneck
            .tier()
            .cmp(&b.bottleneck.tier())
            .then(match (a.onset_s, b.onset_s) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
    });
    caused_by_limit(&mut findings);

    let this = LatencySplit::of(step.load, step.result);
    // A log replayed at its times: its steps are multiples of its speed.
    let replayed = step
        .result
        .traffic
        .as_ref()
        .is_some_and(|t| t.replay.is_some());
    let load = |v: f64| {
        if replayed {
            format!("×{}", num(v))
        } else {
            num(v)
        }
    };
    let first = ctx.first_split.clone();
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
                load(a.load),
                load(b.load),
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
        ruled_out,
    })
}
