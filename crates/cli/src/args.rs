//! Command-line arguments (clap stays in this crate) and their translation into the
//! engine's [`Workload`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use loadlab_engine::config::workload::DEFAULT_CONNECTIONS;
use loadlab_engine::config::{
    parse_duration, ClientCertPem, CpuList, IoMode, Request, SourceAddrs, TransportFlags,
};
use loadlab_engine::{Arrival, GrpcCall, LoadModel, Transport, Workload};

/// What `--help` says of request templates (run, knee, grpc).
macro_rules! template_help {
    () => {
        "Requests that vary: the URL's path and query, header values and the body \
(gRPC: the strings of the JSON message) may hold templates, rendered for every request: \
${seq} the request's number in the run (1, 2, …; one value per request), ${rand:LO-HI} a random integer \
from LO to HI, ${uuid} a random UUID, ${pick:a,b,c} one of the values, ${randstr:N} N random letters \
and digits, ${hex:N} N random hex digits, ${now} and ${now_ms} the Unix time in seconds and \
milliseconds, ${COLUMN} a column of the row this request took from --data (every column of one \
request from the same row; values are percent-encoded in the URL where they must be). $${ is a \
literal ${. A mistake in a template or a data file is refused before any load, with its file, line \
and column."
    };
}

macro_rules! run_examples {
    () => {
        "Examples:\n  \
        loadlab run http://127.0.0.1:8080/health --rate 2000 --duration 30s --warmup 5s\n  \
        loadlab run http://127.0.0.1:8080/health --connections 64 --duration 10s --json out.json\n  \
        loadlab run http://127.0.0.1:8080/sleep --rate 500 --keep-alive off --source-addrs 16\n  \
        loadlab run http://127.0.0.1:8080/plaintext -c 256 --pipeline 16 -d 15s\n  \
        loadlab run --http2 http://127.0.0.1:8080/ -c 4 --concurrency 128 -n 200000\n  \
        loadlab run 'http://127.0.0.1:8080/users/${id}?s=${seq}' --data ids.csv --rate 500 -d 30s\n  \
        loadlab run --targets shop.txt --rate 300 -d 1m --slo 'checkout:p99<300ms'\n  \
        loadlab run http://10.0.0.9:8080/ --rate 200000 -c 512 -d 30s --agents 8 --token-file token"
    };
}

macro_rules! knee_examples {
    () => {
        "Examples:\n  \
        loadlab knee http://127.0.0.1:8080/ --slo 'p99<200ms'\n  \
        loadlab knee http://127.0.0.1:8080/api -X POST -H 'Content-Type: application/json' --body '{\"q\":1}' --slo 'p95<100ms' --slo 'errors<0.1%'\n  \
        loadlab knee http://127.0.0.1:8080/ --probe-container web --max 20000 --step 10s\n  \
        loadlab knee --targets shop.txt --slo 'p99<200ms'   (a mix: a step holds when every request name does)\n  \
        loadlab knee 127.0.0.1:50051 --proto proto/helloworld.proto --call helloworld.Greeter/SayHello -D '{\"name\":\"x\"}' --slo 'p99<50ms'\n  \
        loadlab knee http://10.0.0.9:8080/ --slo 'p99<200ms' --remote-probe --token-file token   (then `loadlab probe --coordinator THIS:7878 --listen 8080 --token-file token` on 10.0.0.9)\n\n\
        Exit status: 0 a knee (or at least --max) was found; 1 no step could run, or no knee was \
        measured (the server rejected the request with 4xx, or nothing listens at the address); \
        2 bad input, named; \
        130 or 143 interrupted (what was measured is written)."
    };
}

macro_rules! grpc_examples {
    () => {
        "Examples:\n  \
        loadlab grpc 127.0.0.1:50051 --proto proto/helloworld.proto --call helloworld.Greeter/SayHello -D '{\"name\":\"x\"}' -n 100000 -c 8 --concurrency 64\n  \
        loadlab grpc 127.0.0.1:50051 --proto proto/hello.proto --call hello.HelloService/Say --rate 500 -d 30s --timeout 100ms\n  \
        loadlab grpc https://127.0.0.1:8443 -k --proto svc.proto -I protos/ --call pkg.Svc/Get -m 'authorization: Bearer x'\n  \
        loadlab grpc 127.0.0.1:50051 --proto feed.proto --call feed.Feed/Subscribe -c 4 --concurrency 200 -d 30s   # 200 server streams held"
    };
}

