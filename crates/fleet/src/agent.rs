//! `loadlab agent`: dial the coordinator (retrying with backoff until it answers), announce
//! ourselves, run each step we are given with the engine (`loadlab_engine::measure`, the
//! load path of `loadlab run`), stream its seconds, return its measurement. The load stops
//! within a second when the coordinator says stop or goes away (HTTP/2 keep-alive pings
//! notice a silent peer within [`KEEPALIVE_TIMEOUT`] of [`KEEPALIVE_INTERVAL`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loadlab_engine::replay::Replay;
use loadlab_engine::{CancellationToken, RunOptions, RunShape};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};

use crate::clock::now_unix_ns;
use crate::proto::{AgentMsg, CoordMsg, Hello, JsonCodec, MAX_MESSAGE, SESSION_PATH, TOKEN_HEADER};

/// HTTP/2 pings on the control connection this often...
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_millis(250);
/// ...and a peer that does not answer within this is gone. A silent coordinator (frozen, or
/// its machine cut off) is noticed within the sum, 0.75 s, so that an agent stops its load
/// within a second (tested with SIGSTOP: 0.56 s; 0.86 s with 300 + 600 ms, too close).
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest wait between two attempts to reach the coordinator.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How an agent is run.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// `HOST:PORT` of the coordinator.
    pub coordinator: String,
    /// The shared token.
    pub token: String,
    /// The agent's name.
    pub name: String,
    /// Worker threads per step (the weight of this agent's share).
    pub threads: usize,
    /// PEM certificate(s) to trust for a coordinator with TLS; `None`: plain TCP.
    pub tls_ca: Option<Vec<u8>>,
    /// Name to expect in the coordinator's certificate [default: the host of `coordinator`].
    pub tls_domain: Option<String>,
    /// The version announced ([`crate::version`]).
    pub version: String,
    /// Give up when the coordinator has not answered for this long.
    pub wait: Duration,
    /// Print what happens on stderr.
    pub log: bool,
}

/// Why an agent stopped without the coordinator's goodbye.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The coordinator refused us (token, version, run full).
    #[error("the coordinator at {coordinator} refused this agent: {message}")]
    Refused {
        /// Coordinator address.
        coordinator: String,
        /// Its reason.
        message: String,
        /// The gRPC status code.
        code: Code,
    },
    /// Nobody answered for `--wait`.
    #[error("no coordinator answered at {coordinator} for {waited:?} (last error: {last}); is `loadlab lab/run --agents N --listen ...` running and reachable from here?")]
    GaveUp {
        /// Coordinator address.
        coordinator: String,
        /// How long we tried.
        waited: Duration,
        /// The last connection error.
        last: String,
    },
    /// Bad address or TLS settings.
    #[error("{0}")]
    Setup(String),
}

enum SessionEnd {
    Bye(String),
    Lost(String),
}

enum SessionError {
    Unreachable(String),
    Refused(Status),
}

/// Runs the agent until the coordinator says the run is over (`Ok`) or refuses it.
pub fn run_agent(opts: &AgentOptions) -> Result<String, AgentError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AgentError::Setup(format!("starting the agent's runtime: {e}")))?;
    rt.block_on(agent_loop(opts))
}

fn say(opts: &AgentOptions, msg: impl AsRef<str>) {
    if opts.log {
        eprintln!("loadlab agent {}: {}", opts.name, msg.as_ref());
    }
}

