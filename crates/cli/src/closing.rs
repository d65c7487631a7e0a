//! The few lines a knee search ends on at the terminal (`loadlab knee`, `loadlab demo`):
//! each knee as a range, its why with its key figure, and what was probed. The full report
//! stays in the bundle.

use std::fmt::Write as _;
use std::path::Path;

use loadlab_lab::bundle::{read_configs, read_json, read_steps, ScenarioKnee};
use loadlab_lab::verdict::Limit;
use loadlab_lab::Plan;

/// A load value as the closing lines print it (as the reports do).
pub(crate) use loadlab_report::format::load as num;
pub(crate) use loadlab_report::knee::unit;

/// The knee of one search in words (the report's answer says the same).
pub(crate) fn range_words(k: &ScenarioKnee, unit: &str) -> String {
    loadlab_report::knee::range_words(&k.outcome, unit)
}

/// What to do when a search stopped on a step that judged loadlab or the run.
fn stop_advice(by: Limit) -> &'static str {
    match by {
        Limit::GeneratorLimited => {
            "loadlab could not offer the load on schedule there; add --threads or cores, \
             pin the server elsewhere, or spread the load with --agents"
        }
        Limit::AgentLost => "an agent was lost during the step; check the agents and run again",
        Limit::RowsUsedUp => {
            "the data file's rows were used up (data order unique); add rows or shorten the steps"
        }
        Limit::Interrupted => "the search was interrupted",
        _ => "the search stopped before the server broke",
    }
}

/// True when a search of the bundle stopped on a rejected request or an address where
/// nothing listens (no knee measured).
pub(crate) fn not_measured(bundle: &Path) -> bool {
    read_configs(bundle).unwrap_or_default().iter().any(|c| {
        c.knees
            .iter()
            .any(|k| k.outcome.limited_by.is_some_and(Limit::not_the_load))
    })
}

/// The closing lines of a bundle's knee searches; with `probes`, what the probes watched.
pub(crate) fn knees(bundle: &Path, probes: bool) -> std::io::Result<String> {
    let plan: Plan = read_json(&bundle.join("plan.json"))?;
    let configs = read_configs(bundle)?;
    let steps = read_steps(bundle).unwrap_or_default();
    let unit = unit(&plan);
    let mut out = String::new();
    let many = configs.len() > 1 || plan.scenarios.len() > 1;
    for c in &configs {
        if c.knees.is_empty() {
            if let Some(m) = &c.message {
                let _ = writeln!(out, "{}: {m}", c.config);
            }
        }
        for k in &c.knees {
            let o = &k.outcome;
            let label = if many {
                format!("{} / {}: ", c.config, k.scenario)
            } else {
                String::new()
            };
            let confirmed = match (o.range, o.confirmed) {
                (Some(_), true) => ", both ends confirmed",
                (Some(_), false) => ", not confirmed",
                (None, _) => "",
            };
            let _ = writeln!(out, "{label}knee {}{confirmed}", range_words(k, unit));
            // A mix of named requests: which of them broke at the knee.
            let broke = o.first_unsustained.and_then(|at| {
                steps
                    .iter()
                    .rev()
                    .find(|s| {
                        s.config == c.config
                            && s.scenario == k.scenario
                            && s.load == at
                            && !s.verdict.sustained
                    })
                    .and_then(|s| {
                        let all = s.verdict.names.len() == s.result.by_name.len();
                        s.verdict.names_failed().map(|n| (n, all))
                    })
            });
            match broke {
                Some((names, false)) => {
                    let _ = writeln!(out, "  broke: {names}; the other requests of the mix held");
                }
                Some((names, true)) => {
                    let _ = writeln!(out, "  broke: {names}");
                }
                None => {}
            }
            if let (Some(s), Some(_)) = (o.stopped, o.first_unsustained) {
                let _ = writeln!(
                    out,
                    "  note: the search stopped at {} ({}): the range is the server's, only not narrowed or confirmed further",
                    num(s.at),
                    s.by.describe()
                );
            }
            for n in &o.non_monotonic {
                let _ = writeln!(out, "  note: non-monotonic: {n}");
            }
            match &k.diagnosis {
                Some(d) => {
                    for f in &d.findings {
                        let _ = writeln!(out, "  why: {}: {}", f.bottleneck.label(), f.evidence);
                    }
                    if let Some(f) = d.findings.first() {
                        let _ = writeln!(out, "  try: {}", f.advice);
                    }
                }
                None if o.first_unsustained.is_none() && o.stopped.is_some() => {
                    let s = o.stopped.expect("checked");
                    let _ = writeln!(out, "  why: not found: {}", stop_advice(s.by));
                }
                None if o.first_unsustained.is_none() && o.knee.is_some() => {
                    let _ = writeln!(
                        out,
                        "  why: not reached; raise --max (or load.knee.max) to find it"
                    );
                }
                None => {}
            }
        }
    }
    // What the probes watched, once per source.
    let mut seen = Vec::new();
    for s in steps.iter().filter(|_| probes) {
        if let Some(src) = s.probes.as_ref().and_then(|p| p.source.as_ref()) {
            let line = src.found.clone();
            if !seen.contains(&line) {
                seen.push(line);
            }
        }
    }
    for line in seen {
        let _ = writeln!(out, "probed: {line}");
    }
    Ok(out)
}

/// What each knob did to the knee: for every two configurations of a scenario that differ
/// in one matrix parameter and both have a knee range, the ratio of their knees, with the
/// span the two ranges allow (`workers 2 → 8: knee ×4.0 (×3.6 to ×4.5)`).
pub(crate) fn knob_effects(bundle: &Path) -> std::io::Result<String> {
    let configs = read_configs(bundle)?;
    let mut out = String::new();
    for (i, a) in configs.iter().enumerate() {
        for b in &configs[i + 1..] {
            // (name, value in a, value in b) of each parameter that differs.
            let differ: Vec<(&str, &str, &str)> = a
                .params
                .iter()
                .zip(&b.params)
                .filter(|(x, y)| x != y)
                .map(|((k, x), (_, y))| (k.as_str(), x.as_str(), y.as_str()))
                .collect();
            let [(name, from, to)] = differ.as_slice() else {
                continue;
            };
            for ka in &a.knees {
                let Some(kb) = b.knees.iter().find(|k| k.scenario == ka.scenario) else {
                    continue;
                };
                let (Some([l1, h1]), Some([l2, h2])) = (ka.outcome.range, kb.outcome.range) else {
                    continue;
                };
                let mid = (l2 + h2) / (l1 + h1);
                let (lo, hi) = (l2 / h1, h2 / l1);
                let scenario = if a.knees.len() > 1 {
                    format!(" ({})", ka.scenario)
                } else {
                    String::new()
                };
                let moved = if lo > 1.0 || hi < 1.0 {
                    format!("knee ×{mid:.1} (×{lo:.1} to ×{hi:.1} within the measured ranges)")
                } else {
                    format!(
                        "no change the step spacing resolves (×{lo:.1} to ×{hi:.1} within the measured ranges)"
                    )
                };
                let _ = writeln!(out, "The knob: {name} {from} → {to}{scenario}: {moved}");
            }
        }
    }
    Ok(out)
}
