//! [`Workload`]: the one description of a run that `loadlab run`, `loadlab grpc` and every
//! plan scenario become, with one set of defaults. It is serializable, so that a step can
//! travel over the wire as it is, and [`Workload::validate`] turns it into a
//! [`RunConfig`](super::RunConfig).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{value_err, ConfigError, Field};
use super::values::{duration_text, opt_duration_text, CpuList, SourceAddrs};
use super::{GrpcCall, LoadModel, Protocol};

/// Connections when none are given: closed loop exactly this many, open loop the initial
/// pool, HTTP/2 and gRPC the connections that carry the streams.
pub const DEFAULT_CONNECTIONS: u64 = 64;
/// HTTP/1.1 open loop: the pool may grow to the larger of the connections and this.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
/// HTTP/2 closed loop without a concurrency: streams per run (ghz's default is 50).
pub const DEFAULT_STREAMS: u64 = 64;
/// HTTP/2 open loop without a concurrency: the ceiling of streams in flight.
pub const DEFAULT_OPEN_STREAMS: u64 = 1024;
/// The per-request deadline when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The measured duration when neither a duration nor a request count is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

// The limits below bound the work and memory of one run, whatever number is typed. A value
// outside them is refused (exit 2) with the allowed range, before anything is sent.

/// The highest open-loop rate, requests per second (all threads, or all agents, together).
/// One generator core drives at most a few hundred thousand; a rate far above what the
/// machine can schedule still ends on time, with the arrivals it never sent counted.
pub const MAX_RATE: f64 = 10_000_000.0;
/// The most connections, pool ceiling or streams in flight one run may ask for.
pub const MAX_CONNECTIONS: u64 = 1_000_000;
/// The longest measured duration. A run with `--requests` and no duration also stops
/// after this long.
pub const MAX_DURATION: Duration = Duration::from_secs(8 * 3600);
/// The longest warm-up.
pub const MAX_WARMUP: Duration = Duration::from_secs(3600);
/// The longest per-request deadline (latency histograms hold one hour).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Which side closes a connection that is not reused (HTTP/1.1, keep-alive off), and so
/// which side's socket waits in TIME_WAIT for 60 s afterwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseBy {
    /// loadlab sends `Connection: close` and the server closes after its response: the
    /// server's socket waits in TIME_WAIT, loadlab's port is free again at once (wrk with
    /// `-H "Connection: close"`, oha `--disable-keepalive`).
    #[default]
    Server,
    /// loadlab reads the response and closes the connection itself, as a client without
    /// connection reuse does: each of loadlab's local ports waits in TIME_WAIT, and at
    /// enough new connections per second the ephemeral range runs out (document 002).
    Client,
}

impl CloseBy {
    /// The value as `--close-by` and plans spell it.
    pub fn name(self) -> &'static str {
        match self {
            CloseBy::Server => "server",
            CloseBy::Client => "client",
        }
    }
}

impl std::str::FromStr for CloseBy {
    type Err = String;

    /// Reads `server` or `client`.
    fn from_str(s: &str) -> Result<CloseBy, String> {
        match s {
            "server" => Ok(CloseBy::Server),
            "client" => Ok(CloseBy::Client),
            _ => Err("\"server\" or \"client\"".into()),
        }
    }
}

