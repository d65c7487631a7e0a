//! Runs a plan: for each configuration of the matrix, start the targets, run the steps
//! (fixed, knee search, or all scenarios together) with probes sampling the targets and the
//! kernel, append each step to the bundle as it finishes, stop the targets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadlab_engine::config::CpuList;
use loadlab_engine::{CancellationToken, RunConfig, RunOptions, RunResult, SecondStats, Workload};
use loadlab_fleet::{Coordinator, FleetError};
use loadlab_system::doctor::Finding;
use loadlab_system::ports;
use loadlab_system::probe::{ProbeReport, Prober};
use loadlab_system::procfs::process_running;

use crate::build::{self, BuildsOutcome};
use crate::bundle::{
    Bundle, CappedLog, ConfigRecord, ConfigStatus, ScenarioKnee, StepRecord, BUNDLE_VERSION,
};
use crate::diagnosis::{Diagnosis, Tracker};
use crate::knee::{self, KneeParams, Phase, StepSignal};
use crate::matrix::Config;
use crate::plan::{Model, Plan, ScenarioSpec, Steps};
use crate::target::{self, StartError, TargetExit, TargetSet};
use crate::verdict::{judge, Limit};
use crate::watch::{RemoteSources, Watch, WatchError};

/// How the caller steers an experiment.
pub struct LabOptions {
    /// Bundle directory.
    pub out: PathBuf,
    /// Cancel to stop (Ctrl-C): the current step ends, targets are stopped, the report is written.
    pub stop: CancellationToken,
    /// Where progress goes (`None`: nowhere).
    pub progress: Option<Arc<dyn LabProgress>>,
    /// The command line (recorded in the environment).
    pub command: Vec<String>,
    /// The pre-flight findings written into the bundle (`doctor.json`, and `doctor.txt`
    /// as `loadlab doctor` shows them).
    pub doctor: Vec<Finding>,
    /// Drive the steps from these agents instead of this process (`--agents N`). A
    /// coordinator without agents (`--remote-probe` alone, see
    /// [`Coordinator::drives_load`]) leaves the load here.
    pub fleet: Option<Arc<Coordinator>>,
    /// The samples of a `loadlab probe` on the server's host (`--remote-probe`): they
    /// replace every local probe.
    pub remote_probe: Option<RemoteSources>,
    /// Do not run the targets' `build` commands (`--no-build`): what they build must be
    /// there already. Said once in the progress.
    pub skip_builds: bool,
}

/// Where a lab run reports as it goes: the CLI draws it as one live status area on a
/// terminal, or as plain lines.
pub trait LabProgress: Send + Sync {
    /// A line for the log: a configuration starting, a step's outcome, a knee, why.
    fn line(&self, msg: &str);
    /// A step is starting.
    fn step(&self, step: &StepStart);
    /// One second of the running step finished (in together mode, the first scenario's),
    /// with its latency histogram (encoded as `loadlab_engine::records::encode_histogram`
    /// does).
    fn second(&self, s: &SecondStats, latency: &str);
}

