//! What `loadlab compare` reads: a result bundle (every scenario and configuration, their
//! steps and knees) or one `loadlab run --json` result (one step), each refused with the
//! path and the cause when it is neither.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use loadlab_engine::records::decode_histogram;
use loadlab_engine::result::SCHEMA_VERSION;
use loadlab_engine::{Model, RunResult};
use loadlab_lab::bundle::StepRecord;
use loadlab_lab::plan::Steps;
use loadlab_lab::verdict::{Limit, Verdict};

use super::bootstrap::{Counts, QuantileTable};
use super::{
    InputSummary, KneeRange, KneeSource, NameFigures, SeriesKey, SessionCounts, StepFigures,
    StreamFigures,
};
use crate::knee::{closed_unit, fixed_knee};

/// Why an input cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The path does not exist or cannot be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The input.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A directory that is not a result bundle (or a broken one).
    #[error("{} is not a loadlab result bundle: {why}", .path.display())]
    NotABundle {
        /// The input.
        path: PathBuf,
        /// What is missing or broken.
        why: String,
    },
    /// A file that is not a `loadlab run --json` result.
    #[error("{} is not a loadlab run result (`loadlab run --json`): {why}", .path.display())]
    NotARunResult {
        /// The input.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// What an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A `loadlab lab` result bundle.
    Bundle,
    /// A `loadlab run --json` result.
    RunResult,
}

/// One input, read and decoded.
pub struct Input {
    path: PathBuf,
    kind: InputKind,
    name: String,
    started_at: Option<String>,
    steps: usize,
    pub(super) series: Vec<Series>,
}

/// One scenario in one configuration.
pub(super) struct Series {
    pub scenario: String,
    pub config: String,
    pub model: Model,
    pub unit: &'static str,
    pub knee: Option<KneeRange>,
    /// Ascending load.
    pub levels: Vec<Level>,
}

/// Every run of a series at one load.
pub(super) struct Level {
    pub load: f64,
    /// Runs that say something about the server.
    pub runs: Vec<Run>,
    /// Runs left out (generator-limited, agent lost, interrupted).
    pub excluded: u32,
}

/// One run (a step of a bundle, or a run result).
pub(super) struct Run {
    p99_ms: Option<f64>,
    achieved_rps: f64,
    /// `None` for a run result (no verdict).
    pub sustained: Option<bool>,
    /// The verdict lists clauses missed by less than the count resolves.
    pub unresolved: bool,
    generator_limited: bool,
    /// The whole window's latency (for pooling repeats).
    latency: Counts,
    /// Each second's latency.
    seconds: Vec<Counts>,
    /// Successes of each full second of the measured window.
    window_successes: Vec<u64>,
    /// Each request name's part of the run, in the list's order (empty without names).
    names: Vec<NameRun>,
    /// A flow's sessions (`None` for independent requests).
    sessions: Option<SessionCounts>,
    /// Held streams' timing and flow-control stalls (`None` for other loads).
    streams: Option<StreamFigures>,
}

/// One request name's part of a run: its figures and its whole-window latency (the run
/// keeps no per-second data per name).
pub(super) struct NameRun {
    name: String,
    p99_ms: Option<f64>,
    achieved_rps: f64,
    /// The name held its own SLO (`None` for a run result: no verdict).
    sustained: Option<bool>,
    errors_total: u64,
    latency: Counts,
}

impl Input {
    /// Reads a bundle directory or a run result file.
    pub fn load(path: &Path) -> Result<Input, InputError> {
        let meta = std::fs::metadata(path).map_err(|source| InputError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.is_dir() {
            load_bundle(path)
        } else {
            load_run(path)
        }
    }

    /// The input's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A bundle or a run result.
    pub fn kind(&self) -> InputKind {
        self.kind
    }

    /// Scenario and configuration of every series, in order.
    pub fn keys(&self) -> Vec<SeriesKey> {
        self.series.iter().map(Series::key).collect()
    }

    pub(super) fn summary(&self, label: &str) -> InputSummary {
        InputSummary {
            label: label.to_string(),
            path: self.path.display().to_string(),
            kind: self.kind,
            name: self.name.clone(),
            started_at: self.started_at.clone(),
            steps: self.steps,
        }
    }
}

impl Series {
    pub fn key(&self) -> SeriesKey {
        SeriesKey {
            scenario: self.scenario.clone(),
            config: self.config.clone(),
        }
    }

