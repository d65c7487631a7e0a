//! Two-stage configuration: a [`Workload`] as the user gave it (flags, a plan scenario at
//! one step, or the wire) becomes a validated [`RunConfig`]. Every error names the
//! [`Field`], the value and what is allowed.
//!
//! - [`workload`]: the [`Workload`] and its [`Transport`], with the one set of defaults.
//! - [`values`]: durations, CPU lists, source addresses and headers, each with one parser.
//! - [`traffic`]: requests that vary ([`traffic::Traffic`]): templates, data rows and a
//!   list of named requests, as described.
//! - [`validate`]: every field checked once, in [`Workload::validate`].
//! - [`error`]: the [`Field`] at fault and the [`ConfigError`] naming it.

pub mod error;
pub mod traffic;
pub mod validate;
pub mod values;
pub mod workload;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::{ConfigError, Field};
pub use loadlab_grpc::GrpcCall;
pub use values::{parse_duration, CpuList, IoMode, IoUsed, SourceAddrs};
pub use workload::{
    check_pointer, ClientCertPem, CloseBy, Request, Transport, TransportFlags, Workload,
    MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_TIMEOUT, MAX_WARMUP,
};

/// How arrivals are spaced in open loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced, `1/rate` apart.
    #[default]
    Constant,
    /// Exponentially distributed gaps (a Poisson process) with mean `1/rate`.
    Poisson,
}

/// The load model, with its rate in open loop.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LoadModel {
    /// Requests are sent on a schedule whatever the server does (tsung, JMeter, wrk2).
    Open {
        /// Offered requests per second, summed over all workers.
        rate: f64,
        /// Spacing of arrivals.
        #[serde(default)]
        arrival: Arrival,
    },
    /// Each connection sends its next request when the previous response ends (wrk, ab).
    Closed,
}

/// Open or closed loop, as results and plans name it (`"open"`, `"closed"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Requests on a schedule; steps are rates.
    Open,
    /// Each connection (or stream) waits for its response; steps are connections or streams.
    Closed,
}

/// The URL scheme, which selects the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS through rustls.
    Https,
}

/// The wire protocol of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.1: one request in flight per connection (or a pipelined batch).
    #[default]
    Http1,
    /// HTTP/2: requests multiplexed as streams over a fixed set of connections (h2c prior
    /// knowledge on plain TCP, ALPN `h2` over TLS).
    Http2,
    /// gRPC unary calls over HTTP/2; the reply's `grpc-status` decides success.
    Grpc,
    /// gRPC server-streaming calls over HTTP/2: streams held open, each message the server
    /// sends a reply (its latency the wait for it), a stream that ends opened again.
    GrpcServerStream,
    /// gRPC server-streaming calls opened at a rate (`--stream-lifetime`): each arrival
    /// opens a stream, whose first message is its reply (timed from the intended open),
    /// takes the messages that follow as gaps until its lifetime ends, and resets it.
    GrpcStreamOpens,
    /// gRPC bidirectional-streaming calls over HTTP/2: streams held open, the request
    /// message sent on them (open loop: at the rate, each stream's turn in order; closed
    /// loop: again as soon as its reply came), each message the server sends the reply to
    /// the oldest one unanswered on its stream, timed from that one's intended send.
    #[serde(rename = "grpc_bidi_stream")]
    GrpcBidi,
    /// gRPC client-streaming calls over HTTP/2: streams held open, the request message sent
    /// on them (open loop: at the rate, each stream's turn in order; closed loop: one
    /// after another), a call's side ended after its messages, and its one reply the
    /// answer to each of them, timed from the last one's intended send.
    GrpcClientStream,
    /// WebSocket (RFC 6455) messages: one in flight per connection, its reply the next
    /// data message the server sends.
    Ws,
    /// Server-sent events: streams held open, each event a reply (its latency the wait
    /// for it).
    Sse,
}

impl std::str::FromStr for Protocol {
    type Err = String;

    /// Reads the name results and plans use.
    fn from_str(s: &str) -> Result<Protocol, String> {
        // A server-streaming call is a `grpc` scenario whose method streams.
        Protocol::ALL
            .into_iter()
            .filter(|p| !p.grpc_stream())
            .find(|p| p.name() == s)
            .ok_or_else(|| "\"http1\", \"http2\", \"grpc\", \"ws\" or \"sse\"".into())
    }
}

impl std::str::FromStr for Model {
    type Err = String;

    /// Reads `open` or `closed`.
    fn from_str(s: &str) -> Result<Model, String> {
        match s {
            "open" => Ok(Model::Open),
            "closed" => Ok(Model::Closed),
            _ => Err("\"open\" or \"closed\"".into()),
        }
    }
}

impl std::str::FromStr for Arrival {
    type Err = String;

    /// Reads `constant` or `poisson`.
    fn from_str(s: &str) -> Result<Arrival, String> {
        match s {
            "constant" => Ok(Arrival::Constant),
            "poisson" => Ok(Arrival::Poisson),
            _ => Err("\"constant\" or \"poisson\"".into()),
        }
    }
}

