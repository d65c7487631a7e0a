//! `loadlab lab`, `loadlab doctor`, `loadlab report` and `loadlab demo`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use loadlab_engine::CancellationToken;
use loadlab_fleet::Coordinator;
use loadlab_lab::plan::MatrixSet;
use loadlab_lab::{LabOptions, Plan};
use loadlab_system::doctor::{self, Facts, Finding, Severity};

use crate::args::{DemoArgs, DoctorArgs, LabArgs, ReportArgs, TuneArgs};
use crate::{cancel_on_signal, BadInput, EXIT_ALL_FAILED, EXIT_GATE_FAILED};
use loadlab_engine::config::workload::{DEFAULT_DURATION, DEFAULT_MAX_CONNECTIONS};

/// The demo's plan, built into the binary.
const DEMO_PLAN: &str = include_str!("../../../plans/demo.toml");

fn load_plan(path: &Path, quick: bool, sets: &[MatrixSet]) -> anyhow::Result<Plan> {
    Plan::load_with(path, quick, sets).map_err(|e| BadInput(e.to_string()).into())
}

pub(crate) fn default_out(name: &str) -> PathBuf {
    let stamp = loadlab_engine::env::Environment::capture(Vec::new())
        .started_at
        .replace(':', "");
    PathBuf::from("results").join(format!("{name}-{stamp}"))
}

/// Runs the pre-flight checks for a plan.
fn preflight(plan: &Plan) -> Vec<Finding> {
    let demand = loadlab_lab::doctor::demand(plan);
    let facts = Facts::read(demand.loopback, demand.source_addrs as usize);
    doctor::diagnose(&demand, &facts)
}

/// How [`run_lab`] runs a plan, beside the plan and its bundle directory.
pub(crate) struct RunSettings {
    /// No progress lines.
    pub(crate) quiet: bool,
    /// `--no-build`.
    pub(crate) skip_builds: bool,
    /// Say the pre-flight in one line, for a newcomer (the demo), not finding by finding.
    pub(crate) brief_preflight: bool,
    /// `--remote-probe`: each step's probe source, from the coordinator's remote probe.
    pub(crate) remote_probe: Option<loadlab_lab::watch::RemoteSources>,
    /// `--prometheus-rw`: where each step's seconds are pushed.
    pub(crate) prometheus: Option<crate::promrw::Endpoint>,
}

/// The pre-flight in one line for a newcomer: whether anything stops the run, and where
/// the notes for heavier runs are.
fn brief(findings: &[Finding]) -> String {
    // Late wake-ups are no tuning note: they are said on their own.
    let late = findings
        .iter()
        .find(|f| f.check == doctor::Check::Wakeups && f.severity == Severity::Warn);
    let findings: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.check != doctor::Check::Wakeups)
        .collect();
    let count = |sev: Severity| findings.iter().filter(|f| f.severity == sev).count();
    let (fail, warn) = (count(Severity::Fail), count(Severity::Warn));
    let notes = if warn == 0 {
        String::new()
    } else {
        format!(
            "; {warn} note{} on tuning for heavier runs in doctor.txt",
            if warn == 1 { "" } else { "s" }
        )
    };
    let mut text = if fail == 0 {
        format!("loadlab: checked this machine first (file descriptors, ports, listen queues, wake-ups): nothing stands in the way{notes}")
    } else {
        format!(
            "loadlab: checked this machine first: {fail} problem{} may spoil the run (`loadlab doctor` says how to fix {}){notes}",
            if fail == 1 { "" } else { "s" },
            if fail == 1 { "it" } else { "them" }
        )
    };
    if let Some(f) = late {
        // "this machine woke a sleeping thread 2.89 ms late at p99 (…): …"
        let said = f.message.split(" (").next().unwrap_or_default();
        text.push_str(&format!(
            "\nloadlab: {said}: some steps may be noted generator-limited (doctor.txt says more)"
        ));
    }
    text
}

pub(crate) fn run_lab(
    plan: &Plan,
    out: PathBuf,
    settings: RunSettings,
    stop: CancellationToken,
    fleet: Option<Arc<Coordinator>>,
) -> anyhow::Result<(loadlab_lab::LabSummary, String)> {
    run_with(plan, out, settings, stop, fleet, &mut |opts| {
        loadlab_lab::run_plan(plan, opts).map_err(Into::into)
    })
}

