//! `loadlab tune`: searches a plan's `[matrix]` for the configuration with the highest
//! knee of one scenario, in a fraction of the full product's load ([`search`]), and
//! measures what each knob did ([`effects`]). The bundle is the lab's (every step of every
//! configuration tried, probes and diagnosis), plus `tune.json` ([`TuneResult`]).

pub mod effects;
pub mod search;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bundle::{ConfigRecord, ConfigStatus};
use crate::experiment::{run_driven, LabError, LabOptions, LabSummary, Session};
use crate::knee::{self, KneeParams, StepSignal};
use crate::plan::{Budget, Model, Plan, Steps};
use crate::verdict::Limit;
use search::{Ended, Eval, Evaluator, Space, Trial};

/// `tune.json`'s format version.
pub const TUNE_VERSION: u32 = 1;

/// A plan made ready for tune: one scenario, a knee search.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The plan tune runs: the tuned scenario only, its knee search in `load.steps`.
    pub plan: Plan,
    /// The scenario whose knee is maximized.
    pub scenario: String,
    /// The knee search's bounds.
    pub params: KneeParams,
    /// Load time of one step (warm-up and measured time), seconds.
    pub step_s: f64,
}

/// Checks that `plan` can be tuned and makes the plan tune runs (before any load): a
/// matrix of two configurations or more, a knee search (`load.knee`, or `[tune] knee`), and
/// the scenario to maximize (`[tune] scenario`, or the plan's only scenario).
pub fn prepare(plan: &Plan) -> Result<Prepared, String> {
    let spec = plan.tune.clone().unwrap_or_default();
    let configs = plan.configs();
    if configs.len() < 2 {
        return Err(format!(
            "plan `{}` has {} configuration{}: tune searches a [matrix] of two or more (e.g. `[matrix] workers = [2, 4, 8, 16]`)",
            plan.name,
            configs.len(),
            if configs.len() == 1 { "" } else { "s" }
        ));
    }
    let scenario = match (&spec.scenario, plan.scenarios.as_slice()) {
        (Some(s), _) => s.clone(),
        (None, [only]) => only.name.clone(),
        (None, all) => {
            return Err(format!(
                "plan `{}` has {} scenarios ({}): say which knee tune maximizes with `[tune] scenario = \"NAME\"`",
                plan.name,
                all.len(),
                all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        }
    };
    let steps = match (&spec.knee, &plan.load.steps) {
        (Some(k), _) => k.clone(),
        (None, k @ Steps::Knee { .. }) => k.clone(),
        (None, _) => {
            return Err(format!(
                "plan `{}` gives fixed steps, and tune compares knees: set `load.knee = {{ start, max }}` or `[tune] knee = {{ start = 10, max = 2000 }}` (and `[quick] tune_knee` for --quick)",
                plan.name
            ))
        }
    };
    let Steps::Knee {
        start,
        max,
        precision,
        growth,
        confirm,
    } = steps
    else {
        unreachable!("a knee search")
    };
    let mut tuned = plan.clone();
    tuned.scenarios.retain(|s| s.name == scenario);
    // A knee search of tune's own (the plan's load runs fixed steps or all scenarios
    // together): a `requests` cap was written for those steps, and would cut tune's short.
    if spec.knee.is_some() {
        for s in &mut tuned.scenarios {
            s.requests = None;
        }
    }
    tuned.load.steps = steps;
    if let Some(d) = spec.step_duration {
        tuned.load.step_duration = d;
    }
    Ok(Prepared {
        params: KneeParams {
            start,
            max,
            precision,
            growth,
            integer: plan.load.model == Model::Closed,
            confirm,
            poisson_s: tuned.load.poisson_s(),
        },
        step_s: (tuned.load.warmup + tuned.load.step_duration).as_secs_f64(),
        plan: tuned,
        scenario,
    })
}

/// A knee as a range: at least `lo`, below `hi` (either unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KneeRange {
    /// The highest load sustained in every run.
    pub lo: Option<f64>,
    /// The lowest load above it not sustained.
    pub hi: Option<f64>,
}

/// The winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Configuration id.
    pub config: String,
    /// Each knob's value, as written in the plan.
    pub params: BTreeMap<String, String>,
    /// Its knee.
    pub knee: KneeRange,
    /// Why its knee is there: the diagnosis at its first unsustained load.
    pub why: Option<String>,
    /// Against the runner-up: resolvably better, or not, in one sentence.
    pub versus_runner_up: String,
    /// Resolvably better than the runner-up (ranges disjoint).
    pub resolved: bool,
    /// Its knee was not reached for a reason that is not the server's (the generator, an
    /// agent): the knee is at least `knee.lo`.
    pub lower_bound_only: bool,
}

