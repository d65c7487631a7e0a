//! Experiment plans: the TOML a user writes ([`PlanFile`]), validated into a [`Plan`] when
//! it loads. Unknown keys are errors; every error names the field, the value and what is
//! allowed.
//!
//! - [`file`](mod@file): the file format, as written.
//! - `quick` (private): the `[quick]` overlay `--quick` applies before validation.
//! - [`matrix_set`]: `--matrix KNOB=V1,V2`, laid over the file after `[quick]`.
//! - `validate` (private): every field checked and converted into the types below.
//! - [`workload`]: a scenario at one step as the engine's [`loadlab_engine::Workload`],
//!   checked for every scenario when the plan loads.

pub mod file;
pub mod matrix_set;
mod quick;
mod validate;
pub mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loadlab_engine::Protocol;
use serde::{Deserialize, Serialize};

pub use file::{
    KneeFile, LoadFile, PlanFile, ProbeFile, QuickFile, ReadyFile, ScenarioFile, SloFile,
    TargetFile,
};
pub use loadlab_engine::Model;
pub use matrix_set::MatrixSet;

/// Placeholders loadlab fills in itself (beside the matrix parameters and `{NAME_port}`).
/// The paths among them (`{plan_dir}`, `{bundle}`, `{files}`, `{loadlab}`) are absolute.
pub const BUILTINS: [&str; 5] = ["loadlab", "port", "plan_dir", "bundle", "files"];

/// The placeholders a target's `build` may use: those that have one value for the whole
/// run, known before any configuration (a build runs once, before the first).
pub const BUILD_PLACEHOLDERS: [&str; 3] = ["bundle", "loadlab", "plan_dir"];

/// `build_timeout` when a target does not set it.
pub const DEFAULT_BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The most configurations a `[matrix]` may make (the product of its lists, before
/// `[[exclude]]`): each runs every scenario's steps, so more is refused, never expanded.
pub const MAX_CONFIGURATIONS: usize = 10_000;

/// A validated plan: durations parsed, templates and every scenario's workload checked.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// `name`: letters, digits, `-`, `_` and `.`; titles the report, prefixes the default bundle.
    pub name: String,
    /// `description`, printed under the report's title (empty: none).
    pub description: String,
    /// Directory of the plan file, absolute (for `cwd`, `{plan_dir}` and where builds run).
    pub dir: PathBuf,
    /// The plan as written (copied into the bundle).
    #[serde(skip)]
    pub source: String,
    /// Targets in start order.
    pub targets: Vec<TargetSpec>,
    /// Matrix parameters in name order (a TOML table does not keep the order its keys
    /// were written in), each with its values in the order written.
    pub matrix: Vec<(String, Vec<String>)>,
    /// `[[exclude]]`: a configuration matching every key of one of these maps is skipped.
    pub exclude: Vec<BTreeMap<String, String>>,
    /// `[[scenario]]`s in plan order (at least one, names unique).
    pub scenarios: Vec<ScenarioSpec>,
    /// `[load]`: how every scenario is driven, step by step.
    pub load: LoadSpec,
    /// `[slo]`: the bounds a step must meet to count as sustained.
    pub slo: Slo,
    /// Whether `--quick` was applied.
    #[serde(default)]
    pub quick: bool,
    /// The `--matrix KNOB=V1,V2` lists laid over the file, as given (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrix_set: Vec<String>,
    /// `[probe]`: what the probes watch.
    #[serde(default)]
    pub probe: ProbeSpec,
    /// `[tune]`: how `loadlab tune` searches the matrix (`None`: not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<TuneSpec>,
}

