//! The `loadlab` binary: parses arguments and calls the libraries.

// clap's `--help` is written from the argument structs' doc comments, where `[matrix]` (a
// plan's table) and `<failure>` (a JUnit element) are meant as written, not as rustdoc links
// or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod args;
mod closing;
mod compare;
mod completions;
mod fleet;
mod habits;
mod knee;
mod lab;
mod live;
mod man;
mod outputs;
mod peers;
mod promrw;
mod reflect;

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

use clap::Parser;
use loadlab_engine::{summary, CancellationToken, EngineError, RunOptions, SecondStats};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use args::{Cli, Command, GrpcArgs, OutputArgs, RunArgs};

/// Exit status when a run completed but no request succeeded.
const EXIT_ALL_FAILED: u8 = 1;
/// Exit status for invalid input (as clap uses for usage errors).
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status when a `--slo` gate failed (or a lab run regressed against its baseline).
pub(crate) const EXIT_GATE_FAILED: u8 = 3;

/// The signal (SIGINT or SIGTERM) that stopped this run early; 0 if none did.
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// A run a signal stopped exits 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM),
/// as a shell reports a process the signal killed, whatever it measured before: a partial
/// run's gates and knees are not a verdict, and a CI job stopped by its timeout must not
/// pass. Called after the results are printed and written.
pub(crate) fn interrupted_exit() -> Option<ExitCode> {
    let sig = STOPPED_BY.load(Ordering::SeqCst);
    if sig == 0 {
        return None;
    }
    let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
    let code = 128 + sig;
    eprintln!(
        "loadlab: interrupted by {name}: what was measured before it is printed and written above; exit {code}"
    );
    Some(ExitCode::from(code as u8))
}