/// How requests travel: the protocol and the settings that only it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "protocol", rename_all = "snake_case", deny_unknown_fields)]
pub enum Transport {
    /// HTTP/1.1: one request in flight per connection, or a pipelined batch.
    Http1 {
        /// Reuse connections (`true`) or open one per request.
        keep_alive: bool,
        /// With keep-alive off, which side closes each connection.
        #[serde(default)]
        close_by: CloseBy,
        /// Requests written back to back before reading responses (closed loop,
        /// keep-alive); 1 is no pipelining.
        pipeline: u32,
        /// Open loop: the pool may grow up to this many connections [default: the larger
        /// of the connections and 1024].
        max_connections: Option<u64>,
        /// Also re-send POST and PATCH requests that a server closing its connection
        /// gracefully never answered (idempotent methods always are).
        retry_unprocessed: bool,
    },
    /// HTTP/2: streams multiplexed over a fixed set of kept connections (h2c prior
    /// knowledge on `http://`, ALPN `h2` on `https://`).
    Http2 {
        /// Streams in flight: closed loop exactly, open loop the ceiling [default: closed
        /// 64 or the connections if more; open 1024].
        concurrency: Option<u64>,
    },
    /// gRPC unary calls over HTTP/2; the reply's `grpc-status` decides success.
    Grpc {
        /// The call, resolved from its proto.
        call: GrpcCall,
        /// Calls in flight, as for [`Transport::Http2`].
        concurrency: Option<u64>,
    },
    /// WebSocket (RFC 6455, `ws://` and `wss://`): each connection opened with an HTTP/1.1
    /// upgrade and kept; a message is the request's body, its reply the next data message
    /// the server sends on that connection (one message in flight per connection, as an
    /// HTTP/1.1 request is).
    #[serde(rename = "ws")]
    WebSocket {
        /// Open loop: the connections may grow up to this many, as over HTTP/1.1.
        max_connections: Option<u64>,
        /// Send binary frames (`true`) or text frames.
        #[serde(default)]
        binary: bool,
        /// Connection load: each exchange is a ping frame (the body its payload) and its
        /// reply the pong, instead of a data message and the next one back.
        #[serde(default)]
        ping: bool,
        /// Server push: the body is sent once per connection after the upgrade (a
        /// subscribe message), and each data message the server sends is a reply, its
        /// latency the wait for it (closed loop: the connections are held).
        #[serde(default)]
        push: bool,
        /// A reply is the next data message that contains this text, rendered as the
        /// message is (`${seq}`, a data row's columns: the same draw); the others are not
        /// replies. `None`: the next data message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_contains: Option<String>,
        /// A JSON pointer (RFC 6901) to the time the server sent each reply, since the Unix
        /// epoch (seconds, milliseconds, microseconds or nanoseconds, told by magnitude):
        /// each reply's delay from that time to its arrival is recorded beside its latency
        /// (`server_delay_ms`). `None`: not read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_at: Option<String>,
    },
    /// Server-sent events (`text/event-stream` over HTTP/1.1): each connection holds one
    /// stream, and each exchange waits for its next event. Closed loop: the streams held
    /// are the connections.
    Sse {
        /// A JSON pointer to the time the server sent each event, in its data (as a
        /// WebSocket's `sent_at`). `None`: not read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_at: Option<String>,
    },
}

impl Default for Transport {
    fn default() -> Self {
        Transport::Http1 {
            keep_alive: true,
            close_by: CloseBy::Server,
            pipeline: 1,
            max_connections: None,
            retry_unprocessed: false,
        }
    }
}

impl Transport {
    /// The wire protocol.
    pub fn protocol(&self) -> Protocol {
        match self {
            Transport::Http1 { .. } => Protocol::Http1,
            Transport::Http2 { .. } => Protocol::Http2,
            Transport::Grpc { call, .. } if call.bidirectional => Protocol::GrpcBidi,
            Transport::Grpc { call, .. } if call.client_streaming => Protocol::GrpcClientStream,
            Transport::Grpc { call, .. } if call.server_streaming && call.lifetime_ms > 0 => {
                Protocol::GrpcStreamOpens
            }
            Transport::Grpc { call, .. } if call.server_streaming => Protocol::GrpcServerStream,
            Transport::Grpc { .. } => Protocol::Grpc,
            Transport::WebSocket { .. } => Protocol::Ws,
            Transport::Sse { .. } => Protocol::Sse,
        }
    }

