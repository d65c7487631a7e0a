//! The answer a report opens with, before any chart or table: per scenario and
//! configuration, where the knee is (a range), why (one sentence with its figures), each
//! SLO clause at the last load sustained and at the first not sustained, the best
//! configuration when one is resolvably ahead, and what to be wary of (loadlab's own
//! limit, lost agents or probes, clauses the counts could not resolve, configurations that
//! did not run). Both `report.md` and `report.html` put it first.
//!
//! The knee's words are [`crate::knee::range_words`], the ones the terminal prints too.

use std::fmt::Write;

use loadlab_lab::bundle::{ConfigRecord, ConfigStatus, StepRecord};
use loadlab_lab::diagnosis::Bottleneck;
use loadlab_lab::gate::Figures;
use loadlab_lab::plan::{Model, Plan, Slo};
use loadlab_lab::verdict::{percentile_of, Limit};

use crate::format::{load, num, pct_abs, pct_whole};
use crate::knee::{fixed_knee, fixed_words, range_words, unit};

/// One SLO clause.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Clause {
    /// The `q` percentile at most `ms`.
    Latency { q: f64, ms: f64 },
    /// Failed requests at most this fraction.
    Errors(f64),
    /// The server kept pace with the arrivals, at least this fraction (open loop).
    Throughput(f64),
}

impl Clause {
    fn of(slo: &Slo, model: Model) -> Vec<Clause> {
        let mut v: Vec<Clause> = slo
            .latency_bounds()
            .into_iter()
            .map(|(q, ms)| Clause::Latency { q, ms })
            .collect();
        v.push(Clause::Errors(slo.max_error_rate));
        if model == Model::Open {
            v.push(Clause::Throughput(slo.min_achieved_ratio));
        }
        v
    }

    fn words(self) -> String {
        match self {
            Clause::Latency { q, ms } => format!("p{} < {} ms", num(q), num(ms)),
            Clause::Errors(x) => format!("errors < {} %", num(100.0 * x)),
            Clause::Throughput(x) => format!("keeps pace ≥ {} %", num(100.0 * x)),
        }
    }

    fn limit(self) -> Limit {
        match self {
            Clause::Latency { .. } => Limit::Latency,
            Clause::Errors(_) => Limit::Errors,
            Clause::Throughput(_) => Limit::Throughput,
        }
    }

    /// The figure for the clause, and whether it is beyond the bound.
    fn figure(self, f: &Figures<'_>) -> Option<(String, bool)> {
        match self {
            Clause::Latency { q, ms } => {
                percentile_of(f, q).map(|v| (format!("{} ms", num(v)), v > ms))
            }
            Clause::Errors(max) => {
                let attempts = f.attempts.max(1) as f64;
                let rate = f.errors_total as f64 / attempts;
                Some((pct_abs(rate), rate > max))
            }
            Clause::Throughput(min) => {
                let pace = f.trend.map_or(1.0, |t| t.pace);
                Some((pct_abs(pace), pace < min))
            }
        }
    }

    /// The clause at one step, for the whole run or one request `name`: its figure, and
    /// passed, failed, or beyond the bound by less than the step's count of requests
    /// resolves (then not failed).
    fn at(self, s: &StepRecord, name: Option<&str>) -> String {
        let (figures, failed) = match name {
            None => (
                Some(Figures::of_run(&s.result)),
                s.verdict.limits.contains(&self.limit()),
            ),
            Some(name) => (
                s.result
                    .by_name
                    .iter()
                    .find(|n| n.name == name)
                    .map(Figures::of_name),
                s.verdict
                    .names
                    .iter()
                    .any(|n| n.name == name && n.limits.contains(&self.limit())),
            ),
        };
        let Some((figure, beyond)) = figures.as_ref().and_then(|f| self.figure(f)) else {
            return "-".into();
        };
        match (beyond, failed) {
            (true, true) => format!("{figure}, **failed**"),
            (true, false) => format!("{figure}, not resolved (too few requests to tell)"),
            (false, _) => format!("{figure}, passed"),
        }
    }
}

