//! The result bundle: a directory written while the experiment runs, so that a run killed
//! halfway leaves every finished step readable.
//!
//! ```text
//! plan.toml          the plan as written
//! plan.json          the validated plan (after --quick)
//! environment.json   kernel, CPU, cores, sysctls, nofile limits, loadlab version, command
//! doctor.json        the pre-flight checks (`loadlab_system::doctor::Finding`s)
//! doctor.txt         the same, as `loadlab doctor` prints them
//! steps.jsonl        one line per finished step, appended and flushed at once
//! configs.jsonl      one line per finished configuration (status, knee per scenario)
//! seconds.csv        one row per second of every step (config, scenario, step, phase, load,
//!                    then `loadlab run --csv`'s columns)
//! hlog/CONFIG/       each step's latency as an HdrHistogram interval log,
//!                    SCENARIO-stepNNN.hlog (`loadlab run --hlog`'s format)
//! logs/              each target's stdout and stderr, per configuration
//! .lock              held (flock) by the run writing the bundle; holds its pid
//! report.md          rendered from the files above (`loadlab report DIR` re-renders it)
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use loadlab_engine::RunResult;
use loadlab_system::doctor::{self, Finding};
use serde::{Deserialize, Serialize};

use crate::knee::{KneeOutcome, Phase};
use crate::plan::{Model, Plan};
use crate::target::TargetExit;
use crate::verdict::Verdict;

/// Bundle format version.
pub const BUNDLE_VERSION: u32 = 1;

/// One finished step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepRecord {
    /// Bundle format version.
    pub bundle_version: u32,
    /// Configuration id: the matrix values as `backlog=256,workers=1`, or `default`.
    pub config: String,
    /// Matrix values of the configuration.
    pub params: Vec<(String, String)>,
    /// Scenario name (together mode: one record per scenario, same `index`).
    pub scenario: String,
    /// Step number within the configuration and scenario.
    pub index: u32,
    /// Why the step ran.
    pub phase: Phase,
    /// Open or closed loop.
    pub model: Model,
    /// The step's load: offered req/s (open) or connections (closed).
    pub load: f64,
    /// Whether the step met the plan's `[slo]`, and what limited it if not.
    pub verdict: Verdict,
    /// A target that exited during the step.
    pub crashed: Option<TargetExit>,
    /// What the probes saw (target process tree and kernel).
    pub probes: Option<loadlab_system::probe::ProbeReport>,
    /// The engine's full result (with mergeable histograms).
    pub result: RunResult,
    /// Why the step was not sustained (absent for a sustained step, and in older bundles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<crate::diagnosis::Diagnosis>,
    /// One response of the server to the step's request, its status and the start of its
    /// body, taken when most requests were rejected (4xx): what the server said is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_sample: Option<String>,
}

impl<'a> From<&'a StepRecord> for crate::diagnosis::StepFacts<'a> {
    fn from(s: &'a StepRecord) -> Self {
        crate::diagnosis::StepFacts {
            config: &s.config,
            scenario: &s.scenario,
            index: s.index,
            model: s.model,
            load: s.load,
            params: &s.params,
            verdict: &s.verdict,
            crashed: s.crashed.as_ref(),
            probes: s.probes.as_ref(),
            result: &s.result,
            response_sample: s.response_sample.as_deref(),
        }
    }
}

/// How a configuration ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigStatus {
    /// Every step ran.
    Completed,
    /// A target never became ready; no step ran.
    NotReady,
    /// A target exited with its `unavailable_exit` status: it cannot run on this machine
    /// (the message says why and how to fix it); no step ran.
    Unavailable,
    /// A target exited during a step; later steps were skipped.
    Crashed,
    /// Stopped by the user.
    Interrupted,
}

/// The knee of one scenario in one configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioKnee {
    /// Scenario name, as in the plan.
    pub scenario: String,
    /// The search's outcome.
    pub outcome: KneeOutcome,
    /// Why the knee is where it is: the diagnosis of the first value not sustained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<crate::diagnosis::Diagnosis>,
}