async fn agent_loop(opts: &AgentOptions) -> Result<String, AgentError> {
    let endpoint = endpoint(opts)?;
    let mut since = Instant::now();
    let mut backoff = Duration::from_millis(100);
    let mut told_waiting = false;
    loop {
        match session(opts, &endpoint).await {
            Ok(SessionEnd::Bye(reason)) => {
                say(opts, format!("the coordinator ended the run: {reason}"));
                return Ok(reason);
            }
            Ok(SessionEnd::Lost(why)) => {
                say(
                    opts,
                    format!("lost the coordinator ({why}); load stopped; reconnecting"),
                );
                since = Instant::now();
                backoff = Duration::from_millis(100);
            }
            Err(SessionError::Refused(status)) => {
                return Err(AgentError::Refused {
                    coordinator: opts.coordinator.clone(),
                    message: status.message().to_string(),
                    code: status.code(),
                });
            }
            Err(SessionError::Unreachable(last)) => {
                if since.elapsed() >= opts.wait {
                    return Err(AgentError::GaveUp {
                        coordinator: opts.coordinator.clone(),
                        waited: opts.wait,
                        last,
                    });
                }
                if !told_waiting {
                    say(
                        opts,
                        format!(
                            "waiting for the coordinator at {} ({last}); retrying for up to {:?}",
                            opts.coordinator, opts.wait
                        ),
                    );
                    told_waiting = true;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn endpoint(opts: &AgentOptions) -> Result<Endpoint, AgentError> {
    control_endpoint(
        &opts.coordinator,
        opts.tls_ca.as_deref(),
        opts.tls_domain.as_deref(),
    )
    .map_err(AgentError::Setup)
}

/// The control connection to `coordinator` (`HOST:PORT`), with TLS trusting `tls_ca` when
/// given, expecting `tls_domain` (default: the host) in the certificate. Shared by agents
/// and remote probes. Errs with a message naming the flag at fault.
pub(crate) fn control_endpoint(
    coordinator: &str,
    tls_ca: Option<&[u8]>,
    tls_domain: Option<&str>,
) -> Result<Endpoint, String> {
    let scheme = if tls_ca.is_some() { "https" } else { "http" };
    let uri = format!("{scheme}://{coordinator}");
    let mut ep = Endpoint::from_shared(uri.clone())
        .map_err(|e| format!("--coordinator {coordinator}: not a HOST:PORT ({e})"))?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    if let Some(ca) = tls_ca {
        let host = coordinator.rsplit_once(':').map_or(coordinator, |(h, _)| h);
        let domain =
            tls_domain.map_or_else(|| host.trim_matches(['[', ']']).to_string(), str::to_string);
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .domain_name(domain);
        ep = ep.tls_config(tls).map_err(|e| format!("--tls-ca: {e}"))?;
    }
    Ok(ep)
}

/// The running steps: each one's stop token and thread.
type Jobs = Arc<Mutex<HashMap<u64, (CancellationToken, Option<std::thread::JoinHandle<()>>)>>>;

async fn session(opts: &AgentOptions, endpoint: &Endpoint) -> Result<SessionEnd, SessionError> {
    let channel: Channel = endpoint
        .connect()
        .await
        .map_err(|e| SessionError::Unreachable(error_chain(&e)))?;
    let mut grpc = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    grpc.ready()
        .await
        .map_err(|e| SessionError::Unreachable(error_chain(&e)))?;
    let (tx, rx) = mpsc::channel::<AgentMsg>(1024);
    let hello = Hello {
        version: opts.version.clone(),
        name: opts.name.clone(),
        threads: opts.threads,
        cores: loadlab_engine::config::available_cores(),
    };
    tx.send(AgentMsg::Hello(hello))
        .await
        .expect("the receiver is ours");
    let mut request = tonic::Request::new(ReceiverStream::new(rx));
    let token = MetadataValue::try_from(opts.token.as_str())
        .map_err(|_| SessionError::Refused(Status::invalid_argument("the token file holds characters that cannot travel in gRPC metadata (use printable ASCII)")))?;
    request.metadata_mut().insert(TOKEN_HEADER, token);
    let path = http::uri::PathAndQuery::from_static(SESSION_PATH);
    let response = grpc
        .streaming(request, path, JsonCodec::<AgentMsg, CoordMsg>::default())
        .await
        .map_err(classify)?;
    let mut inbound = response.into_inner();
    let jobs: Jobs = Arc::default();
    let end = loop {
        let msg = match inbound.message().await {
            Ok(Some(m)) => m,
            Ok(None) => break SessionEnd::Lost("the coordinator closed the session".into()),
            Err(status) => match classify(status) {
                SessionError::Refused(s) => {
                    stop_all(&jobs);
                    return Err(SessionError::Refused(s));
                }
                SessionError::Unreachable(why) => break SessionEnd::Lost(why),
            },
        };
        match msg {
            CoordMsg::Welcome { version } => say(
                opts,
                format!(
                    "joined the coordinator at {} (loadlab {version})",
                    opts.coordinator
                ),
            ),
            CoordMsg::Ping { seq, t1 } => {
                let t2 = now_unix_ns();
                let pong = AgentMsg::Pong {
                    seq,
                    t1,
                    t2,
                    t3: now_unix_ns(),
                };
                if tx.send(pong).await.is_err() {
                    break SessionEnd::Lost("the session closed".into());
                }
            }
            CoordMsg::Start {
                job,
                workload,
                replay,
                start_at_unix_ns,
            } => start_job(
                opts,
                &jobs,
                &tx,
                job,
                (*workload, replay.map(|r| r.replay())),
                start_at_unix_ns,
            ),
            CoordMsg::Stop { job } => {
                if let Some((stop, _)) = jobs.lock().expect("jobs").get(&job) {
                    stop.cancel();
                }
            }
            CoordMsg::Bye { reason } => break SessionEnd::Bye(reason),
        }
    };
    stop_all(&jobs);
    Ok(end)
}

/// Stops every running step and waits for its threads (the engine stops within a second).
fn stop_all(jobs: &Jobs) {
    let handles: Vec<_> = jobs
        .lock()
        .expect("jobs")
        .drain()
        .map(|(_, (stop, h))| {
            stop.cancel();
            h
        })
        .collect();
    for h in handles.into_iter().flatten() {
        let _ = h.join();
    }
}

fn start_job(
    opts: &AgentOptions,
    jobs: &Jobs,
    tx: &mpsc::Sender<AgentMsg>,
    job: u64,
    (workload, replay): (loadlab_engine::Workload, Option<Replay>),
    start_at_unix_ns: u64,
) {
    let stop = CancellationToken::new();
    let failed_tx = tx.clone();
    let tx = tx.clone();
    let thread_stop = stop.clone();
    let jobs_done = jobs.clone();
    let name = opts.name.clone();
    let log = opts.log;
    let handle = std::thread::Builder::new()
        .name(format!("loadlab-agent-job-{job}"))
        .spawn(move || {
            let msg = run_share(&workload, replay, start_at_unix_ns, thread_stop, job, &tx);
            if log {
                match &msg {
                    AgentMsg::Done { measurement, .. } => eprintln!(
                        "loadlab agent {name}: step {job} done: {} responses",
                        measurement.totals.responses
                    ),
                    AgentMsg::Failed { error, .. } => {
                        eprintln!("loadlab agent {name}: step {job} failed: {error}")
                    }
                    _ => {}
                }
            }
            let _ = tx.blocking_send(msg);
            jobs_done.lock().expect("jobs").remove(&job);
        });
    match handle {
        Ok(h) => {
            jobs.lock().expect("jobs").insert(job, (stop, Some(h)));
        }
        Err(e) => {
            let _ = failed_tx.try_send(AgentMsg::Failed {
                job,
                error: format!("cannot start a thread for the step: {e}"),
            });
        }
    }
}

/// Runs one share with the engine; the message to send back.
fn run_share(
    workload: &loadlab_engine::Workload,
    replay: Option<Replay>,
    start_at_unix_ns: u64,
    stop: CancellationToken,
    job: u64,
    tx: &mpsc::Sender<AgentMsg>,
) -> AgentMsg {
    let cfg = match workload.validate() {
        Ok(c) => loadlab_engine::RunConfig { replay, ..c },
        Err(e) => {
            return AgentMsg::Failed {
                job,
                error: e.to_string(),
            }
        }
    };
    let shape = RunShape::of(&cfg);
    let mut progress = |s: &loadlab_engine::SecondStats, latency: &str| {
        // Never block the engine's collector on a slow coordinator: a second that does not
        // fit is left out of the live view (the final measurement has every second).
        let _ = tx.try_send(AgentMsg::Second {
            job,
            stats: s.clone(),
            latency: latency.to_string(),
        });
    };
    let start_at = std::time::UNIX_EPOCH + Duration::from_nanos(start_at_unix_ns);
    let opts = RunOptions {
        command: std::env::args().collect(),
        stop,
        progress: Some(&mut progress),
        start_at: Some(start_at),
    };
    match loadlab_engine::measure(&cfg, opts) {
        Ok(m) => AgentMsg::Done {
            job,
            shape,
            measurement: Box::new(m),
        },
        Err(e) => AgentMsg::Failed {
            job,
            error: e.to_string(),
        },
    }
}

/// Refusals end the agent; anything else is a connection problem to retry.
fn classify(status: Status) -> SessionError {
    if is_refusal(status.code()) {
        SessionError::Refused(status)
    } else {
        SessionError::Unreachable(format!("{}: {}", status.code(), status.message()))
    }
}

/// Whether a status from the coordinator is a refusal (token, version, run full, a
/// malformed hello), not a connection problem to retry.
pub(crate) fn is_refusal(code: Code) -> bool {
    matches!(
        code,
        Code::Unauthenticated
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::ResourceExhausted
            | Code::InvalidArgument
    )
}

/// An error and its causes in one line, each cause's words once.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        // hyper and tonic repeat their cause's words in their own message.
        let text = c.to_string();
        if !s.ends_with(&text) && !s.contains(&format!("{text}: ")) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = c.source();
    }
    s
}
