//! Experiment plans: the TOML a user writes ([`PlanFile`]), validated into a [`Plan`].
//! Unknown keys are errors; every error names the field, the value and what is allowed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::template;

/// Placeholders loadlab fills in itself (beside the matrix parameters and `{NAME_port}`).
pub const BUILTINS: [&str; 5] = ["loadlab", "port", "plan_dir", "bundle", "files"];

/// A plan as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Plan name (used for the bundle directory).
    pub name: String,
    /// What the experiment shows.
    #[serde(default)]
    pub description: String,
    /// Servers to start, in order (stopped in reverse). May be empty for an external target.
    #[serde(default)]
    pub target: Vec<TargetFile>,
    /// Parameter lists; the run covers their product.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    /// Combinations of the matrix left out (every key given must match).
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, toml::Value>>,
    /// Requests to drive.
    pub scenario: Vec<ScenarioFile>,
    /// Load profile.
    pub load: LoadFile,
    /// What counts as sustained.
    #[serde(default)]
    pub slo: SloFile,
    /// Overrides for `--quick`.
    #[serde(default)]
    pub quick: Option<QuickFile>,
}

/// `[[target]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// Name (also gives the `{NAME_port}` placeholder).
    pub name: String,
    /// Argument list with placeholders; with `shell = true`, one string for `sh -c`.
    pub command: Vec<String>,
    /// Run through `sh -c`.
    #[serde(default)]
    pub shell: bool,
    /// Environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the plan's directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Readiness probe.
    pub ready: ReadyFile,
    /// How long to wait for readiness.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: String,
    /// Grace between SIGTERM and SIGKILL.
    #[serde(default = "default_stop_grace")]
    pub stop_grace: String,
    /// Files written (after placeholder rendering) into the `{files}` directory before the
    /// target starts, e.g. a server's configuration: file name → contents.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// CPUs to pin the target (and what it starts) to, e.g. "0" (as `taskset -c`).
    pub cpus: Option<String>,
    /// An exit status meaning "cannot run on this machine" (e.g. 3 for a greeter whose
    /// io_uring is refused): exiting with it before ready marks the configuration
    /// unavailable, with the target's own explanation, instead of failed.
    pub unavailable_exit: Option<i32>,
}

fn default_ready_timeout() -> String {
    "30s".into()
}
fn default_stop_grace() -> String {
    "5s".into()
}

/// `ready = { http = "...", status = 200 }` or `ready = { tcp = "host:port" }`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReadyFile {
    /// GET this URL until it answers `status`.
    pub http: Option<String>,
    /// Expected status for `http`.
    #[serde(default = "default_status")]
    pub status: u16,
    /// Connect to this address until it accepts.
    pub tcp: Option<String>,
}

fn default_status() -> u16 {
    200
}

/// `[[scenario]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Name (a table per scenario in the report).
    pub name: String,
    /// URL template.
    pub url: String,
    /// HTTP method.
    #[serde(default = "default_method")]
    pub method: String,
    /// Headers `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Body.
    #[serde(default)]
    pub body: String,
    /// Connection reuse.
    #[serde(default = "default_true")]
    pub keep_alive: bool,
    /// Request timeout.
    #[serde(default = "default_timeout")]
    pub timeout: String,
    /// This scenario's own rate when `load.together = true`.
    pub rate: Option<f64>,
    /// Stop this scenario after this many requests (per step).
    pub requests: Option<u64>,
    /// `http1` (default), `http2` (h2c prior knowledge, or ALPN over https) or `grpc`.
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// gRPC: the .proto file, relative to the plan's directory.
    pub proto: Option<String>,
    /// gRPC: directories searched for the proto's imports, relative to the plan's directory.
    #[serde(default)]
    pub import_paths: Vec<String>,
    /// gRPC: the unary method, `package.Service/Method`.
    pub call: Option<String>,
    /// gRPC: the request message as JSON.
    pub data: Option<String>,
    /// gRPC: request metadata, `key: value` each.
    #[serde(default)]
    pub metadata: Vec<String>,
}

fn default_protocol() -> String {
    "http1".into()
}

fn default_method() -> String {
    "GET".into()
}
fn default_true() -> bool {
    true
}
fn default_timeout() -> String {
    "5s".into()
}