/// A validated `[tune]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneSpec {
    /// `tune.scenario`: the scenario whose knee is maximized.
    pub scenario: Option<String>,
    /// `tune.knee` (a [`Steps::Knee`]): the search tune runs instead of `[load]`'s steps.
    pub knee: Option<Steps>,
    /// `tune.budget`: the default `--budget`.
    pub budget: Option<Budget>,
    /// `tune.step_duration`: tune's steps' measured time (`None`: `load.step_duration`).
    #[serde(default)]
    pub step_duration: Option<Duration>,
    /// `[tune.knobs]`: per matrix parameter, the bottlenecks more of it relieves.
    #[serde(default)]
    pub knobs: BTreeMap<String, Vec<crate::diagnosis::bottleneck::Bottleneck>>,
}

/// How much `loadlab tune` may spend.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// At most this many configurations evaluated.
    Configs(usize),
    /// No configuration started once this much load (warm-up and measured time) was spent.
    LoadSeconds(f64),
}

impl Budget {
    /// `12` (configurations) or a duration such as `30m` (load time).
    pub fn parse(s: &str) -> Result<Budget, String> {
        let s = s.trim();
        if let Ok(n) = s.parse::<usize>() {
            return if n == 0 {
                Err("a budget of 0 configurations evaluates nothing: give 1 or more".into())
            } else {
                Ok(Budget::Configs(n))
            };
        }
        match humantime::parse_duration(s) {
            Ok(d) if d.as_secs_f64() > 0.0 => Ok(Budget::LoadSeconds(d.as_secs_f64())),
            _ => Err(format!(
                "{s:?}: a number of configurations (12) or a time of load (30m, 1h)"
            )),
        }
    }

    /// Words: `12 configurations`, `30m of load`.
    pub fn words(&self) -> String {
        match self {
            Budget::Configs(1) => "1 configuration".into(),
            Budget::Configs(n) => format!("{n} configurations"),
            Budget::LoadSeconds(s) => format!(
                "{} of load",
                humantime::format_duration(std::time::Duration::from_secs_f64(s.round()))
            ),
        }
    }
}

/// What the probes watch while a step runs: the server's process tree and cgroup (its CPU,
/// memory, threads, descriptors, quota throttling) and its network namespace's kernel
/// counters (listen-queue overflows, TIME_WAIT).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeSpec {
    /// The targets the plan starts; without targets, the process listening on the first
    /// scenario's port when its host is this machine (found at the start of the run).
    #[default]
    Auto,
    /// `probe.pid`.
    Pid(u32),
    /// `probe.pidfile`, resolved against the plan's directory.
    Pidfile(PathBuf),
    /// `probe.cgroup`.
    Cgroup(String),
    /// `probe.container`.
    Container(String),
    /// `probe.listen`.
    Listen(u16),
    /// `probe.off`: nothing but the kernel's counters.
    Off,
}

/// A validated `[[target]]`: a server started afresh, in plan order, for each scenario run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetSpec {
    /// `name`, unique among targets; gives the `{NAME_port}` placeholder and the log file name.
    pub name: String,
    /// `command`: program and arguments, placeholders unrendered (one string with `shell`).
    pub command: Vec<String>,
    /// `shell`: run the single `command` string through `sh -c`.
    pub shell: bool,
    /// `env`: added to loadlab's environment; values are templates.
    pub env: BTreeMap<String, String>,
    /// `cwd` resolved against the plan's directory (default: the plan's directory).
    pub cwd: PathBuf,
    /// `ready`: polled after start until it succeeds or `ready_timeout` passes.
    pub ready: Ready,
    /// `ready_timeout` (default 30 s).
    pub ready_timeout: Duration,
    /// `stop_grace` (default 5 s): wait between SIGTERM and SIGKILL to the target's group.
    pub stop_grace: Duration,
    /// Files to write into `{files}`: name → template.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// CPUs to pin the target to (empty: not pinned).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Exit status meaning the target cannot run on this machine.
    pub unavailable_exit: Option<i32>,
    /// `build`: run once per plan, before the first configuration (`None`: nothing to build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildSpec>,
}

