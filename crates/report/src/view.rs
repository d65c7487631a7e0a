//! A result bundle as the reports read it: loaded once from disk into one typed view that
//! every renderer takes (report.md, report.html, the answer, `compare`), instead of each
//! reading the files again.

use std::path::{Path, PathBuf};

use loadlab_engine::env::Environment;
use loadlab_lab::bundle::{read_configs, read_json, read_steps, ConfigRecord, StepRecord};
use loadlab_lab::plan::Plan;

/// One bundle's plan, environment, steps and configurations.
#[derive(Debug)]
pub struct Bundle {
    /// Where it is on disk (its other files: doctor.json, tune.json, the logs).
    pub dir: PathBuf,
    /// The plan as run (`plan.json`).
    pub plan: Plan,
    /// The machine it ran on (`environment.json`; absent in a bundle cut short early).
    pub env: Option<Environment>,
    /// Every step, in the order run (`steps.jsonl`).
    pub steps: Vec<StepRecord>,
    /// Every configuration that finished, with its knees (`configs.jsonl`).
    pub configs: Vec<ConfigRecord>,
}

/// Why a directory did not load as a bundle.
#[derive(Debug)]
pub enum LoadError {
    /// A file every bundle has is missing.
    Missing(&'static str),
    /// A file did not read or parse.
    Io(std::io::Error),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Missing(file) => write!(f, "no {file}"),
            LoadError::Io(e) => e.fmt(f),
        }
    }
}

impl From<LoadError> for std::io::Error {
    fn from(e: LoadError) -> std::io::Error {
        match e {
            LoadError::Io(e) => e,
            missing @ LoadError::Missing(_) => {
                std::io::Error::new(std::io::ErrorKind::NotFound, missing.to_string())
            }
        }
    }
}

impl Bundle {
    /// Reads the bundle in `dir` (a bundle cut short before its first step has no
    /// `steps.jsonl`: its steps are none).
    pub fn load(dir: &Path) -> Result<Bundle, LoadError> {
        if !dir.join("plan.json").exists() {
            return Err(LoadError::Missing("plan.json"));
        }
        let plan: Plan = read_json(&dir.join("plan.json")).map_err(LoadError::Io)?;
        let steps = read_steps(dir).map_err(LoadError::Io)?;
        let configs = read_configs(dir).map_err(LoadError::Io)?;
        let env: Option<Environment> = read_json(&dir.join("environment.json")).ok();
        Ok(Bundle {
            dir: dir.to_path_buf(),
            plan,
            env,
            steps,
            configs,
        })
    }
}
