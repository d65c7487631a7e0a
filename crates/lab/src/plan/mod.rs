//! Experiment plans: the TOML a user writes ([`PlanFile`]), validated into a [`Plan`] when
//! it loads. Unknown keys are errors; every error names the field, the value and what is
//! allowed.
//!
//! - [`file`]: the file format, as written.
//! - `quick` (private): the `[quick]` overlay `--quick` applies before validation.
//! - `validate` (private): every field checked and converted into the types below.
//! - [`workload`]: a scenario at one step as the engine's [`loadlab_engine::Workload`],
//!   checked for every scenario when the plan loads.

pub mod file;
mod quick;
mod validate;
pub mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use file::{
    KneeFile, LoadFile, PlanFile, QuickFile, ReadyFile, ScenarioFile, SloFile, TargetFile,
};
pub use loadlab_engine::Model;

/// Placeholders loadlab fills in itself (beside the matrix parameters and `{NAME_port}`).
pub const BUILTINS: [&str; 5] = ["loadlab", "port", "plan_dir", "bundle", "files"];

/// A validated plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// Matrix parameters in name order (a TOML table does not keep the order its keys
    /// were written in), each with its values in the order written.
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
    #[serde(default)]
    pub quick: bool,
}

/// A validated target.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// CPUs to pin the target to (empty: not pinned).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Exit status meaning the target cannot run on this machine.
    pub unavailable_exit: Option<i32>,
}

/// Readiness probe (templates).
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(default)]
    pub protocol: loadlab_engine::Protocol,
    /// gRPC: the method called (`package.Service/Method`).
    pub call: Option<String>,
    /// gRPC: the call resolved from the proto.
    #[serde(skip)]
    pub grpc: Option<loadlab_engine::GrpcCall>,
}

/// How steps are chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
        #[serde(default)]
        confirm: u32,
    },
    /// All scenarios together at their own rates, once.
    Together,
}

/// A validated load profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// Local source addresses for new connections.
    pub source_addrs: Option<loadlab_engine::config::SourceAddrs>,
    /// CPUs for loadlab's workers (empty: not pinned).
    #[serde(default)]
    pub cpus: Vec<usize>,
}

/// A validated SLO.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

impl Plan {
    /// Reads and validates a plan file.
    pub fn load(path: &Path, quick: bool) -> Result<Plan, PlanError> {
        let source = std::fs::read_to_string(path).map_err(|e| PlanError::Read {
            path: path.into(),
            source: e,
        })?;
        let dir = plan_dir(path);
        Plan::parse(&source, &path.display().to_string(), &dir, quick)
    }

    /// Validates plan text; `origin` names it in errors. With `quick`, the `[quick]` table
    /// is applied first. Every scenario is checked as the workload of its first and last
    /// step (placeholders filled with sample values), so a mistake the engine would find
    /// stops the plan before any target starts.
    pub fn parse(source: &str, origin: &str, dir: &Path, quick: bool) -> Result<Plan, PlanError> {
        let mut file: PlanFile = toml::from_str(source).map_err(|e| PlanError::Parse {
            path: origin.into(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if quick {
            quick::apply(&mut file, origin)?;
        }
        let plan = validate::plan(&file, source, origin, dir, quick)?;
        workload::check_scenarios(&plan, origin)?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests;