/// A validated `build` of a `[[target]]` (see [`crate::build`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSpec {
    /// `build`: program and arguments, placeholders unrendered (one string with `shell`);
    /// only [`BUILD_PLACEHOLDERS`] appear in it.
    pub command: Vec<String>,
    /// `build_shell`: run the single `command` string through `sh -c`.
    pub shell: bool,
    /// `build_timeout` (default [`DEFAULT_BUILD_TIMEOUT`]): the build is stopped past it.
    pub timeout: Duration,
}

/// Readiness probe (templates).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Ready {
    /// HTTP GET answering this status.
    Http {
        /// `ready.http`: the URL to GET, placeholders unrendered.
        url: String,
        /// `ready.status` (default 200).
        status: u16,
    },
    /// `ready.tcp`: ready once a TCP connect to this address succeeds.
    Tcp {
        /// `host:port` template.
        addr: String,
    },
}

/// A validated `[[scenario]]`; [`Plan::workload`] makes it the engine's workload at a step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioSpec {
    /// `name`, unique among scenarios; heads the scenario's tables in the report.
    pub name: String,
    /// `url`: `http://` or `https://`, placeholders rendered per configuration.
    pub url: String,
    /// `method` (default `GET`), sent upper-cased.
    pub method: String,
    /// `headers`: `Name: value` each, rendered as templates.
    pub headers: Vec<String>,
    /// `body` (default empty), rendered as a template.
    pub body: String,
    /// `keep_alive` (default true); HTTP/2 and gRPC require it.
    pub keep_alive: bool,
    /// `close_by` (default `server`): with keep-alive off, which side closes each
    /// connection; `client` needs `keep_alive = false`.
    #[serde(default)]
    pub close_by: loadlab_engine::CloseBy,
    /// `timeout` (default 5 s): per-request deadline, above 0.
    pub timeout: Duration,
    /// `rate`: this scenario's requests/s in together mode; unused otherwise.
    pub rate: Option<f64>,
    /// `requests`: end each step after this many, or at `step_duration` if that comes first.
    pub requests: Option<u64>,
    /// `protocol` (default `http1`).
    #[serde(default)]
    pub protocol: loadlab_engine::Protocol,
    /// gRPC: the method called (`package.Service/Method`).
    pub call: Option<String>,
    /// gRPC: the call resolved from the proto.
    #[serde(skip)]
    pub grpc: Option<loadlab_engine::GrpcCall>,
    /// `insecure` (default false): certificates are not checked.
    #[serde(default)]
    pub insecure: bool,
    /// `cacert`: the certificates (PEM) the scenario trusts besides the system's store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// `cert` and `key`: the client certificate (mTLS). Not written to `plan.json` (nor,
    /// from there, to the report): the key stays in its file.
    #[serde(skip)]
    pub client_cert: Option<loadlab_engine::config::ClientCertPem>,
    /// Requests that vary: `[[scenario.request]]` or `targets`, `data`, `data_order`,
    /// `request_order`.
    #[serde(default)]
    pub traffic: ScenarioTraffic,
    /// WebSocket connection load (`ping_every`): each connection pings this often, and a
    /// step is a number of connections held (closed model).
    #[serde(default)]
    pub ping_every: Option<Duration>,
    /// WebSocket: what a reply must contain (`reply_contains`, a template rendered as the
    /// message is).
    #[serde(default)]
    pub reply_contains: Option<String>,
    /// WebSocket: the JSON pointer to each reply's send time (`sent_at`).
    #[serde(default)]
    pub sent_at: Option<String>,
    /// WebSocket server push (`push = true`): the body is a subscribe message, and each
    /// message the server sends a reply (closed model: a step is the connections held).
    #[serde(default)]
    pub push: bool,
}

