//! The plan file as written ([`PlanFile`] and its tables): TOML, unknown keys refused.
//! Defaults shared with `loadlab run` come from the engine's workload defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A plan as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Plan name (used for the bundle directory).
    pub name: String,
    /// What the experiment shows.
    #[serde(default)]
    pub description: String,
    /// Servers to start, in order (stopped in reverse). May be empty for an external target.
    #[serde(default)]
    pub target: Vec<TargetFile>,
    /// Parameter lists; the run covers their product.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    /// Combinations of the matrix left out (every key given must match).
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, toml::Value>>,
    /// Requests to drive.
    pub scenario: Vec<ScenarioFile>,
    /// `[load]`: model, steps and connection settings, shared by every scenario.
    pub load: LoadFile,
    /// What counts as sustained.
    #[serde(default)]
    pub slo: SloFile,
    /// Overrides for `--quick`.
    #[serde(default)]
    pub quick: Option<QuickFile>,
    /// `[probe]`: what to probe instead of the targets the plan starts (a server loadlab
    /// did not start).
    #[serde(default)]
    pub probe: Option<ProbeFile>,
    /// `[tune]`: how `loadlab tune` searches the matrix.
    #[serde(default)]
    pub tune: Option<TuneFile>,
}

/// `[tune]`: what `loadlab tune` maximizes and what it may know of the knobs.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TuneFile {
    /// The scenario whose knee is maximized (default: the plan's only, or first, scenario).
    pub scenario: Option<String>,
    /// The knee search tune runs for each configuration, when `[load]` gives fixed steps
    /// (or to replace `load.knee` for tune).
    pub knee: Option<KneeFile>,
    /// Default `--budget`: a number of configurations, or a time of load ("30m").
    pub budget: Option<toml::Value>,
    /// Measured time of tune's steps, instead of `load.step_duration`.
    pub step_duration: Option<String>,
    /// `[tune.knobs] workers = { relieves = "concurrency" }`: which bottleneck each matrix
    /// parameter relieves (more of it, more room).
    #[serde(default)]
    pub knobs: BTreeMap<String, KnobFile>,
}

/// One `[tune.knobs]` entry.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KnobFile {
    /// Bottlenecks that more of this knob relieves: a name or a list of names.
    #[serde(default)]
    pub relieves: Option<toml::Value>,
}

/// `[probe]`: at most one of its keys.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeFile {
    /// Probe this process and its descendants (and its cgroup).
    pub pid: Option<u32>,
    /// Probe the process whose pid this file holds, read when the run starts (relative to
    /// the plan's directory).
    pub pidfile: Option<String>,
    /// Probe every process of this cgroup, and the cgroup's own figures: a path under a
    /// cgroup mount, or a cgroup path such as `/system.slice/app.service`.
    pub cgroup: Option<String>,
    /// Probe the cgroup of this container (docker, podman, containerd): its name or ID.
    pub container: Option<String>,
    /// Probe the process listening on this TCP port on this machine.
    pub listen: Option<u16>,
    /// `true`: probe nothing (the kernel's counters are still read).
    #[serde(default)]
    pub off: bool,
}

/// `[[target]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// Name (also gives the `{NAME_port}` placeholder).
    pub name: String,
    /// Argument list with placeholders; with `shell = true`, one string for `sh -c`.
    pub command: Vec<String>,
    /// Run through `sh -c`.
    #[serde(default)]
    pub shell: bool,
    /// Environment variables added to loadlab's own; values are templates.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the plan's directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Readiness probe, polled after start until it succeeds or `ready_timeout` passes.
    pub ready: ReadyFile,
    /// How long to wait for readiness.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: String,
    /// Grace between SIGTERM and SIGKILL.
    #[serde(default = "default_stop_grace")]
    pub stop_grace: String,
    /// Files written (after placeholder rendering) into the `{files}` directory before the
    /// target starts, e.g. a server's configuration: file name → contents.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// CPUs to pin the target (and what it starts) to, e.g. "0" (as `taskset -c`).
    pub cpus: Option<String>,
    /// An exit status meaning "cannot run on this machine" (e.g. 3 for a greeter whose
    /// io_uring is refused): exiting with it before ready marks the configuration
    /// unavailable, with the target's own explanation, instead of failed.
    pub unavailable_exit: Option<i32>,
    /// What builds the target, run once per plan before the first configuration, in the
    /// plan's directory: a program and its arguments (`["cargo", "build", "--release"]`),
    /// or with `build_shell = true` one string for `sh -c`. Kept as written (any TOML
    /// value) so that a mistake is an error naming `target[N].build`, not a parser's.
    pub build: Option<toml::Value>,
    /// Run `build` through `sh -c` (then `build` is one string, in a list).
    #[serde(default)]
    pub build_shell: bool,
    /// How long the build may take before it is stopped and the plan with it (default 30m).
    pub build_timeout: Option<String>,
}

