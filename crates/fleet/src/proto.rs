//! The control channel: one bidirectional gRPC stream per agent or probe
//! (`/loadlab.fleet.v1.Fleet/Session`), JSON messages in gRPC frames (a tonic codec of
//! our own, so the messages are the engine's own serde types and need no `.proto`).
//!
//! An agent opens the stream with [`AgentMsg::Hello`] and its token in the
//! [`TOKEN_HEADER`] metadata. The coordinator refuses a wrong token
//! (`UNAUTHENTICATED`), another version (`FAILED_PRECONDITION`) or an agent too many
//! (`RESOURCE_EXHAUSTED`), each with a message naming the cause; otherwise it answers
//! [`CoordMsg::Welcome`], measures the clock offset with [`CoordMsg::Ping`]s, and then sends
//! [`CoordMsg::Start`] and [`CoordMsg::Stop`] for each step, and [`CoordMsg::Bye`] at the
//! end of the run.
//!
//! A remote probe (`loadlab probe`, protocol 2) opens the same stream with
//! [`AgentMsg::ProbeHello`] instead: what it probes and the target's limits. It is refused
//! as an agent is (token, version), and also when the run waits for no probe or already
//! has its one (`RESOURCE_EXHAUSTED`). It answers the same pings, then sends one
//! [`AgentMsg::Sample`] a second until [`CoordMsg::Bye`]; it is never sent a step.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut};
use loadlab_engine::replay::ReplayShare;
use loadlab_engine::{Measurement, RunShape, SecondStats, Workload};
use loadlab_system::cgroup::{CgroupLimits, CgroupSample};
use loadlab_system::probe::{KernelSample, ProbeInfo, ProcessSample, TargetLimits};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Status, Streaming};

/// Revision of the messages below; part of [`crate::version`]. 2: remote probes
/// ([`AgentMsg::ProbeHello`], [`AgentMsg::Sample`]); 3: a timed replay's share in
/// [`CoordMsg::Start`].
pub const PROTOCOL: u32 = 3;
/// The gRPC method.
pub const SESSION_PATH: &str = "/loadlab.fleet.v1.Fleet/Session";
/// The gRPC service.
pub const SERVICE: &str = "loadlab.fleet.v1.Fleet";
/// Metadata key carrying the shared token.
pub const TOKEN_HEADER: &str = "x-loadlab-token";
/// Largest message either side accepts (a step's result with its histograms is far
/// smaller; a long step's per-second histograms grow it).
pub const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// What a `Start` may carry besides its replay share (the workload, the run's settings).
const START_ROOM: usize = 16 * 1024 * 1024;

/// Whether an agent's part of a timed replay fits in the `Start` that carries it, within
/// `limit` bytes of JSON: an agent would fail to decode a larger one and be lost; it is
/// refused before the step instead, with what would make it fit.
pub fn replay_fits(share: &ReplayShare, agent: &str, limit: usize) -> Result<(), String> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, share).map_err(|e| e.to_string())?;
    let room = limit.saturating_sub(START_ROOM.min(limit / 2));
    if n.0 <= room {
        return Ok(());
    }
    Err(format!(
        "agent {agent}'s part of the step's stretch is {} requests, {:.0} MB to send, above the {:.0} MB an agent takes in one message: shorten the step (--duration), lower --speed, or add agents",
        share.kinds.len(),
        n.0 as f64 / 1e6,
        room as f64 / 1e6
    ))
}

/// What an agent says on joining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// [`crate::version`] of the agent.
    pub version: String,
    /// `--name`, or the host name.
    pub name: String,
    /// Worker threads it runs (the weight of its share).
    pub threads: usize,
    /// CPUs it may run on.
    pub cores: usize,
}

/// What a remote probe (`loadlab probe`) says on joining: who it is and what it probes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeHello {
    /// [`crate::version`] of the probe.
    pub version: String,
    /// `--name`, or the host name.
    pub name: String,
    /// What it probes and how it found it (`pid 812 (gunicorn), found listening on :8080,
    /// on host web-1 via loadlab probe`).
    pub info: Option<ProbeInfo>,
    /// What the target may use (CPUs, `nofile`), read on its host at start.
    pub limits: Option<TargetLimits>,
    /// The target's cgroup limits, read on its host at start.
    pub cgroup_limits: Option<CgroupLimits>,
}

/// One sample of a remote probe's target, taken on its host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemoteSample {
    /// When it was taken, Unix ns in the probe host's clock.
    pub unix_ns: u64,
    /// The target's processes, summed; `None` when it has none.
    pub process: Option<ProcessSample>,
    /// The kernel's TCP counters of the target's network namespace.
    pub kernel: KernelSample,
    /// The target's cgroup; `None` without one.
    pub cgroup: Option<CgroupSample>,
}