/// One scenario and configuration.
struct Row<'a> {
    scenario: String,
    config: String,
    knee: String,
    /// The highest load sustained at the knee.
    low: Option<f64>,
    /// The first load the server did not sustain.
    fail: Option<f64>,
    why: Option<String>,
    /// The why's bottleneck alone ("CPU-bound"), to count alike whys.
    why_label: Option<String>,
    /// The why's bottleneck.
    bottleneck: Option<Bottleneck>,
    /// The last step sustained and the first not sustained.
    steps: [Option<&'a StepRecord>; 2],
}

/// The run at `load` of a scenario and configuration that says what the knee says: the
/// last one `sustained` as asked, else the last one at all. A load repeated to confirm it
/// may have a run limited by loadlab itself, which says nothing about the server.
fn step_at<'a>(
    list: &[&'a StepRecord],
    load: Option<f64>,
    sustained: bool,
) -> Option<&'a StepRecord> {
    let load = load?;
    let at: Vec<&'a StepRecord> = list
        .iter()
        .filter(|s| (s.load - load).abs() < 1e-9)
        .copied()
        .collect();
    let says = |s: &&StepRecord| {
        s.verdict.sustained == sustained
            && (sustained
                || s.verdict
                    .limits
                    .iter()
                    .any(|l| matches!(l, Limit::Latency | Limit::Errors | Limit::Throughput)))
    };
    at.iter().rev().find(|s| says(s)).or(at.last()).copied()
}

fn rows<'a>(
    plan: &Plan,
    steps: &'a [StepRecord],
    configs: &[ConfigRecord],
    unit: &str,
) -> Vec<Row<'a>> {
    let mut config_order: Vec<&str> = configs.iter().map(|c| c.config.as_str()).collect();
    for s in steps {
        if !config_order.contains(&s.config.as_str()) {
            config_order.push(&s.config);
        }
    }
    let mut out = Vec::new();
    for sc in &plan.scenarios {
        for c in &config_order {
            let list: Vec<&StepRecord> = steps
                .iter()
                .filter(|s| s.scenario == sc.name && s.config == *c)
                .collect();
            if list.is_empty() {
                continue;
            }
            let searched = configs
                .iter()
                .find(|r| r.config == *c)
                .and_then(|r| r.knees.iter().find(|k| k.scenario == sc.name));
            let (knee, low, fail, diagnosis) = match searched {
                Some(k) => (
                    searched_words(&k.outcome, unit),
                    k.outcome.knee,
                    k.outcome.first_unsustained,
                    k.diagnosis.as_ref(),
                ),
                None => {
                    let f = fixed_knee(&list);
                    let words = fixed_words(&f, unit);
                    (words, f.best, f.fail, None)
                }
            };
            let diagnosis = diagnosis
                .or_else(|| step_at(&list, fail, false).and_then(|s| s.diagnosis.as_ref()));
            let finding = diagnosis.and_then(|d| d.findings.first());
            let why = finding.map(|f| {
                let evidence = f.evidence.split("; ruled out").next().unwrap_or_default();
                format!("{}: {}", f.bottleneck.label(), evidence.trim())
            });
            let why_label = finding.map(|f| f.bottleneck.label().to_string());
            out.push(Row {
                scenario: sc.name.clone(),
                config: c.to_string(),
                knee,
                low,
                fail,
                why,
                why_label,
                bottleneck: finding.map(|f| f.bottleneck),
                steps: [step_at(&list, low, true), step_at(&list, fail, false)],
            });
        }
    }
    for r in &mut out {
        if let Some(but) = cpu_not_spent(r, steps, unit) {
            if let Some(why) = &mut r.why {
                why.push_str(&but);
            }
        }
    }
    out
}

/// How much more CPU time another configuration must have used, while holding, than a
/// CPU-bound step did before that step's CPU counts as not spent: a quarter more, and at
/// least a tenth of one CPU.
const MORE_CPU_RATIO: f64 = 1.25;
const MORE_CPU_POINTS: f64 = 10.0;