/// A step about to run, for a live view.
#[derive(Clone, Debug)]
pub struct StepStart {
    /// The configuration, `name=value,...`.
    pub config: String,
    /// Its position, from 1.
    pub config_number: usize,
    /// Configurations in the plan.
    pub configs: usize,
    /// The scenarios of the step, joined.
    pub scenario: String,
    /// The scenario whose seconds [`LabProgress::second`] reports: the step's first.
    pub seconds_of: String,
    /// Offered load: req/s, or connections/streams in closed loop.
    pub load: f64,
    /// `req/s`, `conns` or `streams`.
    pub unit: &'static str,
    /// The unit of what the seconds achieved: `req/s`, `msg/s`, `events/s`.
    pub rate: &'static str,
    /// The step's measured duration, seconds.
    pub duration_s: f64,
    /// This step's number, from 1, and the plan's estimate of all steps (`~` when a knee
    /// search makes it a guess).
    pub number: usize,
    /// The estimate of all steps.
    pub planned: usize,
    /// True when `planned` is an estimate.
    pub estimated: bool,
    /// Wall time left, by the time steps have taken so far (`None` before the first).
    pub left_s: Option<f64>,
}

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The bundle directory is another run's, or already holds a bundle.
    #[error("{0}")]
    OutTaken(String),
    /// The bundle could not be written.
    #[error("result bundle {path}: {source}")]
    Bundle {
        /// Directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A scenario rendered into an invalid run (a plan error found late).
    #[error("scenario `{scenario}` in configuration {config}: {source}")]
    Scenario {
        /// Scenario.
        scenario: String,
        /// Configuration.
        config: String,
        /// Cause.
        source: loadlab_engine::EngineError,
    },
    /// A probe the plan or the flags named cannot be found (before any load).
    #[error(transparent)]
    Probe(#[from] WatchError),
    /// A target's `build` failed, timed out or could not start: no target was started.
    #[error(transparent)]
    Build(Box<crate::build::BuildError>),
    /// The agents could not run a step (`--agents`).
    #[error("scenario `{scenario}` in configuration {config}: {source}")]
    Agents {
        /// Scenario.
        scenario: String,
        /// Configuration.
        config: String,
        /// Cause.
        source: Box<FleetError>,
    },
}

/// What an experiment did, in brief.
#[derive(Debug)]
pub struct LabSummary {
    /// Bundle directory.
    pub bundle: PathBuf,
    /// Configurations finished.
    pub configs: Vec<ConfigRecord>,
    /// Steps run.
    pub steps: usize,
    /// Stopped by the user.
    pub interrupted: bool,
}

struct Runner<'a> {
    plan: &'a Plan,
    opts: &'a LabOptions,
    bundle: Bundle,
    /// Step records written.
    steps: usize,
    /// Steps run (a together step counts once) and the plan's estimate of all of them.
    steps_run: usize,
    steps_planned: usize,
    /// When the first configuration started (the ETA uses the observed time per step).
    started: Instant,
    configs_total: usize,
    /// The configuration running, from 0.
    config_index: usize,
    /// `load.cpus`, if this machine has those CPUs.
    load_cpus: Option<CpuList>,
    /// Diagnoses each step against the earlier ones.
    tracker: Tracker,
    /// Diagnoses of the steps not sustained: configuration, scenario, load.
    diagnoses: Vec<(String, String, f64, Diagnosis)>,
    /// What the probes watch.
    watch: Watch,
    /// Per scenario, where its data rows and `${seq}` stand: every step goes on from the
    /// last (so `unique` never sends a row twice in one run, whatever the configuration).
    resumes: BTreeMap<String, loadlab_engine::config::traffic::Resume>,
    /// The configuration running is raced first (see [`Session::run`]).
    race: Option<knee::Race>,
}

/// A knee search's step count is not known in advance; this many is typical.
const KNEE_STEPS_ESTIMATE: usize = 8;

fn planned_steps(plan: &Plan, configs: usize) -> usize {
    let per_config = match &plan.load.steps {
        Steps::Fixed(v) => plan.scenarios.len() * v.len(),
        Steps::Knee { confirm, .. } => {
            plan.scenarios.len() * (KNEE_STEPS_ESTIMATE + 2 * *confirm as usize)
        }
        Steps::Together => 1,
    };
    configs * per_config
}

