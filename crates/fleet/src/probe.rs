//! `loadlab probe`: the lab's probe of a server on another host. It runs on the server's
//! machine, dials the coordinator (retrying with backoff until it answers, as an agent
//! does), announces what it probes ([`ProbeHello`]: how the target was found, its limits,
//! its cgroup's limits), answers the coordinator's clock pings, and streams one
//! [`RemoteSample`] a second (the target's process tree, its network namespace's TCP
//! counters, its cgroup, and when the sample was taken) until the coordinator says the run
//! is over. It never listens, and never sends load.
//!
//! What it probes is resolved by the caller, before dialing, with the system crate's
//! sources (`ProcessSource::for_pid`, `for_pidfile`, `for_listener`,
//! `CgroupSource::for_path`, `for_container`), so that a target that does not exist is
//! said at once.

use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use loadlab_system::probe::ProbeSource;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::agent::{control_endpoint, error_chain, is_refusal};
use crate::clock::now_unix_ns;
use crate::proto::{
    AgentMsg, CoordMsg, JsonCodec, ProbeHello, RemoteSample, MAX_MESSAGE, SESSION_PATH,
    TOKEN_HEADER,
};

/// A sample is sent this often.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait between two attempts to reach the coordinator.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How a remote probe is run.
pub struct ProbeOptions {
    /// `HOST:PORT` of the coordinator.
    pub coordinator: String,
    /// The shared token.
    pub token: String,
    /// The probe's name (in the coordinator's log and the step's probe description).
    pub name: String,
    /// This host's name: the target's description says it was found `on host HOST via
    /// loadlab probe`.
    pub host: String,
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
    /// What is probed, resolved already. Its [`ProbeSource::info`] is sent with `, on host
    /// HOST via loadlab probe` added to how it was found (and the probe's name, when it is
    /// not the host's).
    pub source: Box<dyn ProbeSource>,
}

/// Why a remote probe stopped without the coordinator's goodbye.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The coordinator refused us (token, version, a probe too many).
    #[error("the coordinator at {coordinator} refused this probe: {message}")]
    Refused {
        /// Coordinator address.
        coordinator: String,
        /// Its reason.
        message: String,
        /// The gRPC status code.
        code: Code,
    },
    /// Nobody answered for `--wait`.
    #[error("no coordinator answered at {coordinator} for {waited:?} (last error: {last}); is `loadlab lab/knee ... --remote-probe --listen ...` running and reachable from here?")]
    GaveUp {
        /// Coordinator address.
        coordinator: String,
        /// How long we tried.
        waited: Duration,
        /// The last connection error.
        last: String,
    },
    /// The coordinator went away during the run, without its goodbye.
    #[error("lost the coordinator at {coordinator} during the run: {reason}")]
    Lost {
        /// Coordinator address.
        coordinator: String,
        /// What ended the session.
        reason: String,
    },
    /// Bad address or TLS settings.
    #[error("{0}")]
    Setup(String),
}

enum SessionError {
    Unreachable(String),
    Refused(Status),
    Lost(String),
}

/// The source, shared by the sampling thread of each session.
type SharedSource = Arc<Mutex<Box<dyn ProbeSource>>>;

/// Runs the probe until the coordinator says the run is over (`Ok` with its reason), refuses
/// it, cannot be reached for `wait`, or goes away mid-run.
pub fn run_probe(opts: ProbeOptions) -> Result<String, ProbeError> {
    let ProbeOptions {
        coordinator,
        token,
        name,
        host,
        tls_ca,
        tls_domain,
        version,
        wait,
        log,
        source,
    } = opts;
    let info = source.info().map(|mut i| {
        i.found = found_remotely(&i.found, &host, &name);
        i
    });
    let hello = ProbeHello {
        version,
        name: name.clone(),
        info,
        limits: source.limits(),
        cgroup_limits: source.cgroup_limits(),
    };
    let dial = Dial {
        endpoint: control_endpoint(&coordinator, tls_ca.as_deref(), tls_domain.as_deref())
            .map_err(ProbeError::Setup)?,
        coordinator,
        token,
        name,
        wait,
        log,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ProbeError::Setup(format!("starting the probe's runtime: {e}")))?;
    rt.block_on(dial.run(hello, Arc::new(Mutex::new(source))))
}

/// How a target was found, said from the coordinator's side: `pid 812 (gunicorn), found
/// listening on :8080, on host web-1 via loadlab probe` (and `web-1-sidecar` after it when
/// the probe's name is not the host's).
pub fn found_remotely(found: &str, host: &str, name: &str) -> String {
    if name == host {
        format!("{found}, on host {host} via loadlab probe")
    } else {
        format!("{found}, on host {host} via loadlab probe {name}")
    }
}

/// Where and how the probe dials.
struct Dial {
    endpoint: Endpoint,
    coordinator: String,
    token: String,
    name: String,
    wait: Duration,
    log: bool,
}

impl Dial {
    fn say(&self, msg: impl AsRef<str>) {
        if self.log {
            eprintln!("loadlab probe {}: {}", self.name, msg.as_ref());
        }
    }

