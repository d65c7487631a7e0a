//! `loadlab lab PLAN --baseline DIR --max-regression 10%`: the new bundle against a
//! baseline bundle, by [`crate::compare`], and the gate for CI.
//!
//! A **regression** is
//! - a knee resolved lower than the baseline's (ranges apart, a cleanly sustained step
//!   between them) by more than the allowance even at the closest the two ranges allow
//!   (baseline `between 100 and 400`, now `between 10 and 30`: at least 70 % lower);
//! - or a p99, at a load the baseline sustained, resolved worse (see [`crate::compare`]) by
//!   more than the allowance even at the low end of its confidence interval.
//!
//! Both demand that the measurement show *more* than the allowance, as a verdict's clause
//! fails only when the count resolves it above the bound: a regression of 12 % ± 5 %
//! against 10 % allowed does not fail the gate (it could be 7 %); run longer steps (more
//! seconds narrow the interval) or closer steps (knees) to resolve smaller ones. p99 at
//! loads the baseline did not sustain is left to the knee: past the knee, latency is the
//! queue's length, not a service level.
//!
//! The check is stored in the bundle as `baseline.json` ([`BaselineCheck`]), and
//! `report.md` gets an "Against the baseline" section from it ([`section`]), also when
//! `loadlab report DIR` renders it again.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use loadlab_lab::plan::Plan;

use crate::compare::text::{ms, num, pct, pct_abs};
use crate::compare::{
    compare, sole_configs, Comparison, Finding, Input, InputError, InputKind, Method,
    PairComparison, SeriesKey,
};

/// The check's file in the bundle.
pub const FILE: &str = "baseline.json";

/// `--max-regression` when `--baseline` is given without it.
pub const DEFAULT_MAX_REGRESSION: f64 = 0.10;

/// Why the baseline cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// Not readable, or not a bundle.
    #[error("--baseline {0}")]
    Input(#[from] InputError),
    /// Nothing of the baseline matches what the plan runs: the gate would check nothing.
    #[error(
        "--baseline {}: nothing in common with the plan (by scenario and configuration): the baseline has {baseline}; the plan runs {plan}",
        .path.display()
    )]
    NothingInCommon {
        /// The baseline.
        path: PathBuf,
        /// Its series.
        baseline: String,
        /// The plan's.
        plan: String,
    },
    /// The check could not be written into the bundle.
    #[error("writing {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// What the gate found, as stored in `baseline.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineCheck {
    /// The baseline bundle, as given.
    pub baseline: String,
    /// The allowance, as a fraction (`0.1`: 10 %).
    pub max_regression: f64,
    /// The regressions beyond the allowance; any makes `loadlab lab` exit 3.
    pub regressions: Vec<Regression>,
    /// The full comparison (the baseline is `A`, this bundle `B`).
    pub comparison: Comparison,
}

/// Which figure regressed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "figure")]
pub enum RegressedFigure {
    /// The knee.
    Knee,
    /// p99 latency at this load.
    P99 {
        /// The load (req/s, connections or streams).
        load: f64,
    },
}

/// One regression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// Scenario.
    pub scenario: String,
    /// Configuration (the baseline's name).
    pub config: String,
    /// Knee or p99.
    #[serde(flatten)]
    pub figure: RegressedFigure,
    /// One sentence with the figures and how sure they are.
    pub sentence: String,
}

/// Reads the baseline bundle and checks that it shares at least one scenario and
/// configuration with the plan (before any load is offered).
pub fn load(dir: &Path, plan: &Plan) -> Result<Input, BaselineError> {
    if dir.exists() && !dir.is_dir() {
        return Err(InputError::NotABundle {
            path: dir.to_path_buf(),
            why: "a file; --baseline takes the directory `loadlab lab` wrote".into(),
        }
        .into());
    }
    let input = Input::load(dir)?;
    debug_assert_eq!(input.kind(), InputKind::Bundle);
    let base = input.keys();
    let configs: Vec<String> = plan.configs().into_iter().map(|c| c.id).collect();
    let base_configs: Vec<&str> = base.iter().map(|k| k.config.as_str()).collect();
    let plan_configs: Vec<&str> = configs.iter().map(String::as_str).collect();
    let paired = sole_configs(&base_configs, &plan_configs);
    let common = base.iter().any(|k| {
        plan.scenarios.iter().any(|s| s.name == k.scenario)
            && (configs.contains(&k.config) || paired.as_ref().is_some_and(|[b, _]| *b == k.config))
    });
    if !common {
        let list = |keys: Vec<String>| keys.join(", ");
        return Err(BaselineError::NothingInCommon {
            path: dir.to_path_buf(),
            baseline: list(
                base.iter()
                    .map(|k| format!("{} / {}", k.scenario, k.config))
                    .collect(),
            ),
            plan: list(
                configs
                    .iter()
                    .flat_map(|c| {
                        plan.scenarios
                            .iter()
                            .map(move |s| format!("{} / {c}", s.name))
                    })
                    .collect(),
            ),
        });
    }
    Ok(input)
}