fn default_ready_timeout() -> String {
    "30s".into()
}
fn default_stop_grace() -> String {
    "5s".into()
}

/// `ready = { http = "...", status = 200 }` or `ready = { tcp = "host:port" }`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReadyFile {
    /// GET this URL until it answers `status`.
    pub http: Option<String>,
    /// Expected status for `http`.
    #[serde(default = "default_status")]
    pub status: u16,
    /// Connect to this address until it accepts.
    pub tcp: Option<String>,
}

fn default_status() -> u16 {
    200
}

/// `[[scenario]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Name (a table per scenario in the report).
    pub name: String,
    /// `http://` or `https://` URL; placeholders are rendered per configuration.
    pub url: String,
    /// HTTP method (gRPC always sends `POST`).
    #[serde(default = "default_method")]
    pub method: String,
    /// Headers `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Request body; placeholders are rendered per configuration.
    #[serde(default)]
    pub body: String,
    /// Connection reuse; `false` opens one connection per request (HTTP/1.1 only).
    #[serde(default = "default_true")]
    pub keep_alive: bool,
    /// With keep-alive off, who closes each connection: `server` (loadlab sends
    /// `Connection: close`) or `client` (loadlab closes; its ports wait in TIME_WAIT).
    #[serde(default = "default_close_by")]
    pub close_by: String,
    /// Per-request deadline, counted from the intended send time.
    #[serde(default = "default_timeout")]
    pub timeout: String,
    /// This scenario's own rate when `load.together = true`.
    pub rate: Option<f64>,
    /// WebSocket connection load: each connection sends a ping this often and times its
    /// pong; the steps (closed model) are the connections held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_every: Option<String>,
    /// WebSocket: a reply is the next data message containing this (a template rendered
    /// with the message's `${seq}` and data row); the others are not replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_contains: Option<String>,
    /// WebSocket: a JSON pointer to the time the server sent each reply (`--sent-at`); the
    /// delay from it to the reply's arrival is reported beside the latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    /// WebSocket server push: the body is sent once per connection (a subscribe message)
    /// and each message the server sends is a reply; the steps (closed model) are the
    /// connections held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub push: bool,
    /// Stop this scenario after this many requests (per step).
    pub requests: Option<u64>,
    /// `http1` (default; `ws` for a ws:// or wss:// URL), `http2` (h2c prior knowledge, or
    /// ALPN over https), `grpc` or `ws` (WebSocket messages).
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// gRPC: the .proto file, relative to the plan's directory.
    pub proto: Option<String>,
    /// gRPC, in place of `proto`: a compiled descriptor set with its imports (`protoc
    /// --include_imports --descriptor_set_out`, or what `loadlab knee` took from the
    /// server's reflection), relative to the plan's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protoset: Option<String>,
    /// gRPC: directories searched for the proto's imports, relative to the plan's directory.
    #[serde(default)]
    pub import_paths: Vec<String>,
    /// gRPC: the method, `package.Service/Method` (of any kind: unary, server, client or
    /// bidirectional streaming).
    pub call: Option<String>,
    /// gRPC, a client-streaming method: the messages each call sends before its side ends
    /// (10 by default).
    pub messages_per_call: Option<u32>,
    /// gRPC, a bidirectional method: the number field each reply echoes from the message it
    /// answers (`/seq`), matched by it instead of by order.
    pub match_field: Option<String>,
    /// gRPC, a server-streaming method: open streams at the step's rate, each held this
    /// long (`"500ms"`, `"2s"`) and then reset, instead of holding a step's count of them
    /// (`load.model = "open"`; the rate is in streams per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_lifetime: Option<String>,
    /// gRPC: the request message as JSON (`${...}` templates inside its strings).
    pub message: Option<String>,
    /// A data file whose rows feed `${COLUMN}` templates (CSV with a header row, or JSON
    /// Lines), relative to the plan's directory.
    pub data: Option<String>,
    /// How rows are drawn: `sequential` (default; wraps around), `random` or `unique` (each
    /// row once: the run ends when they are used up).
    pub data_order: Option<String>,
    /// A vegeta-format targets file of requests, relative to the plan's directory (instead
    /// of, or besides, `[[scenario.request]]`).
    pub targets: Option<String>,
    /// How the requests are taken: `round-robin` (default: in proportion to their weights,
    /// interleaved) or `random`.
    pub request_order: Option<String>,
    /// An access log (or a HAR, or JSON Lines) relative to the plan's directory, whose
    /// requests the scenario sends in the log's proportions (docs/src/replay.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_mix: Option<String>,
    /// An access log relative to the plan's directory, replayed at the times it logged its
    /// requests (docs/src/replay.md): a step's load is then a multiple of the log's speed
    /// (`load.steps = [1, 2, 4]`, a knee `start = 1`), each step its busiest stretch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
    /// `replay_mix`'s (or `replay`'s) format: `combined`, `common`, `nginx:FORMAT`, `jsonl[:FIELD=PATH,…]`
    /// or `har` [default: told from its first line].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<String>,
    /// The methods `replay_mix` sends [default: GET and HEAD].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_methods: Vec<String>,
    /// Headers `replay_mix` drops by default (cookies, credentials) that it sends anyway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_headers: Vec<String>,
    /// Rules that name `replay_mix`'s requests by their path (`"^/static/=static"`), tried
    /// in order before the folding of identifiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub name_rules: Vec<String>,
    /// Only `replay_mix`'s requests made at or after this time (ISO 8601, the common log
    /// format's time, or seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_from: Option<String>,
    /// Only those made before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_to: Option<String>,
    /// `[[scenario.request]]`: several requests in one load, each with its name and weight.
    #[serde(default)]
    pub request: Vec<RequestFile>,
    /// A flow of user sessions (docs/src/flows.md): a flow file relative to the plan's
    /// directory, or its table inline (`[scenario.flow]`). The load then counts sessions:
    /// started per second (open loop) or users (closed loop).
    pub flow: Option<toml::Value>,
    /// gRPC: request metadata, `key: value` each.
    #[serde(default)]
    pub metadata: Vec<String>,
    /// `https://`: skip certificate checks (the report says so). Off by default: a plan
    /// verifies certificates like any client.
    #[serde(default)]
    pub insecure: bool,
    /// `https://`: a PEM file of certificates to trust besides the system's trust store (a
    /// private CA, a target's self-signed certificate), relative to the plan's directory.
    pub cacert: Option<String>,
    /// `https://`: a client certificate (PEM) for servers that require one (mTLS), relative
    /// to the plan's directory; with `key`.
    pub cert: Option<String>,
    /// The private key (PEM: PKCS#8, RSA or EC) of `cert`, relative to the plan's directory.
    pub key: Option<String>,
}