/// Agent (or probe) to coordinator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentMsg {
    /// The first message of an agent.
    Hello(Hello),
    /// The first message of a remote probe.
    ProbeHello(Box<ProbeHello>),
    /// A remote probe's sample (about one a second).
    Sample(Box<RemoteSample>),
    /// Answer to a [`CoordMsg::Ping`]: its send time, and this agent's receive and send
    /// times (Unix ns, agent clock).
    Pong {
        /// Ping number.
        seq: u32,
        /// Coordinator's send time.
        t1: u64,
        /// Agent's receive time.
        t2: u64,
        /// Agent's send time.
        t3: u64,
    },
    /// A finished second of a running step.
    Second {
        /// Step job.
        job: u64,
        /// Its counts.
        stats: SecondStats,
        /// Its latency histogram, encoded as the result format stores histograms.
        latency: String,
    },
    /// A step's measurement.
    Done {
        /// Step job.
        job: u64,
        /// The share as the agent's engine configured it.
        shape: RunShape,
        /// What it measured.
        measurement: Box<Measurement>,
    },
    /// A step the agent could not run (its share did not validate, the target did not
    /// resolve, a limit was hit).
    Failed {
        /// Step job.
        job: u64,
        /// The engine's error.
        error: String,
    },
}

/// Coordinator to agent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CoordMsg {
    /// Joined.
    Welcome {
        /// The coordinator's [`crate::version`].
        version: String,
    },
    /// Clock probe (Unix ns, coordinator clock).
    Ping {
        /// Ping number.
        seq: u32,
        /// Send time.
        t1: u64,
    },
    /// Run this share of a step, beginning at `start_at_unix_ns` in the agent's own clock.
    Start {
        /// Step job.
        job: u64,
        /// The agent's share.
        workload: Box<Workload>,
        /// A timed replay (`--replay`): the arrivals dealt to this agent, at their times.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay: Option<Box<ReplayShare>>,
        /// Start instant, agent clock.
        start_at_unix_ns: u64,
    },
    /// Stop a step now (what was measured is still returned).
    Stop {
        /// Step job.
        job: u64,
    },
    /// The run is over: the agent exits.
    Bye {
        /// Why (finished, interrupted, ...).
        reason: String,
    },
}

/// gRPC codec carrying serde types as JSON.
pub struct JsonCodec<E, D>(PhantomData<fn() -> (E, D)>);

impl<E, D> Default for JsonCodec<E, D> {
    fn default() -> Self {
        JsonCodec(PhantomData)
    }
}

/// Encoder half of [`JsonCodec`].
pub struct JsonEncoder<E>(PhantomData<fn() -> E>);
/// Decoder half of [`JsonCodec`].
pub struct JsonDecoder<D>(PhantomData<fn() -> D>);

impl<E: Serialize + Send + 'static, D: DeserializeOwned + Send + 'static> Codec
    for JsonCodec<E, D>
{
    type Encode = E;
    type Decode = D;
    type Encoder = JsonEncoder<E>;
    type Decoder = JsonDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        JsonEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        JsonDecoder(PhantomData)
    }
}

impl<E: Serialize> Encoder for JsonEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        serde_json::to_writer(buf.writer(), &item)
            .map_err(|e| Status::internal(format!("encoding a control message: {e}")))
    }
}

impl<D: DeserializeOwned> Decoder for JsonDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        if !buf.has_remaining() {
            return Ok(None);
        }
        serde_json::from_reader(buf.reader())
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("malformed control message: {e}")))
    }
}

/// The coordinator's stream of messages to one agent.
pub type Outbound = Pin<Box<dyn tokio_stream::Stream<Item = Result<CoordMsg, Status>> + Send>>;

/// What the coordinator does with a new session.
pub trait Sessions: Send + Sync + 'static {
    /// Accepts (returning the stream of messages to the agent) or refuses a session.
    fn open(
        self: Arc<Self>,
        request: tonic::Request<Streaming<AgentMsg>>,
    ) -> impl Future<Output = Result<tonic::Response<Outbound>, Status>> + Send;
}

/// The gRPC service, written out by hand (one method; no code generation).
pub struct FleetServer<S> {
    sessions: Arc<S>,
}

impl<S> FleetServer<S> {
    /// Serves `sessions`.
    pub fn new(sessions: Arc<S>) -> Self {
        FleetServer { sessions }
    }
}

impl<S> Clone for FleetServer<S> {
    fn clone(&self) -> Self {
        FleetServer {
            sessions: self.sessions.clone(),
        }
    }
}

impl<S> tonic::server::NamedService for FleetServer<S> {
    const NAME: &'static str = SERVICE;
}

struct SessionMethod<S>(Arc<S>);

impl<S: Sessions> tonic::server::StreamingService<AgentMsg> for SessionMethod<S> {
    type Response = CoordMsg;
    type ResponseStream = Outbound;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<Self::ResponseStream>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Streaming<AgentMsg>>) -> Self::Future {
        let sessions = self.0.clone();
        Box::pin(async move { sessions.open(request).await })
    }
}