fn main() -> ExitCode {
    // The keeper a lab starts beside itself (not a command for people: not in --help).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == loadlab_lab::target::KEEPER_ARG)
    {
        loadlab_lab::target::keeper_main();
        return ExitCode::SUCCESS;
    }
    if let Some(a) = serve_argv() {
        return serve(&a);
    }
    // Other tools' habits (`-h2`, `-t 20`, `-rate 100`) are refused or warned about before
    // clap reads them another way, and clap's refusals say what to type instead.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let found = habits::scan(&argv, loadlab_engine::config::available_cores());
    if !found.refusals.is_empty() {
        for r in &found.refusals {
            eprintln!("loadlab: error: {r}");
        }
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return habits::clap_error(&e, &argv),
    };
    for w in &found.warnings {
        eprintln!("loadlab: warning: {w}");
    }
    let result = match cli.command {
        Command::Serve(a) => return serve(&a),
        Command::Run(a) => cmd_run(&a),
        Command::Grpc(a) => cmd_grpc(&a),
        Command::Lab(a) => lab::cmd_lab(&a),
        Command::Tune(a) => lab::cmd_tune(&a),
        Command::Knee(a) => knee::cmd_knee(&a),
        Command::Doctor(a) => lab::cmd_doctor(&a),
        Command::Report(a) => lab::cmd_report(&a),
        Command::Compare(a) => compare::cmd_compare(&a),
        Command::Demo(a) => lab::cmd_demo(&a),
        Command::Agent(a) => fleet::cmd_agent(&a),
        Command::Probe(a) => fleet::cmd_probe(&a),
        Command::Completions(a) => completions::cmd_completions(&a),
        Command::Man(a) => man::cmd_man(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loadlab: error: {e:#}");
            let bad_input = e.downcast_ref::<BadInput>().is_some()
                || e.downcast_ref::<loadlab_lab::PlanError>().is_some()
                || e.downcast_ref::<loadlab_lab::experiment::LabError>()
                    .is_some_and(|e| {
                        matches!(
                            e,
                            loadlab_lab::experiment::LabError::OutTaken(_)
                                | loadlab_lab::experiment::LabError::Probe(_)
                        )
                    })
                || e.downcast_ref::<EngineError>().is_some_and(|e| {
                    matches!(
                        e,
                        EngineError::Config(_)
                            | EngineError::FdLimit { .. }
                            | EngineError::Replay(_)
                    )
                });
            ExitCode::from(if bad_input {
                EXIT_BAD_INPUT
            } else {
                EXIT_ALL_FAILED
            })
        }
    }
}

/// Runs a reference server in this process, with its own command line.
#[cfg(feature = "servers")]
fn serve(a: &args::ServeArgs) -> ExitCode {
    use args::Server;
    use loadlab_greeters::runtimes::{IoMode, Runtime};
    let runtime = match a.server {
        Server::Scenario | Server::Hello => None,
        Server::GreeterTokio => Some(Runtime::Tokio),
        Server::GreeterTokioPc => Some(Runtime::TokioPerCore),
        Server::GreeterSmol => Some(Runtime::Smol),
        Server::GreeterAsyncStd => Some(Runtime::AsyncStd),
        Server::GreeterGlommio => Some(Runtime::Glommio),
        Server::GreeterMonoio => Some(Runtime::Monoio),
        Server::GreeterMinimal | Server::GreeterMinimalUringPoll => {
            Some(Runtime::Minimal(IoMode::UringPoll))
        }
        Server::GreeterMinimalEpoll => Some(Runtime::Minimal(IoMode::Epoll)),
        Server::GreeterMinimalUring => Some(Runtime::Minimal(IoMode::Uring)),
        Server::GreeterMinimalHybrid => Some(Runtime::Minimal(IoMode::Hybrid)),
    };
    let name = match (a.server, runtime) {
        (_, Some(r)) => format!("loadlab serve {}", r.binary()),
        (Server::Scenario, None) => "loadlab serve scenario".into(),
        _ => "loadlab serve hello".into(),
    };
    let argv = std::iter::once(std::ffi::OsString::from(name)).chain(a.args.iter().cloned());
    match (a.server, runtime) {
        (_, Some(r)) => loadlab_greeters::cli::main(r, argv),
        (Server::Scenario, None) => loadlab_target::cli::main(argv),
        _ => loadlab_hello::cli::main(argv),
    }
}

/// This loadlab was built without the reference servers (`--no-default-features`).
#[cfg(not(feature = "servers"))]
fn serve(_: &args::ServeArgs) -> ExitCode {
    eprintln!("loadlab: error: {}", NO_SERVERS);
    ExitCode::from(EXIT_BAD_INPUT)
}

/// What a lean loadlab says when asked for a reference server.
pub(crate) const NO_SERVERS: &str = "this loadlab was built without the reference servers \
    (the lean install): `loadlab serve`, `loadlab demo` and the plans in plans/ need them. \
    Build them in with `cargo install --locked --path crates/cli` (the `servers` feature, on by \
    default), or run `cargo run --release -- demo` in a clone of loadlab";

/// `loadlab serve SERVER ARGS...`: the server's own arguments, `--help` included, go to the
/// server untouched (clap would take `--help` for `serve`'s own).
fn serve_argv() -> Option<args::ServeArgs> {
    use clap::ValueEnum;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_none_or(|a| a != "serve") {
        return None;
    }
    let name = argv.get(2)?.to_str()?;
    let server = args::Server::from_str(name, false).ok()?;
    Some(args::ServeArgs {
        server,
        args: argv[3..].to_vec(),
    })
}

/// An error in what the user asked for (exit status 2).
#[derive(Debug)]
pub(crate) struct BadInput(pub(crate) String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Cancels `token` on the first SIGINT or SIGTERM: a `signal-hook` iterator on a thread of
/// its own, as the servers do (`loadlab_target_common::signal`). The handlers stay
/// installed, so later signals are ignored while the run winds down.
pub(crate) fn cancel_on_signal(token: CancellationToken) {
    let Ok(mut signals) = Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::Builder::new()
        .name("loadlab-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                STOPPED_BY.store(sig, Ordering::SeqCst);
                eprintln!("\nloadlab: stopping: the result measured so far follows");
                token.cancel();
            }
        })
        .expect("spawning the signal thread");
}

fn cmd_run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let (workload, replay) = a.to_workload().map_err(|e| BadInput(format!("{e:#}")))?;
    execute(workload, replay, &a.output, &a.distributed)
}

fn cmd_grpc(a: &GrpcArgs) -> anyhow::Result<ExitCode> {
    let workload = a.to_workload().map_err(|e| BadInput(format!("{e:#}")))?;
    execute(workload, None, &a.output, &a.distributed)
}