    /// The request names of its runs, in the order they first appear (the list's order).
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for n in self
            .levels
            .iter()
            .flat_map(|l| &l.runs)
            .flat_map(|r| &r.names)
        {
            if !names.contains(&n.name.as_str()) {
                names.push(&n.name);
            }
        }
        names
    }
}

impl Level {
    /// True when every run that counts was sustained with no unresolved clause (and there
    /// is at least one).
    pub fn cleanly_sustained(&self) -> bool {
        !self.runs.is_empty()
            && self
                .runs
                .iter()
                .all(|r| r.sustained == Some(true) && !r.unresolved)
    }

    pub fn figures(&self) -> StepFigures {
        let p99_ms = match self.runs.as_slice() {
            [] => None,
            [one] => one.p99_ms,
            runs => Counts::merged(runs.iter().map(|r| &r.latency))
                .quantile(0.99)
                .map(|us| us as f64 / 1000.0),
        };
        let n = self.runs.len();
        StepFigures {
            runs: n as u32,
            excluded_runs: self.excluded,
            sustained: if self.runs.is_empty() || self.runs.iter().any(|r| r.sustained.is_none()) {
                None
            } else {
                Some(self.runs.iter().all(|r| r.sustained == Some(true)))
            },
            p99_ms,
            achieved_rps: (n > 0)
                .then(|| self.runs.iter().map(|r| r.achieved_rps).sum::<f64>() / n as f64),
            run_p99_ms: self.runs.iter().filter_map(|r| r.p99_ms).collect(),
            run_achieved_rps: self.runs.iter().map(|r| r.achieved_rps).collect(),
            responses: self
                .runs
                .iter()
                .flat_map(|r| &r.seconds)
                .map(Counts::total)
                .sum(),
            latency_seconds: self
                .runs
                .iter()
                .map(|r| r.seconds.iter().filter(|c| !c.is_empty()).count() as u32)
                .sum(),
            window_seconds: self
                .runs
                .iter()
                .map(|r| r.window_successes.len() as u32)
                .sum(),
            generator_limited: self.runs.iter().any(|r| r.generator_limited),
            sessions: self
                .runs
                .iter()
                .filter_map(|r| r.sessions)
                .reduce(|a, b| SessionCounts {
                    started: a.started + b.started,
                    completed: a.completed + b.completed,
                    aborted: a.aborted + b.aborted,
                    running_at_end: a.running_at_end + b.running_at_end,
                }),
            streams: StreamFigures::over(self.runs.iter().filter_map(|r| r.streams)),
        }
    }

    /// The per-second latency histograms of every run, for the bootstrap.
    pub fn latency_table(&self) -> QuantileTable {
        QuantileTable::new(self.runs.iter().flat_map(|r| &r.seconds))
    }

    /// Request name `name`'s figures over the runs that sent it, and its latency over all of
    /// them (histograms added); `None` when no run sent it.
    pub fn name_figures(&self, name: &str) -> Option<(NameFigures, Counts)> {
        let runs: Vec<&NameRun> = self
            .runs
            .iter()
            .filter_map(|r| r.names.iter().find(|n| n.name == name))
            .collect();
        let latency = Counts::merged(runs.iter().map(|n| &n.latency));
        let p99_ms = match runs.as_slice() {
            [] => return None,
            [one] => one.p99_ms,
            _ => latency.quantile(0.99).map(|us| us as f64 / 1000.0),
        };
        let figures = NameFigures {
            runs: runs.len() as u32,
            sustained: runs
                .iter()
                .map(|n| n.sustained)
                .collect::<Option<Vec<bool>>>()
                .map(|all| all.iter().all(|s| *s)),
            p99_ms,
            achieved_rps: Some(
                runs.iter().map(|n| n.achieved_rps).sum::<f64>() / runs.len() as f64,
            ),
            responses: latency.total(),
            errors_total: runs.iter().map(|n| n.errors_total).sum(),
        };
        Some((figures, latency))
    }