/// Find where a web server breaks, and why.
#[derive(Parser, Debug)]
#[command(
    name = "loadlab",
    version,
    about,
    long_about = None,
    after_help = "Exit status: 0 done; 1 no request succeeded (doctor: predicted to fail); \
        2 bad input, named; 3 a gate failed (--slo, lab --baseline), results written; \
        130 or 143 interrupted by Ctrl-C or SIGTERM: what was measured is printed and written, \
        and the status says interrupted whatever the partial result's gates read."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each variant's doc comment is its `--help` text.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Drive one URL with HTTP/1.1 (or HTTP/2) load and report latency, throughput and errors.
    ///
    /// With --rate: open loop, requests sent on schedule whatever the server does, latency
    /// measured from each request's intended send time. Without --rate: closed loop,
    /// --connections connections each sending the next request when the previous
    /// response ends (the wrk/ab model).
    #[command(after_help = run_examples!(), after_long_help = concat!(run_examples!(), "\n\n", template_help!()))]
    Run(Box<RunArgs>),
    /// Run an experiment plan: start the server in each configuration, step the load (or
    /// search for the knee), probe the server and the kernel, and write a result bundle
    /// with report.md.
    #[command(after_help = "Examples:\n  \
        loadlab lab plans/backlog-workers.toml --quick\n  \
        loadlab lab plans/actix-web-benchmark.toml --out results/bench-1\n  \
        loadlab lab plans/demo-knee.toml --agents 3 --token-file token   (then `loadlab agent` on 3 machines)")]
    Lab(LabArgs),
    /// Search a plan's [matrix] for the configuration with the highest knee, in a fraction
    /// of the full product's load, and measure what each knob did.
    ///
    /// The plan needs a knee search (`load.knee`, or `[tune] knee = { start, max }` when
    /// `[load]` gives fixed steps) and, with several scenarios, `[tune] scenario = "NAME"`:
    /// the knee maximized. The search starts from the middle value of each numeric knob
    /// (numbers are ordered: their neighbours are the next value up and down; other knobs
    /// are categories) with a full knee search, then moves one knob at a time from the best
    /// configuration so far. It tries first what the best one's diagnosis points at (more of
    /// the parameter the diagnosis named, such as `workers=2` at a concurrency limit, or of
    /// a knob `[tune.knobs] workers = { relieves = "concurrency" }` says relieves its
    /// bottleneck), then the direction that raised the knee before, then knobs not moved
    /// yet; knobs whose moves changed nothing resolvable come last. Each newcomer is raced:
    /// one step at the best knee so far, repeated if not sustained; not sustained twice, it
    /// is dropped there; sustained, its search grows from there. The best is replaced only
    /// by a knee resolvably higher (ranges disjoint). The search ends when every neighbour
    /// of the best was tried, or the budget is spent.
    ///
    /// Writes a bundle like `lab` (every step of every configuration tried, with probes and
    /// diagnosis), tune.json (the best configuration and whether it is resolvably better
    /// than the runner-up, every configuration tried with its knee or the load it was
    /// dropped at and why, each knob's measured effect on one-knob-apart pairs, the load
    /// time spent against the full product's estimate) and a tune section at the top of
    /// report.md and report.html.
    #[command(after_help = "Examples:\n  \
        loadlab tune plans/backlog-workers.toml --quick\n  \
        loadlab tune plans/proxy-pool-jvm.toml --quick --budget 6\n  \
        loadlab tune my-plan.toml --budget 30m --seed 7 --out results/tune-1")]
    Tune(TuneArgs),
    /// Find the knee of a server you started yourself: the highest load it sustains under
    /// the SLO, and why it breaks there.
    ///
    /// Grows the offered rate geometrically from --start until a step is not sustained,
    /// bisects to --precision, confirms both ends, and diagnoses the first step not
    /// sustained from probes of the server: by default, when the URL's host is this
    /// machine, the process listening on its port (found in /proc/net/tcp{,6} and the
    /// processes' descriptors), its process tree, its cgroup (CPU quota and throttling,
    /// memory limit and OOM kills, pids limit, pressure) and its network namespace's TCP
    /// counters. Writes a bundle like `loadlab lab` (plan.toml: this search as a plan you
    /// can re-run with `loadlab lab`). No knee below --max is an answer ("at least MAX").
    ///
    /// SLO (--slo, repeatable, `loadlab run`'s syntax): latency percentiles from above,
    /// `errors<X%`, `achieved>=RATIO`. Without any: errors at most 1 % and the server
    /// keeping pace with the arrivals (achieved >= 0.98), with no latency bound: give one,
    /// e.g. --slo 'p99<200ms'.
    ///
    /// Probes (at most one): --probe-pid, --probe-pidfile, --probe-cgroup (a directory
    /// under a cgroup mount, or a path such as /system.slice/app.service), --probe-container
    /// (docker, podman or containerd: the cgroup whose path holds the container's ID, found
    /// on disk without the daemon's API; names are read from the runtimes' state),
    /// --no-probe. A server on another host: give --remote-probe --token-file FILE here,
    /// and run `loadlab probe --coordinator THIS-HOST:7878 --token-file FILE --listen PORT`
    /// on the server's host; its samples replace every local probe.
    ///
    /// The cgroup figures (each step's probes.delta.cgroup, over its window): cpu_s and
    /// cpu_percent, the CPU the cgroup used (100 = one CPU); cpu_quota_cpus, its quota
    /// (quota / period, the smallest up to the root); periods and throttled_periods, the
    /// quota periods it had work in and those the quota ran out in; throttled_s, the time
    /// its tasks were stopped; memory_peak_bytes against memory_limit_bytes; oom_kills;
    /// memory_max_events, the times usage hit the limit; pids_peak against pids_limit, and
    /// pids_max_events, forks refused; psi_*_percent, the share of the window its tasks
    /// stalled waiting for CPU, memory or I/O (v2 only). A cgroup that also holds loadlab is
    /// said (shares_cgroup_with_loadlab): its figures include loadlab's.
    #[command(after_help = knee_examples!(), after_long_help = concat!(knee_examples!(), "\n\n", template_help!()))]
    Knee(Box<KneeArgs>),
    /// Check the machine before a run: file-descriptor limits, listen backlog caps,
    /// ephemeral ports and TIME_WAIT; prints the commands that fix each finding. Exits 1
    /// when the plan is predicted to fail.
    #[command(after_help = "Examples:\n  \
        loadlab doctor\n  \
        loadlab doctor plans/ephemeral-ports.toml")]
    Doctor(DoctorArgs),
    /// Drive a gRPC method of any kind with load (the ghz model): the request is built from
    /// JSON with the .proto (or the server's reflection) at run time; replies are counted
    /// per gRPC status.
    ///
    /// Closed loop by default: --concurrency calls in flight over --connections HTTP/2
    /// connections; --rate makes it open loop. A server-streaming method (`returns (stream
    /// …)`) holds --concurrency streams open: each message the server sends is a reply, its
    /// latency the wait for it (the first, the time to first message), and a stream the
    /// server ends with OK is opened again. A bidirectional method holds --concurrency
    /// streams and sends the message on them at the rate, each reply timed from its own
    /// message's intended send; a client-streaming one sends --messages-per-call messages
    /// per call, its reply timed from the last. Every message is rendered from the
    /// templates and --data of -D; a message the server's flow-control window held back is
    /// counted (`flow control`).
    #[command(after_help = grpc_examples!(), after_long_help = concat!(grpc_examples!(), "\n\n", template_help!()))]
    Grpc(Box<GrpcArgs>),
    /// Re-render a result bundle's report.md and report.html from what is on disk, and
    /// print report.md (a bundle from an older loadlab, or one whose run was interrupted).
    #[command(after_help = "Example:\n  loadlab report results/knee-20261206-031500")]
    Report(ReportArgs),
    /// Compare result bundles (or `loadlab run --json` results) side by side, the first as
    /// the baseline: each knee, and p99 and achieved at every load both ran, with the
    /// change in percent and whether the measurement resolves it.
    ///
    /// Series are matched by scenario and configuration name (when each side has a single
    /// configuration, those two are paired); what did not match is listed. p99 and
    /// achieved: a bootstrap over the seconds of each step (their latency histograms and
    /// successes resampled with replacement) gives a 99.9 % confidence interval of the
    /// ratio; a change is called only when that interval excludes no change, reaches beyond
    /// --noise-threshold, and repeated runs of the step do not overlap. Knees are ranges
    /// between two steps: a change only when the ranges are apart and a step that one side
    /// sustained cleanly separates them, otherwise "not resolved by the step spacing".
    /// Runs judged generator-limited, agent-lost or interrupted are left out.
    #[command(after_help = "Examples:\n  \
        loadlab compare results/before results/after\n  \
        loadlab compare results/before results/after-1 results/after-2 --json > comparison.json\n  \
        loadlab compare base.json candidate.json          (two `loadlab run --json` results)\n\n\
        Exit status: 0 compared (whatever the differences); 2 an input is not a bundle or run result.")]
    Compare(CompareArgs),
    /// The first run: start the reference scenario server (inside this binary) with 2 and
    /// then 8 worker threads, find where its blocking /sleep breaks in each, say why, and
    /// what the `workers` knob did to the knee (under a minute); then the next commands.
    Demo(DemoArgs),
    /// Run a reference server of the source experiments (the same as the loadlab-target,
    /// loadlab-hello and greeter-* binaries): `loadlab serve scenario --help`,
    /// `loadlab serve hello --help`, `loadlab serve greeter-tokio --help`.
    #[command(after_help = "Examples:\n  \
        loadlab serve scenario --bind 127.0.0.1:8080 --workers 4\n  \
        loadlab serve hello --bind 127.0.0.1:50051 --latency uniform:2ms..300ms\n  \
        loadlab serve greeter-glommio --bind 127.0.0.1:50051 --threads 1\n  \
        loadlab serve greeter-minimal --io uring --bind 127.0.0.1:50051 --threads 1")]
    Serve(ServeArgs),
    /// Run load for a coordinator on another machine: dial it (retrying until it answers),
    /// run the steps it sends with the same engine as `loadlab run`, return every result
    /// with its histograms, exit when the run is over.
    ///
    /// The agent only dials out and never listens: nothing on the network can make it send
    /// load without the coordinator's token. The coordinator is `loadlab run ... --agents N`
    /// or `loadlab lab PLAN --agents N` (see "Distributed" in their --help).
    #[command(after_help = "Examples:\n  \
        loadlab agent --coordinator 10.0.0.5:7878 --token-file /run/secrets/loadlab-token\n  \
        loadlab agent --coordinator coordinator.example:7878 --token-file token --name rack2-a --threads 4\n  \
        loadlab agent --coordinator coordinator:7878 --token-file token --tls-ca coordinator.pem")]
    Agent(AgentArgs),
    /// Probe a server on this host for a `loadlab knee` or `loadlab lab` run on another
    /// machine: dial its coordinator (retrying until it answers), then send it the server's
    /// figures once a second until the run is over.
    ///
    /// What is sent: the server's process tree (CPU, memory, threads, file descriptors,
    /// CPU waited for), its network namespace's TCP counters (listen-queue overflows and
    /// drops, resets, retransmits, TIME_WAIT, established), its cgroup (CPU quota and
    /// throttling, memory and OOM kills, pids, pressure), its CPU and cgroup limits, and the
    /// time each sample was taken (the coordinator measures this host's clock offset at
    /// join). The coordinator is `loadlab knee URL --remote-probe` or `loadlab lab PLAN
    /// --remote-probe` (with --agents N or without: then the load runs on the coordinator's
    /// machine); its steps are probed and diagnosed from these samples as from a local
    /// probe. One remote probe per run.
    ///
    /// The target, exactly one of --pid, --pidfile, --cgroup, --container, --listen, is
    /// found before dialing: one that does not exist is exit status 2. The probe only dials
    /// out and never listens. Exit status: 0 when the coordinator ended the run; 1 when it
    /// went away mid-run, or none answered for --wait; 2 bad input; 3 refused (wrong token,
    /// another loadlab version, the run already has its probe or waits for none).
    #[command(after_help = "Examples:\n  \
        loadlab probe --coordinator 10.0.0.5:7878 --token-file token --listen 8080\n  \
        loadlab probe --coordinator coordinator.example:7878 --token-file token --pidfile /run/gunicorn.pid --name web-1\n  \
        loadlab probe --coordinator coordinator:7878 --token-file token --container web --tls-ca coordinator.pem\n  \
        (on the coordinator: loadlab knee http://10.0.0.9:8080/ --slo 'p99<200ms' --remote-probe --token-file token)")]
    Probe(ProbeArgs),
    /// Print a completion script for a shell, from the same definitions as --help: every
    /// command, flag and value.
    #[command(after_help = "Examples:\n  \
        loadlab completions bash > ~/.local/share/bash-completion/completions/loadlab\n  \
        loadlab completions zsh > ~/.zfunc/_loadlab   (with fpath+=~/.zfunc before compinit)\n  \
        loadlab completions fish > ~/.config/fish/completions/loadlab.fish")]
    Completions(CompletionsArgs),
    /// Print the manual page (roff), from the same definitions as --help: loadlab.1 on
    /// standard output, or with --out one page per command (loadlab.1, loadlab-run.1, ...).
    #[command(after_help = "Examples:\n  \
        loadlab man | man -l -\n  \
        loadlab man --out /usr/local/share/man/man1")]
    Man(ManArgs),
}

/// `loadlab completions` arguments.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `loadlab man` arguments.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write one page per command into this directory (created if missing) instead of
    /// loadlab.1 to standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `loadlab probe` arguments.
#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("target")
        .required(true)
        .args(["pid", "pidfile", "cgroup", "container", "listen"])
))]
pub struct ProbeArgs {
    #[command(flatten)]
    pub dial: DialArgs,
    /// Probe this process and its descendants (and its cgroup).
    #[arg(long, value_name = "PID", help_heading = "Target (one of)")]
    pub pid: Option<u32>,
    /// Probe the process whose pid this file holds.
    #[arg(long, value_name = "FILE", help_heading = "Target (one of)")]
    pub pidfile: Option<PathBuf>,
    /// Probe every process of this cgroup and the cgroup's own figures: a directory under
    /// a cgroup mount, or a path such as /system.slice/app.service.
    #[arg(long, value_name = "PATH", help_heading = "Target (one of)")]
    pub cgroup: Option<String>,
    /// Probe the cgroup of this container (docker, podman, containerd): name or ID.
    #[arg(long, value_name = "NAME|ID", help_heading = "Target (one of)")]
    pub container: Option<String>,
    /// Probe the process listening on this TCP port on this host (in this network
    /// namespace: in a Kubernetes pod, run the probe as a sidecar with
    /// shareProcessNamespace).
    #[arg(long, value_name = "PORT", help_heading = "Target (one of)")]
    pub listen: Option<u16>,
}

/// How `loadlab agent` and `loadlab probe` reach their coordinator.
#[derive(Args, Debug)]
pub struct DialArgs {
    /// The coordinator, HOST:PORT (its --listen address as reachable from here).
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: String,
    /// File holding the token shared with the coordinator (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    pub token_file: PathBuf,
    /// This process's name in the coordinator's log and the results (a probe's also in
    /// the steps' probe description) [default: the host name].
    #[arg(long)]
    pub name: Option<String>,
    /// Connect with TLS, trusting this PEM certificate (the coordinator's, or its CA).
    #[arg(long, value_name = "PATH")]
    pub tls_ca: Option<PathBuf>,
    /// Name expected in the coordinator's certificate [default: the host of --coordinator].
    #[arg(long, requires = "tls_ca")]
    pub tls_domain: Option<String>,
    /// Give up when no coordinator has answered for this long (pods start in any order).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub wait: Duration,
    /// Log only errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `loadlab agent` arguments.
#[derive(Args, Debug)]
pub struct AgentArgs {
    #[command(flatten)]
    pub dial: DialArgs,
    /// Worker threads per step, also this agent's weight when a step is split [default:
    /// one per CPU this process may run on].
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Distributed load: this process coordinates `loadlab agent`s on other machines, and a
/// `loadlab probe` on the server's.
#[derive(Args, Debug, Clone)]
#[command(group(
    ArgGroup::new("coordinate")
        .multiple(true)
        .args(["agents", "remote_probe"])
))]
pub struct DistributedArgs {
    /// Drive the load from N `loadlab agent` processes instead of this one: wait for N to
    /// join, split every step between them (by their worker threads), start it on all at
    /// one instant, and merge their results exactly (histograms added). Probes, verdicts
    /// and the report work as for a local run.
    #[arg(long, value_name = "N", help_heading = "Distributed")]
    pub agents: Option<usize>,
    /// Wait for one `loadlab probe` on the server's host to join, and probe the server with
    /// its samples (process tree, TCP counters, cgroup) instead of any local probe. Needs
    /// --token-file; with or without --agents (without, the load runs here). One remote
    /// probe per run. `loadlab knee` and `loadlab lab` only: a single run has no probes.
    #[arg(long, help_heading = "Distributed")]
    pub remote_probe: bool,
    /// Address agents and the probe connect to.
    #[arg(
        long,
        default_value = "0.0.0.0:7878",
        value_name = "ADDR",
        requires = "coordinate",
        help_heading = "Distributed"
    )]
    pub listen: std::net::SocketAddr,
    /// File holding the token agents and the probe must present (e.g. `head -c 32
    /// /dev/urandom | base64 > token`).
    #[arg(
        long,
        value_name = "PATH",
        requires = "coordinate",
        help_heading = "Distributed"
    )]
    pub token_file: Option<PathBuf>,
    /// Serve the agents and the probe over TLS with this PEM certificate chain (with
    /// --tls-key).
    #[arg(long, value_name = "PATH", requires_all = ["coordinate", "tls_key"], help_heading = "Distributed")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's PEM private key.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_cert",
        help_heading = "Distributed"
    )]
    pub tls_key: Option<PathBuf>,
    /// How long to wait for the N agents (and the remote probe) before giving up.
    #[arg(long, default_value = "5m", value_parser = parse_duration, requires = "coordinate", help_heading = "Distributed")]
    pub agent_wait: Duration,
    /// When an agent is lost mid-step: the step is recorded as `agent lost` with what the
    /// others measured, then the run continues with the agents left, or stops.
    #[arg(
        long,
        value_enum,
        default_value = "continue",
        requires = "agents",
        help_heading = "Distributed"
    )]
    pub on_agent_loss: AgentLoss,
}