/// Validates and runs one workload: progress, summary, JSON, exit status.
fn execute(
    workload: loadlab_engine::Workload,
    replay: Option<loadlab_engine::replay::Replay>,
    out: &OutputArgs,
    distributed: &args::DistributedArgs,
) -> anyhow::Result<ExitCode> {
    if distributed.remote_probe {
        return Err(BadInput(
            "--remote-probe: a single run has no probes (`loadlab run` and `loadlab grpc` measure the load only); \
             probe the server on its host with `loadlab knee URL --remote-probe` or `loadlab lab PLAN --remote-probe`"
                .into(),
        )
        .into());
    }
    let cfg = match workload.validate() {
        Ok(c) => loadlab_engine::RunConfig { replay, ..c },
        Err(e) => return Err(EngineError::Config(e).into()),
    };
    outputs::check(out)?;
    let open_loop = matches!(cfg.model, loadlab_engine::LoadModel::Open { .. });
    let names = cfg
        .traffic
        .as_ref()
        .map(|t| t.names.clone())
        .unwrap_or_default();
    for g in &out.slo {
        g.applies_to(open_loop)
            .map_err(|e| BadInput(e.to_string()))?;
        g.names_one_of(&names)
            .map_err(|e| BadInput(e.to_string()))?;
    }
    if distributed.agents.is_none() {
        for w in loadlab_engine::runner::preflight(&cfg) {
            eprintln!("loadlab: warning: {w}");
        }
    }
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let coordinator = fleet::coordinator(distributed, &stop, out.quiet)?;
    let view = live::RunView::new(
        out.quiet,
        cfg.duration,
        match cfg.model {
            loadlab_engine::LoadModel::Open { rate, .. } => Some(rate),
            loadlab_engine::LoadModel::Closed => None,
        },
        cfg.transport.protocol().units().rate,
    );
    // A distributed run reports the agents' seconds merged: no `agent` label.
    let pusher = out
        .prometheus
        .prometheus_rw
        .clone()
        .map(promrw::Pusher::start);
    let mut feed = pusher.as_ref().map(|p| {
        let offered = match cfg.model {
            loadlab_engine::LoadModel::Open { rate, .. } => Some(promrw::Offered::Rate(rate)),
            loadlab_engine::LoadModel::Closed => None,
        };
        p.feed(promrw::Labels::new(), offered)
    });
    let mut progress = |s: &SecondStats, latency: &str| {
        view.second(s);
        if let Some(f) = feed.as_mut() {
            f.second(s, latency);
        }
    };
    let result = match coordinator {
        Some(c) => {
            let job = [(workload, cfg)];
            let r = c.run_step(&job, &stop, Some(&mut progress)).pop();
            c.finish(if stop.is_cancelled() {
                "the coordinator was interrupted"
            } else {
                "the run is over"
            });
            r.expect("one result per workload")?
        }
        None => {
            let opts = RunOptions {
                command: std::env::args().collect(),
                stop,
                progress: Some(&mut progress),
                start_at: None,
            };
            loadlab_engine::run(&cfg, opts)?
        }
    };
    drop(view);
    // The last pushes to Prometheus (at most its flush bound), and its warnings, first.
    if let Some(p) = pusher {
        p.finish();
    }
    let gates: Vec<_> = out.slo.iter().map(|g| g.check(&result)).collect();
    // The summary goes to standard error when an output takes standard output.
    let mut text = summary::render(&result);
    if out.latency {
        match loadlab_engine::export::latency_spectrum(&result) {
            Ok(s) => text = format!("{text}\n{s}"),
            Err(e) => eprintln!("loadlab: warning: --latency: {e}"),
        }
    }
    if !gates.is_empty() {
        text.push_str("\nGates:\n");
        for g in &gates {
            text.push_str(&format!("  {g}\n"));
        }
    }
    let (written, write_err) = outputs::write_all(out, &result, &gates);
    if !written.is_empty() {
        text.push_str(&format!("\nWritten: {}\n", written.join(", ")));
    }
    if outputs::stdout_taken(out) {
        eprint!("{text}");
    } else {
        print!("{text}");
        std::io::stdout().flush().ok();
    }
    if let Some(e) = write_err {
        return Err(e);
    }
    if let Some(code) = interrupted_exit() {
        return Ok(code);
    }
    let failed: Vec<&str> = gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.gate.as_str())
        .collect();
    Ok(if result.all_failed() {
        ExitCode::from(EXIT_ALL_FAILED)
    } else if !failed.is_empty() {
        eprintln!(
            "loadlab: {} of {} gates failed: {}",
            failed.len(),
            gates.len(),
            failed.join(", ")
        );
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