/// One configuration tried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    /// Configuration id.
    pub config: String,
    /// Each knob's value.
    pub params: BTreeMap<String, String>,
    /// `knee` (a search ran), `dropped` (not sustained at the incumbent's knee in the
    /// race), `no_knee` (the first load tried was not sustained), `failed` (it did not run).
    pub outcome: String,
    /// Its knee.
    pub knee: KneeRange,
    /// The load it was raced at (the best knee then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raced_at: Option<f64>,
    /// Why tune tried it.
    pub reason: String,
    /// Why its knee is where it is (the diagnosis), or why it did not run.
    pub why: Option<String>,
    /// Steps run.
    pub steps: usize,
    /// Load time, seconds.
    pub load_seconds: f64,
}

/// `tune.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneResult {
    /// [`TUNE_VERSION`].
    pub version: u32,
    /// The scenario whose knee was maximized.
    pub scenario: String,
    /// The knee's unit (`req/s`, `connections`, `streams`).
    pub unit: String,
    /// The budget.
    pub budget: Budget,
    /// The seed (ties between equally promising moves).
    pub seed: u64,
    /// Why the search ended.
    pub ended: Ended,
    /// Configurations in the matrix.
    pub configs_total: usize,
    /// Configurations tried.
    pub configs_evaluated: usize,
    /// Load time spent, seconds (steps × their warm-up and measured time).
    pub load_seconds: f64,
    /// What a knee search of every configuration would have cost, seconds: the steps a
    /// full search takes to each knee tune measured (the search replayed at that knee),
    /// averaged, times the configurations. `None` without a measured knee.
    pub full_product_load_seconds: Option<f64>,
    /// The winner (`None`: no configuration had a knee).
    pub best: Option<Best>,
    /// Every configuration tried, in order.
    pub tried: Vec<Tried>,
    /// Each knob's measured effect.
    pub knobs: Vec<effects::KnobVerdict>,
    /// Every pair of configurations tried that differ in one knob.
    pub effects: Vec<effects::Effect>,
}

/// Steps a full knee search takes to a knee at `knee` (the search replayed with every
/// load up to it sustained).
pub fn full_search_steps(params: KneeParams, knee: f64) -> usize {
    let mut n = 0;
    knee::search(params, &mut |v, _| {
        n += 1;
        if v <= knee {
            StepSignal::Sustained
        } else {
            StepSignal::NotSustained(Limit::Latency)
        }
    });
    n
}

fn params_map(params: &[(String, String)]) -> BTreeMap<String, String> {
    params.iter().cloned().collect()
}

