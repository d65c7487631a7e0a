//! Whether a step was sustained, and if not, what limited it.

use loadlab_engine::stats;
use loadlab_engine::{ErrorClass, RunResult};
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
    /// An agent of a distributed run was lost during the step: its share is missing, and
    /// the step says nothing about the server.
    AgentLost,
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
            Limit::AgentLost => "agent lost",
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
    /// Every SLO held (or missed it by less than the step can resolve).
    pub sustained: bool,
    /// The SLO clauses that failed, most decisive first.
    pub limits: Vec<Limit>,
    /// Clauses the step's figures appear to miss but too few requests can resolve at
    /// [`CONFIDENCE`](stats::CONFIDENCE) (one sentence each, with the count that would): they do not fail
    /// the step.
    #[serde(default)]
    pub unresolved: Vec<String>,
}

fn pct(x: f64) -> String {
    let v = 100.0 * x;
    if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0} %")
    } else {
        format!("{v:.1} %")
    }
}

/// A count clause: `bad` of `n` against the rate `bound`. Fails only when resolved at
/// [`CONFIDENCE`](stats::CONFIDENCE); a miss the count cannot resolve is described in `unresolved`.
fn count_clause(bad: u64, n: u64, bound: f64, what: &str, unresolved: &mut Vec<String>) -> bool {
    if bad as f64 <= bound * n as f64 {
        return false;
    }
    if stats::resolvably_above(bad, n, bound) {
        return true;
    }
    let needed = match stats::min_resolvable(n, bound) {
        Some(k) => format!("{k} would"),
        None => "no count would".into(),
    };
    unresolved.push(format!(
        "{bad} of {n} {what} ({}): above the {} bound, but {n} are too few to tell that from chance ({needed})",
        pct(bad as f64 / n as f64),
        pct(bound),
    ));
    false
}

/// Responses slower than `bound_ms` (from the step's latency histogram).
fn slower_than(r: &RunResult, bound_ms: f64) -> u64 {
    let Ok(h) = loadlab_engine::result::decode_histogram(&r.histograms.latency) else {
        return 0;
    };
    let bound_us = (bound_ms * 1000.0) as u64;
    h.iter_recorded()
        .filter(|v| h.lowest_equivalent(v.value_iterated_to()) > bound_us)
        .map(|v| v.count_at_value())
        .sum()
}

/// Judges a step's result against the SLO. Each clause fails only on a difference the
/// step resolves at [`CONFIDENCE`](stats::CONFIDENCE):
/// - errors: the failures, as a count out of the requests, against `max_error_rate`;
/// - latency: the responses slower than `p99_ms`, as a count, against 1 %;
/// - throughput (open loop): the server kept pace with the arrivals (the latency trend's
///   resolved slope) within `min_achieved_ratio`; failures are the error clause's.
pub fn judge(r: &RunResult, slo: &Slo, crashed: bool) -> Verdict {
    let mut limits = Vec::new();
    let mut unresolved = Vec::new();
    if crashed {
        limits.push(Limit::TargetCrashed);
    }
    if r.stop_reason == loadlab_engine::result::StopReason::Interrupted {
        limits.push(Limit::Interrupted);
    }
    if r.generator_limited {
        limits.push(Limit::GeneratorLimited);
    }
    if r.agents.iter().any(|a| a.lost.is_some()) {
        limits.push(Limit::AgentLost);
    }
    let attempts =
        r.requests + r.errors_total - r.errors.sum_of(&[ErrorClass::Http4xx, ErrorClass::Http5xx]);
    if attempts == 0
        || count_clause(
            r.errors_total,
            attempts,
            slo.max_error_rate,
            "requests failed",
            &mut unresolved,
        )
    {
        limits.push(Limit::Errors);
    }
    if let (Some(bound), Some(p99)) = (slo.p99_ms, r.latency_ms.p99) {
        if p99 > bound {
            let slow = slower_than(r, bound);
            let what = format!("responses slower than {bound} ms");
            if count_clause(slow, r.latency_ms.count, 0.01, &what, &mut unresolved) {
                limits.push(Limit::Latency);
            }
        }
    }
    if r.offered_rps.is_some() && r.successful > 0 {
        match &r.latency_trend {
            Some(t) if t.pace < slo.min_achieved_ratio => limits.push(Limit::Throughput),
            Some(_) => {}
            None => unresolved.push(format!(
                "throughput not judged: {} successful requests are too few to tell a growing queue from latency spread (at least {})",
                r.successful,
                stats::MIN_TREND_SAMPLES
            )),
        }
    }
    limits.sort();
    Verdict {
        sustained: limits.is_empty(),
        limits,
        unresolved,
    }
}