    /// WebSocket and server-sent events: the JSON pointer to the time the server sent each
    /// reply; a server-streaming gRPC call: the field path to it (`--sent-at`).
    pub fn sent_at(&self) -> Option<&str> {
        match self {
            Transport::WebSocket { sent_at, .. } | Transport::Sse { sent_at } => sent_at.as_deref(),
            Transport::Grpc { call, .. } => call.sent_at.as_ref().map(|f| f.pointer.as_str()),
            _ => None,
        }
    }

    /// Whether connections are kept for the next request (always over HTTP/2).
    pub fn keep_alive(&self) -> bool {
        match self {
            Transport::Http1 { keep_alive, .. } => *keep_alive,
            Transport::Http2 { .. }
            | Transport::Grpc { .. }
            | Transport::WebSocket { .. }
            | Transport::Sse { .. } => true,
        }
    }

    /// HTTP/1.1 with keep-alive off: the side that closes each connection; `None` for
    /// kept connections.
    pub fn closes(&self) -> Option<CloseBy> {
        match self {
            Transport::Http1 {
                keep_alive: false,
                close_by,
                ..
            } => Some(*close_by),
            _ => None,
        }
    }

    /// Requests written back to back before their responses are read (1: none; always 1
    /// over HTTP/2, whose streams are concurrent instead).
    pub fn pipeline(&self) -> u32 {
        match self {
            Transport::Http1 { pipeline, .. } => *pipeline,
            Transport::Http2 { .. }
            | Transport::Grpc { .. }
            | Transport::WebSocket { .. }
            | Transport::Sse { .. } => 1,
        }
    }

    /// HTTP/1.1: whether a request the server never processed may be re-sent on another
    /// connection (see [`super::RunConfig::transport`]).
    pub fn resend_unprocessed(&self) -> bool {
        matches!(
            self,
            Transport::Http1 {
                retry_unprocessed: true,
                ..
            }
        )
    }

    /// Whether each connection keeps a schedule of its own (WebSocket connection load: a
    /// ping every interval on every connection held; a bidirectional or client-streaming
    /// gRPC call, whose messages go in turn on every stream held), rather than the arrivals
    /// going to
    /// whichever connection is free.
    pub fn held(&self) -> bool {
        match self {
            Transport::WebSocket { ping, .. } => *ping,
            Transport::Grpc { call, .. } => call.bidirectional || call.client_streaming,
            _ => false,
        }
    }

    /// Whether each request loop holds a stream the server sends on, and each exchange
    /// waits for its next message (a server-streaming gRPC call, server-sent events,
    /// WebSocket push): a loop that waits in vain is a stream starved, which the error
    /// clause weighs per stream-second ([`crate::recorder::StreamRecord`]).
    pub fn server_streams(&self) -> bool {
        match self {
            Transport::Grpc { call, .. } => call.server_streaming,
            Transport::Sse { .. } => true,
            Transport::WebSocket { push, .. } => *push,
            Transport::Http1 { .. } | Transport::Http2 { .. } => false,
        }
    }

    /// The same transport with its sizes set: the ceiling of a pool of connections that
    /// each carry one exchange (HTTP/1.1, WebSocket), or the streams in flight over shared
    /// ones (HTTP/2, gRPC). Validation fills the defaults in this way, and a distributed
    /// step gives each agent its share.
    #[must_use]
    pub fn sized(&self, max_connections: u64, concurrency: u64) -> Transport {
        let mut out = self.clone();
        match &mut out {
            Transport::Http1 {
                max_connections: m, ..
            }
            | Transport::WebSocket {
                max_connections: m, ..
            } => *m = Some(max_connections),
            Transport::Http2 { concurrency: c } | Transport::Grpc { concurrency: c, .. } => {
                *c = Some(concurrency)
            }
            // Closed loop only: exactly its connections.
            Transport::Sse { .. } => {}
        }
        out
    }

    /// Server streams opened at a rate: each one's lifetime after its first message
    /// (`--stream-lifetime`); `None` for every other transport.
    pub fn stream_lifetime(&self) -> Option<Duration> {
        self.grpc()
            .filter(|_| self.protocol() == Protocol::GrpcStreamOpens)
            .map(|c| Duration::from_millis(c.lifetime_ms))
    }