/// A scenario's requests that vary, as the plan gives them: the requests' texts keep the
/// plan's `{placeholders}` (rendered per configuration) and their `${...}` (per request).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScenarioTraffic {
    /// The requests of the mix (empty: the scenario's own `url`, `method`, `headers`,
    /// `body`).
    pub requests: Vec<loadlab_engine::config::traffic::NamedRequest>,
    /// How they are taken.
    pub order: loadlab_engine::config::traffic::MixOrder,
    /// `data`, as written.
    pub data_file: Option<String>,
    /// Its rows, loaded when the plan is (not written to plan.json).
    #[serde(skip)]
    pub data: Option<std::sync::Arc<loadlab_engine::config::traffic::Data>>,
    /// How rows are drawn.
    pub data_order: loadlab_engine::config::traffic::DataOrder,
    /// A flow of user sessions (`flow`): its steps instead of requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<loadlab_session::Flow>,
    /// `flow`, when it names a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_file: Option<String>,
    /// `replay_mix` or `replay`: what reading the log found (read, replayed, left out),
    /// said when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
    /// `replay`: the log at its times, each step a multiple of its speed (loaded when the
    /// plan is; not written to plan.json).
    #[serde(skip)]
    pub timed: Option<std::sync::Arc<crate::replay::TimedLog>>,
    /// `replay`: the steps are multiples of the log's speed (kept in plan.json, for the
    /// reports' units).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_its_times: bool,
}

/// How steps are chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Steps {
    /// `load.steps`: each value in order (rates in open loop, whole counts in closed loop).
    Fixed(Vec<f64>),
    /// `load.knee`: grow, bisect and confirm (see [`crate::knee`]).
    Knee {
        /// `start`: the first value tried, above 0.
        start: f64,
        /// `max`: the highest value tried, at least `start`.
        max: f64,
        /// `precision` (default 0.05): stop bisecting once `(hi - lo) / lo` is at most this.
        precision: f64,
        /// `growth` (default 2, above 1): multiplier between steps until one is not sustained.
        growth: f64,
        /// Repeats of each end of the boundary.
        #[serde(default)]
        confirm: u32,
    },
    /// All scenarios together at their own rates, once.
    Together,
}

/// A validated load profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadSpec {
    /// `load.model` (default `open`): steps are rates (open) or connections or streams (closed).
    pub model: Model,
    /// Which of `load.steps`, `load.knee` or `load.together` the plan gives (exactly one).
    pub steps: Steps,
    /// `load.step_duration` (default 10 s): measured time of each step, above 0.
    pub step_duration: Duration,
    /// `load.warmup` (default 0): load before each step's measurement, not recorded.
    pub warmup: Duration,
    /// Pause between steps.
    pub pause: Duration,
    /// `load.connections` (default 64): open-loop initial pool; HTTP/2 and gRPC: the connections.
    pub connections: u64,
    /// `load.max_connections`: open-loop HTTP/1.1 pool ceiling (`None`: the engine's default).
    pub max_connections: Option<u64>,
    /// HTTP/2 and gRPC streams in flight (or their open-loop ceiling).
    pub concurrency: Option<u64>,
    /// `load.threads`: worker threads (`None`: one per core).
    pub threads: Option<usize>,
    /// `load.arrival` (default `constant`): spacing of open-loop arrivals.
    pub arrival: loadlab_engine::Arrival,
    /// Local source addresses for new connections.
    pub source_addrs: Option<loadlab_engine::config::SourceAddrs>,
    /// CPUs for loadlab's workers (empty: not pinned).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// The I/O interface of plain HTTP/1.1 connections.
    #[serde(default)]
    pub io: loadlab_engine::config::IoMode,
}

impl LoadSpec {
    /// A step's measured seconds when its arrivals are a Poisson stream (open loop,
    /// `arrival = "poisson"`): what a knee search can resolve depends on it
    /// ([`crate::knee::unresolved`]).
    pub fn poisson_s(&self) -> Option<f64> {
        (self.model == Model::Open && self.arrival == loadlab_engine::Arrival::Poisson)
            .then_some(self.step_duration.as_secs_f64())
    }
}

