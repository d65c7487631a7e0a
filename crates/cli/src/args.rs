//! Command-line arguments (clap stays in this crate) and their translation into the
//! engine's [`RunSpec`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use loadlab_engine::{Arrival, RunSpec};

/// Find where a web server breaks, and why.
#[derive(Parser, Debug)]
#[command(name = "loadlab", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Drive one URL with HTTP/1.1 load and report latency, throughput and errors.
    ///
    /// With --rate: open loop, requests sent on schedule whatever the server does, latency
    /// measured from each request's intended send time. Without --rate: closed loop,
    /// --connections connections each sending the next request when the previous
    /// response ends (the wrk/ab model).
    #[command(after_help = "Examples:\n  \
        loadlab run http://127.0.0.1:8080/health --rate 2000 --duration 30s --warmup 5s\n  \
        loadlab run http://127.0.0.1:8080/health --connections 64 --duration 10s --json out.json\n  \
        loadlab run http://127.0.0.1:8080/sleep --rate 500 --keep-alive off --source-addrs 16\n  \
        loadlab run http://127.0.0.1:8080/plaintext -c 256 --pipeline 16 -d 15s")]
    Run(Box<RunArgs>),
    /// Run an experiment plan: start the server in each configuration, step the load (or
    /// search for the knee), probe the server and the kernel, and write a result bundle
    /// with report.md.
    #[command(after_help = "Examples:\n  \
        loadlab lab plans/backlog-workers.toml --quick\n  \
        loadlab lab plans/actix-web-benchmark.toml --out results/bench-1")]
    Lab(LabArgs),
    /// Check the machine before a run: file-descriptor limits, listen backlog caps,
    /// ephemeral ports and TIME_WAIT; prints the commands that fix each finding. Exits 1
    /// when the plan is predicted to fail.
    #[command(after_help = "Examples:\n  \
        loadlab doctor\n  \
        loadlab doctor plans/ephemeral-ports.toml")]
    Doctor(DoctorArgs),
    /// Re-render report.md from a result bundle on disk.
    Report(ReportArgs),
    /// Start the reference scenario server on a free port and run a short experiment
    /// (a knee search on /health, then a few endpoints), then print the tables.
    Demo(DemoArgs),
    /// Run a reference server of the source experiments (the same as the loadlab-target
    /// and loadlab-hello binaries): `loadlab serve scenario --help`, `loadlab serve hello --help`.
    #[command(after_help = "Examples:\n  \
        loadlab serve scenario --bind 127.0.0.1:8080 --workers 4\n  \
        loadlab serve hello --bind 127.0.0.1:50051 --latency uniform:2ms..300ms")]
    Serve(ServeArgs),
}

/// Which reference server.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Server {
    /// The actix-web scenario server (/health, /sleep, /f_sleep, /count, /send_wait, ...).
    Scenario,
    /// The gRPC hello backend (hello.HelloService/Say, helloworld.Greeter/SayHello).
    Hello,
}

/// `loadlab serve` arguments.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The server to run.
    #[arg(value_enum)]
    pub server: Server,
    /// The server's own flags (see `loadlab serve SERVER --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// `loadlab lab` arguments.
#[derive(Args, Debug)]
pub struct LabArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
    /// Use the plan's [quick] scale (minutes on a small machine).
    #[arg(long)]
    pub quick: bool,
    /// Bundle directory [default: results/NAME-TIMESTAMP].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `loadlab doctor` arguments.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// A plan to check against (without one: 1024 keep-alive connections to loopback).
    pub plan: Option<PathBuf>,
    /// Check the plan's [quick] scale.
    #[arg(long)]
    pub quick: bool,
}

/// `loadlab report` arguments.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A result bundle directory.
    pub bundle: PathBuf,
}

/// `loadlab demo` arguments.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Bundle directory [default: results/demo-TIMESTAMP].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// On or off.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Arrival spacing.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ArrivalArg {
    /// Evenly spaced arrivals.
    Constant,
    /// Exponential gaps (Poisson process).
    Poisson,
}