/// A CPU-bound why read against the other configurations of its scenario: where one held
/// the load this step broke at, or more, on no more CPUs, while its target used clearly more
/// CPU time than this step's did, the same CPUs could give the target more than it got here,
/// so their capacity does not explain the knee: the target spent its time otherwise (a pool
/// too small, a lock) or something else ran on its CPUs. A server at its CPUs' limit in
/// both, as when a knob makes each request dearer, is left alone. Returns what the why
/// adds: the other configuration, both figures, and the parameters that differ.
fn cpu_not_spent(r: &Row<'_>, steps: &[StepRecord], unit: &str) -> Option<String> {
    if r.bottleneck != Some(Bottleneck::CpuBound) {
        return None;
    }
    let broke = r.steps[1]?;
    let here = broke.probes.as_ref()?;
    let cpus = here.limits.as_ref()?.cpus;
    let used = here.delta.cpu_percent;
    let held = steps
        .iter()
        .filter(|s| {
            s.scenario == r.scenario
                && s.config != r.config
                && s.verdict.sustained
                && s.load >= broke.load - 1e-9
        })
        .filter_map(|s| {
            let p = s.probes.as_ref()?;
            let more = p.delta.cpu_percent;
            (p.limits.as_ref()?.cpus <= cpus + 1e-9
                && more >= used * MORE_CPU_RATIO
                && more - used >= MORE_CPU_POINTS)
                .then_some((s, more))
        })
        .max_by(|a, b| a.0.load.total_cmp(&b.0.load))?;
    let (other, more) = held;
    let differs: Vec<String> = broke
        .params
        .iter()
        .filter_map(|(k, v)| {
            let there = other.params.iter().find(|(ok, _)| ok == k)?;
            (there.1 != *v).then(|| format!("{k} {v} here, {} there", there.1))
        })
        .collect();
    Some(format!(
        "; but `{}` held {} {unit} with its target using {} of one CPU, against {} here, on no more CPUs: the capacity of its CPUs does not explain this knee, what differs between the two ({}) does, through what the target did with its CPU time or what else ran on its CPUs",
        other.config,
        load(other.load),
        pct_whole(more / 100.0),
        pct_whole(used / 100.0),
        if differs.is_empty() {
            "nothing in the matrix".to_string()
        } else {
            differs.join(", ")
        }
    ))
}

/// A searched knee's range in words; a repeated load that held in some runs and not others
/// is said, as the closing lines say it: the range rests on it.
fn searched_words(o: &loadlab_lab::knee::KneeOutcome, unit: &str) -> String {
    let mut words = range_words(o, unit);
    if let Some(s) = o.resolution_s {
        words.push_str(&format!(
            ", as narrow as its {} s steps of Poisson arrivals tell apart",
            load(s)
        ));
    }
    if !o.non_monotonic.is_empty() {
        let at: Vec<String> = o
            .non_monotonic
            .iter()
            .map(|n| match n.split_once(": ") {
                Some((load, what)) => format!("at {load} {unit}: {what}"),
                None => n.clone(),
            })
            .collect();
        words.push_str(&format!(", not confirmed ({})", at.join("; ")));
    }
    words
}

