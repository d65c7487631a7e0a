//! `loadlab compare` as text: one aligned table per scenario and configuration, each figure
//! with its change and how sure it is.

use std::fmt::Write as _;

use super::{
    names, Comparison, Finding, InputKind, KneeComparison, Method, MetricChange, NamesComparison,
    PairComparison, SeriesComparison, SessionCounts, StepFigures,
};

pub use crate::format::{confidence, num, pct, pct_abs, pct_range};

/// Milliseconds as the report prints them.
pub fn ms(v: f64) -> String {
    crate::format::ms(Some(v))
}

/// Aligns columns with two spaces between them; the last column is not padded.
fn table(out: &mut String, indent: &str, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::from(indent);
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                let pad = widths[i] - c.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// Breaks `text` into lines of at most `width` characters (at spaces).
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join("\n")
}

/// The short word for a finding in a table cell.
fn word(f: Finding) -> &'static str {
    match f {
        Finding::Better => "better",
        Finding::Worse => "WORSE",
        Finding::WithinNoise => "noise",
        Finding::BelowThreshold => "below threshold",
        Finding::WithinRepeatSpread => "repeats overlap",
        Finding::SameRange => "same range",
        Finding::NotResolvedBySteps => "not resolved by the step spacing",
        Finding::Borderline => "borderline step",
        Finding::TooLittleData => "not tested",
        Finding::NotComparable => "n/a",
    }
}

/// A figure's change cell; `sample` says what the test rested on ("9+9 s").
fn metric_cell(m: &MetricChange, sample: &str) -> String {
    let Some(change) = m.change else {
        return word(m.finding).to_string();
    };
    match m.ci {
        Some([lo, hi]) => format!(
            "{} {} ({}, {sample})",
            word(m.finding),
            pct(change),
            pct_range(lo, hi)
        ),
        None => format!("{} {} ({sample})", word(m.finding), pct(change)),
    }
}

fn knee_cell(k: &KneeComparison) -> String {
    match (k.finding, k.change, k.change_range) {
        (Finding::Better | Finding::Worse, Some(c), [Some(lo), Some(hi)]) => format!(
            "{} {} (somewhere in {})",
            if k.finding == Finding::Better {
                "higher"
            } else {
                "LOWER"
            },
            pct(c),
            pct_range(lo, hi)
        ),
        (Finding::Better, _, [Some(lo), None]) => format!("higher: {} or more", pct(lo)),
        (Finding::Better | Finding::Worse, _, _) => (if k.finding == Finding::Better {
            "higher"
        } else {
            "LOWER"
        })
        .to_string(),
        (f, _, _) => word(f).to_string(),
    }
}

/// A figure of one side, `✗` when not sustained, with its runs when repeated.
fn value(v: Option<f64>, sustained: Option<bool>, runs: u32, fmt: fn(f64) -> String) -> String {
    let mut s = v.map_or("-".to_string(), fmt);
    if sustained == Some(false) {
        s.push_str(" ✗");
    }
    if runs > 1 {
        let _ = write!(s, " ({runs} runs)");
    }
    s
}

fn ms_cell(v: f64) -> String {
    format!("{} ms", ms(v))
}

/// Each request name's rows of a series' table (its p99 and achieved at each load), after
/// the whole's.
fn name_rows(
    rows: &mut Vec<Vec<String>>,
    names: &NamesComparison,
    load_suffix: &str,
    achieved: &str,
) {
    for n in &names.names {
        for st in &n.steps {
            let at = format!("{}{load_suffix}", num(st.load));
            let (a, b) = (&st.baseline, &st.other);
            rows.push(vec![
                format!("{}: p99 at {at}", n.name),
                value(st.p99.baseline, a.sustained, a.runs, ms_cell),
                value(st.p99.other, b.sustained, b.runs, ms_cell),
                metric_cell(
                    &st.p99,
                    &format!("{}+{} responses", a.responses, b.responses),
                ),
            ]);
            rows.push(vec![
                format!("{}: {achieved} at {at}", n.name),
                value(st.achieved.baseline, a.sustained, a.runs, num),
                value(st.achieved.other, b.sustained, b.runs, num),
                metric_cell(&st.achieved, names::NO_SECONDS),
            ]);
        }
    }
}