    /// The gRPC call, for gRPC.
    pub fn grpc(&self) -> Option<&GrpcCall> {
        match self {
            Transport::Grpc { call, .. } => Some(call),
            _ => None,
        }
    }
}

impl Workload {
    /// WebSocket connection load: its connections held open, each sending a ping `every`
    /// so often (the rate is the connections over `every`, the pool exactly the
    /// connections). Refused with a rate of its own or a different pool ceiling.
    pub fn hold_with_pings(&mut self, every: Duration) -> Result<(), ConfigError> {
        if every.is_zero() || every > MAX_DURATION {
            return Err(value_err(
                Field::Ping,
                humantime::format_duration(every),
                "a duration above 0 such as 1s",
            ));
        }
        if let LoadModel::Open { rate, .. } = self.load {
            return Err(value_err(
                Field::Rate,
                rate,
                "not with --ping-every: the rate is --connections pings every interval",
            ));
        }
        if let Some(n) = self.requests {
            return Err(value_err(
                Field::Requests,
                n,
                "not with --ping-every: connections held for a duration (--duration)",
            ));
        }
        let Transport::WebSocket {
            max_connections, ..
        } = &mut self.transport
        else {
            return Err(value_err(
                Field::Ping,
                humantime::format_duration(every),
                "only for a WebSocket target (a ws:// or wss:// URL)",
            ));
        };
        if let Some(m) = max_connections.filter(|&m| m != self.connections) {
            return Err(value_err(
                Field::MaxConnections,
                m,
                "with --ping-every the pool is exactly --connections",
            ));
        }
        *max_connections = Some(self.connections);
        self.load = LoadModel::Open {
            rate: self.connections as f64 / every.as_secs_f64(),
            arrival: super::Arrival::Constant,
        };
        Ok(())
    }
}

/// The request sent, before validation (the method is upper-cased and headers split then).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Request {
    /// HTTP method (`POST` for gRPC, whatever is given).
    pub method: String,
    /// Extra headers, each `Name: value`.
    pub headers: Vec<String>,
    /// Body (gRPC: the call's frame is sent instead).
    pub body: Vec<u8>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// A run as the user described it (flags, or a plan scenario at one step), before
