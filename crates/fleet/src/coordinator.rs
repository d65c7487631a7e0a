//! The coordinator: a gRPC server the agents dial, inside `loadlab run --agents N` and
//! `loadlab lab --agents N`. It checks each agent's token and version, measures its clock
//! offset, and for each step splits the load ([`crate::split`]), sends one start instant
//! (a few hundred ms ahead, in each agent's own clock), collects the agents' measurements
//! and merges them ([`crate::merge`]). An agent lost mid-step leaves the step marked
//! `agent lost` with what the others measured; the run goes on with the agents left, or
//! stops ([`OnAgentLoss`]).
//!
//! It also takes one remote probe (`loadlab probe` on the server's host,
//! `--remote-probe`): checked and clock-measured like an agent, it streams a sample a
//! second, which [`Coordinator::probe_source`] hands to the lab's probes as a
//! [`ProbeSource`]. A coordinator may have a probe and no agents: the load then runs on
//! the coordinator's machine ([`Coordinator::drives_load`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use loadlab_engine::env::Environment;
use loadlab_engine::records::{decode_histogram, encode_histogram};
use loadlab_engine::records::{new_histogram, INTERVAL_SIGFIG};
use loadlab_engine::replay::ReplayShare;
use loadlab_engine::result::{AgentSecond, SecondStats};
use loadlab_engine::runner::Progress;
use loadlab_engine::{CancellationToken, Measurement, RunConfig, RunResult, RunShape, Workload};
use loadlab_system::cgroup::CgroupLimits;
use loadlab_system::probe::{ProbeInfo, ProbeSource, SourceSample, TargetLimits};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Status, Streaming};

use crate::agent::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use crate::clock::{estimate, now_unix_ns, Sample};
use crate::merge::{merged_result, AgentInfo, Outcome, Part};
use crate::proto::{
    constant_time_eq, AgentMsg, CoordMsg, FleetServer, Outbound, ProbeHello, RemoteSample,
    Sessions, TOKEN_HEADER,
};
use crate::split::{share_workload, split, SplitError};

/// Pings measuring an agent's clock offset at join.
const CLOCK_PINGS: u32 = 8;
/// The start instant is this far ahead of the Start messages (plus the slowest round trip).
const START_LEAD: Duration = Duration::from_millis(400);
/// An agent with no result this long after its step should have ended is lost.
const RESULT_GRACE: Duration = Duration::from_secs(10);
/// After a stop, agents have this long to return what they measured.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// A remote probe that has sent no sample for this long is lost.
pub const PROBE_SILENCE: Duration = Duration::from_secs(3);
/// Remote probes a run can take.
pub const MAX_PROBES: usize = 1;

/// What to do when an agent is lost during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnAgentLoss {
    /// Record the step as `agent lost` and go on with the agents left.
    #[default]
    Continue,
    /// Record the step as `agent lost` and stop the run (as Ctrl-C would).
    Stop,
}

impl FromStr for OnAgentLoss {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "continue" => Ok(OnAgentLoss::Continue),
            "stop" => Ok(OnAgentLoss::Stop),
            _ => Err(format!("`{s}`: expected continue or stop")),
        }
    }
}

/// How the coordinator is run.
#[derive(Clone, Debug)]
pub struct CoordinatorOptions {
    /// Address to listen on for agents.
    pub listen: SocketAddr,
    /// The shared token.
    pub token: String,
    /// Agents to wait for (0: the load runs on this machine; then `probes` must be 1).
    pub agents: usize,
    /// Remote probes (`loadlab probe`) to wait for: 0 or 1 (one remote probe is supported
    /// per run; a second is refused at join).
    pub probes: usize,
    /// How long to wait for the agents and the probe.
    pub wait: Duration,
    /// PEM certificate chain and key: serve TLS.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    /// Policy on a lost agent.
    pub on_loss: OnAgentLoss,
    /// The run's stop token (cancelled on a lost agent under [`OnAgentLoss::Stop`]).
    pub run_stop: CancellationToken,
    /// Print joins, losses and refusals on stderr.
    pub log: bool,
    /// [`crate::version`].
    pub version: String,
}