impl<S, B> tower_service::Service<http::Request<B>> for FleetServer<S>
where
    S: Sessions,
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != SESSION_PATH {
            return Box::pin(async {
                let mut response = http::Response::new(tonic::body::Body::default());
                let headers = response.headers_mut();
                headers.insert(
                    Status::GRPC_STATUS,
                    (tonic::Code::Unimplemented as i32).into(),
                );
                headers.insert(
                    http::header::CONTENT_TYPE,
                    tonic::metadata::GRPC_CONTENT_TYPE,
                );
                Ok(response)
            });
        }
        let method = SessionMethod(self.sessions.clone());
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(JsonCodec::<CoordMsg, AgentMsg>::default())
                .apply_max_message_size_config(Some(MAX_MESSAGE), Some(MAX_MESSAGE));
            Ok(grpc.streaming(method, req).await)
        })
    }
}

/// Compares a presented token with the secret in time that depends on the presented
/// token's length only: neither the secret's bytes nor its length show in the timing (the
/// loop runs over `presented`, reading the secret cyclically).
pub fn constant_time_eq(presented: &[u8], secret: &[u8]) -> bool {
    let mut diff = presented.len() ^ secret.len();
    if secret.is_empty() {
        return false;
    }
    for (i, p) in presented.iter().enumerate() {
        diff |= usize::from(p ^ secret[i % secret.len()]);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(!constant_time_eq(b"x", b""));
        assert!(
            !constant_time_eq(b"", b""),
            "an empty secret matches nothing"
        );
        // A prefix repeated is not the secret.
        assert!(!constant_time_eq(b"abab", b"ab"));
    }

    #[test]
    fn probe_messages_round_trip_as_json() {
        let sample = AgentMsg::Sample(Box::new(RemoteSample {
            unix_ns: 1_700_000_000_123_456_789,
            process: Some(ProcessSample {
                processes: 3,
                cpu_user_s: 1.5,
                ..ProcessSample::default()
            }),
            kernel: KernelSample {
                listen_overflows: 7,
                ..KernelSample::default()
            },
            cgroup: None,
        }));
        let text = serde_json::to_string(&sample).unwrap();
        assert!(text.starts_with(r#"{"type":"sample""#), "{text}");
        let AgentMsg::Sample(back) = serde_json::from_str(&text).unwrap() else {
            panic!("not a sample: {text}");
        };
        assert_eq!(back.unix_ns, 1_700_000_000_123_456_789);
        assert_eq!(back.kernel.listen_overflows, 7);
        let hello = AgentMsg::ProbeHello(Box::new(ProbeHello {
            version: crate::version(),
            name: "web-1".into(),
            info: None,
            limits: Some(TargetLimits {
                cpus: 0.5,
                cpus_from: "cgroup v2 quota of 0.50 CPUs at /app".into(),
                nofile_soft: None,
            }),
            cgroup_limits: None,
        }));
        let text = serde_json::to_string(&hello).unwrap();
        let AgentMsg::ProbeHello(back) = serde_json::from_str(&text).unwrap() else {
            panic!("not a probe hello: {text}");
        };
        assert_eq!(back.limits.unwrap().cpus, 0.5);
        assert!(crate::version().ends_with("(fleet protocol 3)"));
    }

    #[test]
    fn a_replay_part_too_large_for_its_start_is_refused_with_what_would_fit_it() {
        let share = ReplayShare {
            speed: 1.0,
            gaps_ns: vec![1_000_000; 100_000],
            kinds: vec![3; 100_000],
        };
        let size = serde_json::to_vec(&share).unwrap().len();
        assert!(replay_fits(&share, "a1", MAX_MESSAGE).is_ok());
        // Against a limit it passes once the Start's own room (half of it here) is kept.
        assert!(replay_fits(&share, "a1", size * 2).is_ok());
        let e = replay_fits(&share, "a1", size * 2 - 2).unwrap_err();
        assert!(
            e.starts_with("agent a1's part of the step's stretch is 100000 requests")
                && e.contains("add agents"),
            "{e}"
        );
    }

    #[test]
    fn messages_round_trip_as_json() {
        let w = Workload {
            url: "http://10.0.0.1:8080/".into(),
            ..Workload::default()
        };
        let share = ReplayShare {
            speed: 4.0,
            gaps_ns: vec![0, 250_000_000],
            kinds: vec![1, 0],
        };
        for replay in [None, Some(Box::new(share))] {
            let m = CoordMsg::Start {
                job: 7,
                workload: Box::new(w.clone()),
                replay: replay.clone(),
                start_at_unix_ns: 1_700_000_000_000_000_000,
            };
            let text = serde_json::to_string(&m).unwrap();
            assert_eq!(text.contains("\"replay\""), replay.is_some(), "{text}");
            let CoordMsg::Start {
                job,
                workload,
                replay: back,
                start_at_unix_ns,
            } = serde_json::from_str(&text).unwrap()
            else {
                panic!("not a start: {text}");
            };
            assert_eq!(
                (job, *workload, back, start_at_unix_ns),
                (7, w.clone(), replay, 1_700_000_000_000_000_000)
            );
        }
    }
}