/// `[load]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadFile {
    /// `open` (rates) or `closed` (connection counts).
    #[serde(default = "default_model")]
    pub model: String,
    /// Fixed steps: rates (open) or connection counts (closed).
    pub steps: Option<Vec<f64>>,
    /// Knee search instead of fixed steps.
    pub knee: Option<KneeFile>,
    /// Run every scenario at the same time at its own `rate` (one step per configuration).
    #[serde(default)]
    pub together: bool,
    /// Measured duration of each step.
    #[serde(default = "default_step_duration")]
    pub step_duration: String,
    /// Warm-up before each step.
    #[serde(default = "default_zero")]
    pub warmup: String,
    /// Pause between steps.
    #[serde(default = "default_zero")]
    pub pause: String,
    /// Open loop: initial connections.
    #[serde(default = "default_connections")]
    pub connections: u64,
    /// Open loop: pool ceiling.
    pub max_connections: Option<u64>,
    /// HTTP/2 and gRPC: streams in flight (closed loop without steps: exactly; open loop:
    /// the ceiling). Closed-loop steps of an HTTP/2 or gRPC scenario are concurrencies over
    /// `connections` connections.
    pub concurrency: Option<u64>,
    /// Worker threads (default: cores).
    pub threads: Option<usize>,
    /// `constant` or `poisson`.
    #[serde(default = "default_arrival")]
    pub arrival: String,
    /// Local source addresses (as `loadlab run --source-addrs`).
    pub source_addrs: Option<String>,
    /// CPUs to pin loadlab's worker threads to, e.g. "1" (keep them off the target's).
    pub cpus: Option<String>,
}

fn default_model() -> String {
    "open".into()
}
fn default_step_duration() -> String {
    "10s".into()
}
fn default_zero() -> String {
    "0s".into()
}
fn default_connections() -> u64 {
    16
}
fn default_arrival() -> String {
    "constant".into()
}

/// `knee = { ... }`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KneeFile {
    /// First rate (or connection count) tried.
    pub start: f64,
    /// Highest tried.
    pub max: f64,
    /// Stop bisecting when the bracket is narrower than this fraction.
    #[serde(default = "default_precision")]
    pub precision: f64,
    /// Growth factor before the first unsustained step.
    #[serde(default = "default_growth")]
    pub growth: f64,
    /// Repeats of each end of the boundary once found (0: none).
    #[serde(default = "default_confirm")]
    pub confirm: u32,
}

fn default_precision() -> f64 {
    0.05
}
fn default_growth() -> f64 {
    2.0
}
fn default_confirm() -> u32 {
    1
}

/// `[slo]`: a step is sustained when all hold.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SloFile {
    /// Highest acceptable p99 latency, ms.
    pub p99_ms: Option<f64>,
    /// Highest acceptable fraction of failed requests.
    #[serde(default = "default_error_rate")]
    pub max_error_rate: f64,
    /// Achieved at least this fraction of offered (open loop).
    #[serde(default = "default_ratio")]
    pub min_achieved_ratio: f64,
}

impl Default for SloFile {
    fn default() -> Self {
        SloFile {
            p99_ms: None,
            max_error_rate: default_error_rate(),
            min_achieved_ratio: default_ratio(),
        }
    }
}

fn default_error_rate() -> f64 {
    0.01
}
fn default_ratio() -> f64 {
    0.98
}

/// `[quick]`: what `--quick` changes.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QuickFile {
    /// Replaces `load.steps`.
    pub steps: Option<Vec<f64>>,
    /// Replaces `load.knee`.
    pub knee: Option<KneeFile>,
    /// Replaces `load.step_duration`.
    pub step_duration: Option<String>,
    /// Replaces `load.warmup`.
    pub warmup: Option<String>,
    /// Replaces `load.pause`.
    pub pause: Option<String>,
    /// Replaces these matrix lists.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    /// Replaces every scenario's `requests`.
    pub requests: Option<u64>,
}