/// Compares the bundle in `dir` with the baseline, writes `baseline.json` into it, and
/// returns the check.
pub fn check(
    dir: &Path,
    baseline: &Input,
    max_regression: f64,
) -> Result<BaselineCheck, BaselineError> {
    let this = Input::load(dir)?;
    // The gate's allowance may be finer than the default noise threshold: a change beyond
    // the allowance is never dismissed as below the threshold.
    let method = Method {
        noise_threshold: Method::default().noise_threshold.min(max_regression),
        ..Method::default()
    };
    let comparison = compare(&[baseline, &this], &method);
    let regressions = comparison
        .pairs
        .first()
        .map(|p| regressions(p, &method, max_regression))
        .unwrap_or_default();
    let check = BaselineCheck {
        baseline: baseline.path().display().to_string(),
        max_regression,
        regressions,
        comparison,
    };
    let path = dir.join(FILE);
    let text = serde_json::to_string_pretty(&check).map_err(|e| BaselineError::Write {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&path, text + "\n").map_err(|source| BaselineError::Write { path, source })?;
    Ok(check)
}

/// The regressions of one comparison beyond `max` (see the module comment).
pub fn regressions(pair: &PairComparison, method: &Method, max: f64) -> Vec<Regression> {
    let mut out = Vec::new();
    for s in &pair.series {
        if let Some(k) = &s.knee {
            if let (Finding::Worse, Some(closest)) = (k.finding, k.change_range[1]) {
                if closest < -max {
                    out.push(Regression {
                        scenario: s.scenario.clone(),
                        config: s.config.clone(),
                        figure: RegressedFigure::Knee,
                        sentence: format!(
                            "{}: knee {} → {} {}: at least {} lower, more than the {} allowed ({}; A is the baseline)",
                            s.name(),
                            k.baseline.describe(),
                            k.other.describe(),
                            s.unit,
                            pct_abs(-closest),
                            pct_abs(max),
                            k.evidence
                        ),
                    });
                }
            }
        }
        for st in &s.steps {
            let p = &st.p99;
            let (Some(ci), Some(a), Some(b), Some(change), Some(interval)) = (
                p.ci,
                p.baseline,
                p.other,
                p.change,
                p.interval_text(method.confidence),
            ) else {
                continue;
            };
            if st.baseline.sustained == Some(true) && p.finding == Finding::Worse && ci[0] > max {
                out.push(Regression {
                    scenario: s.scenario.clone(),
                    config: s.config.clone(),
                    figure: RegressedFigure::P99 { load: st.load },
                    sentence: format!(
                        "{}: p99 at {} {}: {} → {} ms, {} ({}): more than the {} allowed even at the interval's low end",
                        s.name(),
                        num(st.load),
                        s.unit,
                        ms(a),
                        ms(b),
                        pct(change),
                        interval,
                        pct_abs(max)
                    ),
                });
            }
        }
    }
    out
}

/// The "Against the baseline" section of `report.md`, from the bundle's `baseline.json`
/// (`None` when the run had no baseline).
pub fn section(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    let mut out = String::new();
    let _ = writeln!(out, "## Against the baseline\n");
    let check: BaselineCheck = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                out,
                "`{FILE}` could not be read ({e}): the check is not shown.\n"
            );
            return Some(out);
        }
    };
    let base = check.comparison.inputs.first();
    let _ = writeln!(
        out,
        "Compared with `{}`{}. A regression is a knee, or a p99 at a load the baseline \
         sustained, worse by more than {} even at the closest the measurement allows (the \
         knees' step ranges, the p99's {} confidence interval from a bootstrap over \
         seconds); `loadlab lab` exits 3 when there is one. Every figure: `loadlab compare {} {}`.\n",
        check.baseline,
        base.and_then(|b| b.started_at.as_deref())
            .map_or(String::new(), |t| format!(" (run {t})")),
        pct_abs(check.max_regression),
        crate::compare::text::confidence(check.comparison.method.confidence),
        check.baseline,
        dir.display()
    );
    if check.regressions.is_empty() {
        let _ = writeln!(
            out,
            "No regression beyond {}.\n",
            pct_abs(check.max_regression)
        );
    } else {
        let n = check.regressions.len();
        let _ = writeln!(
            out,
            "**{n} regression{} beyond {}:**\n",
            if n == 1 { "" } else { "s" },
            pct_abs(check.max_regression)
        );
        for r in &check.regressions {
            let _ = writeln!(out, "- {}", r.sentence);
        }
        let _ = writeln!(out);
    }
    if let Some(pair) = check.comparison.pairs.first() {
        let mut other = Vec::new();
        for s in &pair.series {
            if let Some(k) = &s.knee {
                if k.finding.is_difference()
                    && !check.regressions.iter().any(|r| {
                        r.figure == RegressedFigure::Knee
                            && r.scenario == s.scenario
                            && r.config == s.config
                    })
                {
                    other.push(format!("- {} / {}: knee {}", s.scenario, s.config, k.why));
                }
            }
            for st in &s.steps {
                for (what, m) in [("p99", &st.p99), ("achieved", &st.achieved)] {
                    let gated = what == "p99"
                        && check.regressions.iter().any(|r| {
                            r.figure == (RegressedFigure::P99 { load: st.load })
                                && r.scenario == s.scenario
                                && r.config == s.config
                        });
                    if m.finding.is_difference() && !gated {
                        other.push(format!(
                            "- {} / {}: {what} at {}: {}",
                            s.scenario,
                            s.config,
                            num(st.load),
                            m.why
                        ));
                    }
                }
            }
        }
        if !other.is_empty() {
            let _ = writeln!(
                out,
                "Other differences beyond the noise (not regressions by the rule above):\n\n{}\n",
                other.join("\n")
            );
        }
        let unmatched: Vec<String> = pair
            .only_in_baseline
            .iter()
            .map(|k| format!("{} (baseline only)", key(k)))
            .chain(
                pair.only_in_other
                    .iter()
                    .map(|k| format!("{} (this run only)", key(k))),
            )
            .collect();
        if !unmatched.is_empty() {
            let _ = writeln!(out, "Not compared: {}.\n", unmatched.join(", "));
        }
    }
    Some(out)
}