/// validation. Every field has the default `loadlab run` documents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Workload {
    /// Target URL (`http://` or `https://`; for gRPC the call's path replaces its path).
    pub url: String,
    /// Open loop at a rate, or closed loop.
    pub load: LoadModel,
    /// Protocol and its settings.
    pub transport: Transport,
    /// Closed loop: exactly this many connections. Open loop: the initial pool. HTTP/2:
    /// the connections that carry the streams.
    pub connections: u64,
    /// Measured duration; with `requests`, whichever ends first [default: 10 s unless
    /// `requests` is given].
    #[serde(with = "opt_duration_text")]
    pub duration: Option<Duration>,
    /// Measured request count; with `duration`, whichever ends first.
    pub requests: Option<u64>,
    /// Load applied before measurement starts, not recorded.
    #[serde(with = "duration_text")]
    pub warmup: Duration,
    /// Per-request deadline, counted from the intended send time.
    #[serde(with = "duration_text")]
    pub timeout: Duration,
    /// Worker threads [default: one per core].
    pub threads: Option<usize>,
    /// What is sent.
    pub request: Request,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// Certificates (PEM) trusted besides the system's trust store, e.g. a private CA's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// A client certificate and its key, for servers that ask for one (mTLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<ClientCertPem>,
    /// Local source addresses for new connections.
    pub source_addrs: Option<SourceAddrs>,
    /// Seed for Poisson arrivals [default: random].
    pub seed: Option<u64>,
    /// CPUs to pin the worker threads to (worker i takes the i-th).
    pub cpus: Option<CpuList>,
    /// The I/O interface of plain HTTP/1.1 connections.
    #[serde(default, skip_serializing_if = "is_auto")]
    pub io: super::IoMode,
    /// Requests that vary: templates, a data file, a list of named requests.
    #[serde(skip_serializing_if = "super::traffic::Traffic::is_default")]
    pub traffic: super::traffic::Traffic,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            url: String::new(),
            load: LoadModel::Closed,
            transport: Transport::default(),
            connections: DEFAULT_CONNECTIONS,
            duration: None,
            requests: None,
            warmup: Duration::ZERO,
            timeout: DEFAULT_TIMEOUT,
            threads: None,
            request: Request::default(),
            insecure: false,
            ca_pem: None,
            client_cert: None,
            source_addrs: None,
            seed: None,
            cpus: None,
            io: super::IoMode::Auto,
            traffic: super::traffic::Traffic::default(),
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` lends a reference
fn is_auto(io: &super::IoMode) -> bool {
    *io == super::IoMode::Auto
}

/// A client certificate (mTLS) as the user gave it: the PEM texts of `--cert` and `--key`
/// (a plan's `cert` and `key`), with the files they came from so that a mistake names them.
/// It travels to agents with the workload; its `Debug` leaves out the key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientCertPem {
    /// Where the certificate came from, as the user wrote it (for messages).
    pub cert_file: String,
    /// The certificate (PEM), followed by any intermediates it needs.
    pub cert_pem: String,
    /// Where the key came from, as the user wrote it (for messages).
    pub key_file: String,
    /// The certificate's private key (PEM: PKCS#8, RSA or EC).
    pub key_pem: String,
}

impl std::fmt::Debug for ClientCertPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertPem")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

/// The connection flags of `loadlab run` and `loadlab grpc`, which together choose a
/// [`Transport`]; combinations a transport cannot have are refused here, naming the flag.
#[derive(Clone, Debug)]
pub struct TransportFlags {
    /// `--http2`.
    pub http2: bool,
    /// The resolved call of `loadlab grpc`.
    pub grpc: Option<GrpcCall>,
    /// `--keep-alive on|off`.
    pub keep_alive: bool,
    /// `--close-by server|client`.
    pub close_by: CloseBy,
    /// `--pipeline`.
    pub pipeline: u32,
    /// `--connections` (HTTP/2 refuses a different `--max-connections`).
    pub connections: u64,
    /// `--max-connections`.
    pub max_connections: Option<u64>,
    /// `--concurrency`.
    pub concurrency: Option<u64>,
    /// `--retry-unprocessed`.
    pub retry_unprocessed: bool,
    /// The URL is `ws://` or `wss://`: WebSocket messages.
    pub websocket: bool,
    /// `--binary`: WebSocket messages go as binary frames.
    pub binary: bool,
    /// `--ping-every`: WebSocket connection load, pings and their pongs.
    pub ping: bool,
    /// `--push`: WebSocket server push after a subscribe message.
    pub push: bool,
    /// `--sse`: server-sent event streams.
    pub sse: bool,
    /// `--reply-contains`: what a WebSocket reply must contain.
    pub reply_contains: Option<String>,
    /// `--sent-at`: where a WebSocket reply says when the server sent it.
    pub sent_at: Option<String>,
}