/// What a configuration's record says, for the search.
fn eval_of(
    rec: &ConfigRecord,
    scenario: &str,
    steps: usize,
    step_s: f64,
) -> (Eval, Option<String>) {
    let load_s = steps as f64 * step_s;
    let Some(k) = rec.knees.iter().find(|k| k.scenario == scenario) else {
        let why = rec
            .message
            .clone()
            .unwrap_or_else(|| format!("{:?}: no knee", rec.status).to_lowercase());
        return (
            Eval {
                failed: true,
                steps,
                load_s,
                ..Eval::default()
            },
            Some(why),
        );
    };
    let o = &k.outcome;
    let first = k.diagnosis.as_ref().and_then(|d| d.findings.first());
    let why = match (first, o.limited_by) {
        // The rules' list of what they ruled out stays in the report's step notes.
        (Some(f), _) => Some(format!(
            "{}: {}",
            f.bottleneck.label(),
            f.evidence.split("; ruled out").next().unwrap_or_default()
        )),
        (None, Some(l)) => Some(l.describe().to_string()),
        (None, None) => None,
    };
    // A search stopped by loadlab's own limit (even inside a bracket the server's steps
    // found) is ranked on its floor alone: a higher floor may replace it.
    let not_the_server = o.stopped.is_some()
        || o.limited_by.is_some_and(|l| {
            matches!(
                l,
                Limit::GeneratorLimited | Limit::AgentLost | Limit::Interrupted
            )
        })
        || first.is_some_and(|f| f.bottleneck.not_the_server());
    let failed = rec.status != ConfigStatus::Completed && o.knee.is_none()
        || o.limited_by.is_some_and(Limit::not_the_load);
    let hi = if not_the_server {
        None
    } else {
        o.first_unsustained
    };
    (
        Eval {
            lo: o.knee,
            hi,
            beyond_mixed: hi.and_then(|h| beyond_mixed(&o.values, h)),
            dropped: o.dropped(),
            failed,
            not_the_server,
            bottleneck: first.map(|f| f.bottleneck),
            named: first
                .and_then(|f| f.parameter.clone())
                .map(|p| p.split(", ").map(str::to_string).collect())
                .unwrap_or_default(),
            steps,
            load_s,
        },
        why,
    )
}

/// When some run sustained `hi`, the lowest load above it that no run sustained
/// (`INFINITY`: none was tried); `None` when no run sustained `hi`.
fn beyond_mixed(values: &[crate::knee::ValueRuns], hi: f64) -> Option<f64> {
    values
        .iter()
        .any(|r| r.value == hi && r.sustained > 0)
        .then(|| {
            values
                .iter()
                .filter(|r| r.value > hi && r.never())
                .map(|r| r.value)
                .fold(f64::INFINITY, f64::min)
        })
}

/// The lab as the search's evaluator: runs each configuration in the session and rewrites
/// `tune.json` after each.
struct LabEval<'s, 'a> {
    session: &'s mut Session<'a>,
    prepared: &'s Prepared,
    space: &'s Space,
    configs: &'s [crate::matrix::Config],
    budget: Budget,
    seed: u64,
    dir: std::path::PathBuf,
    whys: Vec<Option<String>>,
    trials: Vec<Trial>,
}

impl LabEval<'_, '_> {
    fn result(&self, ended: Ended) -> TuneResult {
        build_result(
            self.space,
            self.configs,
            self.prepared,
            &self.trials,
            &self.whys,
            ended,
            self.budget,
            self.seed,
        )
    }
}

impl Evaluator for LabEval<'_, '_> {
    type Error = LabError;

    fn eval(
        &mut self,
        config: usize,
        race: Option<search::Race>,
        why: &str,
    ) -> Result<Eval, LabError> {
        let id = self.configs[config].id.clone();
        let n = self.trials.len() + 1;
        let unit = unit(&self.prepared.plan);
        self.session.say(match race {
            Some(r) => format!(
                "tune: #{n} {id}, raced at {} {unit} (the best knee so far): {why}",
                knee::fmt(r.at)
            ),
            None => format!("tune: #{n} {id}: {why}"),
        });
        let before = self.session.steps_run();
        let rec = self.session.run(config, race)?.clone();
        let steps = self.session.steps_run() - before;
        let (eval, reason) = eval_of(&rec, &self.prepared.scenario, steps, self.prepared.step_s);
        self.whys.push(reason);
        self.trials.push(Trial {
            config,
            race_at: race.map(|r| r.at),
            reason: why.to_string(),
            eval: eval.clone(),
        });
        // Until the search ends, the file says it was cut short.
        write_result(&self.dir, &self.result(Ended::Interrupted))?;
        Ok(eval)
    }

    fn stopped(&self) -> bool {
        self.session.stopped()
    }
}

/// The unit of a plan's loads.
pub fn unit(plan: &Plan) -> &'static str {
    plan.unit()
}

