//! `report.md`: for each scenario and configuration a table
//! `offered req/s | mean ms | p95 ms | p99 ms | achieved rps | errors | note` (and, when its steps
//! ran named requests, a row per step and request name with the name's own figures and
//! verdict), the knee of every configuration side by side, and the configurations that
//! could not be measured.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::format::{ms, num};
use crate::knee::{closed_unit, fixed_knee, knee_cell, open_unit};
use loadlab_engine::ErrorClass;
use loadlab_lab::bundle::{ConfigRecord, ConfigStatus, StepRecord};
use loadlab_lab::diagnosis::Bottleneck;
use loadlab_lab::knee::Phase;
use loadlab_lab::plan::{Model, Slo, Steps};

use crate::view::Bundle;
use loadlab_lab::verdict::Limit;

/// The error classes the report counts as timeouts.
const TIMEOUTS: [ErrorClass; 2] = [ErrorClass::RequestTimeout, ErrorClass::ConnectTimeout];
/// A latency this many times the first step's is called out.
const BLOWUP: f64 = 10.0;
/// Within this factor of the lowest mean latency of a table, and of its lowest p99, is "near
/// the latency floor": a mean near the floor beside a p99 twice it is a queue, not a floor.
const FLOOR: f64 = 1.5;

/// The lowest mean and the lowest p99 of a table's rows, ms.
#[derive(Clone, Copy, Default)]
pub struct LatencyFloor {
    /// The lowest mean.
    pub mean: Option<f64>,
    /// The lowest p99.
    pub p99: Option<f64>,
}

impl LatencyFloor {
    /// The floor of these steps.
    pub fn of<'a>(steps: impl Iterator<Item = &'a StepRecord> + Clone) -> LatencyFloor {
        let lowest =
            |f: fn(&StepRecord) -> Option<f64>| steps.clone().filter_map(f).reduce(f64::min);
        LatencyFloor {
            mean: lowest(|s| s.result.latency_ms.mean),
            p99: lowest(|s| s.result.latency_ms.p99),
        }
    }

    /// Whether this step's mean and p99 are both within [`FLOOR`] of the floor's.
    fn near(&self, step: &StepRecord) -> bool {
        let within = |v: Option<f64>, floor: Option<f64>| matches!((v, floor), (Some(v), Some(f)) if v <= FLOOR * f);
        within(step.result.latency_ms.mean, self.mean)
            && within(step.result.latency_ms.p99, self.p99)
    }
}

/// Why lateness the verdict excused does not matter, as the note says it.
fn excused(step: &StepRecord) -> &'static str {
    if step.verdict.sustained {
        "too little to change the load offered"
    } else {
        "too little to explain the failure"
    }
}

/// The note column of one row, written by loadlab.
pub fn notes(step: &StepRecord, first_mean: Option<f64>, floor: LatencyFloor) -> String {
    let r = &step.result;
    let mut out: Vec<String> = Vec::new();
    if let Some(c) = &step.crashed {
        out.push(format!("target crashed ({}: {})", c.target, c.status));
    }
    if step.verdict.limits.contains(&Limit::Interrupted) {
        out.push("interrupted".into());
    }
    if step.verdict.limits.contains(&Limit::GeneratorLimited) {
        out.push("generator-limited".into());
    } else if r.generator_limited {
        // A failed step's verdict weighed all a request waited in loadlab before its send,
        // when longer than the lag: the note says it too.
        let queued = match loadlab_lab::verdict::waited_before_send(r) {
            Some(w) if !step.verdict.sustained => format!("; up to {w:.2} ms before their send"),
            _ => String::new(),
        };
        out.push(format!(
            "some sends late (lag p99 {:.2} ms, worst {:.2} ms{queued}), {}",
            r.schedule_lag_ms.p99,
            r.schedule_lag_ms.max,
            excused(step)
        ));
    }
    let lost: Vec<&str> = r
        .agents
        .iter()
        .filter(|a| a.lost.is_some())
        .map(|a| a.name.as_str())
        .collect();
    if !lost.is_empty() {
        out.push(format!(
            "agent lost ({}): its share is missing, not the server's doing",
            lost.join(", ")
        ));
    }
    if let Some(why) = step.probes.as_ref().and_then(|p| p.lost.as_deref()) {
        out.push(format!(
            "probe lost ({why}): the server's figures end there"
        ));
    }
    if r.all_failed() {
        out.push("every request failed".into());
    }
    let timeouts = r.errors.sum_of(&TIMEOUTS);
    if timeouts > 0 {
        out.push(format!("{timeouts} timeouts"));
    }
    let other: Vec<String> = r
        .nonzero_errors()
        .into_iter()
        .filter(|(class, _)| !TIMEOUTS.contains(class))
        .map(|(class, n)| format!("{n} {}", class.name()))
        .collect();
    if !other.is_empty() {
        out.push(other.join(", "));
    }
    if let Some(stalls) = r.window_stalls.filter(|n| *n > 0) {
        out.push(format!(
            "{stalls} {} waited for the server's flow-control window",
            r.protocol.units().sent
        ));
    }
    if let Some(p) = &step.probes {
        let d = &p.delta;
        match &d.listen {
            // The target's own listening sockets were read: their drops, not the
            // namespace's (another listener's overflows are no cause of this step's).
            Some(l) if l.drops > 0 => out.push(format!(
                "the target's listen queue dropped {} connection attempts",
                l.drops
            )),
            Some(_) => {}
            None if d.listen_overflows > 0 => out.push(format!(
                "listen queue overflowed {} times",
                d.listen_overflows
            )),
            None => {}
        }
    }
    if step.verdict.limits.contains(&Limit::Throughput) {
        if let (Some(t), Some(offered)) = (&r.latency_trend, r.offered_requests_rps()) {
            out.push(format!(
                "fell behind: latency grew {:.0} ms per second of the step, served {:.0} % of the offered rate",
                1000.0 * t.slope,
                100.0 * r.achieved_rps / offered
            ));
        }
    }
    if let Some(names) = step.verdict.names_failed() {
        out.push(format!("names failed: {names}"));
    }
    if let Some(d) = &step.diagnosis {
        let f = &d.findings[0];
        if !matches!(
            f.bottleneck,
            Bottleneck::Generator | Bottleneck::AgentLost | Bottleneck::Crash
        ) {
            out.push(format!("why: {}", f.bottleneck.label()));
        }
    }
    if !step.verdict.unresolved.is_empty() {
        out.push("unresolved clause (see below)".into());
    }
    match (r.latency_ms.mean, first_mean) {
        (Some(m), Some(first)) if first > 0.0 && m >= BLOWUP * first => {
            out.push(format!("latency ×{:.0} of the first step", m / first));
        }
        _ if out.is_empty() && floor.near(step) => out.push("near the latency floor".into()),
        _ => {}
    }
    out.join("; ")
}