/// A validated `[slo]`: a step is sustained when every bound holds ([`crate::verdict::judge`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slo {
    /// p99 bound, ms.
    pub p99_ms: Option<f64>,
    /// Bounds on other percentiles (`slo.gates`, `loadlab knee --slo 'p95<100ms'`), in
    /// percentile order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<PercentileBound>,
    /// `max_error_rate` (default 0.01): highest fraction of failed requests.
    pub max_error_rate: f64,
    /// `min_achieved_ratio` (default 0.98): open loop only, the pace the server must keep.
    pub min_achieved_ratio: f64,
    /// Bounds for single request names (`slo.gates` such as `checkout:p99<300ms`): each the
    /// bounds above, tightened by its own gates. Every other name is judged by the bounds
    /// above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<NamedSlo>,
}

/// The bounds of one request name.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NamedSlo {
    /// The request name.
    pub name: String,
    /// Its bounds (their own `names` empty).
    pub slo: Slo,
}

/// A bound on one latency percentile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentileBound {
    /// The percentile, 0 < q < 100.
    pub percentile: f64,
    /// The bound, ms.
    pub ms: f64,
}

impl Slo {
    /// The bounds request name `name` is judged by: its own, or the plan's.
    pub fn for_name(&self, name: &str) -> &Slo {
        self.names
            .iter()
            .find(|n| n.name == name)
            .map_or(self, |n| &n.slo)
    }

    /// Every latency bound, p99 included, as (percentile, ms), in percentile order.
    pub fn latency_bounds(&self) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = self
            .percentiles
            .iter()
            .map(|b| (b.percentile, b.ms))
            .chain(self.p99_ms.map(|ms| (99.0, ms)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    /// The latency bounds in words: `p99 latency at most 200 ms`.
    pub fn latency_words(&self) -> Vec<String> {
        self.latency_bounds()
            .iter()
            .map(|(q, ms)| format!("p{q} latency at most {ms} ms"))
            .collect()
    }
}

/// What is wrong with a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read.
    #[error("cannot read plan {path}: {source}")]
    Read {
        /// The plan file as given.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax, a wrong type, or an unknown key.
    #[error("plan {path}: {message}")]
    Parse {
        /// The plan's path, or the origin given to [`Plan::parse`].
        path: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field's value is not allowed.
    #[error("plan {path}: {field} = {value} is not allowed: {allowed}")]
    Field {
        /// The plan's path, or the origin given to [`Plan::parse`].
        path: String,
        /// Dotted field name, e.g. `scenario[1].timeout`.
        field: String,
        /// The value as written (strings quoted), or a word such as `missing`.
        value: String,
        /// What is allowed.
        allowed: String,
    },
}

/// The directory of the plan file at `path`, absolute, so that `{plan_dir}` means the same
/// in a target's command whatever its `cwd` (`plan.toml` has the empty parent: the current
/// directory).
fn plan_dir(path: &Path) -> PathBuf {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf())
}

/// The unit a step's load is counted in: in open loop the protocol's rate (requests,
/// WebSocket messages per second; sessions started per second for a flow), and in closed
/// loop connections, streams (HTTP/2, gRPC), open connections (WebSocket), open event
/// streams (server-sent events) or users (a flow); a log replayed at its times (`replay`),
/// a multiple of its speed.
pub fn load_unit(model: Model, protocol: Protocol, flow: bool, replay: bool) -> &'static str {
    if replay {
        return TIMES_THE_LOG;
    }
    match (model, flow) {
        (Model::Open, true) => "sessions/s",
        (Model::Open, false) => protocol.units().rate,
        (Model::Closed, true) => "users",
        (Model::Closed, false) if protocol.multiplexed() => "streams",
        (Model::Closed, false) => protocol.units().held,
    }
}

/// The unit of a run's load, from its result (see [`load_unit`]).
pub fn result_unit(r: &loadlab_engine::RunResult) -> &'static str {
    load_unit(
        r.model,
        r.protocol,
        r.sessions.is_some(),
        r.traffic.as_ref().is_some_and(|t| t.replay.is_some()),
    )
}

/// The load unit of a log replayed at its times: a multiple of its speed.
pub const TIMES_THE_LOG: &str = "× the log";