/// A validated plan.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Directory of the plan file (for `cwd` and `{plan_dir}`).
    pub dir: PathBuf,
    /// The plan as written (copied into the bundle).
    #[serde(skip)]
    pub source: String,
    /// Targets in start order.
    pub targets: Vec<TargetSpec>,
    /// Matrix parameters in order, each with its values.
    pub matrix: Vec<(String, Vec<String>)>,
    /// Excluded combinations.
    pub exclude: Vec<BTreeMap<String, String>>,
    /// Scenarios.
    pub scenarios: Vec<ScenarioSpec>,
    /// Load.
    pub load: LoadSpec,
    /// SLO.
    pub slo: Slo,
    /// Whether `--quick` was applied.
    pub quick: bool,
}

/// A validated target.
#[derive(Clone, Debug, Serialize)]
pub struct TargetSpec {
    /// Name.
    pub name: String,
    /// Command template.
    pub command: Vec<String>,
    /// Through `sh -c`.
    pub shell: bool,
    /// Environment.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Readiness probe.
    pub ready: Ready,
    /// Readiness timeout.
    pub ready_timeout: Duration,
    /// SIGTERM → SIGKILL grace.
    pub stop_grace: Duration,
    /// Files to write into `{files}`: name → template.
    pub files: BTreeMap<String, String>,
    /// CPUs to pin the target to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Exit status meaning the target cannot run on this machine.
    pub unavailable_exit: Option<i32>,
}

/// Readiness probe (templates).
#[derive(Clone, Debug, Serialize)]
pub enum Ready {
    /// HTTP GET answering this status.
    Http {
        /// URL template.
        url: String,
        /// Expected status.
        status: u16,
    },
    /// TCP connect.
    Tcp {
        /// `host:port` template.
        addr: String,
    },
}

/// A validated scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioSpec {
    /// Name.
    pub name: String,
    /// URL template.
    pub url: String,
    /// Method.
    pub method: String,
    /// Headers.
    pub headers: Vec<String>,
    /// Body.
    pub body: String,
    /// Keep-alive.
    pub keep_alive: bool,
    /// Timeout.
    pub timeout: Duration,
    /// Own rate (together mode).
    pub rate: Option<f64>,
    /// Request count per step.
    pub requests: Option<u64>,
    /// Wire protocol.
    pub protocol: loadlab_engine::Protocol,
    /// gRPC: the method called (`package.Service/Method`).
    pub call: Option<String>,
    /// gRPC: the call resolved from the proto.
    #[serde(skip)]
    pub grpc: Option<loadlab_engine::GrpcCall>,
}

/// Open or closed loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Steps are rates.
    Open,
    /// Steps are connection counts.
    Closed,
}

/// How steps are chosen.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Steps {
    /// Fixed list.
    Fixed(Vec<f64>),
    /// Knee search.
    Knee {
        /// First value.
        start: f64,
        /// Largest value.
        max: f64,
        /// Bracket precision.
        precision: f64,
        /// Growth factor.
        growth: f64,
        /// Repeats of each end of the boundary.
        confirm: u32,
    },
    /// All scenarios together at their own rates, once.
    Together,
}

/// A validated load profile.
#[derive(Clone, Debug, Serialize)]
pub struct LoadSpec {
    /// Model.
    pub model: Model,
    /// Steps.
    pub steps: Steps,
    /// Step duration.
    pub step_duration: Duration,
    /// Warm-up.
    pub warmup: Duration,
    /// Pause between steps.
    pub pause: Duration,
    /// Initial connections (open loop).
    pub connections: u64,
    /// Pool ceiling.
    pub max_connections: Option<u64>,
    /// HTTP/2 and gRPC streams in flight (or their open-loop ceiling).
    pub concurrency: Option<u64>,
    /// Threads.
    pub threads: Option<usize>,
    /// Arrival.
    pub arrival: loadlab_engine::Arrival,
    /// Source addresses.
    pub source_addrs: Option<String>,
    /// CPUs for loadlab's workers (empty: not pinned).
    pub cpus: Vec<usize>,
}

/// A validated SLO.
#[derive(Clone, Debug, Serialize)]
pub struct Slo {
    /// p99 bound, ms.
    pub p99_ms: Option<f64>,
    /// Error-rate bound.
    pub max_error_rate: f64,
    /// Achieved/offered bound.
    pub min_achieved_ratio: f64,
}