/// Each agent's share of every distributed step (nothing for a local run).
fn agents_section(out: &mut String, steps: &[StepRecord]) {
    let distributed: Vec<&StepRecord> = steps
        .iter()
        .filter(|s| !s.result.agents.is_empty())
        .collect();
    let Some(first) = distributed.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "## Agents
"
    );
    let names: Vec<String> = first
        .result
        .agents
        .iter()
        .map(|a| {
            let plural = if a.threads == 1 { "" } else { "s" };
            format!("{} ({}, {} thread{plural})", a.name, a.address, a.threads)
        })
        .collect();
    let _ = writeln!(
        out,
        "The load came from {} agents: {}. Each step was split between them by worker threads, \
         started on all at one instant, and their results merged exactly (histograms added, seconds \
         aligned by wall clock); the tables above are the merged steps. Each agent's share and what \
         it measured alone:\n",
        first.result.agents.len(),
        names.join(", ")
    );
    let _ = writeln!(
        out,
        "| step | config | scenario | load | agent | offered share | achieved rps | p99 ms | errors | clock offset ms | start skew ms | note |"
    );
    let _ = writeln!(
        out,
        "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|"
    );
    for s in distributed {
        for a in &s.result.agents {
            let share = a
                .offered_rps
                .map_or(format!("{} conns", a.connections), |r| {
                    format!("{} req/s", num(r))
                });
            // The agent's own flag is the engine's (any lag past 1 ms); the step's verdict
            // may have excused that lag as too small to matter, and then so does the row.
            let note = match (&a.lost, a.generator_limited) {
                (Some(why), _) => format!("lost: {why}"),
                (None, true) if s.verdict.limits.contains(&Limit::GeneratorLimited) => {
                    "generator-limited".into()
                }
                (None, true) => format!("some sends late, {}", excused(s)),
                (None, false) => String::new(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {share} | {} | {} | {} | {:+.2} | {:+.1} | {note} |",
                s.index,
                s.config,
                s.scenario,
                num(s.load),
                a.name,
                num(a.achieved_rps),
                ms(a.latency_p99_ms),
                a.errors_total,
                a.clock_offset_ms,
                a.start_skew_ms,
            );
        }
    }
    let _ = writeln!(out);
}

/// The heading of a table's load column: the closed loop's unit (`connections`,
/// `streams`...), or the open loop's offered rate in its unit.
fn load_column(steps: &[&StepRecord], closed: bool) -> String {
    if closed {
        closed_unit(steps.iter().copied()).to_string()
    } else if !steps.is_empty() && steps.iter().all(|s| crate::knee::replayed(s)) {
        "speed (× the log; offered req/s)".to_string()
    } else {
        format!("offered {}", open_unit(steps.iter().copied()))
    }
}

/// A step's load in a table's load column: a log replayed at its times as its multiple
/// and the rate that offered (`×4 (40)`), else the load itself.
fn load_cell(s: &StepRecord) -> String {
    match (crate::knee::replayed(s), s.result.offered_rps) {
        (true, Some(rate)) => format!("×{} ({})", num(s.load), num(rate)),
        _ => num(s.load),
    }
}

fn table(out: &mut String, steps: &[&StepRecord], closed: bool) {
    let mut rows: Vec<&StepRecord> = steps.to_vec();
    rows.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    let first_mean = steps
        .iter()
        .min_by_key(|s| s.index)
        .and_then(|s| s.result.latency_ms.mean);
    let floor = LatencyFloor::of(steps.iter().copied());
    let load_col = load_column(steps, closed);
    let _ = writeln!(
        out,
        "| {load_col} | mean ms | p95 ms | p99 ms | achieved rps | errors | note |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---|");
    let mut unresolved = Vec::new();
    for s in rows {
        let r = &s.result;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            load_cell(s),
            ms(r.latency_ms.mean),
            ms(p95(r)),
            ms(r.latency_ms.p99),
            num(r.achieved_rps),
            r.errors_total,
            notes(s, first_mean, floor)
        );
        for u in &s.verdict.unresolved {
            unresolved.push(format!("- at {}: {u}", num(s.load)));
        }
    }
    let _ = writeln!(out);
    if !unresolved.is_empty() {
        let _ = writeln!(
            out,
            "Unresolved (these steps count as sustained: the difference is within what their request counts can tell):\n{}\n",
            unresolved.join("\n")
        );
    }
}