fn short_duration(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn bundle_err(path: &std::path::Path) -> impl Fn(std::io::Error) -> LabError + '_ {
    move |e| LabError::Bundle {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Runs the plan and writes its bundle (report included): every configuration of the
/// matrix, in order.
pub fn run_plan(plan: &Plan, opts: &LabOptions) -> Result<LabSummary, LabError> {
    run_driven(plan, opts, &mut |s| {
        for i in 0..s.configs().len() {
            if s.stopped() {
                break;
            }
            s.run(i, None)?;
        }
        Ok(())
    })
}

/// Runs the plan with `driver` choosing which configurations run and how (see
/// [`Session`]), and writes its bundle.
pub fn run_driven(
    plan: &Plan,
    opts: &LabOptions,
    driver: &mut dyn FnMut(&mut Session<'_>) -> Result<(), LabError>,
) -> Result<LabSummary, LabError> {
    target::install_cleanup();
    // Raise the soft nofile limit now, before targets start: they inherit it.
    let demand = crate::doctor::demand(plan);
    // Too low a hard limit is the doctor's `nofile` finding; each step's run reports it.
    let _ = ports::reserve_fds(demand.connections);
    // What the probes watch, found before any load: a probe named that does not exist
    // stops the run here.
    let (watch, watching) = Watch::resolve(plan, opts.remote_probe.clone())?;
    if let Some(p) = &opts.progress {
        p.line(&watching);
        // What each log replayed holds and what of it is left out, before any load.
        for s in &plan.scenarios {
            if let Some(replay) = &s.traffic.replay {
                p.line(&format!("scenario {}: {replay}", s.name));
            }
        }
    }
    let environment = loadlab_engine::env::Environment::capture(opts.command.clone());
    let bundle =
        Bundle::create(&opts.out, plan, &environment, &opts.doctor).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::ResourceBusy | std::io::ErrorKind::AlreadyExists => {
                    LabError::OutTaken(e.to_string())
                }
                _ => bundle_err(&opts.out)(e),
            }
        })?;
    if build_targets(plan, opts, bundle.dir())? == BuildsOutcome::Interrupted {
        return Ok(LabSummary {
            bundle: opts.out.clone(),
            configs: Vec::new(),
            steps: 0,
            interrupted: true,
        });
    }
    let configs = plan.configs();
    let runner = Runner {
        plan,
        opts,
        bundle,
        steps: 0,
        steps_run: 0,
        steps_planned: planned_steps(plan, configs.len()),
        started: Instant::now(),
        configs_total: configs.len(),
        config_index: 0,
        load_cpus: target::usable_cpus(&plan.load.cpus).map(CpuList::new),
        tracker: Tracker::for_this_machine().with_latency_bounds(plan.slo.latency_bounds()),
        diagnoses: Vec::new(),
        watch,
        resumes: BTreeMap::new(),
        race: None,
    };
    let mut session = Session {
        runner,
        configs,
        done: Vec::new(),
    };
    driver(&mut session)?;
    Ok(LabSummary {
        bundle: opts.out.clone(),
        steps: session.runner.steps,
        configs: session.done,
        interrupted: opts.stop.is_cancelled(),
    })
}

/// An experiment under way, for a driver that chooses which configurations run and how
/// (`loadlab tune`): the bundle, the targets' lifecycle, the steps, their verdicts and
/// diagnoses are the lab's, whoever chooses.
pub struct Session<'a> {
    runner: Runner<'a>,
    configs: Vec<Config>,
    done: Vec<ConfigRecord>,
}

impl Session<'_> {
    /// Every configuration of the plan's matrix, in the order `loadlab lab` runs them.
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }

    /// Whether the run was stopped (Ctrl-C): run nothing more.
    pub fn stopped(&self) -> bool {
        self.runner.opts.stop.is_cancelled()
    }

    /// Runs configuration `i` (its targets started, its scenarios' steps or knee searches,
    /// its targets stopped) and appends its record to the bundle. With `race`, each
    /// knee search first races the configuration (see [`knee::race`]): a step at the best
    /// knee so far, repeated if it is not sustained; not sustained twice, the
    /// configuration is dropped (its knee is below it) without a search; otherwise the
    /// search goes on from there.
    pub fn run(&mut self, i: usize, race: Option<knee::Race>) -> Result<&ConfigRecord, LabError> {
        self.runner.race = race;
        let config = self.configs[i].clone();
        let record = self.runner.run_config(i, &config);
        self.runner.race = None;
        let record = record?;
        self.runner
            .bundle
            .append_config(&record)
            .map_err(bundle_err(&self.runner.opts.out))?;
        self.done.push(record);
        Ok(self.done.last().expect("just pushed"))
    }

    /// Steps run so far (every configuration).
    pub fn steps_run(&self) -> usize {
        self.runner.steps_run
    }

    /// Sets the progress estimate to `configs` configurations' worth of steps (a driver
    /// that runs fewer than the matrix).
    pub fn expect_configs(&mut self, configs: usize) {
        self.runner.steps_planned = planned_steps(self.runner.plan, configs);
    }

    /// The configurations run so far, in the order they ran.
    pub fn done(&self) -> &[ConfigRecord] {
        &self.done
    }

    /// Writes one line of progress.
    pub fn say(&self, msg: impl AsRef<str>) {
        self.runner.say(msg.as_ref());
    }

    /// The bundle directory.
    pub fn bundle_dir(&self) -> &std::path::Path {
        self.runner.bundle.dir()
    }
}