/// One finished configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// Bundle format version.
    pub bundle_version: u32,
    /// Configuration id, as in [`StepRecord::config`].
    pub config: String,
    /// Matrix values of the configuration, parameters in name order.
    pub params: Vec<(String, String)>,
    /// How it ended.
    pub status: ConfigStatus,
    /// Why, when it did not complete.
    pub message: Option<String>,
    /// Knee per scenario (knee searches only).
    pub knees: Vec<ScenarioKnee>,
    /// Wall time of the configuration, seconds (start of targets to their stop).
    pub duration_s: f64,
    /// Targets whose output passed the log cap, and how much of it was dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capped_logs: Vec<CappedLog>,
}

/// A target log that reached [`crate::target::LOG_CAP`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CappedLog {
    /// The target's name in the plan.
    pub target: String,
    /// Bytes of its output dropped from the log (its last ones are kept).
    pub dropped_bytes: u64,
}

/// A bundle being written.
pub struct Bundle {
    dir: PathBuf,
    steps: File,
    configs: File,
    seconds: File,
    /// Locked while this process writes the bundle (released when it exits, however).
    _lock: File,
}

/// The columns seconds.csv puts before `loadlab run --csv`'s.
const SECONDS_PREFIX: &[&str] = &["config", "scenario", "step", "phase", "load"];

/// `name` as a file name: letters, digits, `-`, `.`, `=` and `,` kept, anything else `_`.
fn file_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-.=,".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        format!("_{s}")
    } else {
        s
    }
}

/// Takes the bundle directory's lock: a second run writing to the same directory is
/// refused (`ResourceBusy`, naming the other run's pid). The kernel drops the lock when
/// its holder exits, even by SIGKILL, so a crashed run never blocks the next one. `shown`
/// is the directory as the user gave it, for the message.
fn lock_dir(dir: &Path, shown: &Path) -> std::io::Result<File> {
    let path = dir.join(".lock");
    let mut lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "{} is being written by another loadlab run (pid {}): choose another --out, \
                     or wait for that run to end",
                    shown.display(),
                    holder.trim()
                ),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    lock.set_len(0)?;
    writeln!(lock, "{}", std::process::id())?;
    Ok(lock)
}

fn append_line<T: Serialize>(file: &mut File, value: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    file.write_all(&line)?;
    file.flush()?;
    file.sync_data()
}

/// Reads a JSON file of the bundle (`plan.json`, `environment.json`) back into the type
/// that wrote it; a file that does not decode is `InvalidData` naming the file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> std::io::Result<T> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