/// Why the distributed part of a run failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The listening socket.
    #[error("cannot listen for agents on {addr}: {source} (choose another --listen address)")]
    Listen {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The TLS certificate or key.
    #[error("--tls-cert/--tls-key: {0}")]
    Tls(String),
    /// Not enough agents joined in time.
    #[error("{} of {wanted} agents joined within {waited:?}{}: start `loadlab agent --coordinator HOST:PORT --token-file FILE` on {} more machine(s) (or pods), and check that they reach {listen} and hold the same token", joined.len(), if joined.is_empty() { String::new() } else { format!(" ({})", joined.join(", ")) }, wanted - joined.len())]
    Timeout {
        /// Agents wanted.
        wanted: usize,
        /// Who joined (name and address).
        joined: Vec<String>,
        /// How long we waited.
        waited: Duration,
        /// Where we listened.
        listen: SocketAddr,
    },
    /// The remote probe did not join in time.
    #[error("the remote probe did not join within {waited:?}: start `loadlab probe --coordinator HOST:{} --token-file FILE --listen PORT` (or --pid, --pidfile, --cgroup, --container) on the server's host, and check that it reaches {listen} and holds the same token", listen.port())]
    ProbeTimeout {
        /// How long we waited.
        waited: Duration,
        /// Where we listened.
        listen: SocketAddr,
    },
    /// More remote probes asked for than a run can take.
    #[error("{0} remote probes asked for: one remote probe is supported per run")]
    TooManyProbes(usize),
    /// Neither agents nor a probe asked for.
    #[error("a coordinator needs at least one agent or the remote probe")]
    NothingToWaitFor,
    /// Stopped while waiting for agents.
    #[error("interrupted while waiting for agents ({} joined)", .0.len())]
    Interrupted(Vec<String>),
    /// Every agent is gone.
    #[error("no agent is left to run the step (every agent was lost)")]
    NoAgents,
    /// The step cannot be split over the agents.
    #[error(transparent)]
    Split(#[from] SplitError),
    /// An agent could not run its share.
    #[error("agent {agent} could not run its share of the step: {error}")]
    AgentFailed {
        /// Agent name.
        agent: String,
        /// Its error.
        error: String,
    },
    /// The agents' results do not merge (another build).
    #[error("the agents' results do not merge: {0}")]
    Merge(String),
    /// A timed replay's log could not be read to deal it out.
    #[error("the replay's log: {0}")]
    Replay(String),
}

struct AgentConn {
    id: u64,
    info: AgentInfo,
    tx: mpsc::Sender<Result<CoordMsg, Status>>,
}

enum Event {
    Second {
        job: u64,
        agent: u64,
        stats: SecondStats,
        latency: String,
    },
    Done {
        job: u64,
        agent: u64,
        shape: RunShape,
        measurement: Box<Measurement>,
    },
    Failed {
        job: u64,
        agent: u64,
        error: String,
    },
    Lost {
        agent: u64,
        why: String,
    },
}

/// The remote probe: what it said at join, and its newest sample.
struct ProbeConn {
    name: String,
    address: String,
    /// Probe clock minus coordinator clock, ns, measured at join.
    offset_ns: i64,
    info: Option<ProbeInfo>,
    limits: Option<TargetLimits>,
    cgroup_limits: Option<CgroupLimits>,
    tx: mpsc::Sender<Result<CoordMsg, Status>>,
    latest: Mutex<ProbeLatest>,
}

/// A remote probe's newest sample, and why its session ended once it has.
struct ProbeLatest {
    sample: RemoteSample,
    received: Instant,
    ended: Option<String>,
}

impl ProbeConn {
    fn who(&self) -> String {
        format!("remote probe {} ({})", self.name, self.address)
    }

    fn latest(&self) -> std::sync::MutexGuard<'_, ProbeLatest> {
        self.latest.lock().expect("probe sample")
    }

    fn ended(&self) -> bool {
        self.latest().ended.is_some()
    }
}

#[derive(Default)]
struct State {
    agents: Vec<Arc<AgentConn>>,
    /// The remote probe, once joined (kept after its session ends, to say it was lost).
    probe: Option<Arc<ProbeConn>>,
    /// A probe past the checks, still measuring its clock.
    probe_joining: bool,
    /// Sessions past the checks, still measuring their clock.
    joining: usize,
    next_id: u64,
    jobs: HashMap<u64, std_mpsc::Sender<Event>>,
    next_job: u64,
    /// The run is over: agents leaving now are not lost.
    finishing: bool,
    /// Where each agent stands in the data rows and `${seq}` of each series of steps (a
    /// plan scenario, by its traffic key): the next step goes on from there.
    resumes: HashMap<(String, u64), loadlab_engine::config::traffic::Resume>,
}