    /// The successes of each full second of every run's measured window.
    pub fn window_successes(&self) -> Vec<u64> {
        self.runs
            .iter()
            .flat_map(|r| r.window_successes.iter().copied())
            .collect()
    }
}

#[cfg(test)]
impl Input {
    /// A bundle holding these series.
    pub(super) fn synthetic(series: Vec<Series>) -> Input {
        Input {
            path: PathBuf::from("synthetic"),
            kind: InputKind::Bundle,
            name: "synthetic".into(),
            started_at: None,
            steps: series.iter().map(|s| s.levels.len()).sum(),
            series,
        }
    }
}

#[cfg(test)]
impl Run {
    /// A run made of these seconds (latency histograms and successes), judged so.
    pub(super) fn synthetic(
        seconds: Vec<hdrhistogram::Histogram<u64>>,
        successes: Vec<u64>,
        sustained: Option<bool>,
        unresolved: bool,
    ) -> Run {
        let seconds: Vec<Counts> = seconds.iter().map(Counts::of).collect();
        let latency = Counts::merged(&seconds);
        Run {
            p99_ms: latency.quantile(0.99).map(|us| us as f64 / 1000.0),
            achieved_rps: successes.iter().sum::<u64>() as f64 / successes.len().max(1) as f64,
            sustained,
            unresolved,
            generator_limited: false,
            latency,
            seconds,
            window_successes: successes,
            names: Vec::new(),
            sessions: None,
            streams: None,
        }
    }

    /// The run with its streams' figures.
    pub(super) fn with_streams(mut self, streams: StreamFigures) -> Run {
        self.streams = Some(streams);
        self
    }

    /// The run with a request name's part: its latencies (one histogram over the window),
    /// its achieved rate, and whether it held its own SLO.
    pub(super) fn with_name(
        mut self,
        name: &str,
        latency: &hdrhistogram::Histogram<u64>,
        achieved_rps: f64,
        sustained: Option<bool>,
    ) -> Run {
        let latency = Counts::of(latency);
        self.names.push(NameRun {
            name: name.to_string(),
            p99_ms: latency.quantile(0.99).map(|us| us as f64 / 1000.0),
            achieved_rps,
            sustained,
            errors_total: 0,
            latency,
        });
        self
    }
}

/// Limits after which a step says nothing about the server.
fn says_nothing(limits: &[Limit]) -> bool {
    limits.iter().any(|l| {
        matches!(
            l,
            Limit::GeneratorLimited | Limit::AgentLost | Limit::Interrupted
        )
    })
}