/// Runs tune on a prepared plan and writes `tune.json` into the bundle (after every
/// configuration, so an interrupted or failed run keeps what it measured).
/// With `full`, every configuration is searched in full, in the plan's order, with no
/// racing: the full product's answer, to check tune's against.
pub fn run_tune(
    prepared: &Prepared,
    opts: &LabOptions,
    budget: Option<Budget>,
    seed: u64,
    full: bool,
) -> Result<(LabSummary, TuneResult), LabError> {
    let plan = &prepared.plan;
    let configs = plan.configs();
    let budget = match budget.or(plan.tune.as_ref().and_then(|t| t.budget)) {
        _ if full => Budget::Configs(configs.len()),
        Some(b) => b,
        None => search::default_budget(configs.len()),
    };
    let relieves = |k: &str| {
        plan.tune
            .as_ref()
            .and_then(|t| t.knobs.get(k).cloned())
            .unwrap_or_default()
    };
    let params: Vec<Vec<(String, String)>> = configs.iter().map(|c| c.params.clone()).collect();
    let space = Space::new(&plan.matrix, &params, &relieves);
    let mut result = None;
    let summary = run_driven(plan, opts, &mut |session| {
        session.say(format!(
            "tune: {} configurations; budget {}; maximizing the knee of `{}`",
            configs.len(),
            budget.words(),
            prepared.scenario
        ));
        if let Budget::Configs(n) = budget {
            session.expect_configs(n.min(configs.len()));
        }
        let dir = session.bundle_dir().to_path_buf();
        let mut ev = LabEval {
            session,
            prepared,
            space: &space,
            configs: &configs,
            budget,
            seed,
            dir,
            whys: Vec::new(),
            trials: Vec::new(),
        };
        let ended = if full {
            for i in 0..configs.len() {
                if ev.stopped() {
                    break;
                }
                ev.eval(i, None, "--full: every configuration, searched in full")?;
            }
            if ev.stopped() {
                Ended::Interrupted
            } else {
                Ended::Exhausted
            }
        } else {
            search::search(&space, &mut ev, budget, seed)?.ended
        };
        let r = ev.result(ended);
        write_result(&ev.dir, &r)?;
        result = Some(r);
        Ok(())
    })?;
    let result = result.expect("the driver ran");
    Ok((summary, result))
}

/// Writes `tune.json` (a whole file or none: written beside, then renamed).
fn write_result(dir: &std::path::Path, r: &TuneResult) -> Result<(), LabError> {
    let path = dir.join("tune.json");
    let tmp = dir.join(".tune.json.tmp");
    crate::bundle::write_json(&tmp, r)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| LabError::Bundle {
            path: path.clone(),
            source,
        })
}