/// Runs the targets' builds before the first configuration (see [`crate::build`]), or says
/// once that `--no-build` skips them. `bundle` is the bundle directory (absolute).
fn build_targets(
    plan: &Plan,
    opts: &LabOptions,
    bundle: &std::path::Path,
) -> Result<BuildsOutcome, LabError> {
    let say = |msg: &str| {
        if let Some(p) = &opts.progress {
            p.line(msg);
        }
    };
    if opts.skip_builds {
        let builds = build::planned(plan, Some(bundle));
        if !builds.is_empty() {
            let who: Vec<String> = builds.iter().map(|b| b.who()).collect();
            say(&format!("not building {} (--no-build)", who.join(", ")));
        }
        return Ok(BuildsOutcome::Done);
    }
    build::run_all(plan, bundle, &opts.out, &opts.stop, &say)
        .map_err(|e| LabError::Build(Box::new(e)))
}

/// Values for the placeholders of one configuration (ports are allocated here).
fn variables(plan: &Plan, config: &Config, bundle: &std::path::Path) -> BTreeMap<String, String> {
    let mut vars: BTreeMap<String, String> = config.params.iter().cloned().collect();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "loadlab".into());
    vars.insert("loadlab".into(), exe);
    vars.insert("plan_dir".into(), plan.dir.display().to_string());
    vars.insert("bundle".into(), bundle.display().to_string());
    vars.insert(
        "files".into(),
        bundle
            .join("files")
            .join(config.slug())
            .display()
            .to_string(),
    );
    for (i, t) in plan.targets.iter().enumerate() {
        let port = target::free_port().unwrap_or(0).to_string();
        if i == 0 {
            vars.insert("port".into(), port.clone());
        }
        vars.insert(format!("{}_port", t.name), port);
    }
    vars.entry("port".into()).or_insert_with(|| "0".into());
    vars
}

/// The step's request sent once more by hand, and what the server answered, in a few
/// words (plain `http://` HTTP/1.1 only: `None` otherwise, or without an answer).
fn response_sample(w: &Workload) -> Option<String> {
    if !matches!(w.transport, loadlab_engine::Transport::Http1 { .. }) {
        return None;
    }
    let a = crate::http_once::request(
        &w.url,
        &w.request.method,
        &w.request.headers,
        &w.request.body,
        Duration::from_secs(2),
        4096,
    )
    .ok()?;
    Some(format!(
        "the request sent again after the step was answered {}",
        a.describe(200)
    ))
}