impl TransportFlags {
    /// The transport these flags describe.
    pub fn transport(self) -> Result<Transport, ConfigError> {
        let (multiplexed, what) = match (&self.grpc, self.http2) {
            (Some(_), _) => (true, "gRPC"),
            (None, true) => (true, "--http2"),
            (None, false) => (false, ""),
        };
        if self.websocket {
            return self.websocket();
        }
        if self.sse {
            return self.sse();
        }
        if self.binary
            || self.ping
            || self.push
            || self.reply_contains.is_some()
            || self.sent_at.is_some()
        {
            return Err(value_err(
                if self.binary {
                    Field::Binary
                } else if self.ping {
                    Field::Ping
                } else if self.push {
                    Field::Push
                } else if self.reply_contains.is_some() {
                    Field::ReplyContains
                } else {
                    Field::SentAt
                },
                "on",
                if self.sent_at.is_some() && !(self.binary || self.ping || self.push) {
                    "only where replies can carry the server's time: a WebSocket target (a ws:// or wss:// URL) or event streams (--sse)"
                } else {
                    "only for a WebSocket target (a ws:// or wss:// URL)"
                },
            ));
        }
        if self.close_by == CloseBy::Client && (multiplexed || self.keep_alive) {
            return Err(value_err(
                Field::CloseBy,
                "client",
                "only with --keep-alive off over HTTP/1.1: a reused connection is closed by neither side",
            ));
        }
        if !multiplexed {
            if let Some(c) = self.concurrency {
                return Err(value_err(
                    Field::Concurrency,
                    c,
                    "only with --http2 or gRPC: over HTTP/1.1 each connection carries one request at a time (use --connections)",
                ));
            }
            return Ok(Transport::Http1 {
                keep_alive: self.keep_alive,
                close_by: self.close_by,
                pipeline: self.pipeline,
                max_connections: self.max_connections,
                retry_unprocessed: self.retry_unprocessed,
            });
        }
        if !self.keep_alive {
            return Err(value_err(
                Field::KeepAlive,
                "off",
                format!("{what} multiplexes streams over kept connections; leave --keep-alive on"),
            ));
        }
        if let Some(m) = self.max_connections.filter(|&m| m != self.connections) {
            return Err(value_err(
                Field::MaxConnections,
                m,
                format!("{what} uses exactly --connections connections; the open-loop ceiling is --concurrency"),
            ));
        }
        if self.pipeline > 1 {
            return Err(value_err(
                Field::Pipeline,
                self.pipeline,
                "1 over HTTP/2 (streams are multiplexed; use --concurrency)",
            ));
        }
        Ok(match self.grpc {
            Some(call) => Transport::Grpc {
                call,
                concurrency: self.concurrency,
            },
            None => Transport::Http2 {
                concurrency: self.concurrency,
            },
        })
    }

    /// The first flag given that only HTTP/2 or a reused HTTP/1.1 connection means (HTTP/2,
    /// keep-alive off, pipelining, streams in flight), with its value: a WebSocket or an
    /// event stream refuses it.
    fn multiplexing_flag(&self) -> Option<(Field, String)> {
        if self.http2 || self.grpc.is_some() {
            Some((Field::Http2, "on".to_string()))
        } else if !self.keep_alive {
            Some((Field::KeepAlive, "off".into()))
        } else if self.pipeline > 1 {
            Some((Field::Pipeline, self.pipeline.to_string()))
        } else {
            self.concurrency
                .map(|c| (Field::Concurrency, c.to_string()))
        }
    }

    /// `--sse`: streams held over HTTP/1.1, one per connection.
    fn sse(self) -> Result<Transport, ConfigError> {
        let refused = if let Some(refused) = self.multiplexing_flag() {
            Some(refused)
        } else if let Some(m) = self.max_connections.filter(|&m| m != self.connections) {
            Some((Field::MaxConnections, m.to_string()))
        } else if self.binary || self.ping || self.push {
            Some((Field::Binary, "on".into()))
        } else {
            None
        };
        match refused {
            Some((field, value)) => Err(value_err(
                field,
                value,
                "not with --sse: each connection holds one event stream (--connections of them)",
            )),
            None => {
                if let Some(pointer) = &self.sent_at {
                    check_pointer(pointer).map_err(|why| value_err(Field::SentAt, pointer, why))?;
                }
                Ok(Transport::Sse {
                    sent_at: self.sent_at,
                })
            }
        }
    }

