//! The tune section of report.md and report.html, and what `loadlab tune` prints: the
//! winner first, then what each knob did, the cost, and every configuration tried.

use std::fmt::Write as _;
use std::path::Path;

use loadlab_lab::tune::search::Ended;
use loadlab_lab::tune::{range_words, TuneResult};

/// `tune.json` of a bundle, if it has one.
pub fn read(dir: &Path) -> Option<std::io::Result<TuneResult>> {
    let path = dir.join("tune.json");
    path.exists().then(|| loadlab_lab::bundle::read_json(&path))
}

fn duration(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The section, in Markdown (also what `loadlab tune` prints).
pub fn text(r: &TuneResult) -> String {
    let mut o = String::new();
    let unit = r.unit.as_str();
    let _ = writeln!(
        o,
        "## Tune: the configuration with the highest knee of `{}`\n",
        r.scenario
    );
    match &r.best {
        Some(b) => {
            let _ = writeln!(
                o,
                "**Best: `{}`**, knee {}{}: {}.\n",
                b.config,
                range_words(&b.knee, unit),
                if b.lower_bound_only {
                    " (not reached: loadlab or an agent was the limit, so the server's knee is at least this)"
                } else {
                    ""
                },
                b.versus_runner_up
            );
            if let Some(why) = &b.why {
                let _ = writeln!(o, "Why it breaks there: {why}\n");
            }
        }
        None => {
            let _ = writeln!(
                o,
                "**No configuration tried has a knee**: none sustained its first load (see the table below for why).\n"
            );
        }
    }
    let _ = writeln!(
        o,
        "What each knob did, measured on configurations tried that differ in it alone (a change counts only when the two knee ranges do not overlap):\n"
    );
    for k in &r.knobs {
        let _ = writeln!(o, "- {}", k.sentence);
        for e in r.effects.iter().filter(|e| e.knob == k.knob) {
            let _ = writeln!(o, "  - {}", e.sentence);
        }
    }
    let ended = match r.ended {
        Ended::Converged => "every neighbour of the best configuration was tried",
        Ended::Budget => "the budget was spent",
        Ended::Exhausted => "every configuration was tried",
        Ended::Interrupted => "the run was interrupted",
    };
    let _ = write!(
        o,
        "\nCost: {} of {} configurations, {} of load (budget {}; the search ended because {ended})",
        r.configs_evaluated,
        r.configs_total,
        duration(r.load_seconds),
        r.budget.words()
    );
    match r.full_product_load_seconds {
        Some(full) if full > 0.0 => {
            let _ = writeln!(
                o,
                "; a knee search of all {} would take about {}, estimated from the knees measured: tune spent {:.0} % of it.\n",
                r.configs_total,
                duration(full),
                100.0 * r.load_seconds / full
            );
        }
        _ => {
            let _ = writeln!(o, ".\n");
        }
    }
    let _ = writeln!(
        o,
        "| # | configuration | knee ({unit}) | outcome | why tried | why it broke |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    // A log replayed at its times: its loads are multiples of its speed.
    let at = |v: f64| {
        if unit == loadlab_lab::plan::TIMES_THE_LOG {
            format!("×{}", loadlab_lab::knee::fmt(v))
        } else {
            loadlab_lab::knee::fmt(v)
        }
    };
    for (i, t) in r.tried.iter().enumerate() {
        let outcome = match (t.outcome.as_str(), t.raced_at) {
            ("dropped", Some(v)) => format!(
                "dropped: not sustained at {} (the best knee then), {} steps",
                at(v),
                t.steps
            ),
            ("knee", Some(v)) => format!("raced at {}, then searched, {} steps", at(v), t.steps),
            ("knee", None) => format!("full search, {} steps", t.steps),
            ("no_knee", _) => "its first load was not sustained".into(),
            (other, _) => other.to_string(),
        };
        let _ = writeln!(
            o,
            "| {} | `{}` | {} | {outcome} | {} | {} |",
            i + 1,
            t.config,
            range_words(&t.knee, "").trim_end(),
            t.reason.replace('|', "\\|"),
            t.why.as_deref().unwrap_or("-").replace('|', "\\|")
        );
    }
    o.push('\n');
    o
}