/// Server streams (gRPC server streaming, event streams, WebSocket push) at every step of
/// one scenario and configuration: each stream's time to first message and the gaps after
/// it, apart (the table above holds both in its latency). Nothing for other protocols.
fn streams_table(out: &mut String, steps: &[&StepRecord], closed: bool) {
    let mut rows: Vec<&StepRecord> = steps
        .iter()
        .copied()
        .filter(|s| s.result.stream_timing.is_some())
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    let load_col = load_column(steps, closed);
    let _ = writeln!(
        out,
        "Each stream's first message apart from the gaps after it (both in the latency above), and the stream-seconds in which a stream missed a message (a wait timed out or ended in an error; the error clause weighs them):\n"
    );
    let _ = writeln!(
        out,
        "| {load_col} | first messages | first p50 ms | first p99 ms | gaps | gap p50 ms | gap p99 ms | starved stream-seconds |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in rows {
        let t = s.result.stream_timing.as_ref().expect("filtered above");
        let starved = match t.starved() {
            Some((failed, held)) => format!("{failed} of {held}"),
            None => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {starved} |",
            num(s.load),
            t.first_message_ms.count,
            ms(t.first_message_ms.p50),
            ms(t.first_message_ms.p99),
            t.gap_ms.count,
            ms(t.gap_ms.p50),
            ms(t.gap_ms.p99)
        );
    }
    let _ = writeln!(out);
}

/// A flow's sessions at every step of one scenario and configuration (nothing for
/// independent requests): how many started, completed, failed (by the step that ended
/// them, and why) and were still running at the step's end; how long the completed ones
/// took with their think times and without.
fn sessions_table(out: &mut String, steps: &[&StepRecord], closed: bool) {
    if steps.iter().all(|s| s.result.sessions.is_none()) {
        return;
    }
    let mut rows: Vec<&StepRecord> = steps.to_vec();
    rows.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    let load_col = if closed {
        "users"
    } else {
        "offered sessions/s"
    };
    let _ = writeln!(
        out,
        "#### Sessions
"
    );
    let _ = writeln!(
        out,
        "Sessions that started in the step's window: a failed request (no response, a 4xx or 5xx, or an extract rule that found nothing) ends its session; a session whose next step was due after the window is still running. Duration is the first intended send to the last response of completed sessions, think times included; *waiting* leaves them out.
"
    );
    let _ = writeln!(
        out,
        "| {load_col} | started | completed/s | completed | aborted (by step: why) | still running | duration p50 / p99 ms | waiting p50 / p99 ms |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---|---:|---:|---:|");
    for s in rows {
        let r = &s.result;
        let Some(x) = &r.sessions else { continue };
        let by: Vec<String> = x
            .aborted_by_step
            .iter()
            .map(|a| {
                let why = r
                    .by_name
                    .iter()
                    .find(|n| n.name == a.step)
                    .map(loadlab_engine::result::NameResult::failures_text)
                    .unwrap_or_default();
                format!("{} {}: {why}", a.step, a.sessions)
            })
            .collect();
        let aborted = if by.is_empty() {
            x.aborted.to_string()
        } else {
            format!("{} ({})", x.aborted, by.join("; "))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {aborted} | {} | {} / {} | {} / {} |",
            num(s.load),
            x.started,
            num(x.completed_per_s),
            x.completed,
            x.running_at_end,
            ms(x.duration_ms.p50),
            ms(x.duration_ms.p99),
            ms(x.active_ms.p50),
            ms(x.active_ms.p99),
        );
    }
    let _ = writeln!(out);
}