/// `[[scenario.request]]`: one request of a scenario's mix.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFile {
    /// The name its results count under [default: its method and path].
    pub name: Option<String>,
    /// Its share of the scenario's load, relative to the others' (default 1).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// HTTP method.
    #[serde(default = "default_method")]
    pub method: String,
    /// A path from `/` on the scenario's server, or a URL on it (placeholders rendered per
    /// configuration, `${...}` per request).
    pub url: String,
    /// Headers `Name: value` (besides the scenario's own, which every request sends).
    #[serde(default)]
    pub headers: Vec<String>,
    /// Body.
    #[serde(default)]
    pub body: String,
}

fn default_weight() -> u32 {
    1
}

fn default_close_by() -> String {
    "server".into()
}

fn default_protocol() -> String {
    "http1".into()
}

fn default_method() -> String {
    "GET".into()
}
fn default_true() -> bool {
    true
}
fn default_timeout() -> String {
    humantime::format_duration(loadlab_engine::config::workload::DEFAULT_TIMEOUT).to_string()
}

/// `[load]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadFile {
    /// `open` (rates) or `closed` (connection counts).
    #[serde(default = "default_model")]
    pub model: String,
    /// Fixed steps: rates (open) or connection counts (closed).
    pub steps: Option<Vec<f64>>,
    /// Knee search instead of fixed steps.
    pub knee: Option<KneeFile>,
    /// Run every scenario at the same time at its own `rate` (one step per configuration).
    #[serde(default)]
    pub together: bool,
    /// Measured duration of each step.
    #[serde(default = "default_step_duration")]
    pub step_duration: String,
    /// Warm-up before each step.
    #[serde(default = "default_zero")]
    pub warmup: String,
    /// Pause between steps.
    #[serde(default = "default_zero")]
    pub pause: String,
    /// Open loop: initial connections.
    #[serde(default = "default_connections")]
    pub connections: u64,
    /// Open loop: pool ceiling.
    pub max_connections: Option<u64>,
    /// HTTP/2 and gRPC: streams in flight (closed loop without steps: exactly; open loop:
    /// the ceiling). Closed-loop steps of an HTTP/2 or gRPC scenario are concurrencies over
    /// `connections` connections.
    pub concurrency: Option<u64>,
    /// Worker threads (default: cores).
    pub threads: Option<usize>,
    /// `constant` or `poisson`.
    #[serde(default = "default_arrival")]
    pub arrival: String,
    /// Local source addresses (as `loadlab run --source-addrs`).
    pub source_addrs: Option<String>,
    /// CPUs to pin loadlab's worker threads to, e.g. "1" (keep them off the target's).
    pub cpus: Option<String>,
    /// The I/O interface of plain HTTP/1.1 connections: `auto`, `epoll` or `uring` (as
    /// `loadlab run --io`).
    pub io: Option<String>,
}