/// A flow's sessions at a load, side by side: counts only, not tested for noise (a run
/// keeps no per-second session counts, and a session's fate depends on its neighbours').
fn session_row(at: &str, a: &StepFigures, b: &StepFigures) -> Option<Vec<String>> {
    if a.sessions.is_none() && b.sessions.is_none() {
        return None;
    }
    let cell = |s: Option<SessionCounts>| match s {
        Some(s) => format!(
            "{} of {} done, {} aborted",
            s.completed, s.started, s.aborted
        ),
        None => "-".into(),
    };
    let share = |s: Option<SessionCounts>| {
        s.filter(|s| s.started > 0)
            .map(|s| s.aborted as f64 / s.started as f64)
    };
    let change = match (share(a.sessions), share(b.sessions)) {
        (Some(x), Some(y)) => format!(
            "aborted {} → {}, not tested for noise",
            pct_of(x),
            pct_of(y)
        ),
        _ => "not tested for noise".into(),
    };
    Some(vec![
        format!("sessions at {at}"),
        cell(a.sessions),
        cell(b.sessions),
        change,
    ])
}

/// Held streams at a load, side by side: time to first message and the gaps between
/// messages (median and p99), the stream-seconds starved, and flow-control stalls; not
/// tested for noise (a run keeps them as summaries, with no per-second histograms).
fn stream_rows(at: &str, a: &StepFigures, b: &StepFigures) -> Vec<Vec<String>> {
    if a.streams.is_none() && b.streams.is_none() {
        return Vec::new();
    }
    let pair = |p50: Option<f64>, p99: Option<f64>| match (p50, p99) {
        (None, None) => "-".to_string(),
        (p50, p99) => format!(
            "{} / {}",
            p50.map_or("-".into(), ms_cell),
            p99.map_or("-".into(), ms_cell)
        ),
    };
    let change = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if x > 0.0 => {
            format!("p99 {:+.0} %, not tested for noise", 100.0 * (y / x - 1.0))
        }
        _ => "not tested for noise".into(),
    };
    let (sa, sb) = (a.streams.unwrap_or_default(), b.streams.unwrap_or_default());
    let mut rows = Vec::new();
    for (what, a50, a99, b50, b99) in [
        (
            "first message",
            sa.first_message_p50_ms,
            sa.first_message_p99_ms,
            sb.first_message_p50_ms,
            sb.first_message_p99_ms,
        ),
        (
            "gaps",
            sa.gap_p50_ms,
            sa.gap_p99_ms,
            sb.gap_p50_ms,
            sb.gap_p99_ms,
        ),
    ] {
        if a50.is_some() || b50.is_some() {
            rows.push(vec![
                format!("{what} p50 / p99 at {at}"),
                pair(a50, a99),
                pair(b50, b99),
                change(a99, b99),
            ]);
        }
    }
    if sa.starved().is_some() || sb.starved().is_some() {
        let cell = |s: Option<(u64, u64)>| match s {
            None => "-".to_string(),
            Some((failed, held)) => {
                format!(
                    "{failed} of {held} ({})",
                    pct_of(failed as f64 / held as f64)
                )
            }
        };
        rows.push(vec![
            format!("starved stream-seconds at {at}"),
            cell(sa.starved()),
            cell(sb.starved()),
            "counts, not tested for noise".into(),
        ]);
    }
    if sa.window_stalls.is_some() || sb.window_stalls.is_some() {
        let cell = |s: Option<u64>| s.map_or("-".into(), |n| n.to_string());
        rows.push(vec![
            format!("flow-control stalls at {at}"),
            cell(sa.window_stalls),
            cell(sb.window_stalls),
            "counts, not tested for noise".into(),
        ]);
    }
    rows
}

/// A share as a percentage, "< 0.1 %" above zero.
fn pct_of(x: f64) -> String {
    if x > 0.0 && x < 0.001 {
        "< 0.1 %".into()
    } else {
        format!("{:.1} %", 100.0 * x)
    }
}

/// What the names' rows rest on, and the names only one side ran.
fn name_notes(out: &mut String, names: &NamesComparison, a: &str, b: &str) {
    if !names.names.is_empty() {
        let note = format!(
            "request names ({}): {}. A name's p99 is looked at with an interval from its \
             responses taken as independent, which is narrower than the truth: it can show a \
             change within the noise, never a difference. Its achieved rate is shown, not \
             tested. Differences are called on the whole's figures only.",
            names
                .names
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            names::NO_SECONDS
        );
        let _ = writeln!(out, "    {}", wrap(&note, 88).replace('\n', "\n      "));
    }
    for (label, list) in [(a, &names.only_in_baseline), (b, &names.only_in_other)] {
        if !list.is_empty() {
            let _ = writeln!(
                out,
                "    request names only {label} ran: {} (not compared)",
                list.join(", ")
            );
        }
    }
}