/// Each request name's own figures at every step of one scenario and configuration, when
/// its steps ran named requests (nothing otherwise): a row per step and name, by load and
/// then in the list's order, with the name's verdict (✓, or ✗ with the clauses it missed
/// on its own figures). Above the table, how the requests were taken and the data file.
fn names_table(out: &mut String, steps: &[&StepRecord], closed: bool, slo: &Slo) {
    if steps.iter().all(|s| s.result.by_name.is_empty()) {
        return;
    }
    let mut rows: Vec<&StepRecord> = steps.to_vec();
    rows.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    let load_col = load_column(steps, closed);
    let flow = steps.iter().all(|s| s.result.sessions.is_some());
    let _ = writeln!(
        out,
        "#### {}\n",
        if flow {
            "By step of the flow"
        } else {
            "By request name"
        }
    );
    let mut about = vec![
        "Each name's own figures over the step's window; its verdict is judged on them alone, by its own bounds or the plan's (✗: the clauses it missed)".to_string(),
    ];
    if let Some(t) = rows.iter().find_map(|s| s.result.traffic.as_ref()) {
        about.push(format!(
            "the requests were taken {}",
            match t.order {
                loadlab_engine::config::traffic::MixOrder::RoundRobin => {
                    "in turn, in proportion to their weights"
                }
                loadlab_engine::config::traffic::MixOrder::Random => {
                    "at random, in proportion to their weights"
                }
            }
        ));
    }
    let _ = writeln!(out, "{}.\n", about.join("; "));
    // The names judged by bounds of their own (`slo.gates` such as `checkout:p99<300ms`).
    let mut listed: Vec<&str> = Vec::new();
    for s in &rows {
        for n in &s.result.by_name {
            if !listed.contains(&n.name.as_str()) {
                listed.push(&n.name);
            }
        }
    }
    for named in slo
        .names
        .iter()
        .filter(|n| listed.contains(&n.name.as_str()))
    {
        let b = &named.slo;
        let mut words = b.latency_words();
        words.push(format!(
            "errors at most {:.1} % of its requests",
            100.0 * b.max_error_rate
        ));
        if !closed {
            words.push(format!(
                "its successes delivered at {:.0} % or more of the rate they were sent",
                100.0 * b.min_achieved_ratio
            ));
        }
        let _ = writeln!(
            out,
            "`{}` is judged by bounds of its own: {}.\n",
            named.name,
            words.join(", ")
        );
    }
    let data = rows.iter().find_map(|s| {
        let t = s.result.traffic.as_ref()?;
        Some((t.data_file.as_ref()?, t.data_rows?, t.data_order?))
    });
    if let Some((file, n, order)) = data {
        let _ = writeln!(
            out,
            "Data file `{file}`: {n} rows, taken in {} order.\n",
            order.name()
        );
    }
    let _ = writeln!(
        out,
        "| step: {load_col} | name | share | offered req/s | achieved rps | p50 ms | p99 ms | errors | status codes | verdict |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---|---|---|");
    for s in rows {
        for n in &s.result.by_name {
            let errors = if n.errors_total == 0 {
                "0".to_string()
            } else {
                let classes: Vec<String> = n
                    .errors
                    .iter()
                    .filter(|(_, k)| *k > 0)
                    .map(|(class, k)| format!("{k} {}", class.name()))
                    .collect();
                format!("{} ({})", n.errors_total, classes.join(", "))
            };
            let codes: Vec<String> = n
                .status_codes
                .iter()
                .map(|(c, k)| format!("{c}: {k}"))
                .chain(n.grpc_status.iter().map(|(c, k)| format!("{c}: {k}")))
                .collect();
            let verdict = match s.verdict.names.iter().find(|v| v.name == n.name) {
                Some(v) => format!(
                    "✗ {}",
                    v.limits
                        .iter()
                        .map(|l| l.describe())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None if s
                    .verdict
                    .unresolved
                    .iter()
                    .any(|u| u.starts_with(&format!("{}: ", n.name))) =>
                {
                    "✓ (unresolved clause, see above)".into()
                }
                None => "✓".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {errors} | {} | {verdict} |",
                load_cell(s),
                n.name.replace('|', "\\|"),
                crate::format::pct_abs(n.share),
                n.offered_rps.map_or("-".into(), num),
                num(n.achieved_rps),
                ms(n.latency_ms.p50),
                ms(n.latency_ms.p99),
                if codes.is_empty() {
                    "-".to_string()
                } else {
                    codes.join(", ")
                },
            );
        }
    }
    let _ = writeln!(out);
}

/// A step's p95 latency, ms: recorded, or (results written before p95 was) read from its
/// latency histogram.
fn p95(r: &loadlab_engine::RunResult) -> Option<f64> {
    r.latency_ms.p95.or_else(|| {
        loadlab_engine::records::decode_histogram(&r.histograms.latency)
            .ok()
            .filter(|h| !h.is_empty())
            .map(|h| h.value_at_quantile(0.95) as f64 / 1000.0)
    })
}

fn together_table(out: &mut String, steps: &[&StepRecord], config: Option<&ConfigRecord>) {
    let _ = writeln!(out, "| scenario | offered req/s | requests | mean ms | p95 ms | p99 ms | achieved rps | timeouts | errors | run time s | why |");
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut whys = Vec::new();
    for s in steps {
        let r = &s.result;
        let why = s.diagnosis.as_ref().map_or("-", |d| d.headline());
        if let Some(d) = &s.diagnosis {
            whys.push(format!(
                "- {}: {}",
                s.scenario,
                d.findings
                    .iter()
                    .map(|f| format!("{}. Try: {}.", f.evidence, f.advice))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {why} |",
            s.scenario,
            num(s.load),
            r.requests,
            ms(r.latency_ms.mean),
            ms(p95(r)),
            ms(r.latency_ms.p99),
            num(r.achieved_rps),
            r.errors.sum_of(&TIMEOUTS),
            r.errors_total,
            r.duration_s
        );
    }
    let timeouts: u64 = steps
        .iter()
        .map(|s| s.result.errors.sum_of(&TIMEOUTS))
        .sum();
    let _ = writeln!(
        out,
        "\nTimeouts in all: **{timeouts}**{}{}.\n",
        config
            .map(|c| format!("; configuration run time {:.1} s", c.duration_s))
            .unwrap_or_default(),
        targets_cpu(steps)
            .map(|(used, wait)| format!(
                "; the targets used {used:.0} % of one core (and waited {wait:.0} % of one for a CPU)"
            ))
            .unwrap_or_default()
    );
    if !whys.is_empty() {
        let _ = writeln!(out, "Why:\n\n{}\n", whys.join("\n"));
    }
}

/// The targets' CPU over a group of scenarios run together (one probe covers the group):
/// percent of one core used, and percent of one core spent runnable but waiting for a CPU.
fn targets_cpu(steps: &[&StepRecord]) -> Option<(f64, f64)> {
    steps
        .iter()
        .find_map(|s| s.probes.as_ref())
        .map(|p| (p.delta.cpu_percent, p.delta.cpu_wait_percent))
}

/// With scenarios run together over several configurations, document 003's result table:
/// per configuration, the requests that timed out, the run time and the targets' CPU.
fn together_summary(out: &mut String, steps: &[StepRecord], configs: &[ConfigRecord]) {
    if configs.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "## Configurations side by side\n\nEvery scenario ran together in each configuration. Over all of them: the responses \
         received (any status), the requests that timed out, every error, the configuration's \
         run time (targets started, load, targets stopped) and the CPU its targets used, in \
         percent of one core.\n"
    );
    let _ = writeln!(
        out,
        "| configuration | answered | timeouts | errors | run time s | targets' CPU, % of one core |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for c in configs {
        let list: Vec<&StepRecord> = steps
            .iter()
            .filter(|s| s.config == c.config && s.phase == Phase::Together)
            .collect();
        if list.is_empty() {
            let status = match c.status {
                ConfigStatus::Unavailable => "unavailable",
                _ => "not run",
            };
            let _ = writeln!(out, "| {} | {status} | - | - | - | - |", c.config);
            continue;
        }
        let sum = |f: fn(&StepRecord) -> u64| list.iter().map(|s| f(s)).sum::<u64>();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {} |",
            c.config,
            sum(|s| s.result.requests),
            sum(|s| s.result.errors.sum_of(&TIMEOUTS)),
            sum(|s| s.result.errors_total),
            c.duration_s,
            targets_cpu(&list).map_or("-".into(), |(used, _)| format!("{used:.0}"))
        );
    }
    let _ = writeln!(out);
}

/// With several configurations (a matrix), one table per scenario and figure that puts
/// the configurations side by side at each load: throughput, p99 latency, errors and the
/// target's CPU. Configurations that could not run are listed with the reason.
fn side_by_side(
    out: &mut String,
    steps: &[StepRecord],
    configs: &[ConfigRecord],
    scenario_order: &[String],
    closed: bool,
) {
    if configs.len() < 2 {
        return;
    }
    let unit = if closed {
        closed_unit(steps.iter()).to_string()
    } else {
        format!("offered {}", open_unit(steps.iter()))
    };
    type Cell = fn(&StepRecord) -> String;
    let figures: [(&str, Cell); 4] = [
        ("achieved {rate}", |s| {
            format!("{:.0}", s.result.achieved_rps)
        }),
        ("p99 latency, ms", |s| {
            s.result
                .latency_ms
                .p99
                .map_or("-".into(), |v| format!("{v:.2}"))
        }),
        ("errors (% of {sent})", |s| {
            let r = &s.result;
            let total = r.successful + r.errors_total;
            if r.errors_total == 0 {
                "0".into()
            } else {
                let top = r.nonzero_errors().first().map_or("", |e| e.0.name());
                format!(
                    "{:.1} % {top}",
                    100.0 * r.errors_total as f64 / total.max(1) as f64
                )
            }
        }),
        ("target CPU, % of one core", |s| {
            s.probes
                .as_ref()
                .map_or("-".into(), |p| format!("{:.0}", p.delta.cpu_percent))
        }),
    ];
    for sc in scenario_order {
        let mut loads: Vec<f64> = steps
            .iter()
            .filter(|s| &s.scenario == sc)
            .map(|s| s.load)
            .collect();
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        if loads.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "## Side by side: {sc}
"
        );
        // In the scenario's own words: msg/s and messages for a stream's, req/s and
        // requests for calls.
        let of_scenario = || steps.iter().filter(|s| &s.scenario == sc);
        let rate = crate::knee::open_unit(of_scenario());
        let sent = of_scenario()
            .next()
            .filter(|_| rate != "req/s" && rate != "sessions/s")
            .map_or("requests", |s| s.result.protocol.units().sent);
        for (title, cell) in &figures {
            let title = title.replace("{rate}", rate).replace("{sent}", sent);
            let _ = writeln!(out, "**{title}** by {unit}\n");
            let head: Vec<String> = loads.iter().map(|l| num(*l)).collect();
            let _ = writeln!(out, "| configuration | {} |", head.join(" | "));
            let _ = writeln!(out, "|---|{}", "---:|".repeat(loads.len()));
            for c in configs {
                let cells: Vec<String> = loads
                    .iter()
                    .map(|l| {
                        // The last step at this load (a repeated step replaces the first).
                        steps
                            .iter()
                            .rev()
                            .find(|s| &s.scenario == sc && s.config == c.config && s.load == *l)
                            .map_or_else(
                                || match c.status {
                                    ConfigStatus::Unavailable => "unavailable".into(),
                                    ConfigStatus::Completed => "-".into(),
                                    _ => "not run".into(),
                                },
                                |s| {
                                    let v = cell(s);
                                    if s.verdict.sustained {
                                        v
                                    } else {
                                        format!("{v} ✗")
                                    }
                                },
                            )
                    })
                    .collect();
                let _ = writeln!(out, "| {} | {} |", c.config, cells.join(" | "));
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "✗ marks a step that was not sustained: it missed the SLO, or loadlab itself was the limit (generator-limited: the figure is a lower bound for the server). The per-configuration tables below say which.\n"
        );
    }
}

/// Renders the Markdown report of the bundle in `dir`.
pub fn render_bundle(dir: &Path) -> std::io::Result<String> {
    render(dir).map(|(report, _)| report)
}

/// One line per knee of a bundle: where it is and why (what `loadlab demo` ends with).
pub fn knee_lines(dir: &Path) -> std::io::Result<Vec<String>> {
    render(dir).map(|(_, lines)| lines)
}

fn render(dir: &Path) -> std::io::Result<(String, Vec<String>)> {
    Ok(render_view(&Bundle::load(dir)?))
}

/// report.md of a loaded bundle, and one line per knee.
pub(crate) fn render_view(b: &Bundle) -> (String, Vec<String>) {
    let dir = b.dir.as_path();
    let (plan, env, steps, configs) = (&b.plan, &b.env, &b.steps, &b.configs);
    let mut knee_lines = Vec::new();
    let closed = plan.load.model == Model::Closed;
    let together = plan.load.steps == Steps::Together;
    let min_ratio = plan.slo.min_achieved_ratio;
    let scenario_order: Vec<String> = plan.scenarios.iter().map(|s| s.name.clone()).collect();

    let mut out = String::new();
    let _ = writeln!(out, "# loadlab report: {}\n", plan.name);
    if !plan.description.is_empty() {
        let _ = writeln!(out, "{}\n", plan.description.trim());
    }
    let unknown = || "?".to_string();
    let _ = writeln!(
        out,
        "Run {} on {} ({} cores), kernel {}, loadlab {}{}. Latency is measured from each request's intended send time.\n",
        env.as_ref().map_or_else(unknown, |e| e.started_at.clone()),
        env.as_ref().map_or_else(unknown, |e| e.cpu_model.clone()),
        env.as_ref().map_or(0, |e| e.cores),
        env.as_ref().map_or_else(unknown, |e| e.kernel.clone()),
        env.as_ref().map_or_else(unknown, |e| e.loadlab_version.clone()),
        scale(plan, |set| format!("`--matrix {set}`"))
    );
    for torn in loadlab_lab::bundle::torn_lines(dir) {
        let _ = writeln!(out, "**Warning**: {torn}.\n");
    }
    // `loadlab tune`: its answer first.
    match crate::tune::read(dir) {
        Some(Ok(t)) => out.push_str(&crate::tune::text(&t)),
        Some(Err(e)) => {
            let _ = writeln!(
                out,
                "**Warning**: tune.json does not read ({e}): the tune section is left out.\n"
            );
        }
        None => {}
    }
    // The answer before anything else is explained.
    out.push_str(&crate::answer::markdown(plan, steps, configs));
    for s in steps {
        if let Err(e) = loadlab_engine::records::decode_histogram(&s.result.histograms.latency) {
            let _ = writeln!(
                out,
                "**Warning**: steps.jsonl: {} / {} step {}: the latency histogram does not decode ({e}): its percentile curve is left out of report.html.\n",
                s.config, s.scenario, s.index
            );
        }
        for n in &s.result.by_name {
            if let Err(e) = loadlab_engine::records::decode_histogram(&n.latency_histogram) {
                let _ = writeln!(
                    out,
                    "**Warning**: steps.jsonl: {} / {} step {}: request name `{}`'s latency histogram does not decode ({e}): its percentile curve is left out of report.html.\n",
                    s.config, s.scenario, s.index, n.name
                );
            }
        }
    }
    for s in plan.scenarios.iter().filter(|s| s.insecure) {
        let _ = writeln!(
            out,
            "**TLS not verified**: scenario `{}` ran with `insecure = true`; its server's certificate was not checked.\n",
            s.name
        );
    }
    let slo = &plan.slo;
    let _ = writeln!(
        out,
        "Sustained means: {}errors at most {:.1} % of requests, {}. A clause fails only on a difference the step's request count resolves at {:.1} % confidence; achieved throughput is the successes over the window or, when the server fell behind, at most the rate the middle half of them completed at (see docs/src/verdicts.md in loadlab's repository).\n",
        slo.latency_words()
            .iter()
            .map(|w| format!("{w}, "))
            .collect::<String>(),
        100.0 * slo.max_error_rate,
        if closed {
            "no throughput bound in closed loop".to_string()
        } else {
            format!(
                "the server kept up with the arrivals (when its latency grew through the step, it still delivered its successes at {:.0} % or more of the rate they were sent)",
                100.0 * min_ratio
            )
        },
        100.0 * loadlab_engine::stats::CONFIDENCE
    );

    // The doctor's prediction, to set beside what was measured.
    let findings = loadlab_lab::bundle::read_doctor(dir)
        .ok()
        .flatten()
        .unwrap_or_default();
    if !findings.is_empty() {
        let _ = writeln!(out, "## Pre-flight (loadlab doctor)\n");
        for f in &findings {
            let _ = writeln!(out, "- `{}`", f.headline().trim());
        }
        let _ = writeln!(out, "\nThe fixes are in `doctor.txt`.\n");
    }

    // Knees (or the highest sustained step) side by side.
    let mut by_config: BTreeMap<(String, String), Vec<&StepRecord>> = BTreeMap::new();
    let mut config_order: Vec<String> = Vec::new();
    for s in steps {
        if !config_order.contains(&s.config) {
            config_order.push(s.config.clone());
        }
        by_config
            .entry((s.scenario.clone(), s.config.clone()))
            .or_default()
            .push(s);
    }
    if !together && !steps.is_empty() {
        let unit = if closed {
            closed_unit(steps.iter())
        } else {
            open_unit(steps.iter())
        };
        let _ = writeln!(out, "## Knees\n");
        let _ = writeln!(
            out,
            "| configuration | scenario | knee ({unit}) | limited by | why | confirmed |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        let mut fixed_notes = Vec::new();
        let mut whys = Vec::new();
        for c in &config_order {
            let record = configs.iter().find(|r| &r.config == c);
            for sc in &scenario_order {
                let Some(list) = by_config.get(&(sc.clone(), c.clone())) else {
                    continue;
                };
                let searched = record.and_then(|r| r.knees.iter().find(|k| &k.scenario == sc));
                // Where loadlab's own ports or descriptors stopped the steps: the why of
                // that step (which of them ran out) is worth its line.
                let own_limit = |stopped: Option<(f64, Limit)>| {
                    stopped
                        .filter(|(_, by)| *by == Limit::ClientLimited)
                        .map(|(at, _)| at)
                };
                let (best, fail, limit, confirmed, why_at) = match searched {
                    Some(k) => (
                        k.outcome.knee,
                        k.outcome.first_unsustained,
                        k.outcome.limited_by,
                        match (k.outcome.range, k.outcome.confirmed) {
                            (None, _) => "-",
                            (Some(_), true) => "yes",
                            (Some(_), false) => "no",
                        },
                        own_limit(k.outcome.stopped.map(|s| (s.at, s.by))),
                    ),
                    None => {
                        let f = fixed_knee(list);
                        if let Some(n) = f.non_monotonic {
                            fixed_notes.push(format!("- {c} / {sc}: non-monotonic: {n}"));
                        }
                        (f.best, f.fail, f.limit, "fixed steps", own_limit(f.stopped))
                    }
                };
                // Why: the search's own diagnosis, or that of the step at the first value
                // not sustained (or where loadlab's own limit stopped the steps).
                let diagnosis = searched.and_then(|k| k.diagnosis.as_ref()).or_else(|| {
                    fail.or(why_at).and_then(|v| {
                        list.iter()
                            .filter(|s| (s.load - v).abs() < 1e-9)
                            .find_map(|s| s.diagnosis.as_ref())
                    })
                });
                let why = diagnosis.map_or("-".to_string(), |d| {
                    let f = &d.findings[0];
                    match &f.parameter {
                        Some(p) => format!("{} (`{p}`)", f.bottleneck.label()),
                        None => f.bottleneck.label().to_string(),
                    }
                });
                knee_lines.push(format!(
                    "{sc} ({c}): knee {} {unit}; {}",
                    knee_cell(best, fail),
                    match (diagnosis, limit, searched) {
                        (Some(d), _, _) => format!("why: {}", d.findings[0].evidence),
                        (None, Some(_), Some(k)) => k.outcome.summary.clone(),
                        (None, Some(l), None) => format!("limited by {}", l.describe()),
                        (None, None, _) => "not reached".into(),
                    }
                ));
                if let (Some(d), Some(v)) = (diagnosis, fail.or(why_at)) {
                    let at = if unit == loadlab_lab::plan::TIMES_THE_LOG {
                        format!("×{} the log", num(v))
                    } else {
                        num(v)
                    };
                    let mut lines = vec![format!("- **{c} / {sc}** at {at}:")];
                    for f in &d.findings {
                        lines.push(format!(
                            "  - {}: {}. Try: {}.",
                            f.bottleneck.label(),
                            f.evidence,
                            f.advice
                        ));
                    }
                    if let Some(n) = &d.latency_note {
                        lines.push(format!("  - Where the latency went: {n}."));
                    }
                    whys.push(lines.join("\n"));
                }
                // The request names that failed there, when the step ran named requests.
                let names_failed = fail.and_then(|v| {
                    list.iter()
                        .filter(|s| (s.load - v).abs() < 1e-9)
                        .find_map(|s| s.verdict.names_failed())
                });
                let _ = writeln!(
                    out,
                    "| {c} | {sc} | {} | {} | {why} | {confirmed} |",
                    knee_cell(best, fail),
                    limit.map_or(
                        if best.is_some() { "not reached" } else { "-" }.to_string(),
                        |l| match &names_failed {
                            Some(names) => format!("{}; names failed: {names}", l.describe()),
                            None => l.describe().to_string(),
                        }
                    )
                );
            }
        }
        if !fixed_notes.is_empty() {
            let _ = writeln!(out, "\n{}", fixed_notes.join("\n"));
        }
        let _ = writeln!(out);
        let searches: Vec<String> = configs
            .iter()
            .flat_map(|r| {
                r.knees
                    .iter()
                    .map(move |k| format!("- {} / {}: {}", r.config, k.scenario, k.outcome.summary))
            })
            .collect();
        if !searches.is_empty() {
            let _ = writeln!(out, "{}\n", searches.join("\n"));
        }
        if !whys.is_empty() {
            let _ = writeln!(
                out,
                "### Why\n\nWhat the evidence of the first step not sustained says: a limit reached \
                 first (descriptors, processes, memory, a CPU quota), then each bottleneck in the \
                 order its signal moved (see docs/src/diagnosis.md in loadlab's repository):\n\n{}\n\n\
                 <details><summary>The rules behind each why</summary>\n\n{}\n</details>\n",
                whys.join("\n"),
                loadlab_lab::diagnosis::rules::markdown_table()
            );
        }
    }

    if !together {
        side_by_side(&mut out, steps, configs, &scenario_order, closed);
    }

    if together {
        together_summary(&mut out, steps, configs);
        for c in &config_order {
            let _ = writeln!(out, "## {c}\n");
            let list: Vec<&StepRecord> = steps
                .iter()
                .filter(|s| &s.config == c && s.phase == Phase::Together)
                .collect();
            together_table(&mut out, &list, configs.iter().find(|r| &r.config == c));
        }
    } else {
        for sc in &scenario_order {
            let present: Vec<&String> = config_order
                .iter()
                .filter(|c| by_config.contains_key(&(sc.clone(), (*c).clone())))
                .collect();
            if present.is_empty() {
                continue;
            }
            let _ = writeln!(out, "## {sc}\n");
            for c in present {
                let _ = writeln!(out, "### {c}\n");
                table(&mut out, &by_config[&(sc.clone(), c.clone())], closed);
                sessions_table(&mut out, &by_config[&(sc.clone(), c.clone())], closed);
                streams_table(&mut out, &by_config[&(sc.clone(), c.clone())], closed);
                names_table(&mut out, &by_config[&(sc.clone(), c.clone())], closed, slo);
            }
        }
    }

    agents_section(&mut out, steps);

    // A target's output past the log cap was dropped (its last bytes kept): say so, the
    // log in `logs/` is not all it wrote.
    let capped: Vec<String> = configs
        .iter()
        .flat_map(|c| {
            c.capped_logs.iter().map(move |l| {
                format!(
                    "- **{}**: target `{}` wrote more than the {} MiB log cap: {} bytes of its output were dropped from its log (the last {} KiB are kept).",
                    c.config,
                    l.target,
                    loadlab_lab::target::LOG_CAP >> 20,
                    l.dropped_bytes,
                    loadlab_lab::target::LOG_KEEP_END >> 10
                )
            })
        })
        .collect();
    if !capped.is_empty() {
        let _ = writeln!(
            out,
            "## Target logs capped

{}
",
            capped.join("\n")
        );
    }

    let failed: Vec<&ConfigRecord> = configs
        .iter()
        .filter(|c| c.status != ConfigStatus::Completed)
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "## Configurations that did not complete\n");
        for c in failed {
            let status = match c.status {
                ConfigStatus::NotReady => "target never ready",
                ConfigStatus::Unavailable => "unavailable on this machine",
                ConfigStatus::Crashed => "target crashed",
                ConfigStatus::Interrupted => "interrupted",
                ConfigStatus::Completed => "completed",
            };
            // An unavailable target's own explanation is its last log line (cause and fix);
            // otherwise the message, then the target's last log lines as they were.
            let mut lines = c.message.as_deref().unwrap_or("").lines();
            if c.status == ConfigStatus::Unavailable {
                let why = lines.next_back().unwrap_or("");
                let _ = writeln!(out, "- **{}**: {status}. {why}", c.config);
                continue;
            }
            let _ = writeln!(
                out,
                "- **{}**: {status}. {}",
                c.config,
                lines.next().unwrap_or("")
            );
            let tail: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
            if !tail.is_empty() {
                let _ = writeln!(out, "\n  ```text");
                for l in tail {
                    let _ = writeln!(out, "  {}", l.replace("```", "'''"));
                }
                let _ = writeln!(out, "  ```");
            }
        }
        let _ = writeln!(out, "\nTarget logs are in `logs/`.\n");
    }
    if steps.is_empty() {
        let _ = writeln!(out, "No step finished.\n");
    }
    if let Some(section) = crate::baseline::section(dir) {
        out.push_str(&section);
    }
    let _ = writeln!(
        out,
        "Files: `steps.jsonl` (every step, with mergeable HdrHistograms and probe series), `configs.jsonl`, `environment.json`, `doctor.txt`, `logs/`."
    );
    (out, knee_lines)
}