fn default_model() -> String {
    "open".into()
}
fn default_step_duration() -> String {
    humantime::format_duration(loadlab_engine::config::workload::DEFAULT_DURATION).to_string()
}
fn default_zero() -> String {
    "0s".into()
}
fn default_connections() -> u64 {
    loadlab_engine::config::workload::DEFAULT_CONNECTIONS
}
fn default_arrival() -> String {
    "constant".into()
}

/// `knee = { ... }`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KneeFile {
    /// First rate (or connection count) tried.
    pub start: f64,
    /// Highest value tried; still sustained there, the search reports the knee as higher.
    pub max: f64,
    /// Stop bisecting when the bracket is narrower than this fraction.
    #[serde(default = "default_precision")]
    pub precision: f64,
    /// Growth factor before the first unsustained step.
    #[serde(default = "default_growth")]
    pub growth: f64,
    /// Repeats of each end of the boundary once found (0: none).
    #[serde(default = "default_confirm")]
    pub confirm: u32,
}

fn default_precision() -> f64 {
    0.05
}
fn default_growth() -> f64 {
    2.0
}
fn default_confirm() -> u32 {
    1
}

/// `[slo]`: a step is sustained when all hold.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SloFile {
    /// Highest acceptable p99 latency, ms.
    pub p99_ms: Option<f64>,
    /// Highest acceptable fraction of failed requests.
    #[serde(default = "default_error_rate")]
    pub max_error_rate: f64,
    /// Achieved at least this fraction of offered (open loop).
    #[serde(default = "default_ratio")]
    pub min_achieved_ratio: f64,
    /// The same bounds in `loadlab run --slo` syntax (`"p95<100ms"`, `"errors<0.5%"`,
    /// `"achieved>=0.95"`); each tightens the bound above it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
}

impl Default for SloFile {
    fn default() -> Self {
        SloFile {
            p99_ms: None,
            max_error_rate: default_error_rate(),
            min_achieved_ratio: default_ratio(),
            gates: Vec::new(),
        }
    }
}

fn default_error_rate() -> f64 {
    0.01
}
fn default_ratio() -> f64 {
    0.98
}

/// `[quick]`: what `--quick` changes.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QuickFile {
    /// Replaces `load.steps`.
    pub steps: Option<Vec<f64>>,
    /// Replaces `load.knee`.
    pub knee: Option<KneeFile>,
    /// Replaces `load.step_duration`.
    pub step_duration: Option<String>,
    /// Replaces `load.warmup`.
    pub warmup: Option<String>,
    /// Replaces `load.pause`.
    pub pause: Option<String>,
    /// Replaces these matrix lists.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    /// Replaces every scenario's `requests`.
    pub requests: Option<u64>,
    /// Replaces `tune.knee`.
    pub tune_knee: Option<KneeFile>,
    /// Replaces `tune.step_duration`.
    pub tune_step_duration: Option<String>,
}