fn series(out: &mut String, method: &Method, pair: &PairComparison, s: &SeriesComparison) {
    let _ = writeln!(out, "  {}", s.name());
    if let Some(why) = &s.not_comparable {
        let _ = writeln!(out, "    not comparable: {why}\n");
        return;
    }
    let (a, b) = (&pair.baseline, &pair.other);
    let mut rows = vec![vec![
        String::new(),
        a.clone(),
        b.clone(),
        format!("{b} against {a} (change, CI, sample)"),
    ]];
    if let Some(k) = &s.knee {
        rows.push(vec![
            format!("knee ({})", s.unit),
            k.baseline.describe(),
            k.other.describe(),
            knee_cell(k),
        ]);
    }
    // Rates go without their unit (the knee row names it); connections and streams say so.
    let load_suffix = if matches!(s.unit.as_str(), "req/s" | "msg/s" | "events/s") {
        String::new()
    } else {
        format!(" {}", s.unit)
    };
    // A flow's loads are sessions or users; what it achieves is still requests per second.
    let achieved = if matches!(s.unit.as_str(), "sessions/s" | "users") {
        "achieved req/s"
    } else {
        "achieved"
    };
    for st in &s.steps {
        let at = format!("{}{load_suffix}", num(st.load));
        rows.push(vec![
            format!("p99 at {at}"),
            value(
                st.p99.baseline,
                st.baseline.sustained,
                st.baseline.runs,
                ms_cell,
            ),
            value(st.p99.other, st.other.sustained, st.other.runs, ms_cell),
            metric_cell(&st.p99, &{
                let (a, b) = (st.baseline.responses, st.other.responses);
                let tail = 100 * u64::from(method.min_tail);
                if st.p99.finding == Finding::TooLittleData && a.min(b) < tail {
                    format!("{a}+{b} responses")
                } else {
                    format!(
                        "{}+{} s",
                        st.baseline.latency_seconds, st.other.latency_seconds
                    )
                }
            }),
        ]);
        rows.push(vec![
            format!("{achieved} at {at}"),
            value(
                st.achieved.baseline,
                st.baseline.sustained,
                st.baseline.runs,
                num,
            ),
            value(st.achieved.other, st.other.sustained, st.other.runs, num),
            metric_cell(
                &st.achieved,
                &format!(
                    "{}+{} s",
                    st.baseline.window_seconds, st.other.window_seconds
                ),
            ),
        ]);
        if let Some(row) = session_row(&at, &st.baseline, &st.other) {
            rows.push(row);
        }
        rows.extend(stream_rows(&at, &st.baseline, &st.other));
    }
    if let Some(names) = &s.names {
        name_rows(&mut rows, names, &load_suffix, achieved);
    }
    table(out, "    ", &rows);
    if let Some(k) = &s.knee {
        let why = wrap(&format!("knee: {}", k.why), 88).replace('\n', "\n      ");
        let _ = writeln!(out, "    {why}");
    }
    if let Some(names) = &s.names {
        name_notes(out, names, a, b);
    }
    let mut left_out = Vec::new();
    for st in &s.steps {
        for (label, f) in [(a, &st.baseline), (b, &st.other)] {
            if f.excluded_runs > 0 {
                left_out.push(format!(
                    "{label} at {}: {} run{} left out (generator-limited, agent lost or interrupted)",
                    num(st.load),
                    f.excluded_runs,
                    if f.excluded_runs == 1 { "" } else { "s" }
                ));
            }
            if f.generator_limited {
                left_out.push(format!(
                    "{label} at {}: loadlab flagged the run generator-limited; its figures may be loadlab's",
                    num(st.load)
                ));
            }
        }
    }
    for l in left_out {
        let _ = writeln!(out, "    {l}");
    }
    for (label, loads) in [(a, &s.loads_only_in_baseline), (b, &s.loads_only_in_other)] {
        if !loads.is_empty() {
            let list: Vec<String> = loads.iter().map(|l| num(*l)).collect();
            let _ = writeln!(
                out,
                "    loads only {label} ran: {} (not compared)",
                list.join(", ")
            );
        }
    }
    let _ = writeln!(out);
}