struct Shared {
    opts: CoordinatorOptions,
    /// The first step has begun: from now on a lost agent is lost to the run.
    started: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn say(&self, msg: impl AsRef<str>) {
        if self.opts.log {
            eprintln!("loadlab coordinator: {}", msg.as_ref());
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("coordinator state")
    }
}

impl Sessions for Shared {
    async fn open(
        self: Arc<Self>,
        request: tonic::Request<Streaming<AgentMsg>>,
    ) -> Result<tonic::Response<Outbound>, Status> {
        let address = request
            .remote_addr()
            .map_or_else(|| "an unknown address".to_string(), |a| a.to_string());
        let token_ok = request
            .metadata()
            .get(TOKEN_HEADER)
            .is_some_and(|v| constant_time_eq(v.as_bytes(), self.opts.token.as_bytes()));
        if !token_ok {
            self.say(format!(
                "refused an agent or probe from {address}: wrong or missing token"
            ));
            return Err(Status::unauthenticated(
                "wrong or missing token: the --token-file of the agent or probe must hold the coordinator's token",
            ));
        }
        let mut inbound = request.into_inner();
        let hello = match tokio::time::timeout(Duration::from_secs(10), inbound.message()).await {
            Ok(Ok(Some(AgentMsg::Hello(hello)))) => hello,
            Ok(Ok(Some(AgentMsg::ProbeHello(hello)))) => {
                return self.open_probe(*hello, address, inbound);
            }
            _ => {
                self.say(format!("refused an agent from {address}: no hello"));
                return Err(Status::invalid_argument(
                    "the session must begin with the agent's or the probe's hello",
                ));
            }
        };
        if hello.version != self.opts.version {
            self.say(format!(
                "refused agent {} from {address}: it runs loadlab {}, this coordinator runs loadlab {}",
                hello.name, hello.version, self.opts.version
            ));
            return Err(Status::failed_precondition(format!(
                "agent {} runs loadlab {}, but this coordinator runs loadlab {}: run the same version on both",
                hello.name, hello.version, self.opts.version
            )));
        }
        {
            let mut st = self.state();
            if self.opts.agents == 0 {
                self.say(format!(
                    "refused agent {} from {address}: this run takes no agents (its load runs here)",
                    hello.name
                ));
                return Err(Status::resource_exhausted(
                    "this run takes no agents: its load runs on the coordinator's machine (it waits for a remote probe only)",
                ));
            }
            if st.finishing || st.agents.len() + st.joining >= self.opts.agents {
                let names: Vec<String> = st.agents.iter().map(|a| a.info.name.clone()).collect();
                self.say(format!(
                    "refused agent {} from {address}: the run already has its {} agents",
                    hello.name, self.opts.agents
                ));
                return Err(Status::resource_exhausted(format!(
                    "the run already has its {} agents ({})",
                    self.opts.agents,
                    names.join(", ")
                )));
            }
            st.joining += 1;
        }
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(self.clone().session(hello, address, inbound, tx));
        let out: Outbound = Box::pin(ReceiverStream::new(rx));
        Ok(tonic::Response::new(out))
    }
}

impl Shared {
    /// The checks of a remote probe's hello (version, one probe per run); on success its
    /// session runs on a task of its own.
    fn open_probe(
        self: Arc<Self>,
        hello: ProbeHello,
        address: String,
        inbound: Streaming<AgentMsg>,
    ) -> Result<tonic::Response<Outbound>, Status> {
        if hello.version != self.opts.version {
            self.say(format!(
                "refused remote probe {} from {address}: it runs loadlab {}, this coordinator runs loadlab {}",
                hello.name, hello.version, self.opts.version
            ));
            return Err(Status::failed_precondition(format!(
                "probe {} runs loadlab {}, but this coordinator runs loadlab {}: run the same version on both",
                hello.name, hello.version, self.opts.version
            )));
        }
        {
            let mut st = self.state();
            if self.opts.probes == 0 {
                self.say(format!(
                    "refused remote probe {} from {address}: this run waits for no probe (--remote-probe not given)",
                    hello.name
                ));
                return Err(Status::resource_exhausted(
                    "this run waits for no remote probe: give the coordinator --remote-probe",
                ));
            }
            let present = st.probe.as_ref().filter(|p| !p.ended());
            if st.finishing || present.is_some() || st.probe_joining {
                let which = present.map_or_else(|| "one joining".to_string(), |p| p.who());
                self.say(format!(
                    "refused remote probe {} from {address}: the run already has its remote probe ({which}); one remote probe is supported",
                    hello.name
                ));
                return Err(Status::resource_exhausted(format!(
                    "one probe too many: the run already has its remote probe ({which}); one remote probe is supported per run"
                )));
            }
            st.probe_joining = true;
        }
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(self.clone().probe_session(hello, address, inbound, tx));
        let out: Outbound = Box::pin(ReceiverStream::new(rx));
        Ok(tonic::Response::new(out))
    }

    /// The remote probe's session after the checks: its clock (samples may arrive between
    /// the pings), its first sample, registration, then its samples until it ends.
    async fn probe_session(
        self: Arc<Self>,
        hello: ProbeHello,
        address: String,
        mut inbound: Streaming<AgentMsg>,
        tx: mpsc::Sender<Result<CoordMsg, Status>>,
    ) {
        let version = self.opts.version.clone();
        let mut samples = Vec::new();
        let mut newest: Option<RemoteSample> = None;
        let mut failure = None;
        if tx.send(Ok(CoordMsg::Welcome { version })).await.is_err() {
            failure = Some("the session closed".to_string());
        }
        // Pings, then (when none came meanwhile) the first sample: each answer within 5 s.
        let mut seq = 0;
        let mut sent_at = None;
        while failure.is_none() && (seq < CLOCK_PINGS || newest.is_none()) {
            if seq < CLOCK_PINGS && sent_at.is_none() {
                let t1 = now_unix_ns();
                if tx.send(Ok(CoordMsg::Ping { seq, t1 })).await.is_err() {
                    failure = Some("the session closed".into());
                    break;
                }
                sent_at = Some(seq);
            }
            match tokio::time::timeout(Duration::from_secs(5), inbound.message()).await {
                Ok(Ok(Some(AgentMsg::Pong { seq: s, t1, t2, t3 }))) if sent_at == Some(s) => {
                    samples.push(Sample {
                        t1,
                        t2,
                        t3,
                        t4: now_unix_ns(),
                    });
                    seq += 1;
                    sent_at = None;
                }
                Ok(Ok(Some(AgentMsg::Sample(s)))) => newest = Some(*s),
                Ok(Ok(Some(_))) => {
                    failure = Some("unexpected message while joining".into());
                }
                Err(_) if seq < CLOCK_PINGS => {
                    failure = Some("no answer to the clock probe within 5 s".into());
                }
                Err(_) => failure = Some("no sample within 5 s of joining".into()),
                Ok(Err(s)) => failure = Some(s.message().to_string()),
                Ok(Ok(None)) => failure = Some("the probe closed the session".into()),
            }
        }
        let joined = estimate(&samples).filter(|_| failure.is_none()).zip(newest);
        let Some(((offset_ns, rtt_ns), first)) = joined else {
            self.state().probe_joining = false;
            self.changed.notify_all();
            self.say(format!(
                "remote probe {} from {address} did not finish joining: {}",
                hello.name,
                failure.unwrap_or_default()
            ));
            return;
        };
        let conn = Arc::new(ProbeConn {
            name: hello.name.clone(),
            address: address.clone(),
            offset_ns,
            info: hello.info.clone(),
            limits: hello.limits.clone(),
            cgroup_limits: hello.cgroup_limits.clone(),
            tx,
            latest: Mutex::new(ProbeLatest {
                sample: first,
                received: Instant::now(),
                ended: None,
            }),
        });
        {
            let mut st = self.state();
            st.probe_joining = false;
            st.probe = Some(conn.clone());
        }
        self.say(format!(
            "remote probe {} joined from {address} (loadlab {}, probing {}, clock offset {:+.3} ms ± {:.3})",
            hello.name,
            hello.version,
            hello
                .info
                .as_ref()
                .map_or("an unnamed target", |i| i.found.as_str()),
            offset_ns as f64 / 1e6,
            rtt_ns as f64 / 2e6,
        ));
        self.changed.notify_all();
        let why = loop {
            match inbound.message().await {
                Ok(Some(AgentMsg::Sample(s))) => {
                    let mut latest = conn.latest();
                    latest.sample = *s;
                    latest.received = Instant::now();
                }
                Ok(Some(_)) => {}
                Ok(None) => break "the probe closed the session".to_string(),
                Err(s) => break format!("its connection broke ({})", s.message()),
            }
        };
        let finishing = self.state().finishing;
        conn.latest().ended = Some(if finishing {
            "the run is over".to_string()
        } else {
            why.clone()
        });
        self.changed.notify_all();
        if !finishing {
            warn(&format!("lost {}: {why}", conn.who()));
        }
    }