/// [`run_lab`] with `run` choosing how the plan runs (`loadlab tune` drives it).
pub(crate) fn run_with(
    plan: &Plan,
    out: PathBuf,
    settings: RunSettings,
    stop: CancellationToken,
    fleet: Option<Arc<Coordinator>>,
    run: &mut dyn FnMut(&LabOptions) -> anyhow::Result<loadlab_lab::LabSummary>,
) -> anyhow::Result<(loadlab_lab::LabSummary, String)> {
    let RunSettings {
        quiet,
        skip_builds,
        brief_preflight,
        remote_probe,
        prometheus,
    } = settings;
    // A keeper process kills what is left of the targets' process trees if loadlab is
    // killed (best effort: without it, only the targets themselves die with loadlab).
    if let Err(e) = std::env::current_exe().and_then(|exe| loadlab_lab::target::start_keeper(&exe))
    {
        eprintln!("loadlab: warning: no keeper process ({e}): if loadlab is killed, processes its targets forked may survive it");
    }
    let findings = preflight(plan);
    if brief_preflight && !quiet {
        eprintln!("{}", brief(&findings));
    } else if doctor::worst(&findings) != Severity::Ok && !quiet {
        eprintln!(
            "loadlab: pre-flight findings (see `loadlab doctor`):\n{}",
            doctor::render(&findings)
        );
    }
    let view = (!quiet).then(crate::live::LabView::new);
    let shown = view.clone().map(|v| v as Arc<dyn loadlab_lab::LabProgress>);
    let pusher = prometheus.map(crate::promrw::Pusher::start);
    let progress = match &pusher {
        Some(p) => Some(Arc::new(crate::promrw::LabPush::new(p.feeds(), shown))
            as Arc<dyn loadlab_lab::LabProgress>),
        None => shown,
    };
    let opts = LabOptions {
        out,
        stop,
        progress,
        command: std::env::args().collect(),
        doctor: findings,
        fleet,
        remote_probe,
        skip_builds,
    };
    let summary = run(&opts);
    if let Some(v) = &view {
        v.finish();
    }
    if let Some(p) = pusher {
        p.finish();
    }
    let summary = summary?;
    let path = loadlab_report::write_report(&summary.bundle)
        .with_context(|| format!("writing the report into {}", summary.bundle.display()))?;
    let report = std::fs::read_to_string(&path)?;
    Ok((summary, report))
}

pub fn cmd_lab(a: &LabArgs) -> anyhow::Result<ExitCode> {
    let plan = load_plan(&a.plan, a.quick, &a.matrix)?;
    // The baseline is read and matched against the plan before any load.
    let baseline = match &a.baseline {
        Some(dir) => {
            Some(loadlab_report::baseline::load(dir, &plan).map_err(|e| BadInput(e.to_string()))?)
        }
        None => None,
    };
    if let Some(p) = &a.junit {
        crate::outputs::check_dir("--junit", p)?;
    }
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let out = a.out.clone().unwrap_or_else(|| default_out(&plan.name));
    let fleet = crate::fleet::coordinator(&a.distributed, &stop, a.quiet)?;
    let settings = RunSettings {
        quiet: a.quiet,
        skip_builds: a.no_build,
        brief_preflight: false,
        remote_probe: crate::fleet::remote_sources(&a.distributed, fleet.as_ref()),
        prometheus: a.prometheus.prometheus_rw.clone(),
    };
    let (summary, mut report) = run_lab(&plan, out, settings, stop.clone(), fleet.clone())?;
    if let Some(c) = fleet {
        c.finish(if stop.is_cancelled() {
            "the coordinator was interrupted"
        } else {
            "the run is over"
        });
    }
    // Against the baseline: report.md gets its section before it is printed; the
    // regressions are named on stderr after the summary line.
    let check = match &baseline {
        Some(base) if summary.steps > 0 => {
            let max = a
                .max_regression
                .unwrap_or(loadlab_report::baseline::DEFAULT_MAX_REGRESSION);
            let check = loadlab_report::baseline::check(&summary.bundle, base, max)?;
            let path = loadlab_report::write_report(&summary.bundle)
                .with_context(|| format!("writing the report into {}", summary.bundle.display()))?;
            report = std::fs::read_to_string(&path)?;
            Some(check)
        }
        _ => None,
    };
    // `--junit -` has standard output: the report goes to standard error.
    if a.junit.as_deref().is_some_and(crate::outputs::is_stdout) {
        eprintln!("{report}");
    } else {
        println!("{report}");
    }
    eprintln!(
        "loadlab: {} step{} in {} configuration{}{}; bundle {}; charts in {}",
        summary.steps,
        if summary.steps == 1 { "" } else { "s" },
        summary.configs.len(),
        if summary.configs.len() == 1 { "" } else { "s" },
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        summary.bundle.display(),
        loadlab_report::html_path(&summary.bundle).display()
    );
    if let Some(path) = &a.junit {
        let xml = lab_junit(&format!("lab {}", plan.name), &summary, check.as_ref()).to_xml();
        crate::outputs::emit("--junit", path, xml.as_bytes())?;
    }
    if let Some(code) = crate::interrupted_exit() {
        return Ok(code);
    }
    if summary.steps == 0 {
        return Ok(ExitCode::from(EXIT_ALL_FAILED));
    }
    Ok(match check {
        Some(check) if report_regressions(&check) => ExitCode::from(EXIT_GATE_FAILED),
        _ => ExitCode::SUCCESS,
    })
}