/// `--on-agent-loss`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AgentLoss {
    /// Go on with the agents left.
    Continue,
    /// Stop the run (finished steps are kept).
    Stop,
}

/// Which reference server.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Server {
    /// The actix-web scenario server (/health, /sleep, /f_sleep, /count, /send_wait, ...).
    Scenario,
    /// The gRPC hello backend (hello.HelloService/Say, helloworld.Greeter/SayHello).
    Hello,
    /// helloworld.Greeter on tokio, multi-threaded (as in the async-runtime comparison).
    GreeterTokio,
    /// helloworld.Greeter on one current-thread tokio runtime per core, SO_REUSEPORT.
    GreeterTokioPc,
    /// helloworld.Greeter on smol.
    GreeterSmol,
    /// helloworld.Greeter on async-std.
    GreeterAsyncStd,
    /// helloworld.Greeter on glommio (io_uring, thread per core; exit 3 without io_uring).
    GreeterGlommio,
    /// helloworld.Greeter on monoio (io_uring, thread per core; exit 3 without io_uring).
    GreeterMonoio,
    /// helloworld.Greeter on the minimal thread-per-core runtime of the runtime comparison,
    /// `--io epoll|uring-poll|uring|hybrid` (default uring-poll; exit 3 without io_uring
    /// except with epoll).
    GreeterMinimal,
    /// greeter-minimal with `--io epoll` by default (the plans' row names).
    GreeterMinimalEpoll,
    /// greeter-minimal with `--io uring-poll` by default.
    GreeterMinimalUringPoll,
    /// greeter-minimal with `--io uring` by default.
    GreeterMinimalUring,
    /// greeter-minimal with `--io hybrid` by default.
    GreeterMinimalHybrid,
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
    /// Use the plan's `[quick]` scale (minutes on a small machine).
    #[arg(long)]
    pub quick: bool,
    /// Run only these values of one `[matrix]` parameter, e.g. `--matrix threads=2,400`
    /// (repeat for others; a value the plan does not list is allowed). Laid over the plan
    /// after `[quick]`; the report names it.
    #[arg(long = "matrix", value_name = "KNOB=V1,V2")]
    pub matrix: Vec<loadlab_lab::plan::MatrixSet>,
    /// Bundle directory [default: results/NAME-TIMESTAMP].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Do not run the targets' `build` commands (what they build must be there already).
    /// Without it, each distinct build runs once, in the plan's directory, before the first
    /// configuration; a build that fails stops the plan before any load (exit 1, its output
    /// in the bundle's logs/build-TARGET.log).
    #[arg(long)]
    pub no_build: bool,
    /// After the run, compare the new bundle with this baseline bundle (as `loadlab
    /// compare` does) and exit 3 if a knee, or p99 at a load the baseline sustained, is
    /// worse by more than --max-regression beyond the noise; each regression is named on
    /// stderr and in report.md. Read and checked before any load (exit 2 if unusable).
    #[arg(long, value_name = "DIR", help_heading = "Regression gate")]
    pub baseline: Option<PathBuf>,
    /// The regression allowed against --baseline, e.g. 10% or 0.1: a knee must be resolved
    /// lower, or a p99 higher, by more than this even at the closest the measurement allows
    /// (the knees' step ranges, the p99's 99.9 % interval) [default: 10%].
    #[arg(long, value_name = "FRACTION", requires = "baseline", value_parser = parse_fraction, help_heading = "Regression gate")]
    pub max_regression: Option<f64>,
    /// Write JUnit XML for CI servers (`-`: standard output): a test case per configuration
    /// (failed when its target never became ready or crashed; skipped when unavailable
    /// here), one per knee found, and with --baseline one per regression (failed, with its
    /// figures) or one passed case when there is none. Each step's interval log and every
    /// second as CSV are in the bundle (hlog/, seconds.csv).
    #[arg(long, value_name = "PATH", help_heading = "Regression gate")]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
    #[command(flatten)]
    pub distributed: DistributedArgs,
}

/// `loadlab tune` arguments.
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The plan (TOML), with a [matrix] and a knee search.
    pub plan: PathBuf,
    /// How much to spend: a number of configurations (12), or a time of load (30m, 1h: no
    /// configuration starts once that much warm-up and measured time was spent) [default:
    /// `[tune] budget`, else 30 % of the matrix's configurations, at least 4].
    #[arg(long, value_name = "N|TIME", value_parser = parse_budget)]
    pub budget: Option<loadlab_lab::plan::Budget>,
    /// Breaks ties between equally promising moves, and picks the first value of each
    /// category knob: another seed, another path to the same answer.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Search every configuration in full, in the plan's order, with no racing (what
    /// `loadlab lab` would run): the full product's answer and every knob's effect, to
    /// check what tune found against, at the full product's cost.
    #[arg(long, conflicts_with = "budget")]
    pub full: bool,
    /// Use the plan's `[quick]` scale (minutes on a small machine).
    #[arg(long)]
    pub quick: bool,
    /// Search only these values of one `[matrix]` parameter, e.g. `--matrix threads=8,64`
    /// (repeat for others; a value the plan does not list is allowed). Laid over the plan
    /// after `[quick]`; the report names it.
    #[arg(long = "matrix", value_name = "KNOB=V1,V2")]
    pub matrix: Vec<loadlab_lab::plan::MatrixSet>,
    /// Bundle directory [default: results/NAME-tune-TIMESTAMP].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Do not run the targets' `build` commands (what they build must be there already).
    #[arg(long)]
    pub no_build: bool,
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
    #[command(flatten)]
    pub distributed: DistributedArgs,
}

fn parse_budget(s: &str) -> Result<loadlab_lab::plan::Budget, String> {
    loadlab_lab::plan::Budget::parse(s)
}

/// The request sent: `loadlab run`'s and `loadlab knee`'s.
#[derive(Args, Debug)]
pub struct RequestArgs {
    /// HTTP method, e.g. POST (upper-cased before sending).
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
    /// Request body as text; --body-file reads it from a file instead.
    #[arg(long, conflicts_with = "body_file", help_heading = "Request")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long, help_heading = "Request")]
    pub body_file: Option<PathBuf>,
}

impl RequestArgs {
    /// The body: --body, --body-file's bytes, or none.
    pub fn body(&self) -> anyhow::Result<Vec<u8>> {
        Ok(match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(p)) => std::fs::read(p)
                .map_err(|e| anyhow::anyhow!("--body-file {}: cannot read: {e}", p.display()))?,
            (None, None) => Vec::new(),
        })
    }
}