impl Bundle {
    /// Creates the bundle directory and writes the plan and environment. The bundle's
    /// directory is made absolute here (against the current directory), once: [`Bundle::dir`],
    /// and the `{bundle}` and `{files}` placeholders made from it, are absolute whatever the
    /// directory a target runs in. Messages name `dir` as given.
    pub fn create(
        dir: &Path,
        plan: &Plan,
        environment: &loadlab_engine::env::Environment,
        doctor: &[Finding],
    ) -> std::io::Result<Bundle> {
        let shown = dir;
        let dir = &std::path::absolute(dir)?;
        std::fs::create_dir_all(dir.join("logs"))?;
        let lock = lock_dir(dir, shown)?;
        // A bundle holds results once a step or a configuration is recorded. A directory
        // whose run recorded neither (its build failed, or it was stopped before then) is
        // taken over, so that the same --out works once the cause is fixed.
        let recorded = |name: &str| std::fs::metadata(dir.join(name)).is_ok_and(|m| m.len() > 0);
        if recorded("steps.jsonl") || recorded("configs.jsonl") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} already holds a bundle: choose another --out",
                    shown.display()
                ),
            ));
        }
        std::fs::write(dir.join("plan.toml"), &plan.source)?;
        write_json(&dir.join("plan.json"), plan)?;
        write_json(&dir.join("environment.json"), environment)?;
        write_json(&dir.join("doctor.json"), &doctor)?;
        std::fs::write(dir.join("doctor.txt"), doctor::render(doctor))?;
        let open = |name: &str| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
        };
        let mut seconds = open("seconds.csv")?;
        if seconds.metadata()?.len() == 0 {
            writeln!(
                seconds,
                "{}",
                loadlab_engine::export::csv_header(SECONDS_PREFIX)
            )?;
        }
        Ok(Bundle {
            dir: dir.clone(),
            steps: open("steps.jsonl")?,
            configs: open("configs.jsonl")?,
            seconds,
            _lock: lock,
        })
    }

    /// The bundle directory, absolute.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where target logs go.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Appends a finished step and flushes it to disk; then its seconds to seconds.csv and
    /// its interval log under hlog/.
    pub fn append_step(&mut self, step: &StepRecord) -> std::io::Result<()> {
        append_line(&mut self.steps, step)?;
        let phase = serde_json::to_value(step.phase)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let index = step.index.to_string();
        let load = format!("{}", step.load);
        let prefix = [
            step.config.as_str(),
            step.scenario.as_str(),
            &index,
            &phase,
            &load,
        ];
        let mut rows = String::new();
        for line in loadlab_engine::export::csv_rows(&step.result, &prefix)? {
            rows.push_str(&line);
            rows.push('\n');
        }
        self.seconds.write_all(rows.as_bytes())?;
        self.seconds.flush()?;
        let dir = self.dir.join("hlog").join(file_name(&step.config));
        std::fs::create_dir_all(&dir)?;
        let what = format!(
            "config {}, scenario {}, step {} ({phase}), load {}",
            step.config, step.scenario, step.index, step.load
        );
        let mut text = Vec::new();
        loadlab_engine::export::write_hlog(&step.result, Some(&what), &mut text)?;
        // A step index seen twice for one scenario (a repeated step) keeps both logs.
        let stem = format!("{}-step{:03}", file_name(&step.scenario), step.index);
        for n in 1.. {
            let name = if n == 1 {
                format!("{stem}.hlog")
            } else {
                format!("{stem}-{n}.hlog")
            };
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(name))
            {
                Ok(mut f) => return f.write_all(&text),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("some file name is free")
    }

    /// Appends a finished configuration and flushes it to disk.
    pub fn append_config(&mut self, config: &ConfigRecord) -> std::io::Result<()> {
        append_line(&mut self.configs, config)
    }
}

/// A record that carries the bundle format version it was written with.
trait Versioned {
    fn bundle_version(&self) -> u32;
}

impl Versioned for StepRecord {
    fn bundle_version(&self) -> u32 {
        self.bundle_version
    }
}

impl Versioned for ConfigRecord {
    fn bundle_version(&self) -> u32 {
        self.bundle_version
    }
}

/// Only the version of a line, to explain a line that does not fit this loadlab's records.
#[derive(Deserialize)]
struct VersionOnly {
    bundle_version: u32,
}

/// A torn last line of a JSON-lines file (a run killed mid-write), which the readers skip:
/// every line before it is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornLine {
    /// The file.
    pub path: PathBuf,
    /// Its line number, from 1.
    pub line: usize,
}

impl std::fmt::Display for TornLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {} is cut short (the run stopped while writing it): skipped; the lines before it are intact",
            self.path.display(),
            self.line
        )
    }
}

/// Reads JSON lines, skipping a torn last line (returned). Any other line that does not
/// read, or a record of another bundle version, is an error naming the file and the line.
fn read_lines_torn<T: for<'de> Deserialize<'de> + Versioned>(
    path: &Path,
) -> std::io::Result<(Vec<T>, Option<TornLine>)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(e),
    };
    let invalid = |line: usize, why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} line {line}: {why}", path.display()),
        )
    };
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.iter().rposition(|l| !l.trim_ascii().is_empty());
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(v) if v.bundle_version() == BUNDLE_VERSION => out.push(v),
            Ok(v) => return Err(invalid(i + 1, other_version(v.bundle_version()))),
            // Cut mid-way: only the last line can be, by a run that stopped writing.
            Err(e) if e.is_eof() && Some(i) == last => {
                let torn = TornLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                };
                return Ok((out, Some(torn)));
            }
            Err(e) => {
                let why = match serde_json::from_slice::<VersionOnly>(line) {
                    Ok(v) if v.bundle_version != BUNDLE_VERSION => other_version(v.bundle_version),
                    _ => e.to_string(),
                };
                return Err(invalid(i + 1, why));
            }
        }
    }
    Ok((out, None))
}