/// What is wrong with a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read.
    #[error("cannot read plan {path}: {source}")]
    Read {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax, a wrong type, or an unknown key.
    #[error("plan {path}: {message}")]
    Parse {
        /// Path.
        path: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field's value is not allowed.
    #[error("plan {path}: {field} = {value} is not allowed: {allowed}")]
    Field {
        /// Path.
        path: String,
        /// Dotted field name, e.g. `scenario[1].timeout`.
        field: String,
        /// The value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
}

/// A scenario's protocol and, for gRPC, its call resolved from the proto (so a malformed
/// proto or an unknown method stops the plan before any load).
fn scenario_protocol(
    origin: &str,
    dir: &Path,
    i: usize,
    s: &ScenarioFile,
) -> Result<(loadlab_engine::Protocol, Option<loadlab_engine::GrpcCall>), PlanError> {
    use loadlab_engine::Protocol;
    let field = |x: &str| format!("scenario[{i}].{x}");
    let bad = |f: &str, value: String, allowed: String| PlanError::Field {
        path: origin.into(),
        field: field(f),
        value,
        allowed,
    };
    let protocol = match s.protocol.as_str() {
        "http1" => Protocol::Http1,
        "http2" => Protocol::Http2,
        "grpc" => Protocol::Grpc,
        other => {
            return Err(bad(
                "protocol",
                format!("{other:?}"),
                "\"http1\", \"http2\" or \"grpc\"".into(),
            ))
        }
    };
    if protocol.multiplexed() && !s.keep_alive {
        return Err(bad(
            "keep_alive",
            "false".into(),
            "true for HTTP/2 and gRPC (streams share kept connections)".into(),
        ));
    }
    if protocol != Protocol::Grpc {
        let given = [
            ("proto", s.proto.is_some()),
            ("call", s.call.is_some()),
            ("data", s.data.is_some()),
            ("metadata", !s.metadata.is_empty()),
            ("import_paths", !s.import_paths.is_empty()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
            return Err(bad(
                name,
                "set".into(),
                format!(
                    "only with protocol = \"grpc\" (this scenario is {:?})",
                    s.protocol
                ),
            ));
        }
        return Ok((protocol, None));
    }
    let (Some(proto), Some(call)) = (&s.proto, &s.call) else {
        let missing = if s.proto.is_none() { "proto" } else { "call" };
        return Err(bad(
            missing,
            "missing".into(),
            "protocol = \"grpc\" needs proto = \"FILE.proto\" and call = \"package.Service/Method\"".into(),
        ));
    };
    let includes: Vec<PathBuf> = s.import_paths.iter().map(|p| dir.join(p)).collect();
    let data = s.data.as_deref().unwrap_or("{}");
    let resolved = loadlab_grpc::UnaryCall::resolve(&dir.join(proto), &includes, call, data)
        .map_err(|e| bad("call", format!("{call:?} in {proto:?}"), e.to_string()))?;
    let metadata = loadlab_grpc::parse_metadata(&s.metadata)
        .map_err(|e| bad("metadata", format!("{:?}", s.metadata), e.to_string()))?;
    Ok((
        protocol,
        Some(loadlab_engine::GrpcCall {
            path: resolved.path().to_string(),
            frame: resolved.request_frame(),
            metadata,
        }),
    ))
}

fn duration(path: &str, field: &str, v: &str) -> Result<Duration, PlanError> {
    humantime::parse_duration(v.trim()).map_err(|_| PlanError::Field {
        path: path.into(),
        field: field.into(),
        value: format!("{v:?}"),
        allowed: "a duration such as \"10s\", \"500ms\", \"2m\"".into(),
    })
}

fn cpu_list(path: &str, field: &str, v: Option<&str>) -> Result<Vec<usize>, PlanError> {
    match v {
        None => Ok(Vec::new()),
        Some(list) => {
            loadlab_engine::config::parse_cpu_list(list).map_err(|allowed| PlanError::Field {
                path: path.into(),
                field: field.into(),
                value: format!("{list:?}"),
                allowed,
            })
        }
    }
}

fn value_string(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Plan {
    /// Reads and validates a plan file.
    pub fn load(path: &Path, quick: bool) -> Result<Plan, PlanError> {
        let source = std::fs::read_to_string(path).map_err(|e| PlanError::Read {
            path: path.into(),
            source: e,
        })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Plan::parse(&source, &path.display().to_string(), &dir, quick)
    }

    /// Validates plan text; `origin` names it in errors.
    pub fn parse(source: &str, origin: &str, dir: &Path, quick: bool) -> Result<Plan, PlanError> {
        let file: PlanFile = toml::from_str(source).map_err(|e| PlanError::Parse {
            path: origin.into(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let err = |field: String, value: String, allowed: &str| PlanError::Field {
            path: origin.into(),
            field,
            value,
            allowed: allowed.into(),
        };
        let mut file = file;
        if quick {
            if let Some(q) = file.quick.clone() {
                if q.steps.is_some() || q.knee.is_some() {
                    file.load.steps = q.steps;
                    file.load.knee = q.knee;
                }
                if let Some(d) = q.step_duration {
                    file.load.step_duration = d;
                }
                if let Some(d) = q.warmup {
                    file.load.warmup = d;
                }
                if let Some(d) = q.pause {
                    file.load.pause = d;
                }
                for (k, v) in q.matrix {
                    if !file.matrix.contains_key(&k) {
                        return Err(err(
                            format!("quick.matrix.{k}"),
                            format!("{v:?}"),
                            "a parameter that [matrix] defines",
                        ));
                    }
                    file.matrix.insert(k, v);
                }
                if let Some(n) = q.requests {
                    for s in &mut file.scenario {
                        s.requests = Some(n);
                    }
                }
            }
        }
        if file.name.trim().is_empty()
            || !file
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(err(
                "name".into(),
                format!("{:?}", file.name),
                "letters, digits, '-', '_' and '.'",
            ));
        }

        // Matrix.
        let mut matrix = Vec::new();
        for (k, values) in &file.matrix {
            if BUILTINS.contains(&k.as_str()) || k.ends_with("_port") {
                return Err(err(
                    format!("matrix.{k}"),
                    k.clone(),
                    "a name that is not a built-in placeholder",
                ));
            }
            if values.is_empty() {
                return Err(err(
                    format!("matrix.{k}"),
                    "[]".into(),
                    "at least one value",
                ));
            }
            let vals = values
                .iter()
                .map(|v| {
                    value_string(v).ok_or_else(|| {
                        err(
                            format!("matrix.{k}"),
                            v.to_string(),
                            "strings, numbers or booleans",
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            matrix.push((k.clone(), vals));
        }
        let mut exclude = Vec::new();
        for (i, ex) in file.exclude.iter().enumerate() {
            let mut m = BTreeMap::new();
            for (k, v) in ex {
                if !file.matrix.contains_key(k) {
                    return Err(err(
                        format!("exclude[{i}].{k}"),
                        v.to_string(),
                        "a parameter that [matrix] defines",
                    ));
                }
                m.insert(k.clone(), value_string(v).unwrap_or_default());
            }
            exclude.push(m);
        }

        // Placeholders every template may use.
        let mut known: BTreeSet<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
        known.extend(matrix.iter().map(|(k, _)| k.clone()));
        let mut names = BTreeSet::new();
        for t in &file.target {
            if !names.insert(t.name.clone()) {
                return Err(err(
                    "target.name".into(),
                    t.name.clone(),
                    "unique target names",
                ));
            }
            known.insert(format!("{}_port", t.name));
        }
        let check = |field: String, text: &str| -> Result<(), PlanError> {
            template::check(text, &known).map_err(|e| PlanError::Field {
                path: origin.into(),
                field,
                value: format!("{text:?}"),
                allowed: format!(
                    "{e}; known placeholders: {}",
                    known.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            })
        };

        let mut targets = Vec::new();
        for (i, t) in file.target.iter().enumerate() {
            let f = |s: &str| format!("target[{i}].{s}");
            if t.command.is_empty() {
                return Err(err(
                    f("command"),
                    "[]".into(),
                    "a program and its arguments",
                ));
            }
            if t.shell && t.command.len() != 1 {
                return Err(err(
                    f("command"),
                    format!("{:?}", t.command),
                    "one string when shell = true",
                ));
            }
            for (j, a) in t.command.iter().enumerate() {
                check(f(&format!("command[{j}]")), a)?;
            }
            for (k, v) in &t.env {
                check(f(&format!("env.{k}")), v)?;
            }
            for (k, v) in &t.files {
                if k.is_empty() || k.contains('/') || k.starts_with('.') {
                    return Err(err(
                        f(&format!("files.{k}")),
                        k.clone(),
                        "a plain file name",
                    ));
                }
                check(f(&format!("files.{k}")), v)?;
            }
            let ready = match (&t.ready.http, &t.ready.tcp) {
                (Some(u), None) => {
                    check(f("ready.http"), u)?;
                    Ready::Http {
                        url: u.clone(),
                        status: t.ready.status,
                    }
                }
                (None, Some(a)) => {
                    check(f("ready.tcp"), a)?;
                    Ready::Tcp { addr: a.clone() }
                }
                _ => {
                    return Err(err(
                        f("ready"),
                        "…".into(),
                        "exactly one of { http = URL, status = N } or { tcp = \"host:port\" }",
                    ))
                }
            };
            targets.push(TargetSpec {
                name: t.name.clone(),
                command: t.command.clone(),
                shell: t.shell,
                env: t.env.clone(),
                cwd: t
                    .cwd
                    .as_ref()
                    .map_or_else(|| dir.to_path_buf(), |c| dir.join(c)),
                ready,
                ready_timeout: duration(origin, &f("ready_timeout"), &t.ready_timeout)?,
                stop_grace: duration(origin, &f("stop_grace"), &t.stop_grace)?,
                files: t.files.clone(),
                cpus: cpu_list(origin, &f("cpus"), t.cpus.as_deref())?,
                unavailable_exit: t.unavailable_exit,
            });
        }

        if file.scenario.is_empty() {
            return Err(err(
                "scenario".into(),
                "[]".into(),
                "at least one [[scenario]]",
            ));
        }
        let mut scenarios = Vec::new();
        let mut snames = BTreeSet::new();
        for (i, s) in file.scenario.iter().enumerate() {
            let f = |x: &str| format!("scenario[{i}].{x}");
            if !snames.insert(s.name.clone()) {
                return Err(err(f("name"), s.name.clone(), "unique scenario names"));
            }
            check(f("url"), &s.url)?;
            let probe = template::render(&s.url, &mut |_| Some("1".into()));
            if url::Url::parse(&probe)
                .map(|u| !matches!(u.scheme(), "http" | "https"))
                .unwrap_or(true)
            {
                return Err(err(f("url"), s.url.clone(), "an http:// or https:// URL"));
            }
            if let Some(r) = s.rate {
                if !(r.is_finite() && r > 0.0) {
                    return Err(err(f("rate"), r.to_string(), "requests per second above 0"));
                }
            }
            if s.requests == Some(0) {
                return Err(err(f("requests"), "0".into(), "at least 1"));
            }
            let timeout = duration(origin, &f("timeout"), &s.timeout)?;
            if timeout.is_zero() {
                return Err(err(f("timeout"), s.timeout.clone(), "above 0"));
            }
            let (protocol, grpc) = scenario_protocol(origin, dir, i, s)?;
            scenarios.push(ScenarioSpec {
                protocol,
                call: s.call.clone(),
                grpc,
                name: s.name.clone(),
                url: s.url.clone(),
                method: s.method.clone(),
                headers: s.headers.clone(),
                body: s.body.clone(),
                keep_alive: s.keep_alive,
                timeout,
                rate: s.rate,
                requests: s.requests,
            });
        }

        let l = &file.load;
        let model = match l.model.as_str() {
            "open" => Model::Open,
            "closed" => Model::Closed,
            other => {
                return Err(err(
                    "load.model".into(),
                    format!("{other:?}"),
                    "\"open\" or \"closed\"",
                ))
            }
        };
        let steps = match (&l.steps, &l.knee, l.together) {
            (None, None, true) => {
                if model != Model::Open {
                    return Err(err(
                        "load.together".into(),
                        "true".into(),
                        "model = \"open\" (each scenario has a rate)",
                    ));
                }
                if let Some((i, _)) = scenarios.iter().enumerate().find(|(_, s)| s.rate.is_none()) {
                    return Err(err(
                        format!("scenario[{i}].rate"),
                        "missing".into(),
                        "a rate for every scenario when load.together = true",
                    ));
                }
                Steps::Together
            }
            (Some(steps), None, false) => {
                if steps.is_empty() || steps.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                    return Err(err(
                        "load.steps".into(),
                        format!("{steps:?}"),
                        "a non-empty list of values above 0",
                    ));
                }
                if model == Model::Closed && steps.iter().any(|v| v.fract() != 0.0) {
                    return Err(err(
                        "load.steps".into(),
                        format!("{steps:?}"),
                        "whole connection counts in closed loop",
                    ));
                }
                Steps::Fixed(steps.clone())
            }
            (None, Some(k), false) => {
                if !(k.start > 0.0 && k.max >= k.start) {
                    return Err(err(
                        "load.knee".into(),
                        format!("start = {}, max = {}", k.start, k.max),
                        "0 < start <= max",
                    ));
                }
                if !(k.precision > 0.0 && k.precision < 1.0) {
                    return Err(err(
                        "load.knee.precision".into(),
                        k.precision.to_string(),
                        "a fraction between 0 and 1, e.g. 0.05",
                    ));
                }
                if k.growth.is_nan() || k.growth <= 1.0 {
                    return Err(err(
                        "load.knee.growth".into(),
                        k.growth.to_string(),
                        "a factor above 1, e.g. 2",
                    ));
                }
                if k.confirm > 10 {
                    return Err(err(
                        "load.knee.confirm".into(),
                        k.confirm.to_string(),
                        "repeats of each end of the boundary, 0 to 10",
                    ));
                }
                Steps::Knee {
                    start: k.start,
                    max: k.max,
                    precision: k.precision,
                    growth: k.growth,
                    confirm: k.confirm,
                }
            }
            _ => {
                return Err(err(
                    "load".into(),
                    "steps/knee/together".into(),
                    "exactly one of `steps = [...]`, `knee = { start, max }`, or `together = true`",
                ))
            }
        };
        let arrival = match l.arrival.as_str() {
            "constant" => loadlab_engine::Arrival::Constant,
            "poisson" => loadlab_engine::Arrival::Poisson,
            other => {
                return Err(err(
                    "load.arrival".into(),
                    format!("{other:?}"),
                    "\"constant\" or \"poisson\"",
                ))
            }
        };
        let step_duration = duration(origin, "load.step_duration", &l.step_duration)?;
        if step_duration.is_zero() {
            return Err(err(
                "load.step_duration".into(),
                l.step_duration.clone(),
                "above 0",
            ));
        }
        if l.connections == 0 {
            return Err(err("load.connections".into(), "0".into(), "at least 1"));
        }
        let slo = &file.slo;
        if let Some(p) = slo.p99_ms {
            if p.is_nan() || p <= 0.0 {
                return Err(err(
                    "slo.p99_ms".into(),
                    p.to_string(),
                    "milliseconds above 0",
                ));
            }
        }
        if !(0.0..=1.0).contains(&slo.max_error_rate) {
            return Err(err(
                "slo.max_error_rate".into(),
                slo.max_error_rate.to_string(),
                "a fraction from 0 to 1",
            ));
        }
        if !(slo.min_achieved_ratio > 0.0 && slo.min_achieved_ratio <= 1.0) {
            return Err(err(
                "slo.min_achieved_ratio".into(),
                slo.min_achieved_ratio.to_string(),
                "a fraction above 0, at most 1",
            ));
        }
        Ok(Plan {
            name: file.name.clone(),
            description: file.description.clone(),
            dir: dir.to_path_buf(),
            source: source.to_string(),
            targets,
            matrix,
            exclude,
            scenarios,
            load: LoadSpec {
                model,
                steps,
                step_duration,
                warmup: duration(origin, "load.warmup", &l.warmup)?,
                pause: duration(origin, "load.pause", &l.pause)?,
                connections: l.connections,
                max_connections: l.max_connections,
                concurrency: l.concurrency,
                threads: l.threads,
                arrival,
                source_addrs: l.source_addrs.clone(),
                cpus: cpu_list(origin, "load.cpus", l.cpus.as_deref())?,
            },
            slo: Slo {
                p99_ms: slo.p99_ms,
                max_error_rate: slo.max_error_rate,
                min_achieved_ratio: slo.min_achieved_ratio,
            },
            quick,
        })
    }
}