/// Requests that vary: a data file for templates, and a targets file of many requests.
#[derive(Args, Debug, Default)]
#[command(group(ArgGroup::new("replay_log").args(["replay", "replay_mix"])))]
pub struct TrafficArgs {
    /// A data file whose rows feed `${COLUMN}` templates: CSV with a header row, or JSON
    /// Lines (.jsonl, .ndjson, or lines that are JSON objects). Each request takes one row.
    #[arg(long, value_name = "FILE", help_heading = "Requests that vary")]
    pub data: Option<PathBuf>,
    /// How requests take rows: `sequential` (in order, wrapping around), `random`, or
    /// `unique` (each row once: the run ends cleanly when they are used up, and says so).
    #[arg(
        long,
        value_name = "ORDER",
        default_value = "sequential",
        value_parser = parse_data_order,
        requires = "data",
        help_heading = "Requests that vary"
    )]
    pub data_order: loadlab_engine::config::traffic::DataOrder,
    /// Many requests in one load, from a file in vegeta's targets format: a `METHOD URL`
    /// line, `Name: value` header lines, an optional `@body-file` line, requests separated
    /// by blank lines, `#` comments; `# @name NAME` names the next request (results are
    /// kept per name; unnamed ones count as `METHOD /path`). URLs are on one server (a path
    /// from `/` takes the URL argument's). Templates allowed inside.
    #[arg(long, value_name = "FILE", help_heading = "Requests that vary")]
    pub targets: Option<PathBuf>,
    /// Real traffic at the run's rate: the requests an access log holds (nginx or Apache
    /// `combined` or `common`, any nginx `log_format`, JSON Lines, or a HAR), each distinct
    /// request weighted by how often the log has it, in the log's proportions without its
    /// timing. Results are kept per endpoint (`GET /users/{id}`: identifiers folded). By
    /// default only GET and HEAD are replayed, without cookies or credentials, and on the
    /// URL argument's server (the logged host is not used). The format is told from the
    /// first line unless --log-format names it.
    #[arg(
        long,
        value_name = "LOG",
        conflicts_with_all = ["targets", "flow"],
        help_heading = "Requests that vary"
    )]
    pub replay_mix: Option<PathBuf>,
    /// Real traffic at its own times: each request an access log holds (as --replay-mix
    /// reads it) sent at the time the log made it, from its first, so that its bursts and
    /// its quiet stretches are the load (requests logged within one second, or one
    /// millisecond, are spread evenly across it). The run lasts as long as the log (or -d);
    /// its rate is the log's. Results per endpoint, and how closely the sends followed the
    /// log, second by second.
    #[arg(
        long,
        value_name = "LOG",
        conflicts_with_all = ["targets", "flow", "replay_mix"],
        help_heading = "Requests that vary"
    )]
    pub replay: Option<PathBuf>,
    /// --replay's time compressed K times [default: 1]: 4 sends an hour of the log in 15
    /// minutes, at four times its rate and with its shape.
    #[arg(
        long,
        value_name = "K",
        requires = "replay",
        help_heading = "Requests that vary"
    )]
    pub speed: Option<f64>,
    /// The format of the log (--replay, --replay-mix): `combined`, `common`, `nginx:FORMAT` (an nginx
    /// `log_format` string: `$msec`, `$request`, `$request_uri`, `$status`, `$http_NAME`…
    /// are read), `jsonl` or `jsonl:FIELD=PATH,…` (fields time, method, url, status, host,
    /// duration), or `har`.
    #[arg(
        long,
        value_name = "FORMAT",
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub log_format: Option<String>,
    /// The methods --replay and --replay-mix send, comma-separated [default: GET,HEAD]: a replayed POST
    /// repeats its side effects.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub methods: Vec<String>,
    /// A header --replay and --replay-mix drop by default that they send anyway (repeatable): `Cookie`,
    /// `Authorization`, `Proxy-Authorization`, `X-Api-Key`.
    #[arg(
        long,
        value_name = "NAME",
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub keep_header: Vec<String>,
    /// A rule that names the log's requests by their path (repeatable, tried in order
    /// before identifiers are folded): `PATTERN=NAME`, a regular expression and the name of
    /// what it matches (`'^/static/=static'`; `'^/api/(v[0-9]+)/=api $1'` uses its group).
    #[arg(
        long,
        value_name = "PATTERN=NAME",
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub name_rule: Vec<String>,
    /// Only the log's requests made at or after this time: ISO 8601
    /// (`2023-11-14T08:00:00Z`), the common log format's (`14/Nov/2023:08:00:00 +0000`) or
    /// seconds since the epoch (a morning peak's mix, not the day's).
    #[arg(
        long,
        value_name = "TIME",
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub from: Option<String>,
    /// Only the log's requests made before this time (as --from).
    #[arg(
        long,
        value_name = "TIME",
        requires = "replay_log",
        help_heading = "Requests that vary"
    )]
    pub to: Option<String>,
    /// How the targets are taken: `round-robin` (in turn) or `random`.
    #[arg(
        long,
        value_name = "ORDER",
        default_value = "round-robin",
        value_parser = parse_mix_order,
        requires = "targets",
        help_heading = "Requests that vary"
    )]
    pub targets_order: loadlab_engine::config::traffic::MixOrder,
    /// Load as users: a flow file (TOML) of named steps sent in order by each session, with
    /// think times, `extract` rules that take values from responses into `${variables}`,
    /// a cookie jar per session and `loop = N`. The rate then counts sessions started per
    /// second (closed loop: --connections users); results are kept per step and per
    /// session. See docs/src/flows.md.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "targets",
        help_heading = "Requests that vary"
    )]
    pub flow: Option<PathBuf>,
}

/// Reads a flow file: TOML, as `[[scenario]] flow` tables are written.
pub fn read_flow(path: &std::path::Path) -> anyhow::Result<loadlab_session::Flow> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--flow {}: cannot read it: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| anyhow::anyhow!("--flow {}: {e}", path.display()))
}

fn parse_data_order(s: &str) -> Result<loadlab_engine::config::traffic::DataOrder, String> {
    s.parse().map_err(|e| format!("{e}"))
}

fn parse_mix_order(s: &str) -> Result<loadlab_engine::config::traffic::MixOrder, String> {
    s.parse()
}

impl TrafficArgs {
    /// The traffic these flags describe, its files read (a mistake in them is named with
    /// its file, line and column).
    pub fn traffic(&self) -> anyhow::Result<loadlab_engine::config::traffic::Traffic> {
        let (traffic, _) = self.traffic_and_log()?;
        Ok(traffic)
    }

    /// The log of --replay or --replay-mix read for replay (what was read printed), and
    /// the flag that named it; `None` without one.
    pub fn log(&self) -> anyhow::Result<Option<(loadlab_lab::replay::Loaded, &'static str)>> {
        let (path, flag) = match (&self.replay, &self.replay_mix) {
            (Some(p), _) => (p, "--replay"),
            (None, Some(p)) => (p, "--replay-mix"),
            (None, None) => return Ok(None),
        };
        let format = self
            .log_format
            .as_deref()
            .map(str::parse::<loadlab_replay::Format>)
            .transpose()?;
        let mut policy = loadlab_lab::replay::policy(&self.methods, &self.keep_header);
        policy.from_ns = loadlab_lab::replay::window_end(self.from.as_deref())
            .map_err(|e| anyhow::anyhow!("--from {e}"))?;
        policy.to_ns = loadlab_lab::replay::window_end(self.to.as_deref())
            .map_err(|e| anyhow::anyhow!("--to {e}"))?;
        let rules = loadlab_lab::replay::name_rules(&self.name_rule)
            .map_err(|e| anyhow::anyhow!("--name-rule: {e}"))?;
        let timed = self.replay.is_some();
        let loaded = loadlab_lab::replay::load(path, format.as_ref(), &policy, &rules, &[], timed)
            .map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
        eprintln!("loadlab: {}", loaded.report);
        Ok(Some((loaded, flag)))
    }

    /// [`TrafficArgs::traffic`], and the log it was read from (a timed replay needs its
    /// times).
    pub fn traffic_and_log(
        &self,
    ) -> anyhow::Result<(
        loadlab_engine::config::traffic::Traffic,
        Option<loadlab_lab::replay::Loaded>,
    )> {
        use loadlab_engine::config::traffic::{NamedRequest, Traffic};
        let data = match &self.data {
            Some(p) => Some(std::sync::Arc::new(
                loadlab_template::Data::load(p).map_err(|e| anyhow::anyhow!("--data {e}"))?,
            )),
            None => None,
        };
        let mut log = self.log()?.map(|(l, _)| l);
        let requests = match (&self.targets, &mut log) {
            (Some(p), _) => loadlab_template::parse_targets(p)
                .map_err(|e| anyhow::anyhow!("--targets {e}"))?
                .into_iter()
                .map(|t| NamedRequest::from_target(t, &[]))
                .collect(),
            (None, Some(l)) => std::mem::take(&mut l.requests),
            (None, None) => Vec::new(),
        };
        let flow = match &self.flow {
            Some(p) => Some(read_flow(p)?),
            None => None,
        };
        let traffic = Traffic {
            requests,
            order: self.targets_order,
            data,
            data_order: self.data_order,
            flow,
            ..Traffic::default()
        };
        Ok((traffic, log))
    }

    /// The server of the first target (`scheme://authority/`), for a run given a targets
    /// file and no URL.
    pub fn first_target_server(t: &loadlab_engine::config::traffic::Traffic) -> Option<String> {
        let url = &t.requests.first()?.url;
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '?']).next()?;
        Some(format!("{scheme}://{authority}/"))
    }
}

/// `loadlab knee` arguments.
#[derive(Args, Debug)]
pub struct KneeArgs {
    /// The server: an http://, https://, ws:// or wss:// URL; with --call, a gRPC address
    /// (HOST:PORT, http://HOST:PORT or https://HOST:PORT); with --targets, optional.
    #[arg(required_unless_present = "targets")]
    pub url: Option<String>,

    /// A bound each step must meet to count as sustained (repeatable): `p99<200ms`,
    /// `p95<=100ms`, `errors<1%`, `achieved>=0.95` [default: errors<1% and achieved>=0.98,
    /// no latency bound].
    #[arg(long = "slo", value_name = "GATE", help_heading = "Search")]
    pub slo: Vec<String>,
    /// The first load tried: req/s, connections with --model closed, or a multiple of the
    /// log's speed with --replay [default: 10 req/s, 1 connection, or ×1].
    #[arg(long, help_heading = "Search")]
    pub start: Option<f64>,
    /// The highest load tried; sustained there, the knee is "at least MAX" [default:
    /// 100000 req/s, 4096 connections, or ×1000].
    #[arg(long, help_heading = "Search")]
    pub max: Option<f64>,
    /// Stop bisecting once the range between the highest sustained and the lowest
    /// unsustained load is at most this fraction of the lower (5% or 0.05).
    #[arg(long, default_value = "5%", value_parser = parse_fraction, help_heading = "Search")]
    pub precision: f64,
    /// Multiplier between steps until one is not sustained (above 1).
    #[arg(long, default_value_t = 2.0, help_heading = "Search")]
    pub growth: f64,
    /// Measured duration of each step.
    #[arg(long, default_value = "5s", value_parser = parse_duration, help_heading = "Search")]
    pub step: Duration,
    /// Load before each step's measurement, not recorded.
    #[arg(long, default_value = "1s", value_parser = parse_duration, help_heading = "Search")]
    pub warmup: Duration,
    /// Pause between steps (lets the server drain what the last step queued).
    #[arg(long, default_value = "500ms", value_parser = parse_duration, help_heading = "Search")]
    pub pause: Duration,
    /// Repeats of each end of the range once found (0 to 10).
    #[arg(long, default_value_t = 1, help_heading = "Search")]
    pub confirm: u32,
    /// `open`: steps are rates (requests sent on schedule); `closed`: steps are connections
    /// (or HTTP/2 streams) each sending its next request when the last ends.
    #[arg(long, value_enum, default_value = "open", help_heading = "Search")]
    pub model: ModelArg,