    /// One agent's session after the checks: clock, registration, then its messages.
    async fn session(
        self: Arc<Self>,
        hello: crate::proto::Hello,
        address: String,
        mut inbound: Streaming<AgentMsg>,
        tx: mpsc::Sender<Result<CoordMsg, Status>>,
    ) {
        let version = self.opts.version.clone();
        let mut samples = Vec::new();
        let mut failure = None;
        if tx.send(Ok(CoordMsg::Welcome { version })).await.is_err() {
            failure = Some("the session closed".to_string());
        }
        for seq in 0..CLOCK_PINGS {
            if failure.is_some() {
                break;
            }
            let t1 = now_unix_ns();
            if tx.send(Ok(CoordMsg::Ping { seq, t1 })).await.is_err() {
                failure = Some("the session closed".into());
                break;
            }
            match tokio::time::timeout(Duration::from_secs(5), inbound.message()).await {
                Ok(Ok(Some(AgentMsg::Pong { seq: s, t1, t2, t3 }))) if s == seq => {
                    samples.push(Sample {
                        t1,
                        t2,
                        t3,
                        t4: now_unix_ns(),
                    });
                }
                other => {
                    failure = Some(match other {
                        Err(_) => "no answer to the clock probe within 5 s".into(),
                        Ok(Err(s)) => s.message().to_string(),
                        Ok(Ok(None)) => "the agent closed the session".into(),
                        Ok(Ok(Some(_))) => "unexpected message during the clock probe".into(),
                    });
                }
            }
        }
        let Some((offset_ns, rtt_ns)) = estimate(&samples).filter(|_| failure.is_none()) else {
            self.state().joining -= 1;
            self.changed.notify_all();
            self.say(format!(
                "agent {} from {address} did not finish joining: {}",
                hello.name,
                failure.unwrap_or_default()
            ));
            return;
        };
        let conn = {
            let mut st = self.state();
            st.joining -= 1;
            st.next_id += 1;
            let conn = Arc::new(AgentConn {
                id: st.next_id,
                info: AgentInfo {
                    name: hello.name.clone(),
                    address: address.clone(),
                    threads: hello.threads.max(1),
                    offset_ns,
                    rtt_ns,
                },
                tx,
            });
            st.agents.push(conn.clone());
            self.say(format!(
                "agent {} joined from {address} (loadlab {}, {} thread{} on {} cores, clock offset {:+.3} ms ± {:.3}) [{} of {}]",
                hello.name,
                hello.version,
                hello.threads,
                if hello.threads == 1 { "" } else { "s" },
                hello.cores,
                offset_ns as f64 / 1e6,
                rtt_ns as f64 / 2e6,
                st.agents.len(),
                self.opts.agents
            ));
            conn
        };
        self.changed.notify_all();
        let why = loop {
            let msg = match inbound.message().await {
                Ok(Some(m)) => m,
                Ok(None) => break "the agent closed the session".to_string(),
                Err(s) => break format!("{}: {}", s.code(), s.message()),
            };
            let (job, event) = match msg {
                AgentMsg::Second {
                    job,
                    stats,
                    latency,
                } => (
                    job,
                    Event::Second {
                        job,
                        agent: conn.id,
                        stats,
                        latency,
                    },
                ),
                AgentMsg::Done {
                    job,
                    shape,
                    measurement,
                } => (
                    job,
                    Event::Done {
                        job,
                        agent: conn.id,
                        shape,
                        measurement,
                    },
                ),
                AgentMsg::Failed { job, error } => (
                    job,
                    Event::Failed {
                        job,
                        agent: conn.id,
                        error,
                    },
                ),
                AgentMsg::Hello(_)
                | AgentMsg::Pong { .. }
                | AgentMsg::ProbeHello(_)
                | AgentMsg::Sample(_) => continue,
            };
            if let Some(tx) = self.state().jobs.get(&job) {
                let _ = tx.send(event);
            }
        };
        let finishing = {
            let mut st = self.state();
            st.agents.retain(|a| a.id != conn.id);
            for tx in st.jobs.values() {
                let _ = tx.send(Event::Lost {
                    agent: conn.id,
                    why: why.clone(),
                });
            }
            st.finishing
        };
        self.changed.notify_all();
        if !finishing {
            self.say(format!("lost agent {} ({address}): {why}", hello.name));
            // Lost between steps: a step in progress says so itself (in `run_step`).
            if self.opts.on_loss == OnAgentLoss::Stop
                && self.started.load(Ordering::SeqCst)
                && !self.opts.run_stop.is_cancelled()
            {
                warn(&format!(
                    "lost agent {}: stopping the run (--on-agent-loss stop)",
                    hello.name
                ));
                self.opts.run_stop.cancel();
            }
        }
    }
}

/// The coordinator of a distributed run. Dropping it ends the run for the agents.
pub struct Coordinator {
    shared: Arc<Shared>,
    rt: Option<tokio::runtime::Runtime>,
    local_addr: SocketAddr,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    finished: AtomicBool,
}

/// Where one agent's part of a step stands.
enum Pending {
    Running,
    Ended(Outcome),
    Failed(String),
}

impl Coordinator {
    /// Listens for agents (they are accepted from now on).
    pub fn start(opts: CoordinatorOptions) -> Result<Coordinator, FleetError> {
        if opts.probes > MAX_PROBES {
            return Err(FleetError::TooManyProbes(opts.probes));
        }
        if opts.agents == 0 && opts.probes == 0 {
            return Err(FleetError::NothingToWaitFor);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("loadlab-coordinator")
            .enable_all()
            .build()
            .map_err(|e| FleetError::Listen {
                addr: opts.listen,
                source: e,
            })?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(opts.listen))
            .map_err(|e| FleetError::Listen {
                addr: opts.listen,
                source: e,
            })?;
        let local_addr = listener.local_addr().map_err(|e| FleetError::Listen {
            addr: opts.listen,
            source: e,
        })?;
        let mut builder = Server::builder()
            .tcp_nodelay(true)
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT));
        if let Some((cert, key)) = &opts.tls {
            builder = builder
                .tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
                .map_err(|e| FleetError::Tls(e.to_string()))?;
        }
        let shared = Arc::new(Shared {
            opts,
            started: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let router = builder.add_service(FleetServer::new(shared.clone()));
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let incoming = {
            let _guard = rt.enter();
            TcpListenerStream::new(listener)
        };
        rt.spawn(async move {
            let _ = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = shutdown_rx.await;
                })
                .await;
        });
        Ok(Coordinator {
            shared,
            rt: Some(rt),
            local_addr,
            shutdown: Mutex::new(Some(shutdown_tx)),
            finished: AtomicBool::new(false),
        })
    }

    /// The address agents reach us on (with the port chosen, if `--listen` said port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The agents present, in the order they joined (name and address).
    pub fn agents(&self) -> Vec<String> {
        self.shared
            .state()
            .agents
            .iter()
            .map(|a| format!("{} ({})", a.info.name, a.info.address))
            .collect()
    }

    /// Whether this coordinator drives the load from agents. Without agents (a coordinator
    /// for a remote probe only), the load runs on this machine and [`Coordinator::run_step`]
    /// must not be called.
    pub fn drives_load(&self) -> bool {
        self.shared.opts.agents > 0
    }

    /// Agents this coordinator waits for.
    pub fn agent_count(&self) -> usize {
        self.shared.opts.agents
    }

    /// The remote probe, once joined: its name and address.
    pub fn probe(&self) -> Option<String> {
        self.shared
            .state()
            .probe
            .as_ref()
            .map(|p| format!("{} ({})", p.name, p.address))
    }

    /// A fresh probe source for one step over the remote probe's stream (`None` when this
    /// coordinator waits for no probe). Its description and limits are those the probe
    /// sent at join; each sample is the newest received, timed by when it was taken on the
    /// probe's host (through the clock offset measured at join). It reports itself lost
    /// once the probe's session has ended, or when no sample came for [`PROBE_SILENCE`]:
    /// a source made after that is lost at once.
    pub fn probe_source(&self) -> Option<Box<dyn ProbeSource>> {
        if self.shared.opts.probes == 0 {
            return None;
        }
        let conn = self.shared.state().probe.clone();
        Some(Box::new(RemoteSource { conn }))
    }

    /// Waits until every agent wanted, and the remote probe when one is wanted, has joined
    /// (each is said as it joins).
    pub fn wait_for_agents(&self, stop: &CancellationToken) -> Result<(), FleetError> {
        let wanted = self.shared.opts.agents;
        let probes = self.shared.opts.probes;
        let deadline = Instant::now() + self.shared.opts.wait;
        let mut whom = Vec::new();
        if wanted > 0 {
            whom.push(format!(
                "{wanted} agent(s) (`loadlab agent --coordinator HOST:{} --token-file FILE`)",
                self.local_addr.port()
            ));
        }
        if probes > 0 {
            whom.push(format!(
                "the remote probe (`loadlab probe --coordinator HOST:{} --token-file FILE --listen PORT` on the server's host)",
                self.local_addr.port()
            ));
        }
        self.shared.say(format!(
            "waiting up to {:?} for {} on {}",
            self.shared.opts.wait,
            whom.join(" and "),
            self.local_addr,
        ));
        let mut st = self.shared.state();
        loop {
            let probe_in = probes == 0 || st.probe.as_ref().is_some_and(|p| !p.ended());
            if st.agents.len() >= wanted && probe_in {
                return Ok(());
            }
            let joined = || {
                st.agents
                    .iter()
                    .map(|a| format!("{} ({})", a.info.name, a.info.address))
                    .collect::<Vec<_>>()
            };
            if stop.is_cancelled() {
                return Err(FleetError::Interrupted(joined()));
            }
            let now = Instant::now();
            if now >= deadline {
                if st.agents.len() < wanted {
                    return Err(FleetError::Timeout {
                        wanted,
                        joined: joined(),
                        waited: self.shared.opts.wait,
                        listen: self.local_addr,
                    });
                }
                return Err(FleetError::ProbeTimeout {
                    waited: self.shared.opts.wait,
                    listen: self.local_addr,
                });
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            st = self
                .shared
                .changed
                .wait_timeout(st, slice)
                .expect("coordinator state")
                .0;
        }
    }

    /// Runs several workloads at once (a step: one per scenario) on every agent present,
    /// each split between them, all starting at the same instant; returns each merged
    /// result. `stop` ends the step early (what was measured is kept); `progress` sees the
    /// first workload's merged seconds as every agent finishes them, each with its merged
    /// latency histogram (encoded as [`encode_histogram`] does).
    pub fn run_step(
        &self,
        jobs: &[(Workload, RunConfig)],
        stop: &CancellationToken,
        mut progress: Option<&mut Progress<'_>>,
    ) -> Vec<Result<RunResult, FleetError>> {
        let all_err = |e: &dyn Fn() -> FleetError| jobs.iter().map(|_| Err(e())).collect();
        let agents: Vec<Arc<AgentConn>> = self.shared.state().agents.clone();
        if agents.is_empty() {
            return all_err(&|| FleetError::NoAgents);
        }
        self.shared.started.store(true, Ordering::SeqCst);
        let threads: Vec<usize> = agents.iter().map(|a| a.info.threads).collect();
        let mut shares = Vec::with_capacity(jobs.len());
        // A timed replay: the arrivals of the step's stretch dealt out like its rate.
        let mut replays: Vec<Vec<Option<Box<ReplayShare>>>> = Vec::with_capacity(jobs.len());
        for (_, cfg) in jobs {
            match split(cfg, &threads) {
                Ok(s) => shares.push(s),
                Err(e) => return all_err(&|| FleetError::Split(e.clone())),
            }
            let span = cfg.warmup + cfg.duration.unwrap_or_default();
            replays.push(match &cfg.replay {
                Some(r) => match r.deal(span, &threads) {
                    Ok(d) => {
                        let fits = d.iter().zip(&agents).try_for_each(|(s, a)| {
                            crate::proto::replay_fits(s, &a.info.name, crate::proto::MAX_MESSAGE)
                        });
                        if let Err(e) = fits {
                            return all_err(&|| FleetError::Replay(e.clone()));
                        }
                        d.into_iter().map(|s| Some(Box::new(s))).collect()
                    }
                    Err(e) => return all_err(&|| FleetError::Replay(e.clone())),
                },
                None => vec![None; agents.len()],
            });
        }
        let (etx, erx) = std_mpsc::channel();
        let ids: Vec<u64> = {
            let mut st = self.shared.state();
            jobs.iter()
                .map(|_| {
                    st.next_job += 1;
                    let id = st.next_job;
                    st.jobs.insert(id, etx.clone());
                    id
                })
                .collect()
        };
        drop(etx);
        let slowest = agents.iter().map(|a| a.info.rtt_ns).max().unwrap_or(0);
        let start = now_unix_ns() + START_LEAD.as_nanos() as u64 + 2 * slowest;
        let mut pending: Vec<Vec<Pending>> = jobs
            .iter()
            .map(|_| agents.iter().map(|_| Pending::Running).collect())
            .collect();
        for (j, (w, _)) in jobs.iter().enumerate() {
            for (a, agent) in agents.iter().enumerate() {
                let mut workload = share_workload(w, &shares[j][a]);
                if !w.traffic.key.is_empty() {
                    workload.traffic.resume = self
                        .shared
                        .state()
                        .resumes
                        .get(&(w.traffic.key.clone(), agent.id))
                        .copied()
                        .unwrap_or_default();
                }
                let msg = CoordMsg::Start {
                    job: ids[j],
                    workload: Box::new(workload),
                    replay: replays[j][a].take(),
                    start_at_unix_ns: (start as i128 + agent.info.offset_ns as i128).max(0) as u64,
                };
                if agent.tx.try_send(Ok(msg)).is_err() {
                    pending[j][a] = Pending::Ended(Outcome::Lost(
                        "its session ended before the step started".into(),
                    ));
                }
            }
        }
        // When each job's agents should have answered by.
        let ends: Vec<Option<u64>> = jobs
            .iter()
            .map(|(_, cfg)| {
                cfg.duration.map(|d| {
                    start + (cfg.warmup + d + cfg.timeout + RESULT_GRACE).as_nanos() as u64
                })
            })
            .collect();
        let mut stopped_at: Option<Instant> = None;
        let mut live = LiveSeconds::new(agents.iter().map(|a| a.info.name.clone()).collect());
        let index_of = |id: u64| agents.iter().position(|a| a.id == id);
        loop {
            let open = pending
                .iter()
                .any(|p| p.iter().any(|x| matches!(x, Pending::Running)));
            if !open {
                break;
            }
            let lost_any = pending.iter().any(|p| {
                p.iter()
                    .any(|x| matches!(x, Pending::Ended(Outcome::Lost(_))))
            });
            if lost_any
                && self.shared.opts.on_loss == OnAgentLoss::Stop
                && !self.shared.opts.run_stop.is_cancelled()
            {
                warn(
                    "an agent was lost during the step: stopping the run after it (--on-agent-loss stop)",
                );
                self.shared.opts.run_stop.cancel();
            }
            if stopped_at.is_none()
                && (stop.is_cancelled() || self.shared.opts.run_stop.is_cancelled())
            {
                stopped_at = Some(Instant::now());
                for (j, id) in ids.iter().enumerate() {
                    for (a, agent) in agents.iter().enumerate() {
                        if matches!(pending[j][a], Pending::Running) {
                            let _ = agent.tx.try_send(Ok(CoordMsg::Stop { job: *id }));
                        }
                    }
                }
            }
            let now = now_unix_ns();
            for (j, end) in ends.iter().enumerate() {
                let late = end.is_some_and(|e| now > e)
                    || stopped_at.is_some_and(|t| t.elapsed() > STOP_GRACE);
                if !late {
                    continue;
                }
                for (a, agent) in agents.iter().enumerate() {
                    if matches!(pending[j][a], Pending::Running) {
                        let _ = agent.tx.try_send(Ok(CoordMsg::Stop { job: ids[j] }));
                        pending[j][a] = Pending::Ended(Outcome::Lost(
                            "it returned no result in time (the step's end plus the timeout and 10 s)"
                                .into(),
                        ));
                        self.shared.say(format!(
                            "agent {} returned no result for the step in time",
                            agent.info.name
                        ));
                    }
                }
            }
            let event = match erx.recv_timeout(Duration::from_millis(50)) {
                Ok(e) => e,
                Err(std_mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let job_of = |id: u64| ids.iter().position(|&x| x == id);
            match event {
                Event::Second {
                    job,
                    agent,
                    stats,
                    latency,
                } => {
                    if let (Some(cb), Some(0), Some(a)) =
                        (progress.as_mut(), job_of(job), index_of(agent))
                    {
                        live.add(a, &stats, &latency, &mut **cb);
                    }
                }
                Event::Done {
                    job,
                    agent,
                    shape,
                    measurement,
                } => {
                    if let (Some(j), Some(a)) = (job_of(job), index_of(agent)) {
                        pending[j][a] = Pending::Ended(Outcome::Done { shape, measurement });
                    }
                }
                Event::Failed { job, agent, error } => {
                    if let (Some(j), Some(a)) = (job_of(job), index_of(agent)) {
                        pending[j][a] = Pending::Failed(error);
                    }
                }
                Event::Lost { agent, why } => {
                    if let Some(a) = index_of(agent) {
                        for p in pending.iter_mut() {
                            if matches!(p[a], Pending::Running) {
                                p[a] = Pending::Ended(Outcome::Lost(why.clone()));
                            }
                        }
                    }
                }
            }
        }
        if let Some(cb) = progress.as_mut() {
            live.finish(&mut **cb);
        }
        {
            let mut st = self.shared.state();
            for id in &ids {
                st.jobs.remove(id);
            }
        }
        let planned = |cfg: &RunConfig| start + cfg.warmup.as_nanos() as u64;
        let environment = Environment::capture(std::env::args().collect());
        {
            let mut st = self.shared.state();
            for ((w, _), p) in jobs.iter().zip(&pending) {
                if w.traffic.key.is_empty() {
                    continue;
                }
                for (outcome, agent) in p.iter().zip(&agents) {
                    if let Pending::Ended(Outcome::Done { measurement, .. }) = outcome {
                        if let Some(r) = measurement.resume {
                            st.resumes.insert((w.traffic.key.clone(), agent.id), r);
                        }
                    }
                }
            }
        }
        jobs.iter()
            .zip(pending)
            .zip(shares)
            .map(|(((_, cfg), pending), shares)| {
                let mut parts = Vec::with_capacity(agents.len());
                for ((p, agent), share) in pending.into_iter().zip(&agents).zip(shares) {
                    let outcome = match p {
                        Pending::Ended(o) => o,
                        Pending::Failed(error) => {
                            return Err(FleetError::AgentFailed {
                                agent: agent.info.name.clone(),
                                error,
                            })
                        }
                        Pending::Running => Outcome::Lost("no result".into()),
                    };
                    parts.push(Part {
                        agent: agent.info.clone(),
                        share,
                        outcome,
                    });
                }
                merged_result(
                    &RunShape::of(cfg),
                    &parts,
                    planned(cfg),
                    environment.clone(),
                )
                .map_err(FleetError::Merge)
            })
            .collect()
    }

    /// Ends the run for the agents: each is told the reason and exits. Waits (at most 2 s)
    /// for them to leave, then stops listening.
    pub fn finish(&self, reason: &str) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        let (agents, probe) = {
            let mut st = self.shared.state();
            st.finishing = true;
            (st.agents.clone(), st.probe.clone())
        };
        let bye = || CoordMsg::Bye {
            reason: reason.to_string(),
        };
        for a in &agents {
            let _ = a.tx.try_send(Ok(bye()));
        }
        if let Some(p) = &probe {
            let _ = p.tx.try_send(Ok(bye()));
        }
        drop(agents);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut st = self.shared.state();
        let probe_open = |st: &State| st.probe.as_ref().is_some_and(|p| !p.ended());
        while (!st.agents.is_empty() || probe_open(&st)) && Instant::now() < deadline {
            st = self
                .shared
                .changed
                .wait_timeout(st, Duration::from_millis(50))
                .expect("coordinator state")
                .0;
        }
        // Sessions still open end with the server.
        st.agents.clear();
        drop(st);
        if let Some(tx) = self.shutdown.lock().expect("shutdown").take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.finish("the coordinator stopped");
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// A step's view of the remote probe's stream (see [`Coordinator::probe_source`]).
struct RemoteSource {
    /// `None`: the probe never joined.
    conn: Option<Arc<ProbeConn>>,
}

impl ProbeSource for RemoteSource {
    fn info(&self) -> Option<ProbeInfo> {
        self.conn.as_ref()?.info.clone()
    }

    fn limits(&self) -> Option<TargetLimits> {
        self.conn.as_ref()?.limits.clone()
    }

    fn cgroup_limits(&self) -> Option<CgroupLimits> {
        self.conn.as_ref()?.cgroup_limits.clone()
    }

    fn sample(&mut self) -> SourceSample {
        let Some(conn) = &self.conn else {
            return SourceSample::default();
        };
        let latest = conn.latest();
        let s = &latest.sample;
        // When it was taken, in this machine's clock.
        let taken = i128::from(s.unix_ns) - i128::from(conn.offset_ns);
        let age_ns = (i128::from(now_unix_ns()) - taken).clamp(0, i128::from(u64::MAX));
        SourceSample {
            process: s.process.clone(),
            kernel: s.kernel,
            cgroup: s.cgroup.clone(),
            age: Duration::from_nanos(age_ns as u64),
        }
    }

    fn lost(&self) -> Option<String> {
        let Some(conn) = &self.conn else {
            return Some("the remote probe never joined".into());
        };
        let latest = conn.latest();
        if let Some(why) = &latest.ended {
            return Some(format!("{} is gone: {why}", conn.who()));
        }
        let silent = latest.received.elapsed();
        (silent > PROBE_SILENCE).then(|| {
            format!(
                "{} sent no sample for {:.1} s",
                conn.who(),
                silent.as_secs_f64()
            )
        })
    }
}

/// Merges the agents' live seconds: a second is shown once every agent has moved past it,
/// with each agent's own part beside the merged figures ([`SecondStats::agents`]).
struct LiveSeconds {
    names: Vec<String>,
    watermark: Vec<Option<u64>>,
    pending: BTreeMap<u64, (SecondStats, Histogram<u64>)>,
}

impl LiveSeconds {
    fn new(names: Vec<String>) -> LiveSeconds {
        LiveSeconds {
            watermark: vec![None; names.len()],
            names,
            pending: BTreeMap::new(),
        }
    }

    fn add(&mut self, agent: usize, s: &SecondStats, latency: &str, cb: &mut Progress<'_>) {
        let entry = self
            .pending
            .entry(s.second)
            .or_insert_with(|| (SecondStats::empty(s.second), new_histogram(INTERVAL_SIGFIG)));
        // A histogram of another build is left out of the live view only.
        let _ = entry.0.absorb(s);
        entry.0.agents.push(AgentSecond {
            agent: self.names[agent].clone(),
            stats: s.clone(),
            latency: latency.to_string(),
        });
        if let Ok(h) = decode_histogram(latency) {
            let _ = entry.1.add(h);
        }
        self.watermark[agent] = Some(self.watermark[agent].map_or(s.second, |w| w.max(s.second)));
        let Some(low) = self
            .watermark
            .iter()
            .copied()
            .collect::<Option<Vec<u64>>>()
            .and_then(|w| w.into_iter().min())
        else {
            return;
        };
        while let Some(e) = self.pending.first_entry() {
            if *e.key() >= low {
                break;
            }
            let (s, h) = e.remove();
            Self::show(s, &h, cb);
        }
    }

    /// The step is over: the seconds no agent moved past (the last ones) are final too.
    fn finish(&mut self, cb: &mut Progress<'_>) {
        for (_, (s, h)) in std::mem::take(&mut self.pending) {
            Self::show(s, &h, cb);
        }
    }

    fn show(mut s: SecondStats, h: &Histogram<u64>, cb: &mut Progress<'_>) {
        if !h.is_empty() {
            s.latency_p50_ms = Some(h.value_at_quantile(0.5) as f64 / 1000.0);
            s.latency_p99_ms = Some(h.value_at_quantile(0.99) as f64 / 1000.0);
        }
        cb(&s, &encode_histogram(h));
    }
}

/// What changes the run's outcome is said even when quiet.
fn warn(msg: &str) {
    eprintln!("loadlab coordinator: {msg}");
}