pub fn cmd_tune(a: &TuneArgs) -> anyhow::Result<ExitCode> {
    let plan = load_plan(&a.plan, a.quick, &a.matrix)?;
    // What tune needs of the plan is checked before any load.
    let prepared = loadlab_lab::tune::prepare(&plan).map_err(BadInput)?;
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out(&format!("{}-tune", plan.name)));
    let fleet = crate::fleet::coordinator(&a.distributed, &stop, a.quiet)?;
    let settings = RunSettings {
        quiet: a.quiet,
        skip_builds: a.no_build,
        brief_preflight: false,
        remote_probe: crate::fleet::remote_sources(&a.distributed, fleet.as_ref()),
        prometheus: a.prometheus.prometheus_rw.clone(),
    };
    let mut tuned = None;
    let (summary, _report) = run_with(
        &prepared.plan,
        out,
        settings,
        stop.clone(),
        fleet.clone(),
        &mut |opts| {
            let (summary, result) =
                loadlab_lab::tune::run_tune(&prepared, opts, a.budget, a.seed, a.full)?;
            tuned = Some(result);
            Ok(summary)
        },
    )?;
    if let Some(c) = fleet {
        c.finish(if stop.is_cancelled() {
            "the coordinator was interrupted"
        } else {
            "the run is over"
        });
    }
    let result = tuned.expect("tune ran");
    print!("{}", loadlab_report::tune::text(&result));
    println!(
        "\nThe full report: {} (charts) and report.md beside it; tune.json holds every figure above.",
        loadlab_report::html_path(&summary.bundle).display()
    );
    eprintln!(
        "loadlab: {} step{} in {} configuration{}{}; bundle {}",
        summary.steps,
        if summary.steps == 1 { "" } else { "s" },
        summary.configs.len(),
        if summary.configs.len() == 1 { "" } else { "s" },
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        summary.bundle.display(),
    );
    if let Some(code) = crate::interrupted_exit() {
        return Ok(code);
    }
    Ok(if result.best.is_none() {
        ExitCode::from(EXIT_ALL_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// A lab as a JUnit suite: each configuration, each knee, the baseline's verdict.
pub(crate) fn lab_junit(
    suite: &str,
    summary: &loadlab_lab::experiment::LabSummary,
    check: Option<&loadlab_report::baseline::BaselineCheck>,
) -> loadlab_lab::junit::Suite {
    use loadlab_lab::bundle::ConfigStatus;
    use loadlab_lab::junit::Case;
    let case = |classname: &str, name: String| Case {
        name,
        classname: classname.into(),
        failure: None,
        skipped: None,
        output: String::new(),
    };
    let mut cases = Vec::new();
    for c in &summary.configs {
        let why = c.message.clone().unwrap_or_default();
        let mut k = case("loadlab.config", c.config.clone());
        match c.status {
            ConfigStatus::Completed => k.output = "every step ran".into(),
            ConfigStatus::Unavailable => k.skipped = Some(format!("unavailable here: {why}")),
            ConfigStatus::Interrupted => k.skipped = Some("interrupted".into()),
            ConfigStatus::NotReady => {
                k.failure = Some(format!("the target never became ready: {why}"))
            }
            ConfigStatus::Crashed => {
                k.failure = Some(format!("a target exited during a step: {why}"))
            }
        }
        cases.push(k);
        for knee in &c.knees {
            let mut k = case("loadlab.knee", format!("{} / {}", c.config, knee.scenario));
            k.output = match &knee.diagnosis {
                Some(d) => format!("{}; why: {}", knee.outcome.summary, d.headline()),
                None => knee.outcome.summary.clone(),
            };
            // A search that stopped on the request or the address measured no knee.
            if knee
                .outcome
                .limited_by
                .is_some_and(loadlab_lab::verdict::Limit::not_the_load)
            {
                k.failure = Some(format!("no knee measured: {}", knee.outcome.summary));
            }
            cases.push(k);
        }
    }
    if let Some(check) = check {
        if check.regressions.is_empty() {
            let mut k = case(
                "loadlab.baseline",
                format!("no regression against {}", check.baseline),
            );
            k.output = format!(
                "allowed: {}",
                loadlab_report::compare::text::pct_abs(check.max_regression)
            );
            cases.push(k);
        }
        for r in &check.regressions {
            let figure = match r.figure {
                loadlab_report::baseline::RegressedFigure::Knee => "knee".to_string(),
                loadlab_report::baseline::RegressedFigure::P99 { load } => {
                    format!("p99 at {}", loadlab_lab::knee::fmt(load))
                }
            };
            let mut k = case(
                "loadlab.baseline",
                format!("{} / {} {figure}", r.config, r.scenario),
            );
            k.failure = Some(r.sentence.clone());
            cases.push(k);
        }
    }
    loadlab_lab::junit::Suite {
        name: format!("loadlab {suite}"),
        time_s: summary.configs.iter().map(|c| c.duration_s).sum(),
        timestamp: String::new(),
        properties: vec![("bundle".into(), summary.bundle.display().to_string())],
        cases,
    }
}

/// Names each regression against the baseline on stderr; true when there is one.
fn report_regressions(check: &loadlab_report::baseline::BaselineCheck) -> bool {
    let against = format!(
        "against the baseline {} (allowed: {})",
        check.baseline,
        loadlab_report::compare::text::pct_abs(check.max_regression)
    );
    if check.regressions.is_empty() {
        eprintln!("loadlab: no regression {against}");
        return false;
    }
    let n = check.regressions.len();
    eprintln!(
        "loadlab: {n} regression{} {against}:",
        if n == 1 { "" } else { "s" }
    );
    for r in &check.regressions {
        eprintln!("  - {}", r.sentence);
    }
    true
}

/// What `loadlab lab` will build before the first configuration, for `loadlab doctor`.
fn builds_text(plan: &Plan) -> String {
    let builds = loadlab_lab::build::planned(plan, None);
    if builds.is_empty() {
        return "build: none (no target has a `build`)\n".into();
    }
    let mut text = String::new();
    for b in builds {
        text.push_str(&format!(
            "build: {} is built once before the first configuration, in {} (at most {}; \
             `loadlab lab --no-build` skips it):\n       {}\n",
            b.who(),
            plan.dir.display(),
            b.timeout_text(),
            b.command_line()
        ));
    }
    text
}

pub fn cmd_doctor(a: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let demand = match &a.plan {
        Some(p) => {
            let plan = load_plan(p, a.quick, &[])?;
            print!("{}", builds_text(&plan));
            loadlab_lab::doctor::demand(&plan)
        }
        // Without a plan: what `loadlab run --rate R` asks for at its defaults (an open-loop
        // pool that may grow to its ceiling, for the default duration).
        None => doctor::Demand {
            connections: DEFAULT_MAX_CONNECTIONS,
            backlog: None,
            new_connections_per_s: None,
            server_closes: true,
            duration_s: DEFAULT_DURATION.as_secs_f64(),
            loopback: true,
            source_addrs: 1,
        },
    };
    let facts = Facts::read(demand.loopback, demand.source_addrs as usize);
    let findings = doctor::diagnose(&demand, &facts);
    print!("{}", doctor::render(&findings));
    Ok(if doctor::worst(&findings) == Severity::Fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn cmd_report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    if !a.bundle.join("plan.json").exists() {
        return Err(BadInput(format!(
            "{} is not a loadlab result bundle (no plan.json)",
            a.bundle.display()
        ))
        .into());
    }
    let path = loadlab_report::write_report(&a.bundle)?;
    print!("{}", std::fs::read_to_string(&path)?);
    for torn in loadlab_lab::bundle::torn_lines(&a.bundle) {
        eprintln!("loadlab: warning: {torn}");
    }
    eprintln!(
        "loadlab: wrote {} and {}",
        path.display(),
        loadlab_report::html_path(&a.bundle).display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn cmd_demo(a: &DemoArgs) -> anyhow::Result<ExitCode> {
    if !cfg!(feature = "servers") {
        return Err(crate::BadInput(crate::NO_SERVERS.into()).into());
    }
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let out = a.out.clone().unwrap_or_else(|| default_out("demo"));
    let cwd = std::env::current_dir()?;
    let plan = Plan::parse(DEMO_PLAN, "built-in demo plan", &cwd, false)?;
    if !a.quiet {
        eprintln!(
            "loadlab demo: the reference server's /sleep blocks a worker thread for 50 ms; \
             loadlab searches for the load where it breaks with 2 workers, then with 8, and says why \
             (about 45 s)"
        );
    }
    let settings = RunSettings {
        quiet: a.quiet,
        skip_builds: false,
        brief_preflight: true,
        remote_probe: None,
        prometheus: None,
    };
    let (summary, report) = run_lab(&plan, out, settings, stop, None)?;
    if a.verbose {
        println!("{report}");
    }
    println!("\nWhere it breaks, and why:");
    print!("{}", crate::closing::knees(&summary.bundle, false)?);
    print!("{}", crate::closing::knob_effects(&summary.bundle)?);
    println!(
        "\nThe full report: {} (charts) and report.md beside it; --verbose prints it here.",
        loadlab_report::html_path(&summary.bundle).display()
    );
    println!(
        "\nNext:\n  \
         loadlab knee http://127.0.0.1:8080/ --slo 'p99<200ms'     your own server's knee and why (README: \"Find your own server's knee\")\n  \
         loadlab tune plans/backlog-workers.toml --quick          the best configuration of a plan's matrix, and what each knob did\n  \
         loadlab --help                                           every command; the README has the rest"
    );
    if let Some(code) = crate::interrupted_exit() {
        return Ok(code);
    }
    Ok(if summary.steps == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_system::doctor::Check;

    fn finding(check: Check, severity: Severity, message: &str) -> Finding {
        Finding {
            check,
            severity,
            message: message.into(),
            fix: Vec::new(),
        }
    }

    #[test]
    fn the_brief_preflight_says_late_wake_ups_on_their_own_line() {
        let mut fs = vec![
            finding(Check::Nofile, Severity::Ok, "fine"),
            finding(Check::Tuning, Severity::Warn, "netdev_max_backlog"),
            finding(
                Check::Wakeups,
                Severity::Ok,
                "this machine woke a sleeping thread 0.20 ms late at p99 (200 sleeps): within",
            ),
        ];
        assert_eq!(
            brief(&fs),
            "loadlab: checked this machine first (file descriptors, ports, listen queues, \
             wake-ups): nothing stands in the way; 1 note on tuning for heavier runs in doctor.txt"
        );
        fs[2] = finding(
            Check::Wakeups,
            Severity::Warn,
            "this machine woke a sleeping thread 2.89 ms late at p99 (200 sleeps 2 ms apart): loadlab's workers",
        );
        let text = brief(&fs);
        // Not counted as a tuning note, and said with its figure.
        assert!(
            text.contains("; 1 note on tuning for heavier runs"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "\nloadlab: this machine woke a sleeping thread 2.89 ms late at p99: some steps may be noted generator-limited (doctor.txt says more)"
            ),
            "{text}"
        );
    }
}