    /// Probe this process (and its descendants, and its cgroup) instead of the one found
    /// listening on the URL's port.
    #[arg(
        long,
        value_name = "PID",
        help_heading = "Probes",
        group = "probe_source"
    )]
    pub probe_pid: Option<u32>,
    /// Probe the process whose pid this file holds.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Probes",
        group = "probe_source"
    )]
    pub probe_pidfile: Option<PathBuf>,
    /// Probe every process of this cgroup and the cgroup's own figures (v2 or v1).
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Probes",
        group = "probe_source"
    )]
    pub probe_cgroup: Option<String>,
    /// Probe the cgroup of this container (docker, podman, containerd): name or ID.
    #[arg(
        long,
        value_name = "NAME|ID",
        help_heading = "Probes",
        group = "probe_source"
    )]
    pub probe_container: Option<String>,
    /// Probe nothing but this machine's kernel counters.
    #[arg(long, help_heading = "Probes", group = "probe_source")]
    pub no_probe: bool,

    #[command(flatten)]
    pub request: RequestArgs,
    /// Speak HTTP/2: prior knowledge (h2c) on http://, ALPN h2 on https://.
    #[arg(long, help_heading = "Request")]
    pub http2: bool,
    /// WebSocket connection load: the steps are connections held open, each sending a
    /// ping (the body as its payload) every DURATION and timing its pong; the knee is the
    /// connections the server holds before a pong's latency breaks the SLO.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Request")]
    pub ping_every: Option<Duration>,
    /// Server-sent events: the steps are streams held open (one per connection), each
    /// event a reply whose latency is the wait for it; the knee is the streams the server
    /// holds before that breaks the SLO.
    #[arg(long, help_heading = "Request")]
    pub sse: bool,
    /// WebSocket server push: each of --connections connections sends the body once after
    /// the upgrade (a subscribe message), and every data message the server sends is a
    /// reply whose latency is the wait for it (the first: the time to first message).
    /// The steps are the connections held.
    #[arg(long, help_heading = "Request")]
    pub push: bool,
    /// WebSocket: a reply is the next data message that contains TEXT, rendered as the
    /// message is (`--body '{"id":${seq}}' --reply-contains '"id":${seq}'`: the same
    /// ${seq} and data row); other messages the server sends are not replies (a server that
    /// also pushes, or answers out of order).
    #[arg(long, value_name = "TEXT", help_heading = "Request")]
    pub reply_contains: Option<String>,
    /// WebSocket, event streams and server-streaming gRPC: each reply carries the time the
    /// server sent it, as a number at this JSON pointer (`/ts`, `/data/sent`; gRPC: the
    /// field path, `/sent_at_us`) since the Unix epoch in seconds, ms, µs or ns (told by
    /// magnitude; or a google.protobuf.Timestamp); the delay from it to the reply's arrival
    /// is reported beside the latency (`server delay`: with server push, how stale a
    /// message is when it lands). Meaningful when both clocks are the same (one host) or
    /// synchronized.
    #[arg(long, value_name = "POINTER", help_heading = "Request")]
    pub sent_at: Option<String>,
    /// Reuse connections (on) or open a new TCP connection per request (off, HTTP/1.1).
    #[arg(long, value_enum, default_value = "on", help_heading = "Request")]
    pub keep_alive: OnOff,
    /// With --keep-alive off, which side closes each connection (see `loadlab run --help`).
    #[arg(long, value_enum, default_value = "server", help_heading = "Request")]
    pub close_by: CloseByArg,

    /// gRPC: the .proto file that defines the service. Without it (nor --protoset), the
    /// service is asked of the server's reflection, and the descriptors kept in the bundle
    /// (`reflected.protoset`) for the plan to re-run with.
    #[arg(
        long,
        requires = "call",
        conflicts_with = "protoset",
        help_heading = "gRPC"
    )]
    pub proto: Option<PathBuf>,
    /// gRPC: a compiled descriptor set with its imports, in place of --proto (`protoc
    /// --include_imports --descriptor_set_out FILE`).
    #[arg(long, value_name = "FILE", requires = "call", help_heading = "gRPC")]
    pub protoset: Option<PathBuf>,
    /// gRPC: directories searched for the proto's imports (repeatable).
    #[arg(
        short = 'I',
        long = "import-path",
        requires = "proto",
        help_heading = "gRPC"
    )]
    pub import_paths: Vec<PathBuf>,
    /// gRPC: the method, package.Service/Method (unary, server, client or bidirectional
    /// streaming); the URL is then a gRPC address.
    #[arg(long, help_heading = "gRPC")]
    pub call: Option<String>,
    /// gRPC, a client-streaming method: the messages each call sends before it ends its
    /// side (10 by default; ghz's `--stream-call-count` is the same flag).
    #[arg(long, alias = "stream-call-count", value_name = "N", requires = "call",
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "gRPC")]
    pub messages_per_call: Option<u32>,
    /// gRPC, a server-streaming method: the steps are streams opened per second, each held
    /// for DURATION and then reset (its first message timed from its intended open), instead
    /// of streams held; the knee is the opening rate (about rate × DURATION open at once).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, requires = "call",
          help_heading = "gRPC")]
    pub stream_lifetime: Option<Duration>,
    /// gRPC, a bidirectional method: the number field each reply echoes from the message it
    /// answers (`/seq`: field names from the top, the same path in the request and the
    /// reply; the message's `"seq": "${seq}"` makes it unique): a reply answers the message
    /// waiting on its stream with that number, not the oldest (a server that answers out of
    /// order, or drops some).
    #[arg(long, value_name = "FIELD", requires = "call", help_heading = "gRPC")]
    pub match_field: Option<String>,
    /// gRPC: the request message as JSON (templates inside its strings).
    #[arg(
        short = 'D',
        long,
        conflicts_with = "message_file",
        help_heading = "gRPC"
    )]
    pub message: Option<String>,
    /// gRPC: the request message as JSON, read from a file.
    #[arg(long, help_heading = "gRPC")]
    pub message_file: Option<PathBuf>,
    /// gRPC: request metadata, `key: value` (repeatable).
    #[arg(short = 'm', long = "metadata", help_heading = "gRPC")]
    pub metadata: Vec<String>,

    #[command(flatten)]
    pub traffic: TrafficArgs,

    /// Open loop: the initial connection pool; HTTP/2 and gRPC: the connections.
    #[arg(short = 'c', long, default_value_t = DEFAULT_CONNECTIONS, help_heading = "Connections")]
    pub connections: u64,
    /// HTTP/1.1 open loop: the pool may grow to this many connections.
    #[arg(long, help_heading = "Connections")]
    pub max_connections: Option<u64>,
    /// HTTP/2 and gRPC: streams in flight (open loop: the ceiling).
    #[arg(long, help_heading = "Connections")]
    pub concurrency: Option<u64>,
    /// Per-request deadline, counted from the intended send time.
    #[arg(long, default_value = "5s", value_parser = parse_duration, help_heading = "Connections")]
    pub timeout: Duration,
    /// Local source addresses for new connections (as `loadlab run --source-addrs`).
    #[arg(long, help_heading = "Connections")]
    pub source_addrs: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Worker threads [default: one per core].
    #[arg(short = 't', long, help_heading = "Connections")]
    pub threads: Option<usize>,
    /// Pin loadlab's worker threads to these CPUs (keep them off the server's), e.g. 1.
    #[arg(long, help_heading = "Connections")]
    pub cpus: Option<String>,
    /// The I/O interface of plain http:// HTTP/1.1 connections: auto (io_uring in open
    /// loop and in closed loop with keep-alive off, where it was measured better; epoll with
    /// keep-alive in closed loop and for a flow's sessions), epoll, or
    /// uring (io_uring: one system call per turn of the event loop for every connect, send,
    /// receive and close; where the kernel refuses it, epoll, said once).
    #[arg(long, value_parser = ["auto", "epoll", "uring"], help_heading = "Connections")]
    pub io: Option<String>,
    /// Spacing of open-loop arrivals.
    #[arg(
        long,
        value_enum,
        default_value = "constant",
        help_heading = "Connections"
    )]
    pub arrival: ArrivalArg,

    /// Bundle directory [default: results/knee-TIMESTAMP].
    #[arg(short, long, help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Write JUnit XML for CI servers (`-`: standard output, the closing lines then going
    /// to standard error): one test case for the knee, failed when no knee was measured
    /// (the request was rejected, nothing answered, or no step ran), with the search's
    /// summary. The bundle has every step's interval log and every second as CSV (hlog/,
    /// seconds.csv).
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub junit: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,
    #[command(flatten)]
    pub prometheus: PrometheusArgs,

    #[command(flatten)]
    pub distributed: DistributedArgs,
}

/// `--model`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ModelArg {
    /// Rates, on schedule.
    Open,
    /// Connections (or streams) in flight.
    Closed,
}

/// `loadlab compare` arguments.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Result bundle directories or `loadlab run --json` files, at least two; the first is
    /// the baseline (A), the others (B, C...) are each compared with it.
    #[arg(required = true, num_args = 2.., value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Print the comparison as JSON (versioned: `comparison_version`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the comparison as one self-contained HTML page: the text, and each
    /// series' p99 and achieved of both sides overlaid, knees marked (`-`: standard output,
    /// and the text goes to standard error).
    #[arg(long, value_name = "PATH")]
    pub html: Option<std::path::PathBuf>,
    /// A change whose whole confidence interval lies within ± this is reported as below
    /// the threshold, not as a change (5% or 0.05).
    #[arg(long, default_value = "5%", value_name = "FRACTION", value_parser = parse_fraction)]
    pub noise_threshold: f64,
}

/// A fraction written as a percentage (`10%`) or a number from 0 to 1 (`0.1`).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a fraction: write e.g. 10% or 0.1"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: a fraction of 0 or more, e.g. 10% or 0.1"));
    }
    if percent {
        Ok(v / 100.0)
    } else if v > 1.0 {
        Err(format!(
            "`{s}` is ambiguous: write {v}% for a percentage, or a fraction from 0 to 1 (0.1 is 10 %)"
        ))
    } else {
        Ok(v)
    }
}

/// `loadlab doctor` arguments.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// A plan to check against (without one: 1024 keep-alive connections to loopback).
    pub plan: Option<PathBuf>,
    /// Check the plan's `[quick]` scale.
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
    /// Also print the full report (report.md) before the closing summary.
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// On or off.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// `--close-by`: which side closes a connection that is not reused (the engine's
/// [`loadlab_engine::CloseBy`]).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum CloseByArg {
    /// The server, asked by `Connection: close`.
    Server,
    /// loadlab, after reading the response.
    Client,
}

/// `--arrival`: spacing of open-loop requests (the engine's [`Arrival`]).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ArrivalArg {
    /// Evenly spaced arrivals.
    Constant,
    /// Exponential gaps (Poisson process).
    Poisson,
}