    async fn run(&self, hello: ProbeHello, source: SharedSource) -> Result<String, ProbeError> {
        let since = Instant::now();
        let mut backoff = Duration::from_millis(100);
        let mut told_waiting = false;
        if let Some(info) = &hello.info {
            self.say(format!("probing {}", info.found));
        }
        loop {
            match self.session(&hello, &source).await {
                Ok(reason) => {
                    self.say(format!("the coordinator ended the run: {reason}"));
                    return Ok(reason);
                }
                Err(SessionError::Lost(reason)) => {
                    return Err(ProbeError::Lost {
                        coordinator: self.coordinator.clone(),
                        reason,
                    })
                }
                Err(SessionError::Refused(status)) => {
                    return Err(ProbeError::Refused {
                        coordinator: self.coordinator.clone(),
                        message: status.message().to_string(),
                        code: status.code(),
                    })
                }
                Err(SessionError::Unreachable(last)) => {
                    if since.elapsed() >= self.wait {
                        return Err(ProbeError::GaveUp {
                            coordinator: self.coordinator.clone(),
                            waited: self.wait,
                            last,
                        });
                    }
                    if !told_waiting {
                        self.say(format!(
                            "waiting for the coordinator at {} ({last}); retrying for up to {:?}",
                            self.coordinator, self.wait
                        ));
                        told_waiting = true;
                    }
                    tokio::time::sleep(backoff.min(self.wait.saturating_sub(since.elapsed())))
                        .await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// One session: the hello, then samples and pong answers until the goodbye (`Ok`).
    async fn session(
        &self,
        hello: &ProbeHello,
        source: &SharedSource,
    ) -> Result<String, SessionError> {
        let channel: Channel = self
            .endpoint
            .connect()
            .await
            .map_err(|e| SessionError::Unreachable(error_chain(&e)))?;
        let mut grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        grpc.ready()
            .await
            .map_err(|e| SessionError::Unreachable(error_chain(&e)))?;
        let (tx, rx) = mpsc::channel::<AgentMsg>(64);
        tx.send(AgentMsg::ProbeHello(Box::new(hello.clone())))
            .await
            .expect("the receiver is ours");
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        let token = MetadataValue::try_from(self.token.as_str()).map_err(|_| {
            SessionError::Refused(Status::invalid_argument(
                "the token file holds characters that cannot travel in gRPC metadata (use printable ASCII)",
            ))
        })?;
        request.metadata_mut().insert(TOKEN_HEADER, token);
        let path = http::uri::PathAndQuery::from_static(SESSION_PATH);
        let response = grpc
            .streaming(request, path, JsonCodec::<AgentMsg, CoordMsg>::default())
            .await
            .map_err(|status| {
                if is_refusal(status.code()) {
                    SessionError::Refused(status)
                } else {
                    SessionError::Unreachable(format!("{}: {}", status.code(), status.message()))
                }
            })?;
        // Accepted: from now on, losing the coordinator ends the probe.
        let mut inbound = response.into_inner();
        let sampler = Sampler::start(source.clone(), tx.clone());
        let end = loop {
            let msg = match inbound.message().await {
                Ok(Some(m)) => m,
                Ok(None) => {
                    break Err(SessionError::Lost(
                        "the coordinator closed the session".into(),
                    ))
                }
                Err(status) if is_refusal(status.code()) => {
                    break Err(SessionError::Refused(status))
                }
                Err(status) => {
                    break Err(SessionError::Lost(format!(
                        "{}: {}",
                        status.code(),
                        status.message()
                    )))
                }
            };
            match msg {
                CoordMsg::Welcome { version } => self.say(format!(
                    "joined the coordinator at {} (loadlab {version})",
                    self.coordinator
                )),
                CoordMsg::Ping { seq, t1 } => {
                    let t2 = now_unix_ns();
                    let pong = AgentMsg::Pong {
                        seq,
                        t1,
                        t2,
                        t3: now_unix_ns(),
                    };
                    if tx.send(pong).await.is_err() {
                        break Err(SessionError::Lost("the session closed".into()));
                    }
                }
                // A probe runs no load.
                CoordMsg::Start { .. } | CoordMsg::Stop { .. } => {}
                CoordMsg::Bye { reason } => break Ok(reason),
            }
        };
        sampler.stop();
        end
    }
}

/// Samples the source every [`SAMPLE_INTERVAL`] on a thread of its own (reading `/proc`
/// and the cgroup files blocks) and queues each sample for the coordinator.
struct Sampler {
    stop: std_mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(source: SharedSource, tx: mpsc::Sender<AgentMsg>) -> Sampler {
        let (stop, stopped) = std_mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loadlab-probe-sampler".into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match stopped.recv_timeout(wait) {
                        Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                    let sample = take(&source);
                    // Never wait for a slow coordinator: a sample that does not fit is
                    // left out (the next one, a second later, carries the same counters).
                    if let Err(mpsc::error::TrySendError::Closed(_)) =
                        tx.try_send(AgentMsg::Sample(Box::new(sample)))
                    {
                        return;
                    }
                    let now = Instant::now();
                    while next <= now {
                        next += SAMPLE_INTERVAL;
                    }
                }
            })
            .expect("spawn the probe's sampling thread");
        Sampler { stop, thread }
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// One sample of the source, timed at the middle of its reading (Unix ns, this host).
fn take(source: &SharedSource) -> RemoteSample {
    let mut source = source.lock().expect("probe source");
    let before = now_unix_ns();
    let s = source.sample();
    let after = now_unix_ns();
    RemoteSample {
        unix_ns: before + after.saturating_sub(before) / 2,
        process: s.process,
        kernel: s.kernel,
        cgroup: s.cgroup,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_said_with_its_host() {
        assert_eq!(
            found_remotely(
                "pid 812 (gunicorn), found listening on :8080",
                "web-1",
                "web-1"
            ),
            "pid 812 (gunicorn), found listening on :8080, on host web-1 via loadlab probe"
        );
        assert_eq!(
            found_remotely("pid 9", "web-1", "sidecar"),
            "pid 9, on host web-1 via loadlab probe sidecar"
        );
    }
}
