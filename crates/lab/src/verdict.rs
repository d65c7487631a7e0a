//! Whether a step was sustained, and if not, what limited it.

use loadlab_engine::RunResult;
use serde::{Deserialize, Serialize};

use crate::plan::Slo;

/// What stopped a step from being sustained, most decisive first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// A target exited during the step.
    TargetCrashed,
    /// loadlab itself fell behind: the step says nothing about the server.
    GeneratorLimited,
    /// More failed requests than the SLO allows.
    Errors,
    /// p99 latency above the SLO.
    Latency,
    /// Achieved less than the SLO's fraction of offered.
    Throughput,
    /// Stopped by the user.
    Interrupted,
}

impl Limit {
    /// Words for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::TargetCrashed => "target crashed",
            Limit::GeneratorLimited => "generator-limited",
            Limit::Errors => "errors",
            Limit::Latency => "latency",
            Limit::Throughput => "throughput",
            Limit::Interrupted => "interrupted",
        }
    }
}

/// The judgement of one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Every SLO held.
    pub sustained: bool,
    /// The SLO clauses that failed, most decisive first.
    pub limits: Vec<Limit>,
}

/// Judges a step's result against the SLO.
pub fn judge(r: &RunResult, slo: &Slo, crashed: bool) -> Verdict {
    let mut limits = Vec::new();
    if crashed {
        limits.push(Limit::TargetCrashed);
    }
    if r.stop_reason == loadlab_engine::result::StopReason::Interrupted {
        limits.push(Limit::Interrupted);
    }
    if r.generator_limited {
        limits.push(Limit::GeneratorLimited);
    }
    let attempts = r.requests + r.errors_total - r.errors["http_4xx"] - r.errors["http_5xx"];
    if attempts == 0 || r.errors_total as f64 > slo.max_error_rate * attempts as f64 {
        limits.push(Limit::Errors);
    }
    if let (Some(bound), Some(p99)) = (slo.p99_ms, r.latency_ms.p99) {
        if p99 > bound {
            limits.push(Limit::Latency);
        }
    }
    if let Some(offered) = r.offered_rps {
        // A request-count-limited step may end early; judge the rate it ran at.
        if r.achieved_rps < slo.min_achieved_ratio * offered
            && r.stop_reason != loadlab_engine::result::StopReason::Requests
        {
            limits.push(Limit::Throughput);
        }
    }
    limits.sort();
    Verdict {
        sustained: limits.is_empty(),
        limits,
    }
}