/// Load shape, connections and timing: shared by `loadlab run` and `loadlab grpc`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Open loop at this many requests per second (all threads together; at most
    /// 10,000,000). Without it: closed loop. A rate the machine cannot generate still ends
    /// on time: arrivals that fall more than --timeout behind are counted as never sent.
    /// Also written as vegeta's `100/s`, `50/1s`, `6000/1m`; `-R` (wrk2) and `--rps` (ghz)
    /// are the same flag.
    #[arg(
        short = 'r',
        long,
        short_alias = 'R',
        alias = "rps",
        allow_negative_numbers = true,
        value_parser = parse_rate,
        help_heading = "Load"
    )]
    pub rate: Option<f64>,
    /// Spacing of open-loop arrivals.
    #[arg(long, value_enum, default_value = "constant", help_heading = "Load")]
    pub arrival: ArrivalArg,
    /// Closed loop: exactly this many connections, opened up front. Open loop: the initial
    /// pool, each connection opened on first use. HTTP/2 and gRPC: the connections over which
    /// the streams (--concurrency) go. 1 to 1,000,000.
    #[arg(short = 'c', long, default_value_t = DEFAULT_CONNECTIONS, help_heading = "Load")]
    pub connections: u64,
    /// HTTP/2 and gRPC: requests in flight as streams over the connections (closed loop:
    /// exactly; open loop: the ceiling) [default: closed 64 or --connections if larger;
    /// open 1024]. At most 1,000,000.
    #[arg(long, help_heading = "Load")]
    pub concurrency: Option<u64>,
    /// HTTP/1.1 open loop: the pool may grow to this many connections when all are busy
    /// [default: the larger of --connections and 1024]. At most 1,000,000.
    #[arg(long, help_heading = "Load")]
    pub max_connections: Option<u64>,
    /// Measured duration, e.g. 10s, 2m, 500ms; at most 8h [default: 10s unless --requests
    /// is given]. `-z` (hey, oha, ghz) is the same flag.
    #[arg(short = 'd', long, short_alias = 'z', value_parser = parse_duration_flag, allow_hyphen_values = true, help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Measured request count; with --duration, whichever ends first (without it, the run
    /// still stops after 8h).
    #[arg(short = 'n', long, help_heading = "Load")]
    pub requests: Option<u64>,
    /// Load applied before measuring, not recorded; at most 1h.
    #[arg(long, value_parser = parse_duration, default_value = "0s", help_heading = "Load")]
    pub warmup: Duration,
    /// Worker threads, each with its own event loop; 1 to 1024 [default: number of cores].
    #[arg(short = 't', long, help_heading = "Load")]
    pub threads: Option<usize>,
    /// Seed for --arrival poisson (random by default).
    #[arg(long, help_heading = "Load")]
    pub seed: Option<u64>,
    /// Pin worker threads to these CPUs, e.g. 1 or 2-3 (worker i takes the i-th), to keep
    /// loadlab off the server's cores. CPU numbers 0 to 4095.
    #[arg(long, help_heading = "Load")]
    pub cpus: Option<CpuList>,
    /// The I/O interface of plain http:// HTTP/1.1 connections: auto (io_uring in open
    /// loop and in closed loop with keep-alive off, where it was measured better; epoll with
    /// keep-alive in closed loop and for a flow's sessions), epoll, or
    /// uring (io_uring: one system call per turn of the event loop for every connect, send,
    /// receive and close; where the kernel refuses it, epoll, said once).
    #[arg(
        long,
        env = "LOADLAB_IO",
        default_value = "auto",
        help_heading = "Connections"
    )]
    pub io: IoMode,

    /// Per-request deadline (connect + response), counted from the intended send time.
    /// gRPC: also sent as grpc-timeout; a passed deadline counts as DEADLINE_EXCEEDED.
    /// At most 1h.
    #[arg(long, value_parser = parse_duration, default_value = "5s", help_heading = "Connections")]
    pub timeout: Duration,
    /// Local source addresses for new connections: 127.0.0.2-127.0.0.17, a list A,B,C, or a
    /// count N (127.0.0.2 onwards, loopback targets). At most 65,000 addresses.
    #[arg(long, help_heading = "Connections")]
    pub source_addrs: Option<SourceAddrs>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// TLS: certificate checks, extra trusted certificates, a client certificate (run, grpc,
/// knee).
#[derive(Args, Debug)]
pub struct TlsArgs {
    /// Skip TLS certificate verification for https:// targets.
    #[arg(short = 'k', long, help_heading = "Connections")]
    pub insecure: bool,
    /// Trust the certificates of this PEM file (a private CA, a server's self-signed
    /// certificate) besides the system's trust store, as curl --cacert does. The system's
    /// store (/etc/ssl/certs, or SSL_CERT_FILE and SSL_CERT_DIR) is always used.
    #[arg(long, value_name = "FILE", help_heading = "Connections")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) for servers that require one (mTLS); with --key. Any
    /// intermediate certificates follow it in the file.
    #[arg(
        long,
        value_name = "FILE",
        requires = "key",
        help_heading = "Connections"
    )]
    pub cert: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, RSA or EC) of the --cert certificate.
    #[arg(
        long,
        value_name = "FILE",
        requires = "cert",
        help_heading = "Connections"
    )]
    pub key: Option<PathBuf>,
}

impl TlsArgs {
    /// The `--cacert` PEM and the client certificate, read.
    pub fn pems(&self) -> anyhow::Result<(Option<String>, Option<ClientCertPem>)> {
        let read = |flag: &str, p: &Path| {
            std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("{flag} {}: cannot read: {e}", p.display()))
        };
        let ca_pem = match &self.cacert {
            Some(p) => Some(read("--cacert", p)?),
            None => None,
        };
        // clap has already refused one without the other.
        let client_cert = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(ClientCertPem {
                cert_file: cert.display().to_string(),
                cert_pem: read("--cert", cert)?,
                key_file: key.display().to_string(),
                key_pem: read("--key", key)?,
            }),
            _ => None,
        };
        Ok((ca_pem, client_cert))
    }
}

/// Where the result goes.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Write the result as JSON to this file (`-`: standard output, and the summary goes to
    /// standard error). Its schema: schema/run-result.schema.json.
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Write the latency as an HdrHistogram interval log (`.hlog`, format 1.3, as
    /// HistogramLogAnalyzer and every HdrHistogram library read it): one histogram per
    /// second of the measured window, microseconds from the intended send time (`-`:
    /// standard output).
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub hlog: Option<PathBuf>,
    /// Write one CSV row per second (offered, completed, successful, errors in total and
    /// by class, latency p50, p90, p95, p99 and max in ms) with a header row (`-`: standard
    /// output).
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub csv: Option<PathBuf>,
    /// Write the --slo gates as JUnit XML for CI servers: one test case per gate, a failed
    /// gate as <failure> with its figure (`-`: standard output).
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub junit: Option<PathBuf>,
    /// Print the latency distribution and its detailed percentile spectrum after the
    /// summary, as wrk2 --latency does.
    #[arg(long, help_heading = "Output")]
    pub latency: bool,
    /// No per-second progress on stderr.
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,
    /// A gate on the final result, for CI (repeatable; k6-style thresholds): METRIC OP VALUE
    /// with OP one of < <= > >=. Latency from the intended send time: p50, p75, p90, p95,
    /// p99, p99.9, p99.99, p99.999, mean, max, with a unit (`p99<50ms`, `p99.9<=1s`);
    /// `errors<0.1%` (failed over attempted); `achieved>=0.98` (over offered, open loop) or
    /// `achieved>=5000/s`. Each gate is printed PASS or FAIL with its figure; the exit
    /// status is 3 when one fails. Quote it from the shell.
    #[arg(long = "slo", value_name = "GATE", value_parser = parse_gate, help_heading = "Gates")]
    pub slo: Vec<loadlab_lab::gate::Gate>,
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
}

/// `--prometheus-rw`, for run, grpc, knee, lab and tune.
#[derive(Args, Debug)]
pub struct PrometheusArgs {
    /// Push each finished second to this Prometheus remote write receiver (http:// only,
    /// e.g. http://127.0.0.1:9090/api/v1/write): loadlab_requests_total and
    /// loadlab_errors_total{class} (counters), latency as the native histogram
    /// loadlab_latency_seconds (classic _bucket series if the server refuses native ones)
    /// and loadlab_offered_rps, labelled by scenario and config in a lab, by request name
    /// in a mix of named requests and by agent with --agents (one series per part, so a
    /// sum() over them is the run's). From a thread of its own: a push that fails or is
    /// slow is a warning, never a failed run.
    #[arg(long = "prometheus-rw", value_name = "URL", help_heading = "Output")]
    pub prometheus_rw: Option<crate::promrw::Endpoint>,
}

/// `--rate`: requests per second as a number, or vegeta's `N/DURATION` (`100/s`, `50/1s`,
/// `6000/1m`, `5/100ms`).
fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (n, per) = match t.split_once('/') {
        Some((n, per)) => (n.trim(), Some(per.trim())),
        None => (t, None),
    };
    let n: f64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a rate: give requests per second (`500`) or N/DURATION (`500/s`, `30000/1m`)"))?;
    let Some(per) = per else { return Ok(n) };
    let per = if per.starts_with(|c: char| c.is_ascii_digit()) {
        per.to_string()
    } else {
        format!("1{per}")
    };
    let d = parse_duration(&per).map_err(|e| format!("`{s}`: the duration after `/`: {e}"))?;
    if d.is_zero() {
        return Err(format!("`{s}`: the duration after `/` is zero"));
    }
    Ok(n / d.as_secs_f64())
}

/// `--duration`: as [`parse_duration`] with its unit. A number alone (`-d 10`: seconds, or
/// hey's and oha's body?) is refused with both readings, and what is no duration (a body, a
/// JSON message) names the flags that take one.
fn parse_duration_flag(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.parse::<f64>().is_ok() {
        return Err(format!(
            "`{t}` has no unit: {t} seconds? type `-d {t}s`; hey's and oha's body? `--body {t}` \
             (`-d` is the duration here)"
        ));
    }
    parse_duration(s).map_err(|e| {
        if t.starts_with(['{', '[']) {
            format!(
                "`{s}` is not a duration: `-d` is the duration here; hey's and oha's body is \
                 `--body`, ghz's `-d` (the request as JSON) is `-D` (`--message`) in `loadlab grpc`"
            )
        } else if t.starts_with('-') {
            e
        } else {
            format!("{e}; `-d` is the duration here; hey's and oha's body is `--body`")
        }
    })
}

fn parse_gate(s: &str) -> Result<loadlab_lab::gate::Gate, String> {
    s.parse()
        .map_err(|e: loadlab_lab::gate::GateError| e.reason)
}