impl Plan {
    /// Every configuration the plan covers, in order: the product of its `[matrix]` lists
    /// less its `[[exclude]]`s.
    pub fn configs(&self) -> Vec<crate::matrix::Config> {
        crate::matrix::expand(&self.matrix, &self.exclude)
    }

    /// The unit of the plan's loads: its scenarios' when they agree (see [`load_unit`]);
    /// a plan that mixes flows and requests, or protocols, in closed loop counts
    /// connections (streams when every one is multiplexed), and in open loop requests per
    /// second.
    pub fn unit(&self) -> &'static str {
        let all = |f: &dyn Fn(&ScenarioSpec) -> bool| self.scenarios.iter().all(f);
        let first = self
            .scenarios
            .first()
            .map_or(Protocol::Http1, |s| s.protocol);
        let protocol = if all(&|s| s.protocol == first) {
            first
        } else if all(&|s| s.protocol.multiplexed()) {
            Protocol::Http2
        } else {
            Protocol::Http1
        };
        load_unit(
            self.load.model,
            protocol,
            all(&|s| s.traffic.flow.is_some()),
            all(&|s| s.traffic.at_its_times),
        )
    }

    /// Reads and validates a plan file.
    pub fn load(path: &Path, quick: bool) -> Result<Plan, PlanError> {
        Plan::load_with(path, quick, &[])
    }

    /// [`Plan::load`] with `--matrix` lists laid over the file's `[matrix]` (after
    /// `[quick]`'s).
    pub fn load_with(path: &Path, quick: bool, sets: &[MatrixSet]) -> Result<Plan, PlanError> {
        let source = std::fs::read_to_string(path).map_err(|e| PlanError::Read {
            path: path.into(),
            source: e,
        })?;
        let dir = plan_dir(path);
        Plan::parse_with(&source, &path.display().to_string(), &dir, quick, sets)
    }

    /// Validates plan text; `origin` names it in errors. With `quick`, the `[quick]` table
    /// is applied first. Every scenario is checked as the workload of its first and last
    /// step (placeholders filled with sample values), so a mistake the engine would find
    /// stops the plan before any target starts. `dir` is made absolute (against the current
    /// directory), as [`Plan::dir`] is.
    pub fn parse(source: &str, origin: &str, dir: &Path, quick: bool) -> Result<Plan, PlanError> {
        Plan::parse_with(source, origin, dir, quick, &[])
    }

    /// [`Plan::parse`] with `--matrix` lists laid over the file's `[matrix]` (after
    /// `[quick]`'s).
    pub fn parse_with(
        source: &str,
        origin: &str,
        dir: &Path,
        quick: bool,
        sets: &[MatrixSet],
    ) -> Result<Plan, PlanError> {
        // Absolute, so that `{plan_dir}` and every `cwd` mean the same whatever directory a
        // target or a build runs in.
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let dir = dir.as_path();
        let mut file: PlanFile = toml::from_str(source).map_err(|e| PlanError::Parse {
            path: origin.into(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if quick {
            quick::apply(&mut file, origin)?;
        }
        matrix_set::apply(&mut file, origin, sets)?;
        let mut plan = validate::plan(&file, source, origin, dir, quick)?;
        plan.matrix_set = sets.iter().map(ToString::to_string).collect();
        if plan.configs().is_empty() {
            let product: usize = plan.matrix.iter().map(|(_, v)| v.len()).product();
            return Err(PlanError::Field {
                path: origin.into(),
                field: "exclude".into(),
                value: if product == 1 {
                    "the only configuration".into()
                } else {
                    format!("all {product} configurations")
                },
                allowed: if sets.is_empty() {
                    "at least one configuration left by the [[exclude]] tables".into()
                } else {
                    format!(
                        "at least one configuration left by the [[exclude]] tables (with --matrix {})",
                        plan.matrix_set.join(" --matrix ")
                    )
                },
            });
        }
        workload::check_scenarios(&plan, origin)?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests;