/// How the plan was scaled for this run, for the line under the title: `, quick scale` and
/// the `--matrix` lists given on the command line (each written by `code`).
pub(crate) fn scale(plan: &loadlab_lab::Plan, code: impl Fn(&str) -> String) -> String {
    let mut s = String::new();
    if plan.quick {
        s.push_str(", quick scale");
    }
    if !plan.matrix_set.is_empty() {
        let sets: Vec<String> = plan.matrix_set.iter().map(|m| code(m)).collect();
        s.push_str(&format!(
            ", the matrix narrowed on the command line ({})",
            sets.join(" ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed `queue` fixture's steps of one configuration.
    fn steps(config: &str) -> Vec<StepRecord> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/queue/steps.jsonl"
        );
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<StepRecord>(l).unwrap())
            .filter(|s| s.config == config)
            .collect()
    }

    #[test]
    fn server_streams_get_their_first_message_and_gaps_apart_and_stalls_a_note() {
        let mut list = steps("capacity=150");
        let refs: Vec<&StepRecord> = list.iter().collect();
        let mut out = String::new();
        streams_table(&mut out, &refs, true);
        assert_eq!(out, "", "HTTP steps have no stream table");
        let stats = |count: u64, p50: f64, p99: f64| loadlab_engine::result::LatencyStats {
            count,
            p50: Some(p50),
            p99: Some(p99),
            ..Default::default()
        };
        for (k, s) in list.iter_mut().enumerate() {
            s.result.stream_timing = Some(loadlab_engine::result::StreamTiming {
                first_message_ms: stats(8 + k as u64, 150.5, 180.0),
                gap_ms: stats(100, 20.25, 41.0),
                stream_seconds: 36,
                failed_stream_seconds: 4,
                opened: None,
            });
        }
        list[1]
            .result
            .stream_timing
            .as_mut()
            .unwrap()
            .stream_seconds = 0;
        list[0].result.window_stalls = Some(7);
        let refs: Vec<&StepRecord> = list.iter().collect();
        streams_table(&mut out, &refs, true);
        assert!(
            out.contains(
                "| first messages | first p50 ms | first p99 ms | gaps | gap p50 ms | gap p99 ms | starved stream-seconds |"
            ),
            "{out}"
        );
        // Three significant digits, as every latency of the report; a step from a
        // loadlab that did not count stream-seconds says nothing of them.
        let row = format!(
            "| {} | 8 | 150 | 180 | 100 | 20.2 | 41.0 | 4 of 36 |",
            num(list[0].load)
        );
        assert!(out.contains(&row), "{row} not in\n{out}");
        let row = format!(
            "| {} | 9 | 150 | 180 | 100 | 20.2 | 41.0 | – |",
            num(list[1].load)
        );
        assert!(out.contains(&row), "{row} not in\n{out}");
        assert_eq!(out.matches("\n| ").count(), 1 + list.len(), "{out}");
        let note = notes(&list[0], None, LatencyFloor::of(refs.iter().copied()));
        assert!(
            note.contains("7 requests waited for the server's flow-control window"),
            "{note}"
        );
    }

    #[test]
    fn a_step_loadlab_limited_is_not_the_servers_knee() {
        // As recorded: 100 held, 300 failed on latency and throughput.
        let mut list = steps("capacity=150");
        let refs: Vec<&StepRecord> = list.iter().collect();
        let f = fixed_knee(&refs);
        assert_eq!(
            (f.best, f.fail, f.limit),
            (Some(100.0), Some(300.0), Some(Limit::Latency))
        );
        // The same step, also late on loadlab's side (not excused): it says nothing about
        // the server, so the knee is "at least 100", stopped by the generator.
        list[1].verdict.limits.insert(0, Limit::GeneratorLimited);
        let refs: Vec<&StepRecord> = list.iter().collect();
        let f = fixed_knee(&refs);
        assert_eq!(
            (f.best, f.fail, f.limit),
            (Some(100.0), None, Some(Limit::GeneratorLimited))
        );
        assert_eq!(knee_cell(f.best, f.fail), "at least 100");
        // The lab tries such a step once more: the repeat, the server's own failure, decides,
        // and the first attempt beside it changes nothing.
        let mut repeat = list[1].clone();
        repeat.index += 1;
        repeat
            .verdict
            .limits
            .retain(|l| *l != Limit::GeneratorLimited);
        list.insert(2, repeat);
        let refs: Vec<&StepRecord> = list.iter().collect();
        let f = fixed_knee(&refs);
        assert_eq!(
            (f.best, f.fail, f.limit, f.non_monotonic),
            (Some(100.0), Some(300.0), Some(Limit::Latency), None)
        );
        assert_eq!(knee_cell(f.best, f.fail), "between 100 and 300");
        // Sustained throughout: no limit at all.
        let held = steps("capacity=400");
        let refs: Vec<&StepRecord> = held.iter().collect();
        let f = fixed_knee(&refs);
        assert_eq!((f.best, f.fail, f.limit), (Some(300.0), None, None));
    }
}