/// `loadlab run` arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Target URL (http:// or https://); with --targets, optional (the targets' own URLs,
    /// or this server for targets given as paths).
    #[arg(required_unless_present = "targets")]
    pub url: Option<String>,

    #[command(flatten)]
    pub load: LoadArgs,

    /// Speak HTTP/2: prior knowledge (h2c) on http://, ALPN h2 on https://. Requests are
    /// streams: --concurrency of them over --connections connections.
    #[arg(long, help_heading = "Connections")]
    pub http2: bool,
    /// Reuse connections (on) or open a new TCP connection per request (off, HTTP/1.1).
    #[arg(long, value_enum, default_value = "on", help_heading = "Connections")]
    pub keep_alive: OnOff,
    /// With --keep-alive off, which side closes each connection, and so whose socket waits
    /// 60 s in TIME_WAIT: `server` sends `Connection: close` and the server closes (wrk -H
    /// "Connection: close", oha --disable-keepalive); `client` closes from loadlab after
    /// the response, as a client without connection reuse does, holding one local port per
    /// connection for 60 s (how ab without keep-alive runs out of ephemeral ports at ~16k
    /// requests).
    #[arg(
        long,
        value_enum,
        default_value = "server",
        help_heading = "Connections"
    )]
    pub close_by: CloseByArg,
    /// HTTP/1.1 closed loop with keep-alive: write N requests back to back before reading
    /// responses. 1 to 1024.
    #[arg(long, default_value_t = 1, help_heading = "Connections")]
    pub pipeline: u32,
    /// Also re-send POST and PATCH requests that a server closing its connection gracefully
    /// never answered. A server may close a keep-alive connection after a response with
    /// `Connection: close` (nginx: every 1,000 requests) or right after a complete response;
    /// requests written behind that response were never read, and loadlab re-sends them on
    /// a new connection, charging their latency from the original intended send time
    /// (counted as `resent_unprocessed`). GET, HEAD, PUT, DELETE, OPTIONS and TRACE are
    /// always re-sent; POST and PATCH only with this flag (otherwise `connection_closed`).
    /// Over HTTP/2 every stream above the server's GOAWAY, or refused, is re-sent whatever
    /// the method: the protocol guarantees the server never processed it.
    #[arg(long, help_heading = "Connections")]
    pub retry_unprocessed: bool,
    /// WebSocket (a ws:// or wss:// URL): send each message (the body, --body) as a binary
    /// frame instead of a text frame.
    #[arg(long, help_heading = "Connections")]
    pub binary: bool,
    /// WebSocket connection load: hold --connections connections open, each sending a ping
    /// (the body as its payload, at most 125 bytes) every DURATION and timing its pong from
    /// the ping's intended send time. Sets the rate (connections ÷ DURATION) and the pool
    /// (exactly --connections).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Connections")]
    pub ping_every: Option<Duration>,
    /// WebSocket: a reply is the next data message that contains TEXT, rendered as the
    /// message is (`--body '{"id":${seq}}' --reply-contains '"id":${seq}'`: the same
    /// ${seq} and data row); other messages the server sends are not replies (a server that
    /// also pushes, or answers out of order).
    #[arg(long, value_name = "TEXT", help_heading = "Connections")]
    pub reply_contains: Option<String>,
    /// WebSocket: each reply carries the time the server sent it, as a number at this JSON
    /// pointer (`/ts`, `/data/sent`) since the Unix epoch in seconds, ms, µs or ns (told by
    /// magnitude); the delay from it to the reply's arrival is reported beside the latency
    /// (`server delay`: with server push, how stale a message is when it lands). Meaningful
    /// when both clocks are the same (one host) or synchronized.
    #[arg(long, value_name = "POINTER", help_heading = "Connections")]
    pub sent_at: Option<String>,
    /// WebSocket server push: each of --connections connections sends the body once after
    /// the upgrade (a subscribe message), and every data message the server sends is a
    /// reply whose latency is the wait for it (the first: the time to first message).
    /// Closed loop (no --rate).
    #[arg(long, help_heading = "Connections")]
    pub push: bool,
    /// Server-sent events: each of --connections connections holds one `text/event-stream`
    /// (a GET) and every event is a reply, its latency the wait for it (the first event's:
    /// the time to first event); a stream the server ends is opened again with
    /// Last-Event-ID. Closed loop (no --rate); --timeout is the longest gap between events.
    #[arg(long, help_heading = "Connections")]
    pub sse: bool,

    #[command(flatten)]
    pub request: RequestArgs,

    #[command(flatten)]
    pub traffic: TrafficArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub distributed: DistributedArgs,
}

/// `loadlab grpc` arguments.
#[derive(Args, Debug)]
pub struct GrpcArgs {
    /// Server address: HOST:PORT (plaintext HTTP/2), or http://HOST:PORT, or
    /// https://HOST:PORT (TLS with ALPN h2). ghz users: HOST:PORT is plaintext already, so
    /// ghz's `--insecure` (plaintext there) changes nothing here; `-c` is connections here,
    /// ghz's `-c` (calls in flight) is `--concurrency`; `-d` is the duration here, ghz's
    /// `-d` (inline JSON) is `-D`.
    pub addr: String,
    /// The .proto file that defines the service (compiled at run time; no protoc needed).
    /// Without it (nor --protoset), the service is asked of the server's reflection, as
    /// grpcurl and ghz do.
    #[arg(long, conflicts_with = "protoset", help_heading = "Call")]
    pub proto: Option<PathBuf>,
    /// A compiled descriptor set with its imports, in place of --proto (`protoc
    /// --include_imports --descriptor_set_out FILE`; ghz's and grpcurl's --protoset).
    #[arg(long, value_name = "FILE", help_heading = "Call")]
    pub protoset: Option<PathBuf>,
    /// Directories searched for the proto's imports (repeatable; the proto's own
    /// directory is searched last). ghz's `-i`/`--import-paths` are the same flag.
    #[arg(
        short = 'I',
        long = "import-path",
        short_alias = 'i',
        alias = "import-paths",
        requires = "proto",
        help_heading = "Call"
    )]
    pub import_paths: Vec<PathBuf>,
    /// The method: package.Service/Method, of any kind (unary, server streaming, client
    /// streaming, bidirectional).
    #[arg(long, help_heading = "Call")]
    pub call: String,
    /// A client-streaming method: the messages each call sends before it ends its side (10
    /// by default); its one reply answers them all, timed from the last one's intended send.
    /// ghz's `--stream-call-count` is the same flag.
    #[arg(long, alias = "stream-call-count", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Call")]
    pub messages_per_call: Option<u32>,
    /// A server-streaming method: open streams at --rate, each held for DURATION after its
    /// first message and then reset, instead of holding --concurrency of them. Each
    /// stream's first message is its reply, timed from its intended open; the messages
    /// after it are its gaps. The rate is in streams per second; about rate × DURATION are
    /// open at once (a dashboard opened for a while, a subscription joined and left).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, help_heading = "Call")]
    pub stream_lifetime: Option<Duration>,
    /// A server-streaming or bidirectional method: the number field of each message that
    /// says when the server sent it (`/sent_at_us`, `/meta/ts`: field names from the top;
    /// an integer or a floating-point number since the Unix epoch in s, ms, µs or ns, told
    /// by its magnitude, or a google.protobuf.Timestamp): the delay from it to the
    /// message's arrival is reported beside the latency (`server delay`: how stale a
    /// message is when it lands). Meaningful when the server's clock is this machine's, or
    /// synchronized.
    #[arg(long, value_name = "FIELD", help_heading = "Call")]
    pub sent_at: Option<String>,
    /// A bidirectional method: the number field each reply echoes from the message it
    /// answers (`/seq`: field names from the top, the same path in the request and the
    /// reply; `-D '{"seq":"${seq}"}'` makes it unique): a reply answers the message waiting
    /// on its stream with that number, not the oldest, so a server that answers out of
    /// order, or drops a message, is timed right. A reply that matches no message waiting
    /// is counted (`unmatched`) and passed over.
    #[arg(long, value_name = "FIELD", help_heading = "Call")]
    pub match_field: Option<String>,
    /// The request message as JSON (proto3 JSON mapping); its strings may hold templates
    /// (numbers as strings: `"id": "${seq}"`). ghz's `-D FILE` works too: a value that is
    /// not JSON and names a file is read from that file.
    #[arg(
        short = 'D',
        long,
        default_value = "{}",
        conflicts_with = "message_file",
        help_heading = "Call"
    )]
    pub message: String,
    /// The request message as JSON, read from a file (`--data-file`, ghz's name, is the
    /// same flag).
    #[arg(long, alias = "data-file", help_heading = "Call")]
    pub message_file: Option<PathBuf>,
    /// A data file whose rows feed `${COLUMN}` templates in the message (CSV with a header
    /// row, or JSON Lines).
    #[arg(long, value_name = "FILE", help_heading = "Call")]
    pub data: Option<PathBuf>,
    /// How calls take rows: `sequential`, `random` or `unique` (as `loadlab run`).
    #[arg(
        long,
        value_name = "ORDER",
        default_value = "sequential",
        value_parser = parse_data_order,
        requires = "data",
        help_heading = "Call"
    )]
    pub data_order: loadlab_engine::config::traffic::DataOrder,
    /// Request metadata: `key: value`, or a JSON object of string values (repeatable).
    #[arg(short = 'm', long = "metadata", help_heading = "Call")]
    pub metadata: Vec<String>,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub distributed: DistributedArgs,
}

impl LoadArgs {
    /// A workload for `url` over `transport` with these load settings (request fields at
    /// their defaults).
    pub fn to_workload(&self, url: String, transport: Transport) -> anyhow::Result<Workload> {
        let (ca_pem, client_cert) = self.tls.pems()?;
        Ok(Workload {
            url,
            load: match self.rate {
                Some(rate) => LoadModel::Open {
                    rate,
                    arrival: match self.arrival {
                        ArrivalArg::Constant => Arrival::Constant,
                        ArrivalArg::Poisson => Arrival::Poisson,
                    },
                },
                None => LoadModel::Closed,
            },
            transport,
            connections: self.connections,
            duration: self.duration,
            requests: self.requests,
            warmup: self.warmup,
            timeout: self.timeout,
            threads: self.threads,
            insecure: self.tls.insecure,
            ca_pem,
            client_cert,
            source_addrs: self.source_addrs.clone(),
            seed: self.seed,
            cpus: self.cpus.clone(),
            io: self.io,
            ..Workload::default()
        })
    }

    /// The transport flags these load settings contribute to.
    fn transport_flags(&self) -> TransportFlags {
        TransportFlags {
            http2: false,
            grpc: None,
            keep_alive: true,
            close_by: loadlab_engine::CloseBy::Server,
            pipeline: 1,
            connections: self.connections,
            max_connections: self.max_connections,
            concurrency: self.concurrency,
            retry_unprocessed: false,
            websocket: false,
            binary: false,
            ping: false,
            push: false,
            sse: false,
            reply_contains: None,
            sent_at: None,
        }
    }
}

impl RunArgs {
    /// The workload these arguments describe, and the timed replay it sends (--replay).
    pub fn to_workload(
        &self,
    ) -> anyhow::Result<(Workload, Option<loadlab_engine::replay::Replay>)> {
        let body = self.request.body()?;
        let (traffic, log) = self.traffic.traffic_and_log()?;
        let url = match &self.url {
            Some(u) => u.clone(),
            None => TrafficArgs::first_target_server(&traffic).ok_or_else(|| {
                anyhow::anyhow!("--targets: give a URL argument for targets written as paths")
            })?,
        };
        let transport = TransportFlags {
            websocket: crate::knee::is_websocket(&url),
            binary: self.binary,
            ping: self.ping_every.is_some(),
            push: self.push,
            sse: self.sse,
            reply_contains: self.reply_contains.clone(),
            sent_at: self.sent_at.clone(),
            http2: self.http2,
            keep_alive: self.keep_alive == OnOff::On,
            close_by: match self.close_by {
                CloseByArg::Server => loadlab_engine::CloseBy::Server,
                CloseByArg::Client => loadlab_engine::CloseBy::Client,
            },
            pipeline: self.pipeline,
            retry_unprocessed: self.retry_unprocessed,
            ..self.load.transport_flags()
        }
        .transport()?;
        let mut w = Workload {
            request: Request {
                method: self.request.method.clone(),
                headers: self.request.headers.clone(),
                body,
            },
            traffic,
            ..self.load.to_workload(url, transport)?
        };
        if let Some(every) = self.ping_every {
            w.hold_with_pings(every)
                .map_err(|e| crate::BadInput(e.to_string()))?;
        }
        let replay = match (&self.traffic.replay, log) {
            (Some(path), Some(loaded)) => Some(self.timed_replay(&mut w, path, &loaded)?),
            _ => None,
        };
        Ok((w, replay))
    }