impl Protocol {
    /// Every protocol, in the order messages list them.
    pub const ALL: [Protocol; 9] = [
        Protocol::Http1,
        Protocol::Http2,
        Protocol::Grpc,
        Protocol::GrpcServerStream,
        Protocol::GrpcStreamOpens,
        Protocol::GrpcBidi,
        Protocol::GrpcClientStream,
        Protocol::Ws,
        Protocol::Sse,
    ];

    /// The name results and plans use (`http1`, `http2`, `grpc`, `ws`, `sse`; a result's
    /// `grpc_server_stream`, `grpc_stream_opens`, `grpc_bidi_stream` and
    /// `grpc_client_stream`, which a plan
    /// writes as `grpc`: its method says it streams).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
            Protocol::Grpc => "grpc",
            Protocol::GrpcServerStream => "grpc_server_stream",
            Protocol::GrpcStreamOpens => "grpc_stream_opens",
            Protocol::GrpcBidi => "grpc_bidi_stream",
            Protocol::GrpcClientStream => "grpc_client_stream",
            Protocol::Ws => "ws",
            Protocol::Sse => "sse",
        }
    }

    /// What a summary writes after the URL (empty for HTTP/1.1).
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "",
            Protocol::Http2 => " (HTTP/2)",
            Protocol::Grpc => " (gRPC)",
            Protocol::GrpcServerStream => " (gRPC server streaming)",
            Protocol::GrpcStreamOpens => " (gRPC server streams opened at a rate)",
            Protocol::GrpcBidi => " (gRPC bidirectional streaming)",
            Protocol::GrpcClientStream => " (gRPC client streaming)",
            Protocol::Ws => " (WebSocket)",
            Protocol::Sse => " (server-sent events)",
        }
    }

    /// What the protocol's exchanges are called in summaries and reports: what is sent,
    /// what answers it, and the rate's unit. A WebSocket run sends messages and counts
    /// replies; an event stream's exchange is an event the server sends.
    pub fn units(self) -> Units {
        match self {
            Protocol::Http1 | Protocol::Http2 | Protocol::Grpc => Units {
                sent: "requests",
                replies: "responses",
                rate: "req/s",
                held: "connections",
            },
            Protocol::Ws => Units {
                sent: "messages",
                replies: "replies",
                rate: "msg/s",
                held: "open connections",
            },
            Protocol::GrpcBidi => Units {
                sent: "messages",
                replies: "replies",
                rate: "msg/s",
                held: "open streams",
            },
            // A message is answered by its call's one reply.
            Protocol::GrpcClientStream => Units {
                sent: "messages",
                replies: "answered",
                rate: "msg/s",
                held: "open streams",
            },
            Protocol::GrpcServerStream => Units {
                sent: "messages",
                replies: "messages",
                rate: "msg/s",
                held: "open streams",
            },
            // An arrival opens a stream; its first message answers it.
            Protocol::GrpcStreamOpens => Units {
                sent: "streams",
                replies: "first messages",
                rate: "streams/s",
                held: "open streams",
            },
            Protocol::Sse => Units {
                sent: "events",
                replies: "events",
                rate: "events/s",
                held: "open streams",
            },
        }
    }

    /// True for the protocols carried by HTTP/2: streams multiplexed over shared
    /// connections, rather than one exchange in flight on a connection of its own.
    pub fn multiplexed(self) -> bool {
        match self {
            Protocol::Http2
            | Protocol::Grpc
            | Protocol::GrpcServerStream
            | Protocol::GrpcStreamOpens
            | Protocol::GrpcBidi
            | Protocol::GrpcClientStream => true,
            Protocol::Http1 | Protocol::Ws | Protocol::Sse => false,
        }
    }

    /// True for the protocols io_uring can carry (`--io uring`) and whose replies are timed
    /// from the kernel's receive timestamps in open loop: one exchange in flight on a plain
    /// connection of loadlab's own, read as bytes (HTTP/1.1, and a WebSocket's frames after
    /// its upgrade). Server-sent events are held in closed loop, where io_uring was not
    /// measured better.
    pub fn byte_stream(self) -> bool {
        match self {
            Protocol::Http1 | Protocol::Ws => true,
            Protocol::Http2
            | Protocol::Grpc
            | Protocol::GrpcServerStream
            | Protocol::GrpcStreamOpens
            | Protocol::GrpcBidi
            | Protocol::GrpcClientStream
            | Protocol::Sse => false,
        }
    }

    /// True for gRPC calls of every kind.
    pub fn grpc(self) -> bool {
        self == Protocol::Grpc || self.grpc_stream()
    }

    /// True for the gRPC calls that hold a stream (server, client or bidirectional
    /// streaming): a plan writes them as `grpc`, their method says which.
    pub fn grpc_stream(self) -> bool {
        matches!(
            self,
            Protocol::GrpcServerStream
                | Protocol::GrpcStreamOpens
                | Protocol::GrpcBidi
                | Protocol::GrpcClientStream
        )
    }

    /// The protocol offered by ALPN in a TLS handshake: a WebSocket upgrades an HTTP/1.1
    /// connection (RFC 6455 §4.1).
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::Http2
            | Protocol::Grpc
            | Protocol::GrpcServerStream
            | Protocol::GrpcStreamOpens
            | Protocol::GrpcBidi
            | Protocol::GrpcClientStream => b"h2",
            Protocol::Http1 | Protocol::Ws | Protocol::Sse => b"http/1.1",
        }
    }
}