/// The pair's findings in one line: what is worse, what is better (by series), and how
/// many figures were within the noise or could not be told.
fn summary(pair: &PairComparison) -> String {
    let mut worse = Vec::new();
    let mut better = Vec::new();
    let mut quiet = 0;
    let mut unresolved_knees = 0;
    let mut untested = 0;
    let (mut names_quiet, mut names_untested) = (0, 0);
    for s in &pair.series {
        let (mut w, mut b) = (Vec::new(), Vec::new());
        if let Some(k) = &s.knee {
            match k.finding {
                Finding::Worse => w.push("knee".to_string()),
                Finding::Better => b.push("knee".to_string()),
                Finding::NotResolvedBySteps | Finding::Borderline => unresolved_knees += 1,
                Finding::SameRange => quiet += 1,
                _ => {}
            }
        }
        for st in &s.steps {
            for (what, m) in [("p99", &st.p99), ("achieved", &st.achieved)] {
                let item = format!("{what} at {}", num(st.load));
                match m.finding {
                    Finding::Worse => w.push(item),
                    Finding::Better => b.push(item),
                    Finding::WithinNoise
                    | Finding::BelowThreshold
                    | Finding::WithinRepeatSpread => quiet += 1,
                    _ => untested += 1,
                }
            }
        }
        for (list, items) in [(&mut worse, w), (&mut better, b)] {
            if !items.is_empty() {
                list.push(format!("{} ({})", s.name(), items.join(", ")));
            }
        }
        for st in s.names.iter().flat_map(|n| &n.names).flat_map(|n| &n.steps) {
            for m in [&st.p99, &st.achieved] {
                match m.finding {
                    Finding::WithinNoise => names_quiet += 1,
                    _ => names_untested += 1,
                }
            }
        }
    }
    let mut parts = Vec::new();
    if !worse.is_empty() {
        parts.push(format!("worse: {}", worse.join("; ")));
    }
    if !better.is_empty() {
        parts.push(format!("better: {}", better.join("; ")));
    }
    if worse.is_empty() && better.is_empty() {
        parts.push("no difference beyond the noise".into());
    }
    parts.push(format!("{quiet} within the noise"));
    if unresolved_knees > 0 {
        parts.push(format!(
            "{unresolved_knees} knee{} not resolved by the steps",
            if unresolved_knees == 1 { "" } else { "s" }
        ));
    }
    if untested > 0 {
        parts.push(format!("{untested} not tested (too little data)"));
    }
    if names_quiet + names_untested > 0 {
        parts.push(format!(
            "request names: {names_quiet} within the noise, {names_untested} not tested ({})",
            names::NO_SECONDS
        ));
    }
    format!(
        "{} against {}: {}",
        pair.other,
        pair.baseline,
        parts.join(". ")
    )
}

/// Renders the comparison for a terminal.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "loadlab compare: {} inputs, {} is the baseline",
        c.inputs.len(),
        c.inputs.first().map_or("A", |i| i.label.as_str())
    );
    let rows: Vec<Vec<String>> = c
        .inputs
        .iter()
        .map(|i| {
            let what = match i.kind {
                InputKind::Bundle => format!(
                    "bundle of plan {}, {} step{}",
                    i.name,
                    i.steps,
                    if i.steps == 1 { "" } else { "s" }
                ),
                InputKind::RunResult => format!("run result: {}", i.name),
            };
            vec![
                i.label.clone(),
                i.path.clone(),
                what,
                i.started_at.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(&mut out, "  ", &rows);
    let m = &c.method;
    let how = format!(
        "p99 and achieved at each load both ran: the change, its {} confidence interval from a \
         bootstrap over seconds ({} resamples of the per-second histograms and successes), and \
         the sample on each side. A change is called only when the interval excludes no \
         change, reaches beyond ±{} (--noise-threshold), and repeated runs do not overlap; a \
         figure is tested only from {} seconds a side, a p99 only from {} responses. Knees \
         are ranges: called only when a step one side sustained cleanly separates them. ✗: \
         not sustained.",
        confidence(m.confidence),
        loadlab_system::doctor::thousands(u64::from(m.resamples)),
        pct_abs(m.noise_threshold),
        m.min_seconds,
        loadlab_system::doctor::thousands(100 * u64::from(m.min_tail)),
    );
    let _ = writeln!(out, "\n{}\n", wrap(&how, 92));
    for pair in &c.pairs {
        let _ = writeln!(out, "{} against {}\n", pair.other, pair.baseline);
        if let Some([a, b]) = &pair.paired_configs {
            let _ = writeln!(
                out,
                "  paired the only configuration of each: {}'s {a} with {}'s {b}\n",
                pair.baseline, pair.other
            );
        }
        for s in &pair.series {
            series(&mut out, m, pair, s);
        }
        for (label, keys) in [
            (&pair.baseline, &pair.only_in_baseline),
            (&pair.other, &pair.only_in_other),
        ] {
            if !keys.is_empty() {
                let list: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{} / {}", k.scenario, k.config))
                    .collect();
                let _ = writeln!(
                    out,
                    "  only in {label} (not matched by scenario and configuration): {}",
                    list.join(", ")
                );
            }
        }
        if pair.series.is_empty() {
            let _ = writeln!(
                out,
                "  nothing matched: no scenario and configuration in common"
            );
        }
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        let _ = writeln!(out, "{}\n", wrap(&summary(pair), 92));
    }
    out
}