impl Runner<'_> {
    fn say(&self, msg: impl AsRef<str>) {
        if let Some(p) = &self.opts.progress {
            p.line(msg.as_ref());
        }
    }

    /// Something the user must see even without progress (`-q`): on stderr then.
    fn warn(&self, msg: impl AsRef<str>) {
        match &self.opts.progress {
            Some(p) => p.line(msg.as_ref()),
            None => eprintln!("loadlab: {}", msg.as_ref().trim_start()),
        }
    }

    /// True if `exit` is its target's declared "cannot run here" status.
    fn unavailable(&self, exit: &TargetExit) -> bool {
        self.plan.targets.iter().any(|t| {
            t.name == exit.target && t.unavailable_exit.is_some() && t.unavailable_exit == exit.code
        })
    }

    fn run_config(&mut self, i: usize, config: &Config) -> Result<ConfigRecord, LabError> {
        self.config_index = i;
        let started = Instant::now();
        let vars = variables(self.plan, config, self.bundle.dir());
        self.say(format!(
            "[{}/{}] configuration {}",
            i + 1,
            self.configs_total,
            config.id
        ));
        // Each scenario gets freshly started targets, so that work a server is still doing
        // for one scenario (requests the client gave up on) does not leak into the next.
        let groups: Vec<Vec<&ScenarioSpec>> = match self.plan.load.steps {
            Steps::Together => vec![self.plan.scenarios.iter().collect()],
            _ => self.plan.scenarios.iter().map(|s| vec![s]).collect(),
        };
        let mut knees = Vec::new();
        let mut capped_logs = Vec::new();
        let mut status = ConfigStatus::Completed;
        let mut message = None;
        for group in groups {
            if self.opts.stop.is_cancelled() {
                status = ConfigStatus::Interrupted;
                break;
            }
            let prefix = match group.as_slice() {
                [one] => format!("{}-{}-", config.slug(), one.name),
                _ => format!("{}-", config.slug()),
            };
            let mut targets =
                match TargetSet::start(&self.plan.targets, &vars, &self.bundle.logs_dir(), &prefix)
                {
                    Ok(t) => t,
                    Err(StartError::Exited(exit)) if self.unavailable(&exit) => {
                        let why = exit.log_tail.trim().to_string();
                        self.say(format!("  unavailable on this machine: {why}"));
                        status = ConfigStatus::Unavailable;
                        message = Some(why);
                        break;
                    }
                    Err(e) => {
                        self.warn(format!("  {}: not started: {e}", config.id));
                        status = ConfigStatus::NotReady;
                        message = Some(e.to_string());
                        break;
                    }
                };
            let crashed = self.run_group(config, &vars, &group, &mut targets, &mut knees)?;
            for (name, bytes) in targets.capped_logs() {
                capped_logs.push(CappedLog {
                    target: name.clone(),
                    dropped_bytes: bytes,
                });
                self.warn(format!(
                    "  {}: target `{name}` wrote more than {} MiB: {bytes} bytes of its output were dropped from its log (the last {} KiB are kept)",
                    config.id,
                    crate::target::LOG_CAP >> 20,
                    crate::target::LOG_KEEP_END >> 10
                ));
            }
            targets.stop();
            if let Some(exit) = crashed {
                status = ConfigStatus::Crashed;
                message = Some(format!("target `{}` crashed: {}", exit.target, exit.status));
            }
        }
        if self.opts.stop.is_cancelled() && status == ConfigStatus::Completed {
            status = ConfigStatus::Interrupted;
        }
        Ok(ConfigRecord {
            bundle_version: BUNDLE_VERSION,
            config: config.id.clone(),
            params: config.params.clone(),
            status,
            message,
            knees,
            duration_s: started.elapsed().as_secs_f64(),
            capped_logs,
        })
    }

    /// Runs the steps of one scenario (or of all of them together) against running targets;
    /// returns the exit of a target that crashed.
    fn run_group(
        &mut self,
        config: &Config,
        vars: &BTreeMap<String, String>,
        group: &[&ScenarioSpec],
        targets: &mut TargetSet,
        knees: &mut Vec<ScenarioKnee>,
    ) -> Result<Option<TargetExit>, LabError> {
        match &self.plan.load.steps {
            Steps::Together => Ok(self
                .step(config, vars, group, 0, Phase::Together, None, targets)?
                .1),
            Steps::Fixed(values) => {
                // Each attempt its own index: a repeated step keeps both records.
                let mut index = 0u32;
                for v in values {
                    let mut recs = Vec::new();
                    // A step loadlab limited (or an agent lost) says nothing of the server: it
                    // is tried once more, as in a search, and the repeat is the server's
                    // figure (the report keeps both, the first one noted).
                    for attempt in 0..2 {
                        if self.opts.stop.is_cancelled() {
                            return Ok(None);
                        }
                        let (r, exit) =
                            self.step(config, vars, group, index, Phase::Fixed, Some(*v), targets)?;
                        index += 1;
                        if exit.is_some() {
                            return Ok(exit);
                        }
                        recs = r;
                        let not_the_server = recs
                            .iter()
                            .any(|r| r.verdict.limits.iter().any(|l| worth_repeating(*l)));
                        if attempt == 0 && not_the_server && !self.opts.stop.is_cancelled() {
                            self.say("  generator-limited or agent lost: repeating the step once");
                            self.pause();
                            continue;
                        }
                        break;
                    }
                    // A rejected request is rejected at every load: the rest of the steps
                    // would measure nothing more.
                    if recs
                        .iter()
                        .any(|r| r.verdict.limits.contains(&Limit::Rejected))
                    {
                        self.say(format!(
                            "  {}: the server rejected the request (4xx): the remaining steps are skipped",
                            group[0].name
                        ));
                        break;
                    }
                    if recs
                        .iter()
                        .any(|r| r.verdict.limits.contains(&Limit::RowsUsedUp))
                    {
                        self.say(format!(
                            "  {}: the data file's rows were used up (data order unique): the remaining steps are skipped",
                            group[0].name
                        ));
                        break;
                    }
                    self.pause();
                }
                Ok(None)
            }
            Steps::Knee {
                start,
                max,
                precision,
                growth,
                confirm,
            } => {
                let params = KneeParams {
                    start: *start,
                    max: *max,
                    precision: *precision,
                    growth: *growth,
                    integer: self.plan.load.model == Model::Closed,
                    confirm: *confirm,
                    poisson_s: self.plan.load.poisson_s(),
                };
                let mut index = 0u32;
                let mut failure: Option<LabError> = None;
                let mut crashed = None;
                let race = self.race;
                let mut step_at = |v: f64, phase: Phase| {
                    // A generator-limited step is tried once more: a moment of contention
                    // on a shared machine should not end the search.
                    for attempt in 0..2 {
                        if failure.is_some() {
                            return StepSignal::NotSustained(Limit::Interrupted);
                        }
                        let r = self.step(config, vars, group, index, phase, Some(v), targets);
                        index += 1;
                        self.pause();
                        let signal = match r {
                            Ok((recs, exit)) => {
                                if exit.is_some() {
                                    crashed = exit;
                                }
                                match recs[0].verdict.limits.first() {
                                    None => StepSignal::Sustained,
                                    Some(l) => StepSignal::NotSustained(*l),
                                }
                            }
                            Err(e) => {
                                failure = Some(e);
                                StepSignal::NotSustained(Limit::Interrupted)
                            }
                        };
                        if attempt == 0
                            && !self.opts.stop.is_cancelled()
                            && matches!(signal, StepSignal::NotSustained(l) if worth_repeating(l))
                        {
                            self.say("  generator-limited or agent lost: repeating the step once");
                            continue;
                        }
                        return signal;
                    }
                    unreachable!("the loop returns on its second attempt")
                };
                let outcome = match race {
                    Some(r) => knee::race(params, r, &mut step_at),
                    None => knee::search(params, &mut step_at),
                };
                if let Some(e) = failure {
                    return Err(e);
                }
                self.say(format!("  {}: {}", group[0].name, outcome.summary));
                // The knee's why: the last diagnosis at the first value not sustained that
                // speaks of the server (a generator-limited attempt was repeated, and the
                // repeat decided the step), else the last one there.
                let diagnosis = outcome.first_unsustained.and_then(|v| {
                    let at_v: Vec<&Diagnosis> = self
                        .diagnoses
                        .iter()
                        .filter(|(c, sc, load, _)| {
                            *c == config.id && *sc == group[0].name && (*load - v).abs() < 1e-9
                        })
                        .map(|(_, _, _, d)| d)
                        .collect();
                    at_v.iter()
                        .rev()
                        .find(|d| !d.findings.iter().any(|f| f.bottleneck.not_the_server()))
                        .or(at_v.last())
                        .map(|d| (*d).clone())
                });
                if let Some(d) = &diagnosis {
                    for f in &d.findings {
                        self.say(format!("    why: {}", f.evidence));
                    }
                }
                knees.push(ScenarioKnee {
                    scenario: group[0].name.clone(),
                    outcome,
                    diagnosis,
                });
                Ok(crashed)
            }
        }
    }

    /// Diagnoses a step not sustained, against the scenario's earlier steps; remembers the
    /// step for the next ones.
    fn diagnose(&mut self, rec: &StepRecord) -> Option<Diagnosis> {
        let d = self.tracker.step(rec)?;
        self.diagnoses.push((
            rec.config.clone(),
            rec.scenario.clone(),
            rec.load,
            d.clone(),
        ));
        Some(d)
    }

    /// Runs a step's workloads at once, here (one engine per scenario) or on the agents.
    fn run_jobs(
        &self,
        config: &Config,
        scenarios: &[&ScenarioSpec],
        jobs: &[(Workload, RunConfig)],
        stop: &CancellationToken,
    ) -> Vec<Result<RunResult, LabError>> {
        let progress = self.opts.progress.clone();
        let mut seconds = |s: &SecondStats, latency: &str| {
            if let Some(p) = &progress {
                p.second(s, latency);
            }
        };
        // A coordinator for a remote probe only drives no load: the step runs here.
        if let Some(fleet) = self.opts.fleet.as_ref().filter(|f| f.drives_load()) {
            return fleet
                .run_step(jobs, stop, Some(&mut seconds))
                .into_iter()
                .zip(scenarios)
                .map(|(r, s)| {
                    r.map_err(|e| LabError::Agents {
                        scenario: s.name.clone(),
                        config: config.id.clone(),
                        source: Box::new(e),
                    })
                })
                .collect();
        }
        let command = self.opts.command.clone();
        std::thread::scope(|sc| {
            let handles: Vec<_> = jobs
                .iter()
                .enumerate()
                .map(|(i, (_, cfg))| {
                    let stop = stop.clone();
                    let command = command.clone();
                    // The live view follows the first scenario of a together step.
                    let progress = self.opts.progress.clone().filter(|_| i == 0);
                    sc.spawn(move || {
                        let mut seconds = |s: &SecondStats, latency: &str| {
                            if let Some(p) = &progress {
                                p.second(s, latency);
                            }
                        };
                        loadlab_engine::run(
                            cfg,
                            RunOptions {
                                command,
                                stop,
                                progress: Some(&mut seconds),
                                start_at: None,
                            },
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(scenarios)
                .map(|(h, s)| {
                    h.join()
                        .expect("engine thread")
                        .map_err(|e| LabError::Scenario {
                            scenario: s.name.clone(),
                            config: config.id.clone(),
                            source: e,
                        })
                })
                .collect()
        })
    }

    fn pause(&self) {
        let end = Instant::now() + self.plan.load.pause;
        while Instant::now() < end && !self.opts.stop.is_cancelled() {
            std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
        }
    }

    /// Runs one step of `scenarios` (several at once in together mode) and appends it.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        config: &Config,
        vars: &BTreeMap<String, String>,
        scenarios: &[&ScenarioSpec],
        index: u32,
        phase: Phase,
        value: Option<f64>,
        targets: &mut TargetSet,
    ) -> Result<(Vec<StepRecord>, Option<TargetExit>), LabError> {
        let mut jobs: Vec<(Workload, RunConfig)> = Vec::new();
        for s in scenarios {
            let mut workload = self.plan.workload(s, vars, value, self.load_cpus.clone());
            // Rows and `${seq}` go on from where the scenario's last step left them.
            workload.traffic.resume = self.resumes.get(&s.name).copied().unwrap_or_default();
            workload.traffic.key = s.name.clone();
            // A log at its times: the step's value is its speed, over its busiest stretch.
            let timed = s.traffic.timed.as_ref().map(|t| {
                let step = t.step(
                    value.or(s.rate).unwrap_or(1.0),
                    workload.warmup,
                    self.plan.load.step_duration,
                );
                workload.load = loadlab_engine::LoadModel::Open {
                    rate: step.rate,
                    arrival: loadlab_engine::Arrival::Constant,
                };
                workload.duration = Some(step.duration);
                step.replay
            });
            let cfg = workload.validate().map_err(|e| LabError::Scenario {
                scenario: s.name.clone(),
                config: config.id.clone(),
                source: e.into(),
            })?;
            jobs.push((
                workload,
                RunConfig {
                    replay: timed,
                    ..cfg
                },
            ));
        }
        if let Some(p) = &self.opts.progress {
            let l = &self.plan.load;
            let knee = matches!(l.steps, Steps::Knee { .. });
            let first = scenarios[0];
            p.step(&StepStart {
                config: config.id.clone(),
                config_number: self.config_index + 1,
                configs: self.configs_total,
                scenario: scenarios
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join("+"),
                seconds_of: first.name.clone(),
                load: value.or(first.rate).unwrap_or(0.0),
                unit: match crate::plan::load_unit(
                    l.model,
                    first.protocol,
                    first.traffic.flow.is_some(),
                    first.traffic.at_its_times,
                ) {
                    "connections" => "conns",
                    u => u,
                },
                rate: first.protocol.units().rate,
                duration_s: l.step_duration.as_secs_f64(),
                number: self.steps_run + 1,
                planned: self.steps_planned.max(self.steps_run + 1),
                estimated: knee,
                left_s: (self.steps_run > 0).then(|| {
                    let per_step = self.started.elapsed().as_secs_f64() / self.steps_run as f64;
                    self.steps_planned.saturating_sub(self.steps_run) as f64 * per_step
                }),
            });
        }
        let step_stop = self.opts.stop.child_token();
        let prober = match self.watch.source(targets.pids()) {
            Ok(source) => source.map(|s| Prober::start_source(s, Duration::from_secs(1))),
            Err(why) => {
                self.warn(format!(
                    "  {why}: this step is probed for this machine's TCP counters only"
                ));
                Some(Prober::start(Vec::new(), Duration::from_secs(1)))
            }
        };
        let watch_pids = targets.pids();
        let watch_stop = step_stop.clone();
        let watching = CancellationToken::new();
        let watch_done = watching.clone();
        // Cut the step short as soon as a target dies (its process turns into a zombie).
        let watcher = std::thread::spawn(move || {
            while !watch_done.is_cancelled() {
                if watch_pids.iter().any(|p| !process_running(*p)) {
                    watch_stop.cancel();
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let results = self.run_jobs(config, scenarios, &jobs, &step_stop);
        watching.cancel();
        let _ = watcher.join();
        let probes: Option<ProbeReport> = prober.map(Prober::stop);
        if let Some(lost) = probes.as_ref().and_then(|p| p.lost.as_ref()) {
            self.warn(format!(
                "  the probe was lost during the step ({lost}): the step is judged without the rest of its samples"
            ));
        }
        // Give an exiting target a moment to be seen as exited.
        let mut exit = targets.exited();
        if exit.is_none() && step_stop.is_cancelled() && !self.opts.stop.is_cancelled() {
            std::thread::sleep(Duration::from_millis(100));
            exit = targets.exited();
        }
        self.steps_run += 1;
        let l = &self.plan.load;
        // Observed wall time per step so far (target restarts included; steps that end at
        // their request count are shorter than step_duration).
        let per_step = self.started.elapsed().as_secs_f64() / self.steps_run as f64;
        let left = self.steps_planned.saturating_sub(self.steps_run) as f64 * per_step;
        let knee = matches!(l.steps, Steps::Knee { .. });
        let eta = format!(
            "[step {} of {}{}, {}{} left]",
            self.steps_run,
            if knee { "~" } else { "" },
            self.steps_planned.max(self.steps_run),
            if knee { "~" } else { "" },
            short_duration(left)
        );
        let mut records = Vec::new();
        for ((s, r), (workload, _)) in scenarios.iter().zip(results).zip(&jobs) {
            let result = r?;
            if let Some(t) = &result.traffic {
                self.resumes.insert(s.name.clone(), t.resume);
            }
            let verdict = judge(&result, &self.plan.slo, exit.is_some());
            // Most requests rejected: send the request once more to read what the server
            // says is wrong.
            let response_sample =
                crate::verdict::rejected(&result).and_then(|_| response_sample(workload));
            let load = match self.plan.load.model {
                // A log at its times: the multiple of its speed the step replayed it at.
                Model::Open if s.traffic.timed.is_some() => value.or(s.rate).unwrap_or(1.0),
                Model::Open => result.offered_rps.unwrap_or(0.0),
                // Requests in flight: connections over HTTP/1.1, streams over HTTP/2.
                Model::Closed => result.concurrency.max(1) as f64,
            };
            let mut rec = StepRecord {
                bundle_version: BUNDLE_VERSION,
                config: config.id.clone(),
                params: config.params.clone(),
                scenario: s.name.clone(),
                index,
                phase,
                model: self.plan.load.model,
                load,
                verdict,
                crashed: exit.clone(),
                probes: probes.clone(),
                result,
                diagnosis: None,
                response_sample,
            };
            rec.diagnosis = self.diagnose(&rec);
            self.say(format!(
                "  {} {:>9} {}: achieved {:.1} {}, p99 {}, {} errors{} {eta}",
                s.name,
                knee::fmt(load),
                match crate::plan::load_unit(
                    self.plan.load.model,
                    s.protocol,
                    s.traffic.flow.is_some(),
                    s.traffic.at_its_times,
                ) {
                    "connections" => "conns",
                    u => u,
                },
                rec.result.achieved_rps,
                s.protocol.units().rate,
                rec.result
                    .latency_ms
                    .p99
                    .map_or("-".into(), |v| format!("{v:.1} ms")),
                rec.result.errors_total,
                match (rec.verdict.limits.first(), &rec.diagnosis) {
                    (None, _) => " (sustained)".to_string(),
                    (Some(l), Some(d)) => format!(
                        " (not sustained: {}{}; why: {})",
                        l.describe(),
                        names_failed(&rec.verdict),
                        d.headline()
                    ),
                    (Some(l), None) => format!(
                        " (not sustained: {}{})",
                        l.describe(),
                        names_failed(&rec.verdict)
                    ),
                }
            ));
            self.bundle
                .append_step(&rec)
                .map_err(bundle_err(self.bundle.dir()))?;
            self.steps += 1;
            records.push(rec);
        }
        Ok((records, exit))
    }
}

/// The request names that missed their SLO, for a progress line: ` by checkout (latency)`.
fn names_failed(v: &crate::verdict::Verdict) -> String {
    v.names_failed()
        .map_or(String::new(), |n| format!(" by {n}"))
}

/// A step limited by loadlab itself or by a lost agent says nothing of the server: the lab
/// tries it once more (fixed steps and searches alike), and the repeat decides it.
fn worth_repeating(l: Limit) -> bool {
    matches!(l, Limit::GeneratorLimited | Limit::AgentLost)
}