/// Per scenario with several configurations: the one whose knee is resolvably ahead (its
/// range's low end at or above every other range's high end), or that none is.
fn best(rows: &[Row<'_>], unit: &str) -> Vec<String> {
    let mut scenarios: Vec<&str> = Vec::new();
    for r in rows {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    let mut out = Vec::new();
    for sc in scenarios {
        let mine: Vec<&Row<'_>> = rows.iter().filter(|r| r.scenario == sc).collect();
        // Fewer than two, or no configuration broke: nothing to rank.
        if mine.len() < 2 || mine.iter().all(|r| r.fail.is_none()) {
            continue;
        }
        // A range's top: its first unsustained load, or unbounded ("at least").
        let top = |r: &Row<'_>| r.fail.unwrap_or(f64::INFINITY);
        // `o` is resolvably above `r`: it sustained a load at which `r` had broken.
        let above = |o: &Row<'_>, r: &Row<'_>| o.low.is_some_and(|lo| top(r) <= lo);
        let unbeaten: Vec<&Row<'_>> = mine
            .iter()
            .copied()
            .filter(|r| !mine.iter().any(|o| o.config != r.config && above(o, r)))
            .collect();
        let ahead_of_rest = !unbeaten.is_empty()
            && unbeaten.len() < mine.len()
            && mine
                .iter()
                .filter(|o| !unbeaten.iter().any(|b| b.config == o.config))
                .all(|o| unbeaten.iter().all(|b| above(b, o)));
        let names = |v: &[&Row<'_>]| {
            v.iter()
                .map(|r| format!("`{}`", r.config))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(match (ahead_of_rest, unbeaten.as_slice()) {
            (true, [r]) => format!(
                "**{sc}**: best configuration {}: it sustained {} {unit}, where every other configuration had already broken",
                names(&[r]),
                load(r.low.unwrap_or_default())
            ),
            (true, best) => format!(
                "**{sc}**: best configurations {}: each sustained a load at which every other configuration had already broken; their own knees overlap, so none of them is resolvably ahead",
                names(best)
            ),
            _ => format!(
                "**{sc}**: no configuration's knee is apart from every other's: their ranges overlap, so none is resolvably best"
            ),
        });
    }
    out
}

/// What a reader should weigh before trusting the figures.
fn warnings(steps: &[StepRecord], configs: &[ConfigRecord]) -> Vec<String> {
    let mut out = Vec::new();
    let count = |f: &dyn Fn(&StepRecord) -> bool| steps.iter().filter(|s| f(s)).count();
    let generator = count(&|s| s.verdict.limits.contains(&Limit::GeneratorLimited));
    if generator > 0 {
        out.push(format!(
            "{generator} step{} limited by loadlab itself (generator-limited): {} nothing about the server; see the step notes",
            if generator == 1 { " was" } else { "s were" },
            if generator == 1 { "it says" } else { "they say" }
        ));
    }
    let agents = count(&|s| s.result.agents.iter().any(|a| a.lost.is_some()));
    if agents > 0 {
        out.push(format!(
            "an agent was lost during {agents} step{}",
            if agents == 1 { "" } else { "s" }
        ));
    }
    let probes = count(&|s| s.probes.as_ref().is_some_and(|p| p.lost.is_some()));
    if probes > 0 {
        out.push(format!(
            "the probe's source stopped answering during {probes} step{}: the why there rests on fewer samples",
            if probes == 1 { "" } else { "s" }
        ));
    }
    let unresolved = count(&|s| !s.verdict.unresolved.is_empty());
    if unresolved > 0 {
        out.push(format!(
            "{unresolved} step{} a clause the request count could not resolve (not counted as failed; see the step notes)",
            if unresolved == 1 { " had" } else { "s had" }
        ));
    }
    for c in configs {
        let what = match c.status {
            ConfigStatus::Completed => continue,
            ConfigStatus::Unavailable => "unavailable here",
            ConfigStatus::Interrupted => "interrupted",
            ConfigStatus::NotReady => "its target never became ready",
            ConfigStatus::Crashed => "a target exited during a step",
        };
        out.push(format!(
            "configuration `{}`: {what}{}",
            c.config,
            c.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    for c in configs {
        for k in &c.knees {
            if let (Some(s), Some(_)) = (k.outcome.stopped, k.outcome.first_unsustained) {
                out.push(format!(
                    "{} / {}: the search stopped at {} ({}): the range is the server's, only not narrowed or confirmed further",
                    c.config,
                    k.scenario,
                    load(s.at),
                    s.by.describe()
                ));
            }
        }
    }
    out
}

/// Beyond this many configurations a scenario is answered in groups (configurations
/// whose knees read the same) and its clauses in counts, so that a large matrix still
/// answers in its first screen; each configuration's own line is in the Knees table.
const COMPACT_BEYOND: usize = 4;

/// The scenarios answered in groups ([`COMPACT_BEYOND`]), in plan order.
fn compact_scenarios<'r>(rows: &'r [Row<'_>]) -> Vec<&'r str> {
    let mut v: Vec<&str> = Vec::new();
    for r in rows {
        if !v.contains(&r.scenario.as_str())
            && rows.iter().filter(|o| o.scenario == r.scenario).count() > COMPACT_BEYOND
        {
            v.push(&r.scenario);
        }
    }
    v
}

/// A scenario of many configurations: one line per knee shared, with the configurations
/// that have it and their whys counted.
fn compact_lines(out: &mut String, rows: &[Row<'_>], scenario: &str) {
    let mine: Vec<&Row<'_>> = rows.iter().filter(|r| r.scenario == scenario).collect();
    let _ = writeln!(out, "- **{scenario}** ({} configurations):", mine.len());
    let mut said: Vec<&str> = Vec::new();
    for r in &mine {
        if said.contains(&r.knee.as_str()) {
            continue;
        }
        said.push(&r.knee);
        let alike: Vec<&&Row<'_>> = mine.iter().filter(|o| o.knee == r.knee).collect();
        let names: Vec<String> = alike.iter().map(|o| format!("`{}`", o.config)).collect();
        let mut whys: Vec<(&str, usize)> = Vec::new();
        for o in &alike {
            if let Some(l) = &o.why_label {
                match whys.iter_mut().find(|(w, _)| *w == l.as_str()) {
                    Some((_, n)) => *n += 1,
                    None => whys.push((l, 1)),
                }
            }
        }
        let why = if whys.is_empty() {
            String::new()
        } else {
            format!(
                " Why: {}.",
                whys.iter()
                    .map(|(w, n)| format!("{w} in {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let _ = writeln!(
            out,
            "  - knee {} in {} of {}: {}.{why}",
            r.knee,
            alike.len(),
            mine.len(),
            names.join(", ")
        );
    }
}

/// A scenario of many configurations in the clause table: each clause counted over the
/// configurations that broke, at the last load each sustained and the first it did not.
fn compact_clauses(out: &mut String, plan: &Plan, rows: &[Row<'_>], scenario: &str) {
    let broke: Vec<&Row<'_>> = rows
        .iter()
        .filter(|r| r.scenario == scenario && r.steps[1].is_some())
        .collect();
    if broke.is_empty() {
        return;
    }
    let all = rows.iter().filter(|r| r.scenario == scenario).count();
    let count = |c: Clause, side: usize| -> String {
        let (mut passed, mut failed, mut unresolved) = (0, 0, 0);
        for r in &broke {
            let Some(s) = r.steps[side] else { continue };
            let at = c.at(s, None);
            if at.ends_with("**failed**") {
                failed += 1;
            } else if at.contains("not resolved") {
                unresolved += 1;
            } else if at.ends_with("passed") {
                passed += 1;
            }
        }
        let mut parts = Vec::new();
        if failed > 0 {
            parts.push(format!("**failed** in {failed}"));
        }
        if unresolved > 0 {
            parts.push(format!("not resolved in {unresolved}"));
        }
        if passed > 0 {
            parts.push(format!("passed in {passed}"));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    };
    for (i, c) in Clause::of(&plan.slo, plan.load.model)
        .into_iter()
        .enumerate()
    {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            if i == 0 { scenario } else { "" },
            if i == 0 {
                format!("the {} of {all} that broke", broke.len())
            } else {
                String::new()
            },
            c.words(),
            count(c, 0),
            count(c, 1),
        );
    }
}

/// The answer section, in Markdown (empty for a bundle without steps).
pub fn markdown(plan: &Plan, steps: &[StepRecord], configs: &[ConfigRecord]) -> String {
    let unit = unit(plan);
    let rows = rows(plan, steps, configs, unit);
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(out, "## Answer\n");
    let many_configs = rows.iter().any(|r| {
        rows.iter()
            .any(|o| o.scenario == r.scenario && o.config != r.config)
    });
    // Rows that read the same and have no why (knees not reached, mostly) share one line: a
    // scenario whose every configuration is among them is named once.
    let label = |r: &Row<'_>| {
        if many_configs || rows.len() > 1 {
            format!("**{}** ({})", r.scenario, r.config)
        } else {
            format!("**{}**", r.scenario)
        }
    };
    let compact = compact_scenarios(&rows);
    let mut said: Vec<&str> = Vec::new();
    for sc in &compact {
        compact_lines(&mut out, &rows, sc);
    }
    // The rest, one line per scenario and configuration.
    let full: Vec<&Row<'_>> = rows
        .iter()
        .filter(|r| !compact.contains(&r.scenario.as_str()))
        .collect();
    for r in full.iter().copied() {
        if r.why.is_none() {
            if said.contains(&r.knee.as_str()) {
                continue;
            }
            let alike: Vec<&Row<'_>> = full
                .iter()
                .copied()
                .filter(|o| o.why.is_none() && o.knee == r.knee)
                .collect();
            if alike.len() > 1 {
                said.push(&r.knee);
                let mut who: Vec<String> = Vec::new();
                let mut named: Vec<&str> = Vec::new();
                for o in &alike {
                    let all = rows.iter().filter(|x| x.scenario == o.scenario).count();
                    let here = alike.iter().filter(|x| x.scenario == o.scenario).count();
                    if all > 1 && here == all {
                        if !named.contains(&o.scenario.as_str()) {
                            named.push(&o.scenario);
                            who.push(format!("**{}** (all {all} configurations)", o.scenario));
                        }
                    } else if many_configs {
                        who.push(label(o));
                    } else {
                        who.push(format!("**{}**", o.scenario));
                    }
                }
                let _ = writeln!(out, "- {}: knee {}.", who.join(", "), r.knee);
                continue;
            }
        }
        let _ = writeln!(out, "- {}: knee {}.", label(r), r.knee);
        if let Some(why) = &r.why {
            let _ = writeln!(out, "  Why: {why}.");
        }
    }
    for b in best(&rows, unit) {
        let _ = writeln!(out, "- {b}.");
    }
    let _ = writeln!(out);
    // Each clause at the two steps that bracket the knee; for a mix of named requests, also
    // the clauses each name failed at the second, by its own bounds. A knee not reached
    // (every step held) has no such pair: its line above says so.
    let bracketed: Vec<&Row<'_>> = rows.iter().filter(|r| r.steps[1].is_some()).collect();
    if bracketed.is_empty() {
        return finish(out, steps, configs);
    }
    let _ = writeln!(
        out,
        "| scenario | configuration | SLO clause | at the last load sustained | at the first load not sustained |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    let mut compacted: Vec<&str> = Vec::new();
    for r in bracketed {
        if compact.contains(&r.scenario.as_str()) {
            if !compacted.contains(&r.scenario.as_str()) {
                compacted.push(&r.scenario);
                compact_clauses(&mut out, plan, &rows, &r.scenario);
            }
            continue;
        }
        let mut lines: Vec<(Option<&str>, Clause)> = Clause::of(&plan.slo, plan.load.model)
            .into_iter()
            .map(|c| (None, c))
            .collect();
        if let Some(s) = r.steps[1] {
            for n in &s.verdict.names {
                for c in Clause::of(plan.slo.for_name(&n.name), plan.load.model) {
                    if n.limits.contains(&c.limit()) {
                        lines.push((Some(n.name.as_str()), c));
                    }
                }
            }
        }
        for (i, (name, c)) in lines.iter().enumerate() {
            let cell = |s: Option<&StepRecord>| {
                s.map_or("-".to_string(), |s| {
                    let at = c.at(s, *name);
                    if i == 0 {
                        format!("{} {unit}: {at}", load(s.load))
                    } else {
                        at
                    }
                })
            };
            let words = match name {
                Some(n) => format!("`{n}`: {}", c.words()),
                None => c.words(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {words} | {} | {} |",
                if i == 0 { r.scenario.as_str() } else { "" },
                if i == 0 { r.config.as_str() } else { "" },
                cell(r.steps[0]),
                cell(r.steps[1]),
            );
        }
    }
    let _ = writeln!(out);
    finish(out, steps, configs)
}

/// The warnings after the answer.
fn finish(mut out: String, steps: &[StepRecord], configs: &[ConfigRecord]) -> String {
    let warnings = warnings(steps, configs);
    if !warnings.is_empty() {
        let _ = writeln!(out, "Before trusting these figures:\n");
        for w in warnings {
            let _ = writeln!(out, "- {w}.");
        }
        let _ = writeln!(out);
    }
    out
}