    /// A `ws://` or `wss://` target: what HTTP/2 and pipelining flags mean has no
    /// WebSocket counterpart, so they are refused, naming the flag.
    fn websocket(self) -> Result<Transport, ConfigError> {
        let refused = if let Some(refused) = self.multiplexing_flag() {
            Some(refused)
        } else if self.retry_unprocessed {
            Some((Field::RetryUnprocessed, "on".into()))
        } else {
            None
        };
        if let Some((field, value)) = refused {
            return Err(value_err(
                field,
                value,
                "not with a WebSocket target: each connection is upgraded once, kept, and carries one message at a time (use --connections and --max-connections)",
            ));
        }
        if self.push && (self.ping || self.reply_contains.is_some()) {
            return Err(value_err(
                Field::Push,
                "on",
                "not with --ping-every or --reply-contains: every message the server pushes is a reply",
            ));
        }
        if self.ping && self.reply_contains.is_some() {
            return Err(value_err(
                Field::ReplyContains,
                self.reply_contains.unwrap_or_default(),
                "not with --ping-every: a pong is the reply",
            ));
        }
        if let Some(pointer) = &self.sent_at {
            if self.ping {
                return Err(value_err(
                    Field::SentAt,
                    pointer,
                    "not with --ping-every: a pong carries no time of the server's",
                ));
            }
            check_pointer(pointer).map_err(|why| value_err(Field::SentAt, pointer, why))?;
        }
        Ok(Transport::WebSocket {
            max_connections: self.max_connections,
            binary: self.binary,
            ping: self.ping,
            push: self.push,
            reply_contains: self.reply_contains,
            sent_at: self.sent_at,
        })
    }
}