fn other_version(v: u32) -> String {
    format!(
        "a record of bundle version {v}, but this loadlab reads version {BUNDLE_VERSION}: \
         render it with the loadlab that wrote it"
    )
}

fn read_lines<T: for<'de> Deserialize<'de> + Versioned>(path: &Path) -> std::io::Result<Vec<T>> {
    read_lines_torn(path).map(|(records, _)| records)
}

/// The torn last lines of a bundle's `steps.jsonl` and `configs.jsonl`, which
/// [`read_steps`] and [`read_configs`] skip, for a warning. A file that does not read at
/// all is left for those readers to report.
pub fn torn_lines(dir: &Path) -> Vec<TornLine> {
    let steps = read_lines_torn::<StepRecord>(&dir.join("steps.jsonl"));
    let configs = read_lines_torn::<ConfigRecord>(&dir.join("configs.jsonl"));
    [steps.map(|r| r.1), configs.map(|r| r.1)]
        .into_iter()
        .filter_map(|r| r.ok().flatten())
        .collect()
}

/// The finished steps of a bundle.
pub fn read_steps(dir: &Path) -> std::io::Result<Vec<StepRecord>> {
    read_lines(&dir.join("steps.jsonl"))
}

/// The finished configurations of a bundle.
pub fn read_configs(dir: &Path) -> std::io::Result<Vec<ConfigRecord>> {
    read_lines(&dir.join("configs.jsonl"))
}

/// The pre-flight findings of a bundle; `None` when it has no `doctor.json` (bundles
/// written before it existed).
pub fn read_doctor(dir: &Path) -> std::io::Result<Option<Vec<Finding>>> {
    let path = dir.join("doctor.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_system::doctor::{Check, Severity};

    fn finding(check: Check, severity: Severity, message: &str) -> Finding {
        Finding {
            check,
            severity,
            message: message.into(),
            fix: vec!["sysctl -w net.core.somaxconn=65535".into()],
        }
    }

    #[test]
    fn doctor_findings_are_stored_typed_and_as_text() {
        let dir =
            std::env::temp_dir().join(format!("loadlab-bundle-doctor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let plan = Plan::parse(
            "name = \"b\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1\"\n[load]\nsteps = [10]\n",
            "b.toml",
            &dir,
            false,
        )
        .unwrap();
        let env = loadlab_engine::env::Environment::capture(vec!["loadlab".into()]);
        let findings = vec![
            finding(Check::Nofile, Severity::Ok, "1,056 file descriptors needed"),
            finding(
                Check::Somaxconn,
                Severity::Warn,
                "the planned listen backlog 7,168 exceeds 4,096\nsecond line",
            ),
        ];
        Bundle::create(&dir, &plan, &env, &findings).unwrap();
        assert_eq!(read_doctor(&dir).unwrap(), Some(findings.clone()));
        let text = std::fs::read_to_string(dir.join("doctor.txt")).unwrap();
        assert_eq!(text, doctor::render(&findings));
        assert!(text.starts_with("[OK]   nofile: 1,056 file descriptors needed\n"));

        // A bundle from before doctor.json has no findings to read; a broken one is an error.
        std::fs::remove_file(dir.join("doctor.json")).unwrap();
        assert_eq!(read_doctor(&dir).unwrap(), None);
        std::fs::write(dir.join("doctor.json"), "[{\"check\": 1}]").unwrap();
        assert!(read_doctor(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
