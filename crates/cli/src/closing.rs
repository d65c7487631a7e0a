//! The few lines a knee search ends on at the terminal (`loadlab knee`, `loadlab demo`):
//! each knee as a range, its why with its key figure, and what was probed. The full report
//! stays in the bundle.

use std::fmt::Write as _;
use std::path::Path;

use loadlab_lab::bundle::{read_configs, read_json, read_steps, ScenarioKnee};
use loadlab_lab::plan::Model;
use loadlab_lab::verdict::Limit;
use loadlab_lab::Plan;

/// A load value as the closing lines print it.
pub(crate) fn num(v: f64) -> String {
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// The unit of a plan's steps.
pub(crate) fn unit(plan: &Plan) -> &'static str {
    match plan.load.model {
        Model::Open => "req/s",
        Model::Closed if plan.scenarios.iter().all(|s| s.protocol.multiplexed()) => "streams",
        Model::Closed => "connections",
    }
}

/// The knee of one search in words: `between 40 and 41.25 req/s`, `at least 100000 req/s`,
/// `below 10 req/s`.
pub(crate) fn range_words(k: &ScenarioKnee, unit: &str) -> String {
    let o = &k.outcome;
    if o.limited_by == Some(Limit::Rejected) {
        return format!(
            "not measured: the server rejected the request at {} {unit}",
            o.first_unsustained.map_or("?".into(), num)
        );
    }
    match (o.knee, o.first_unsustained) {
        (Some(lo), Some(hi)) => format!("between {} and {} {unit}", num(lo), num(hi)),
        (Some(lo), None) => format!(
            "at least {} {unit} (sustained at the highest load tried)",
            num(lo)
        ),
        (None, Some(hi)) => format!(
            "below {} {unit} (the first load tried was not sustained)",
            num(hi)
        ),
        (None, None) => "not measured".into(),
    }
}

/// True when a search of the bundle stopped on a rejected request (no knee measured).
pub(crate) fn rejected(bundle: &Path) -> bool {
    read_configs(bundle).unwrap_or_default().iter().any(|c| {
        c.knees
            .iter()
            .any(|k| k.outcome.limited_by == Some(Limit::Rejected))
    })
}

/// The closing lines of a bundle's knee searches.
pub(crate) fn knees(bundle: &Path) -> std::io::Result<String> {
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
    for s in &steps {
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