fn key(k: &SeriesKey) -> String {
    format!("{} / {}", k.scenario, k.config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{
        KneeComparison, KneeRange, KneeSource, MetricChange, SeriesComparison, StepComparison,
        StepFigures,
    };

    fn figures(sustained: bool) -> StepFigures {
        StepFigures {
            runs: 1,
            excluded_runs: 0,
            sustained: Some(sustained),
            p99_ms: Some(100.0),
            achieved_rps: Some(50.0),
            run_p99_ms: vec![100.0],
            run_achieved_rps: vec![50.0],
            responses: 2000,
            latency_seconds: 10,
            window_seconds: 10,
            generator_limited: false,
            sessions: None,
            streams: None,
        }
    }

    fn metric(finding: Finding, change: f64, ci: [f64; 2]) -> MetricChange {
        MetricChange {
            baseline: Some(100.0),
            other: Some(100.0 * (1.0 + change)),
            change: Some(change),
            ci: Some(ci),
            finding,
            test: "bootstrap over 10+10 per-second histograms".into(),
            why: format!("{}: ...", finding.describe()),
        }
    }

    fn range(sustained: f64, not_sustained: f64) -> KneeRange {
        KneeRange {
            sustained: Some(sustained),
            not_sustained: Some(not_sustained),
            limited_by: None,
            source: KneeSource::FixedSteps,
            confirmed: false,
            non_monotonic: false,
        }
    }

    /// One series: the knee moved from [100, 400] to [10, 30]; p99 at 50 changed by `change`
    /// within `ci`, the baseline's step sustained or not.
    fn pair(change: f64, ci: [f64; 2], baseline_sustained: bool) -> PairComparison {
        PairComparison {
            baseline: "A".into(),
            other: "B".into(),
            paired_configs: None,
            only_in_baseline: Vec::new(),
            only_in_other: Vec::new(),
            series: vec![SeriesComparison {
                scenario: "sleep".into(),
                config: "workers=16".into(),
                other_config: "workers=16".into(),
                unit: "req/s".into(),
                not_comparable: None,
                knee: Some(KneeComparison {
                    baseline: range(100.0, 400.0),
                    other: range(10.0, 30.0),
                    change: Some(-0.9),
                    change_range: [Some(-0.975), Some(-0.7)],
                    finding: Finding::Worse,
                    evidence: "B was not sustained at 30, A sustained 30".into(),
                    why: "lower: ...".into(),
                }),
                steps: vec![StepComparison {
                    load: 50.0,
                    baseline: figures(baseline_sustained),
                    other: figures(true),
                    p99: metric(
                        if ci[0] > 0.0 {
                            Finding::Worse
                        } else {
                            Finding::WithinNoise
                        },
                        change,
                        ci,
                    ),
                    achieved: metric(Finding::WithinNoise, 0.0, [-0.01, 0.01]),
                }],
                loads_only_in_baseline: Vec::new(),
                loads_only_in_other: Vec::new(),
                names: None,
            }],
        }
    }

    #[test]
    fn a_regression_must_exceed_the_allowance_even_at_the_closest() {
        let m = Method::default();
        let figures_of = |p: &PairComparison, max: f64| -> Vec<RegressedFigure> {
            regressions(p, &m, max)
                .into_iter()
                .map(|r| r.figure)
                .collect()
        };
        // p99 +30 % (CI +20..+40 %), knee at least 70 % lower: both beyond 10 %.
        let p = pair(0.3, [0.2, 0.4], true);
        assert_eq!(
            figures_of(&p, 0.1),
            vec![RegressedFigure::Knee, RegressedFigure::P99 { load: 50.0 }]
        );
        let r = &regressions(&p, &m, 0.1)[1];
        assert!(
            r.sentence.starts_with(
                "sleep / workers=16: p99 at 50 req/s: 100 → 130 ms, +30 % (99.9 % CI +20..+40 %"
            ),
            "{}",
            r.sentence
        );
        // Allowed 25 %: the p99 could be +20 %, the knee is still at least 70 % lower.
        assert_eq!(figures_of(&p, 0.25), vec![RegressedFigure::Knee]);
        // Allowed 75 %: nothing.
        assert!(figures_of(&p, 0.75).is_empty());
        // A p99 within the noise, or at a load the baseline did not sustain, is no regression.
        assert_eq!(
            figures_of(&pair(0.3, [-0.1, 0.6], true), 0.1),
            vec![RegressedFigure::Knee]
        );
        assert_eq!(
            figures_of(&pair(0.3, [0.2, 0.4], false), 0.1),
            vec![RegressedFigure::Knee]
        );
    }

    #[test]
    fn the_report_section_comes_from_the_bundle_file() {
        let dir = std::env::temp_dir().join(format!("loadlab-baseline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(section(&dir), None);
        let p = pair(0.3, [0.2, 0.4], true);
        let check = BaselineCheck {
            baseline: "results/main".into(),
            max_regression: 0.1,
            regressions: regressions(&p, &Method::default(), 0.1),
            comparison: Comparison {
                comparison_version: crate::compare::COMPARISON_VERSION,
                method: Method::default(),
                inputs: Vec::new(),
                pairs: vec![p],
            },
        };
        std::fs::write(dir.join(FILE), serde_json::to_string(&check).unwrap()).unwrap();
        let text = section(&dir).unwrap();
        assert!(text.starts_with("## Against the baseline\n"), "{text}");
        assert!(text.contains("Compared with `results/main`"), "{text}");
        assert!(text.contains("**2 regressions beyond 10 %:**"), "{text}");
        assert!(text.contains("- sleep / workers=16: knee between 100 and 400 → between 10 and 30 req/s: at least 70 % lower"), "{text}");
        // A file that does not decode says so instead of vanishing.
        std::fs::write(dir.join(FILE), "{}").unwrap();
        assert!(section(&dir).unwrap().contains("could not be read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