/// `loadlab run` arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Target URL (http:// or https://).
    pub url: String,

    /// Open loop at this many requests per second (all threads together). Without it: closed loop.
    #[arg(
        short = 'r',
        long,
        allow_negative_numbers = true,
        help_heading = "Load"
    )]
    pub rate: Option<f64>,
    /// Spacing of open-loop arrivals.
    #[arg(long, value_enum, default_value = "constant", help_heading = "Load")]
    pub arrival: ArrivalArg,
    /// Closed loop: exactly this many connections, opened up front. Open loop: the initial
    /// pool, each connection opened on first use.
    #[arg(short = 'c', long, default_value_t = 64, help_heading = "Load")]
    pub connections: u64,
    /// Open loop: the pool may grow to this many connections when all are busy
    /// [default: the larger of --connections and 1024].
    #[arg(long, help_heading = "Load")]
    pub max_connections: Option<u64>,
    /// Measured duration, e.g. 10s, 2m, 500ms [default: 10s unless --requests is given].
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Measured request count; with --duration, whichever ends first.
    #[arg(short = 'n', long, help_heading = "Load")]
    pub requests: Option<u64>,
    /// Load applied before measuring, not recorded.
    #[arg(long, value_parser = parse_duration, default_value = "0s", help_heading = "Load")]
    pub warmup: Duration,
    /// Worker threads, each with its own event loop [default: number of cores].
    #[arg(short = 't', long, help_heading = "Load")]
    pub threads: Option<usize>,
    /// Seed for --arrival poisson (random by default).
    #[arg(long, help_heading = "Load")]
    pub seed: Option<u64>,
    /// Pin worker threads to these CPUs, e.g. 1 or 2-3 (worker i takes the i-th), to keep
    /// loadlab off the server's cores.
    #[arg(long, help_heading = "Load")]
    pub cpus: Option<String>,

    /// Reuse connections (on) or open a new TCP connection per request (off).
    #[arg(long, value_enum, default_value = "on", help_heading = "Connections")]
    pub keep_alive: OnOff,
    /// Per-request deadline (connect + response), counted from the intended send time.
    #[arg(long, value_parser = parse_duration, default_value = "5s", help_heading = "Connections")]
    pub timeout: Duration,
    /// Closed loop with keep-alive: write N requests back to back before reading responses.
    #[arg(long, default_value_t = 1, help_heading = "Connections")]
    pub pipeline: u32,
    /// Local source addresses for new connections: 127.0.0.2-127.0.0.17, a list A,B,C, or a
    /// count N (127.0.0.2 onwards, loopback targets).
    #[arg(long, help_heading = "Connections")]
    pub source_addrs: Option<String>,
    /// Skip TLS certificate verification for https:// URLs.
    #[arg(short = 'k', long, help_heading = "Connections")]
    pub insecure: bool,

    /// HTTP method.
    #[arg(
        short = 'X',
        long = "method",
        default_value = "GET",
        help_heading = "Request"
    )]
    pub method: String,
    /// Extra header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", help_heading = "Request")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(long, conflicts_with = "body_file", help_heading = "Request")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long, help_heading = "Request")]
    pub body_file: Option<PathBuf>,

    /// Write the result as JSON to this file.
    #[arg(long, help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// No per-second progress on stderr.
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,
}

/// Parses `10s`, `500ms`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "`{s}` is negative: give a duration above 0, e.g. 10s"
        ));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(format!("`{s}` is not a duration: use e.g. 10s, 500ms, 2m"))
        };
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("`{s}` is not a duration ({e}): use e.g. 10s, 500ms, 2m"))
}

impl RunArgs {
    /// The engine's view of these arguments.
    pub fn to_spec(&self) -> anyhow::Result<RunSpec> {
        let body = match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(p)) => std::fs::read(p)
                .map_err(|e| anyhow::anyhow!("--body-file {}: cannot read: {e}", p.display()))?,
            (None, None) => Vec::new(),
        };
        Ok(RunSpec {
            url: self.url.clone(),
            rate: self.rate,
            arrival: match self.arrival {
                ArrivalArg::Constant => Arrival::Constant,
                ArrivalArg::Poisson => Arrival::Poisson,
            },
            connections: self.connections,
            max_connections: self.max_connections,
            duration: self.duration,
            requests: self.requests,
            warmup: self.warmup,
            keep_alive: self.keep_alive == OnOff::On,
            timeout: self.timeout,
            threads: self.threads,
            method: self.method.clone(),
            headers: self.headers.clone(),
            body,
            pipeline: self.pipeline,
            insecure: self.insecure,
            source_addrs: self.source_addrs.clone(),
            seed: self.seed,
            cpus: self.cpus.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