/// The words a protocol's figures are given in ([`Protocol::units`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Units {
    /// What is sent: `requests`, `messages`, `events`.
    pub sent: &'static str,
    /// What answers it: `responses`, `replies`, `events`.
    pub replies: &'static str,
    /// An open loop's rate: `req/s`, `msg/s`, `events/s`.
    pub rate: &'static str,
    /// A closed loop's load: `connections`, `open connections`, `open streams`.
    pub held: &'static str,
}

/// Where requests go.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// URL scheme: plain TCP (`http`) or TLS (`https`).
    pub scheme: Scheme,
    /// Host as written in the URL (for `Host:` and TLS SNI).
    pub host: String,
    /// Port (explicit or the scheme's default).
    pub port: u16,
    /// Path and query.
    pub path_and_query: String,
    /// Resolved addresses; connections go to the first.
    pub addrs: Vec<SocketAddr>,
    /// The URL's scheme is `ws` or `wss` (a WebSocket target).
    pub websocket: bool,
}

/// A validated run: what [`Workload::validate`] returns, defaults filled in.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Requests that vary, compiled (templates, data rows, a list of named requests);
    /// `None`: every request is the same bytes.
    pub traffic: Option<std::sync::Arc<crate::traffic::Traffic>>,
    /// Where requests go: the URL parsed, its host resolved.
    pub target: Target,
    /// Open or closed loop.
    pub model: LoadModel,
    /// The wire and its settings: the workload's [`Transport`] with its defaults filled
    /// in (`max_connections` and `concurrency` are `Some`, as [`RunConfig::max_connections`]
    /// and [`RunConfig::concurrency`]; HTTP/1.1's `retry_unprocessed` is on for idempotent
    /// methods too: it says whether an unanswered request may be re-sent).
    pub transport: Transport,
    /// Initial connections (closed loop, and HTTP/2: all of them).
    pub connections: u64,
    /// Pool ceiling (equal to `connections` in closed loop and over HTTP/2).
    pub max_connections: u64,
    /// Requests in flight: closed loop exactly this many, open loop at most. HTTP/1.1:
    /// one per connection (`connections`, or `max_connections` in open loop); HTTP/2:
    /// streams spread over the connections.
    pub concurrency: u64,
    /// Measured duration, if bounded by time.
    pub duration: Option<Duration>,
    /// Measured requests, if bounded by count.
    pub requests: Option<u64>,
    /// Load applied before measurement starts, not recorded (zero: none).
    pub warmup: Duration,
    /// Per-request deadline from intended send time.
    pub timeout: Duration,
    /// Worker threads (default: one per core); closed loop and HTTP/2: at most one per connection.
    pub threads: usize,
    /// HTTP method, upper-cased (`POST` for gRPC).
    pub method: String,
    /// Extra headers as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// Body (gRPC: the call's frame, not this, is sent).
    pub body: Vec<u8>,
    /// Skip certificate checks.
    pub insecure: bool,
    /// Certificates trusted besides the system's trust store.
    pub ca_certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The client certificate and its key (mTLS), checked to match.
    pub client_cert: Option<Arc<rustls::sign::CertifiedKey>>,
    /// Source addresses (empty: let the kernel choose).
    pub source_addrs: Vec<IpAddr>,
    /// Seed for random arrivals.
    pub seed: u64,
    /// CPUs the worker threads are pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// The I/O interface asked for (the runner resolves it: [`RunConfig::io_used`]).
    pub io: IoMode,
    /// A timed replay: every arrival at the time a log made it, its request the log's
    /// (set by the caller after validation; the open loop's rate then only says the
    /// replay's mean rate).
    pub replay: Option<crate::replay::Replay>,
}

impl RunConfig {
    /// The interface its HTTP/1.1 connections use, and why not io_uring if it was asked for
    /// and refused.
    pub fn io_used(&self) -> (IoUsed, Option<String>) {
        let plain_http1 =
            self.transport.protocol().byte_stream() && self.target.scheme == Scheme::Http;
        // A flow's sessions wake through their own timer loop, which does not pace the ring.
        let flow = self.traffic.as_ref().is_some_and(|t| t.flow.is_some());
        // A WebSocket takes io_uring only when asked (`--io uring`): it spends less CPU per
        // message (docs/src/streams.md), but against a saturated server (every connection
        // waiting for its reply) the dispatcher was woken 6 to 23 ms late in about half the
        // knee searches of a test, where epoll kept to its schedule; the cause is not found.
        let ws = self.transport.protocol() == Protocol::Ws;
        let better =
            !flow && !ws && (self.model != LoadModel::Closed || !self.transport.keep_alive());
        self.io.resolve(plain_http1, better)
    }
}

/// Number of cores available to this process.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