    /// Makes `w` a timed replay of `loaded` (the log at `path`): open loop at the log's
    /// mean rate (times --speed), as long as the log unless -d says otherwise.
    fn timed_replay(
        &self,
        w: &mut Workload,
        path: &std::path::Path,
        loaded: &loadlab_lab::replay::Loaded,
    ) -> anyhow::Result<loadlab_engine::replay::Replay> {
        if self.load.rate.is_some() {
            anyhow::bail!(
                "--rate: --replay sends each request at the time its log made it (--speed K compresses the log's time K times); --replay-mix sends the log's mix at a rate"
            );
        }
        if self.load.requests.is_some() {
            anyhow::bail!(
                "-n/--requests: --replay sends the log's requests, as many as it has (-d cuts it short)"
            );
        }
        use loadlab_engine::config::Protocol;
        if !matches!(w.transport.protocol(), Protocol::Http1 | Protocol::Http2) {
            anyhow::bail!(
                "--replay sends HTTP requests (HTTP/1.1, or HTTP/2 with --http2): not WebSocket, server-sent events or held connections"
            );
        }
        let speed = self.traffic.speed.unwrap_or(1.0);
        let (replay, rate, span) = loadlab_lab::replay::timed(loaded, path, speed)
            .map_err(|e| anyhow::anyhow!("--replay {e}"))?;
        w.load = LoadModel::Open {
            rate,
            arrival: Arrival::Constant,
        };
        if w.duration.is_none() {
            w.duration = Some(span);
        }
        Ok(replay)
    }
}

impl GrpcArgs {
    /// The workload these arguments describe: resolves the call from the proto (every
    /// mistake in the proto, the call, the data or the metadata is reported here, before
    /// any load).
    pub fn to_workload(&self) -> anyhow::Result<Workload> {
        let data = match &self.message_file {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("--message-file {}: cannot read: {e}", p.display()))?,
            // ghz's `-D FILE` (its data file): a value that is not JSON and names a file.
            None if !self.message.trim_start().starts_with(['{', '['])
                && std::path::Path::new(&self.message).is_file() =>
            {
                std::fs::read_to_string(&self.message)
                    .map_err(|e| anyhow::anyhow!("-D {}: cannot read: {e}", self.message))?
            }
            None => self.message.clone(),
        };
        let url = grpc_url(&self.addr)?;
        let (bytes, from) = match (&self.proto, &self.protoset) {
            (Some(_), _) => (Vec::new(), String::new()),
            (None, Some(p)) => (
                std::fs::read(p)
                    .map_err(|e| anyhow::anyhow!("--protoset {}: cannot read: {e}", p.display()))?,
                format!("--protoset {}", p.display()),
            ),
            (None, None) => (
                crate::reflect::for_call(&url, &self.load.tls, &self.metadata, &self.call)?,
                "the server's reflection".to_string(),
            ),
        };
        let schema = match &self.proto {
            Some(file) => loadlab_grpc::Schema::Proto {
                file,
                include_dirs: &self.import_paths,
            },
            None => loadlab_grpc::Schema::Set {
                bytes: &bytes,
                from: &from,
            },
        };
        let reads = loadlab_grpc::Reads {
            sent_at: self.sent_at.as_deref(),
            match_field: self.match_field.as_deref(),
        };
        let mut call = GrpcCall::resolve_from(schema, &self.call, &data, &self.metadata, reads)
            .map_err(|(input, e)| match input {
                loadlab_grpc::CallInput::SentAt => anyhow::anyhow!("--sent-at {e}"),
                loadlab_grpc::CallInput::MatchField => anyhow::anyhow!("--match-field {e}"),
                _ => e.into(),
            })?;
        if let Some(n) = self.messages_per_call {
            if !call.client_streaming {
                return Err(crate::BadInput(format!(
                    "--messages-per-call {n}: `{}` is not a client-streaming method (`rpc M(stream A) returns (B)`); its calls send one message (bidirectional: the run's rate)",
                    self.call
                ))
                .into());
            }
            call.messages_per_call = n;
        }
        if let Some(d) = self.stream_lifetime {
            call.lifetime_ms = stream_lifetime_ms(d, &call, &self.call)?;
        }
        let transport = TransportFlags {
            grpc: Some(call),
            ..self.load.transport_flags()
        }
        .transport()?;
        let traffic = TrafficArgs {
            data: self.data.clone(),
            data_order: self.data_order,
            ..TrafficArgs::default()
        }
        .traffic()?;
        Ok(Workload {
            traffic,
            ..self.load.to_workload(url, transport)?
        })
    }
}

/// `--stream-lifetime`, ms, for a server-streaming `call` (named `name`); refused for
/// another kind, or below a millisecond.
pub fn stream_lifetime_ms(d: Duration, call: &GrpcCall, name: &str) -> anyhow::Result<u64> {
    let flag = format!("--stream-lifetime {}", humantime::format_duration(d));
    if !call.server_streaming || call.bidirectional || call.client_streaming {
        return Err(crate::BadInput(format!(
            "{flag}: `{name}` is not a server-streaming method (`rpc M(A) returns (stream B)`); its streams are held at --concurrency"
        ))
        .into());
    }
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Err(crate::BadInput(format!("{flag}: at least 1ms")).into());
    }
    Ok(ms)
}

/// `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT` as a URL (without a path: the
/// call gives it).
pub fn grpc_url(addr: &str) -> anyhow::Result<String> {
    let addr = addr.trim().trim_end_matches('/');
    if addr.contains("://") {
        if !(addr.starts_with("http://") || addr.starts_with("https://")) {
            anyhow::bail!("`{addr}`: give HOST:PORT, http://HOST:PORT or https://HOST:PORT");
        }
        if addr.splitn(4, '/').nth(3).is_some() {
            anyhow::bail!("`{addr}`: no path after the address (the path comes from --call)");
        }
        return Ok(format!("{addr}/"));
    }
    if !addr
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
    {
        anyhow::bail!(
            "`{addr}` is not HOST:PORT (e.g. 127.0.0.1:50051, [::1]:50051, https://example.test:443)"
        );
    }
    Ok(format!("http://{addr}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn fractions_parse_as_percentages_or_numbers() {
        assert_eq!(parse_fraction("10%"), Ok(0.1));
        assert_eq!(parse_fraction(" 2.5 % "), Ok(0.025));
        assert_eq!(parse_fraction("0.1"), Ok(0.1));
        assert_eq!(parse_fraction("0"), Ok(0.0));
        assert_eq!(parse_fraction("150%"), Ok(1.5));
        for bad in ["10", "abc", "%", "-5%", "-0.1", "NaN", ""] {
            assert!(parse_fraction(bad).is_err(), "{bad} accepted");
        }
        assert!(parse_fraction("10").unwrap_err().contains("10%"));
    }

    #[test]
    fn coordinator_flags_take_agents_or_the_remote_probe() {
        use clap::Parser;
        let knee = |args: &[&str]| {
            Cli::try_parse_from([&["loadlab", "knee", "http://10.0.0.9:8080/"], args].concat())
        };
        let Command::Knee(a) = knee(&[
            "--remote-probe",
            "--token-file",
            "t",
            "--listen",
            "10.0.0.5:7000",
            "--agent-wait",
            "1m",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert!(a.distributed.remote_probe);
        assert_eq!(a.distributed.agents, None);
        assert_eq!(a.distributed.listen.port(), 7000);
        assert!(knee(&["--agents", "2", "--remote-probe", "--token-file", "t"]).is_ok());
        // Without either, the coordinator's flags mean nothing.
        assert!(knee(&["--token-file", "t"]).is_err());
        assert!(knee(&["--listen", "0.0.0.0:1"]).is_err());
        // `loadlab probe`: exactly one target.
        let probe = |args: &[&str]| {
            Cli::try_parse_from(
                [
                    &[
                        "loadlab",
                        "probe",
                        "--coordinator",
                        "c:7878",
                        "--token-file",
                        "t",
                    ],
                    args,
                ]
                .concat(),
            )
        };
        let Command::Probe(p) = probe(&["--listen", "8080"]).unwrap().command else {
            panic!()
        };
        assert_eq!(
            (p.listen, p.dial.wait),
            (Some(8080), Duration::from_secs(600))
        );
        assert!(probe(&[]).is_err());
        assert!(probe(&["--listen", "8080", "--pid", "1"]).is_err());
    }

    #[test]
    fn grpc_takes_ghz_import_path_spellings() {
        use clap::Parser;
        let dirs = |flag: &str| {
            let argv = [
                "loadlab",
                "grpc",
                "127.0.0.1:1",
                "--proto",
                "p.proto",
                "--call",
                "a.B/C",
                flag,
                "inc",
            ];
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Grpc(g) => g.import_paths,
                _ => panic!("not grpc"),
            }
        };
        for flag in ["-I", "-i", "--import-path", "--import-paths"] {
            assert_eq!(dirs(flag), [PathBuf::from("inc")], "{flag}");
        }
    }

    #[test]
    fn max_regression_needs_a_baseline_and_compare_two_inputs() {
        use clap::Parser;
        let lab =
            |args: &[&str]| Cli::try_parse_from([&["loadlab", "lab", "p.toml"], args].concat());
        let Command::Lab(a) = lab(&["--baseline", "b", "--max-regression", "20%"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(
            (a.baseline.unwrap(), a.max_regression),
            ("b".into(), Some(0.2))
        );
        assert!(lab(&["--max-regression", "20%"]).is_err());
        assert!(Cli::try_parse_from(["loadlab", "compare", "a"]).is_err());
        let Command::Compare(c) =
            Cli::try_parse_from(["loadlab", "compare", "a", "b", "c", "--json"])
                .unwrap()
                .command
        else {
            panic!()
        };
        assert_eq!(c.inputs.len(), 3);
        assert!(c.json);
        assert_eq!(c.noise_threshold, 0.05);
    }
}