/// Whether `pointer` is a JSON pointer (RFC 6901: empty, or `/` then tokens), with the
/// reason when it is not.
pub fn check_pointer(pointer: &str) -> Result<(), String> {
    if pointer.is_empty() || pointer.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "a JSON pointer starts with `/` (RFC 6901): `/{pointer}` for a top-level field, `/data/ts` for a nested one"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> TransportFlags {
        TransportFlags {
            http2: false,
            grpc: None,
            keep_alive: true,
            close_by: CloseBy::Server,
            pipeline: 1,
            connections: 64,
            max_connections: None,
            concurrency: None,
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

    #[test]
    fn a_websocket_url_makes_a_websocket_transport_and_refuses_http_flags() {
        let ws = TransportFlags {
            websocket: true,
            binary: true,
            max_connections: Some(100),
            ..flags()
        };
        let t = ws.clone().transport().unwrap();
        assert_eq!(
            t,
            Transport::WebSocket {
                max_connections: Some(100),
                binary: true,
                ping: false,
                push: false,
                reply_contains: None,
                sent_at: None,
            }
        );
        assert_eq!(t.protocol(), Protocol::Ws);
        assert!(!t.protocol().multiplexed());
        assert_eq!(t.protocol().alpn(), b"http/1.1");
        // Its wire form names the protocol as results and plans do.
        let wire = serde_json::to_value(&t).unwrap();
        assert_eq!(wire["protocol"], "ws", "{wire}");
        assert_eq!(serde_json::from_value::<Transport>(wire).unwrap(), t);
        for (bad, flag) in [
            (
                TransportFlags {
                    http2: true,
                    ..ws.clone()
                },
                "--http2",
            ),
            (
                TransportFlags {
                    pipeline: 2,
                    ..ws.clone()
                },
                "--pipeline",
            ),
            (
                TransportFlags {
                    keep_alive: false,
                    ..ws.clone()
                },
                "--keep-alive",
            ),
            (
                TransportFlags {
                    concurrency: Some(4),
                    ..ws.clone()
                },
                "--concurrency",
            ),
        ] {
            let e = bad.transport().unwrap_err().to_string();
            assert!(e.contains(flag) && e.contains("WebSocket"), "{e}");
        }
        let e = TransportFlags {
            binary: true,
            ..flags()
        }
        .transport()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--binary") && e.contains("ws://"), "{e}");
    }

    #[test]
    fn flags_that_a_transport_cannot_have_name_the_flag() {
        let e = TransportFlags {
            concurrency: Some(8),
            ..flags()
        }
        .transport()
        .unwrap_err();
        assert!(e.to_string().starts_with("--concurrency = 8"), "{e}");
        let e = TransportFlags {
            http2: true,
            keep_alive: false,
            ..flags()
        }
        .transport()
        .unwrap_err();
        assert!(e.to_string().contains("--keep-alive"), "{e}");
        let e = TransportFlags {
            http2: true,
            max_connections: Some(9),
            ..flags()
        }
        .transport()
        .unwrap_err();
        assert!(e.to_string().contains("--max-connections"), "{e}");
        let e = TransportFlags {
            close_by: CloseBy::Client,
            ..flags()
        }
        .transport()
        .unwrap_err();
        assert!(e.to_string().starts_with("--close-by = client"), "{e}");
        assert!(e.to_string().contains("--keep-alive off"), "{e}");
        assert!(matches!(
            TransportFlags {
                close_by: CloseBy::Client,
                keep_alive: false,
                ..flags()
            }
            .transport()
            .unwrap(),
            Transport::Http1 {
                close_by: CloseBy::Client,
                keep_alive: false,
                ..
            }
        ));
        assert_eq!(
            TransportFlags {
                http2: true,
                concurrency: Some(8),
                ..flags()
            }
            .transport()
            .unwrap(),
            Transport::Http2 {
                concurrency: Some(8)
            }
        );
    }

    #[test]
    fn a_workload_travels_as_json_and_comes_back_equal() {
        let w = Workload {
            url: "http://127.0.0.1:8080/x".into(),
            load: LoadModel::Open {
                rate: 1500.0,
                arrival: super::super::Arrival::Poisson,
            },
            duration: Some(Duration::from_millis(2500)),
            source_addrs: Some("4".parse().unwrap()),
            cpus: Some("1-2".parse().unwrap()),
            transport: Transport::Grpc {
                call: GrpcCall {
                    path: "/a.B/C".into(),
                    frame: bytes::Bytes::from_static(&[0, 0, 0, 0, 0]),
                    metadata: vec![],
                    template: None,
                    // A streaming call's kind goes to the agents with the call.
                    server_streaming: true,
                    bidirectional: true,
                    client_streaming: false,
                    messages_per_call: 0,
                    // And a server stream's lifetime.
                    lifetime_ms: 1500,
                    sent_at: None,
                    // And the field its replies are matched by.
                    match_field: Some(Box::new({
                        let seq = loadlab_grpc::fields::FieldPath {
                            numbers: vec![1],
                            kind: loadlab_grpc::fields::NumberKind::Unsigned,
                            pointer: "/seq".into(),
                        };
                        loadlab_grpc::MatchField {
                            request: seq.clone(),
                            reply: seq,
                        }
                    })),
                },
                concurrency: Some(32),
            },
            // Agents get the client certificate and its key with the workload.
            client_cert: Some(ClientCertPem {
                cert_file: "client.pem".into(),
                cert_pem: "-----BEGIN CERTIFICATE-----\n".into(),
                key_file: "client.key".into(),
                key_pem: "-----BEGIN PRIVATE KEY-----\n".into(),
            }),
            ..Workload::default()
        };
        // Its key is not in what a log or a panic would print.
        assert!(!format!("{w:?}").contains("PRIVATE KEY"));
        let json = serde_json::to_string(&w).unwrap();
        assert!(json.contains("\"duration\":\"2s 500ms\""), "{json}");
        assert!(json.contains("\"protocol\":\"grpc\""), "{json}");
        assert!(json.contains("\"model\":\"open\""), "{json}");
        let back: Workload = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        // Every field has its default: a URL is a whole workload.
        let min: Workload = serde_json::from_str(r#"{"url": "http://127.0.0.1:1/"}"#).unwrap();
        assert_eq!(min.connections, DEFAULT_CONNECTIONS);
        assert_eq!(min.transport, Transport::default());
        assert!(serde_json::from_str::<Workload>(r#"{"url": "x", "bogus": 1}"#).is_err());
    }
}