/// A run's figures and decoded histograms, judged by `verdict` (`None`: a run result).
fn run_of(r: &RunResult, verdict: Option<&Verdict>) -> Result<Run, String> {
    let sustained = verdict.map(|v| v.sustained);
    let unresolved = verdict.is_some_and(|v| !v.unresolved.is_empty());
    let latency = decode_histogram(&r.histograms.latency)
        .map(|h| Counts::of(&h))
        .map_err(|e| format!("histograms.latency: {e}"))?;
    let seconds = r
        .histograms
        .per_second_latency
        .iter()
        .enumerate()
        .map(|(i, h)| {
            decode_histogram(h)
                .map(|h| Counts::of(&h))
                .map_err(|e| format!("histograms.per_second_latency[{i}]: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Only the full seconds of the measured window: the seconds after it hold the drain of
    // whatever was still queued, and the window's last fraction of a second is partial.
    let window_successes = r
        .per_second
        .iter()
        .filter(|s| (s.second + 1) as f64 <= r.duration_s + 1e-6)
        .map(|s| s.successful)
        .collect();
    let names = r
        .by_name
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let latency = decode_histogram(&n.latency_histogram)
                .map(|h| Counts::of(&h))
                .map_err(|e| format!("by_name[{i}].latency_histogram ({}): {e}", n.name))?;
            Ok(NameRun {
                name: n.name.clone(),
                p99_ms: n.latency_ms.p99,
                achieved_rps: n.achieved_rps,
                sustained: verdict.map(|v| !v.names.iter().any(|f| f.name == n.name)),
                errors_total: n.errors_total,
                latency,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Run {
        p99_ms: r.latency_ms.p99,
        achieved_rps: r.achieved_rps,
        sustained,
        unresolved,
        // A bundle's verdict has already judged the run's lateness (a run it held against
        // loadlab is left out); a run result has no verdict, only the flag.
        generator_limited: sustained.is_none() && r.generator_limited,
        latency,
        seconds,
        window_successes,
        names,
        sessions: r.sessions.as_ref().map(|s| SessionCounts {
            started: s.started,
            completed: s.completed,
            aborted: s.aborted,
            running_at_end: s.running_at_end,
        }),
        streams: (r.stream_timing.is_some() || r.window_stalls.is_some()).then(|| {
            let t = r.stream_timing.as_ref();
            StreamFigures {
                streams: t.map_or(0, |t| t.first_message_ms.count),
                first_message_p50_ms: t.and_then(|t| t.first_message_ms.p50),
                first_message_p99_ms: t.and_then(|t| t.first_message_ms.p99),
                gap_p50_ms: t.and_then(|t| t.gap_ms.p50),
                gap_p99_ms: t.and_then(|t| t.gap_ms.p99),
                window_stalls: r.window_stalls,
                stream_seconds: t.map_or(0, |t| t.stream_seconds),
                failed_stream_seconds: t.map_or(0, |t| t.failed_stream_seconds),
            }
        }),
    })
}

fn load_run(path: &Path) -> Result<Input, InputError> {
    let not_run = |why: String| InputError::NotARunResult {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // The version first, so that a result of another loadlab says so rather than naming
    // whichever field changed.
    let version: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_run(format!("not JSON: {e}")))?;
    match version.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(not_run(format!(
                "schema_version {v}, this loadlab reads {SCHEMA_VERSION}"
            )))
        }
        None => return Err(not_run("no schema_version".into())),
    }
    let r: RunResult = serde_json::from_value(version).map_err(|e| not_run(e.to_string()))?;
    let load = match r.offered_rps {
        Some(rate) => rate,
        None if r.protocol.multiplexed() => r.concurrency as f64,
        None => r.connections as f64,
    };
    let unit = match (r.model, r.protocol.multiplexed()) {
        (Model::Open, _) if r.sessions.is_some() => "sessions/s",
        (Model::Closed, _) if r.sessions.is_some() => "users",
        (Model::Open, _) => r.protocol.units().rate,
        (Model::Closed, true) => "concurrent streams",
        (Model::Closed, false) => r.protocol.units().held,
    };
    let run = run_of(&r, None).map_err(not_run)?;
    Ok(Input {
        path: path.to_path_buf(),
        kind: InputKind::RunResult,
        name: what_it_sent(&r),
        started_at: Some(r.environment.started_at.clone()),
        steps: 1,
        series: vec![Series {
            scenario: "run".into(),
            config: r.url.clone(),
            model: r.model,
            unit,
            knee: None,
            levels: vec![Level {
                load,
                runs: vec![run],
                excluded: 0,
            }],
        }],
    })
}

fn load_bundle(dir: &Path) -> Result<Input, InputError> {
    let not_bundle = |why: String| InputError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let b = crate::view::Bundle::load(dir).map_err(|e| not_bundle(e.to_string()))?;
    if !dir.join("steps.jsonl").exists() {
        return Err(not_bundle("no steps.jsonl".into()));
    }
    if b.steps.is_empty() {
        return Err(not_bundle("no step finished (steps.jsonl is empty)".into()));
    }
    let crate::view::Bundle {
        plan,
        env,
        steps,
        configs,
        ..
    } = b;

    // Series in the report's order: configurations as they ran, scenarios in plan order.
    let mut config_order: Vec<&str> = Vec::new();
    for s in &steps {
        if !config_order.contains(&s.config.as_str()) {
            config_order.push(&s.config);
        }
    }
    let together = plan.load.steps == Steps::Together;
    let model = plan.load.model;
    let mut series = Vec::new();
    for config in config_order {
        for scenario in &plan.scenarios {
            let list: Vec<&StepRecord> = steps
                .iter()
                .filter(|s| s.config == config && s.scenario == scenario.name)
                .collect();
            if list.is_empty() {
                continue;
            }
            let unit = match model {
                Model::Open if scenario.traffic.flow.is_some() => "sessions/s",
                Model::Open => scenario.protocol.units().rate,
                Model::Closed => closed_unit(list.iter().copied()),
            };
            let knee = (!together).then(|| {
                let searched = configs
                    .iter()
                    .find(|c| c.config == config)
                    .and_then(|c| c.knees.iter().find(|k| k.scenario == scenario.name));
                match searched {
                    Some(k) => KneeRange {
                        sustained: k.outcome.knee,
                        not_sustained: k.outcome.first_unsustained,
                        limited_by: k.outcome.limited_by,
                        source: KneeSource::Search,
                        confirmed: k.outcome.confirmed,
                        non_monotonic: !k.outcome.non_monotonic.is_empty(),
                    },
                    None => {
                        let f = fixed_knee(&list);
                        KneeRange {
                            sustained: f.best,
                            not_sustained: f.fail,
                            limited_by: f.limit,
                            source: KneeSource::FixedSteps,
                            confirmed: false,
                            non_monotonic: f.non_monotonic.is_some(),
                        }
                    }
                }
            });
            let mut levels: Vec<Level> = Vec::new();
            for s in &list {
                let i = match levels.iter().position(|l| super::same_load(l.load, s.load)) {
                    Some(i) => i,
                    None => {
                        levels.push(Level {
                            load: s.load,
                            runs: Vec::new(),
                            excluded: 0,
                        });
                        levels.len() - 1
                    }
                };
                if says_nothing(&s.verdict.limits) {
                    levels[i].excluded += 1;
                    continue;
                }
                let run = run_of(&s.result, Some(&s.verdict)).map_err(|e| {
                    not_bundle(format!(
                        "steps.jsonl: {config} / {} step {}: {e}",
                        s.scenario, s.index
                    ))
                })?;
                levels[i].runs.push(run);
            }
            levels.sort_by(|a, b| a.load.total_cmp(&b.load));
            series.push(Series {
                scenario: scenario.name.clone(),
                config: config.to_string(),
                model,
                unit,
                knee,
                levels,
            });
        }
    }
    Ok(Input {
        path: dir.to_path_buf(),
        kind: InputKind::Bundle,
        name: plan.name.clone(),
        started_at: env.map(|e| e.started_at),
        steps: steps.len(),
        series,
    })
}

/// What a run sent, as a comparison names it: `GET URL` for one request; a flow's steps
/// (`flow login → page → logout at URL`) or a list's names (`3 requests (a, b, c) at URL`),
/// whose first method would misname the run.
fn what_it_sent(r: &RunResult) -> String {
    let names: Vec<&str> = r.by_name.iter().map(|n| n.name.as_str()).collect();
    match (&r.sessions, names.len()) {
        (Some(_), n) if n > 0 => format!("flow {} at {}", names.join(" → "), r.url),
        (None, n) if n > 1 => format!("{n} requests ({}) at {}", names.join(", "), r.url),
        _ => format!("{} {}", r.method, r.url),
    }
}