/// A knee range in words: `155 to 160`, `below 160`, `at least 155`.
pub fn range_words(k: &KneeRange, unit: &str) -> String {
    match (k.lo, k.hi) {
        (Some(lo), Some(hi)) => format!("{} to {} {unit}", knee::fmt(lo), knee::fmt(hi)),
        (Some(lo), None) => format!("at least {} {unit}", knee::fmt(lo)),
        (None, Some(hi)) => format!("below {} {unit}", knee::fmt(hi)),
        (None, None) => "not measured".into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn build_result(
    space: &Space,
    configs: &[crate::matrix::Config],
    prepared: &Prepared,
    trials: &[Trial],
    whys: &[Option<String>],
    ended: Ended,
    budget: Budget,
    seed: u64,
) -> TuneResult {
    let unit = unit(&prepared.plan);
    let range = |e: &Eval| KneeRange { lo: e.lo, hi: e.hi };
    let tried: Vec<Tried> = trials
        .iter()
        .enumerate()
        .map(|(i, t)| Tried {
            config: configs[t.config].id.clone(),
            params: params_map(&configs[t.config].params),
            outcome: if t.eval.failed {
                "failed"
            } else if t.eval.dropped {
                "dropped"
            } else if t.eval.lo.is_none() {
                "no_knee"
            } else {
                "knee"
            }
            .into(),
            knee: range(&t.eval),
            raced_at: t.race_at,
            reason: t.reason.clone(),
            why: whys.get(i).cloned().flatten(),
            steps: t.eval.steps,
            load_seconds: t.eval.load_s,
        })
        .collect();
    let best_i = search::best(trials);
    let best = best_i.map(|b| {
        let t = &trials[b];
        // The runner-up: the highest floor among the others.
        let runner = trials
            .iter()
            .enumerate()
            .filter(|(i, o)| *i != b && !o.eval.failed)
            .max_by(|x, y| {
                x.1.eval
                    .floor()
                    .total_cmp(&y.1.eval.floor())
                    .then(y.1.eval.ceiling().total_cmp(&x.1.eval.ceiling()))
            });
        let (versus, resolved) = match runner {
            None => ("no other configuration ran to compare it with".to_string(), false),
            Some((_, r)) => {
                let resolved = t.eval.resolved_above(&r.eval);
                let words = format!(
                    "{} (knee {})",
                    configs[r.config].id,
                    range_words(&range(&r.eval), unit)
                );
                if resolved {
                    (format!("resolvably better than the runner-up, {words}: the ranges do not overlap"), true)
                } else {
                    (format!("not resolvably better than the runner-up, {words}: the ranges overlap, so either will do as far as this measurement can tell"), false)
                }
            }
        };
        Best {
            config: configs[t.config].id.clone(),
            params: params_map(&configs[t.config].params),
            knee: range(&t.eval),
            why: whys.get(b).cloned().flatten(),
            versus_runner_up: versus,
            resolved,
            lower_bound_only: t.eval.not_the_server,
        }
    });
    // The full product: every configuration searched from the start, at the knees measured.
    let knees: Vec<f64> = trials
        .iter()
        .filter(|t| !t.eval.failed && !t.eval.dropped)
        .filter_map(|t| match (t.eval.lo, t.eval.hi) {
            (Some(lo), Some(hi)) => Some((lo + hi) / 2.0),
            (Some(lo), None) => Some(lo),
            _ => None,
        })
        .collect();
    let full = (!knees.is_empty()).then(|| {
        let mean = knees
            .iter()
            .map(|&k| full_search_steps(prepared.params, k) as f64)
            .sum::<f64>()
            / knees.len() as f64;
        mean * configs.len() as f64 * prepared.step_s
    });
    let (knobs, effects) = effects::measure(space, configs, trials, unit);
    TuneResult {
        version: TUNE_VERSION,
        scenario: prepared.scenario.clone(),
        unit: unit.into(),
        budget,
        seed,
        ended,
        configs_total: configs.len(),
        configs_evaluated: trials.len(),
        load_seconds: trials.iter().map(|t| t.eval.load_s).sum(),
        full_product_load_seconds: full,
        best,
        tried,
        knobs,
        effects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_a_boundary_some_run_sustained_the_ceiling_is_the_first_load_none_did() {
        let v = |value: f64, runs: u32, sustained: u32| crate::knee::ValueRuns {
            value,
            runs,
            sustained,
        };
        let values = [
            v(74.375, 2, 2),
            v(79.6875, 2, 1),
            v(90.0, 1, 0),
            v(85.0, 1, 0),
            v(200.0, 1, 1),
        ];
        assert_eq!(beyond_mixed(&values, 79.6875), Some(85.0));
        // Every run at `hi` failed: `hi` bounds the knee as it is.
        assert_eq!(beyond_mixed(&values, 85.0), None);
        assert_eq!(
            beyond_mixed(&[v(10.0, 2, 1), v(20.0, 1, 1)], 10.0),
            Some(f64::INFINITY)
        );
    }

    #[test]
    fn a_full_search_to_a_knee_takes_the_steps_the_search_takes() {
        let p = KneeParams {
            start: 10.0,
            max: 10_000.0,
            precision: 0.05,
            growth: 2.0,
            integer: false,
            confirm: 1,
            poisson_s: None,
        };
        // 10, 20, 40, 80, 160 sustained, 320 not; bisection from 160..320 to 5 %: 240,
        // 200, 180, 170, 165 (5 steps); both ends confirmed (2).
        let n = full_search_steps(p, 162.0);
        assert!((10..=14).contains(&n), "{n}");
        assert!(full_search_steps(p, 1000.0) > full_search_steps(p, 20.0));
    }
}
