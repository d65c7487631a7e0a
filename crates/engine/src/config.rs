//! Two-stage configuration: a [`RunSpec`] as the user gave it (flags, a plan) becomes a
//! validated [`RunConfig`]. Every error names the field, the value and what is allowed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};

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

/// The load model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadModel {
    /// Requests are sent on a schedule whatever the server does (tsung, JMeter, wrk2).
    Open {
        /// Offered requests per second, summed over all workers.
        rate: f64,
        /// Spacing of arrivals.
        arrival: Arrival,
    },
    /// Each connection sends its next request when the previous response ends (wrk, ab).
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
}

impl Protocol {
    /// The name results use (`http1`, `http2`, `grpc`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
            Protocol::Grpc => "grpc",
        }
    }

    /// True for the protocols carried by HTTP/2.
    pub fn multiplexed(self) -> bool {
        self != Protocol::Http1
    }
}

/// A gRPC unary call ready to send: what `loadlab_grpc::UnaryCall` resolved from the proto.
#[derive(Clone, Debug)]
pub struct GrpcCall {
    /// `/package.Service/Method`.
    pub path: String,
    /// The request message in its gRPC frame, sent for every call.
    pub frame: bytes::Bytes,
    /// Custom metadata `(key, value)`, keys in lower case, already validated.
    pub metadata: Vec<(String, String)>,
}

/// A run as the user described it, before validation.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Target URL (`http://` or `https://`).
    pub url: String,
    /// Open loop at this rate (requests/s); `None` is closed loop.
    pub rate: Option<f64>,
    /// Arrival spacing in open loop.
    pub arrival: Arrival,
    /// Closed loop: exactly this many connections. Open loop: the initial pool size.
    pub connections: u64,
    /// Open loop: the pool may grow up to this many connections.
    pub max_connections: Option<u64>,
    /// Measured duration. With `requests`, whichever ends first.
    pub duration: Option<Duration>,
    /// Measured request count. With `duration`, whichever ends first.
    pub requests: Option<u64>,
    /// Load applied before measurement starts, not recorded.
    pub warmup: Duration,
    /// Reuse connections (`true`) or open one per request.
    pub keep_alive: bool,
    /// Per-request deadline, counted from the intended send time.
    pub timeout: Duration,
    /// Worker threads; `None` is one per core.
    pub threads: Option<usize>,
    /// HTTP method.
    pub method: String,
    /// Extra headers, each `Name: value`.
    pub headers: Vec<String>,
    /// Request body.
    pub body: Vec<u8>,
    /// Requests written back to back before reading responses (closed loop, keep-alive).
    pub pipeline: u32,
    /// Re-send non-idempotent requests (POST, PATCH) that a server closing its HTTP/1.1
    /// connection gracefully never answered (idempotent ones always are).
    pub retry_unprocessed: bool,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// Local source addresses for new connections: a range `A-B`, a list `A,B`, or a count.
    pub source_addrs: Option<String>,
    /// Seed for Poisson arrivals (random when `None`).
    pub seed: Option<u64>,
    /// CPUs to pin the worker threads to, e.g. `1` or `2-3,6` (worker i takes the i-th).
    pub cpus: Option<String>,
    /// Speak HTTP/2 (h2c prior knowledge on http://, ALPN on https://).
    pub http2: bool,
    /// HTTP/2: streams in flight (closed loop: exactly; open loop: the ceiling).
    pub concurrency: Option<u64>,
    /// gRPC unary calls instead of plain requests (implies HTTP/2; the URL's path is
    /// replaced by the call's).
    pub grpc: Option<GrpcCall>,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            url: String::new(),
            rate: None,
            arrival: Arrival::Constant,
            connections: 64,
            max_connections: None,
            duration: None,
            requests: None,
            warmup: Duration::ZERO,
            keep_alive: true,
            timeout: Duration::from_secs(5),
            threads: None,
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            pipeline: 1,
            retry_unprocessed: false,
            insecure: false,
            source_addrs: None,
            seed: None,
            cpus: None,
            http2: false,
            concurrency: None,
            grpc: None,
        }
    }
}

/// Where requests go.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Transport.
    pub scheme: Scheme,
    /// Host as written in the URL (for `Host:` and TLS SNI).
    pub host: String,
    /// Port (explicit or the scheme's default).
    pub port: u16,
    /// Path and query.
    pub path_and_query: String,
    /// Resolved addresses; connections go to the first.
    pub addrs: Vec<SocketAddr>,
}

/// A validated run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Target.
    pub target: Target,
    /// Open or closed loop.
    pub model: LoadModel,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Initial connections (closed loop, and HTTP/2: all of them).
    pub connections: u64,
    /// Pool ceiling (equal to `connections` in closed loop and over HTTP/2).
    pub max_connections: u64,
    /// Requests in flight: closed loop exactly this many, open loop at most. HTTP/1.1:
    /// one per connection (`connections`, or `max_connections` in open loop); HTTP/2:
    /// streams spread over the connections.
    pub concurrency: u64,
    /// The gRPC call, for [`Protocol::Grpc`].
    pub grpc: Option<GrpcCall>,
    /// Measured duration, if bounded by time.
    pub duration: Option<Duration>,
    /// Measured requests, if bounded by count.
    pub requests: Option<u64>,
    /// Warm-up.
    pub warmup: Duration,
    /// Connection reuse.
    pub keep_alive: bool,
    /// Per-request deadline from intended send time.
    pub timeout: Duration,
    /// Worker threads.
    pub threads: usize,
    /// HTTP method.
    pub method: String,
    /// Extra headers as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// Pipeline depth (1 = none).
    pub pipeline: u32,
    /// HTTP/1.1 requests the server never processed may be re-sent on another connection:
    /// the method is idempotent, or `--retry-unprocessed` allows it.
    pub resend_unprocessed: bool,
    /// Skip certificate checks.
    pub insecure: bool,
    /// Source addresses (empty: let the kernel choose).
    pub source_addrs: Vec<IpAddr>,
    /// Seed for random arrivals.
    pub seed: u64,
    /// CPUs the worker threads are pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
}

/// What is wrong with a [`RunSpec`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse.
    #[error("invalid URL `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// The URL's scheme has no transport.
    #[error("unsupported scheme `{scheme}` in `{url}`: loadlab run speaks http:// and https://")]
    Scheme {
        /// The URL given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A value is outside its allowed range.
    #[error("{field} = {value} is not allowed: {allowed}")]
    Value {
        /// The flag or plan field.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// The host did not resolve.
    #[error("cannot resolve host `{host}` of `{url}`: {reason}")]
    Resolve {
        /// The URL given.
        url: String,
        /// Its host.
        host: String,
        /// The resolver's message.
        reason: String,
    },
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2), and `host` (the URL's authority is sent).
const CONNECTION_HEADERS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// HTTP/2 closed loop without `--concurrency`: streams per run (ghz's default is 50).
pub const DEFAULT_STREAMS: u64 = 64;

fn value_err(field: &'static str, value: impl ToString, allowed: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        field,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// Number of cores available to this process.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl RunSpec {
    /// Checks every field and resolves the target.
    pub fn validate(&self) -> Result<RunConfig, ConfigError> {
        let target = parse_target(&self.url)?;
        let model = match self.rate {
            Some(rate) if !(rate.is_finite() && rate > 0.0) => {
                return Err(value_err(
                    "--rate",
                    rate,
                    "a number of requests per second above 0",
                ))
            }
            Some(rate) => LoadModel::Open {
                rate,
                arrival: self.arrival,
            },
            None => LoadModel::Closed,
        };
        if self.connections == 0 {
            return Err(value_err("--connections", 0, "at least 1"));
        }
        if let Some(d) = self.duration {
            if d.is_zero() {
                return Err(value_err(
                    "--duration",
                    "0s",
                    "a duration above 0, e.g. 10s",
                ));
            }
        }
        if self.requests == Some(0) {
            return Err(value_err("--requests", 0, "at least 1"));
        }
        if self.timeout.is_zero() {
            return Err(value_err("--timeout", "0s", "a duration above 0, e.g. 5s"));
        }
        let threads = self.threads.unwrap_or_else(available_cores);
        if threads == 0 || threads > 1024 {
            return Err(value_err("--threads", threads, "1 to 1024"));
        }
        if self.pipeline == 0 || self.pipeline > 1024 {
            return Err(value_err("--pipeline", self.pipeline, "1 to 1024"));
        }
        if self.pipeline > 1 && (self.rate.is_some() || !self.keep_alive) {
            return Err(value_err(
                "--pipeline",
                self.pipeline,
                "pipelining needs closed loop (no --rate) and --keep-alive on",
            ));
        }
        let protocol = match (&self.grpc, self.http2) {
            (Some(_), _) => Protocol::Grpc,
            (None, true) => Protocol::Http2,
            (None, false) => Protocol::Http1,
        };
        if protocol.multiplexed() {
            return self.validate_multiplexed(target, model, protocol, threads);
        }
        if let Some(c) = self.concurrency {
            return Err(value_err(
                "--concurrency",
                c,
                "only with --http2 or gRPC: over HTTP/1.1 each connection carries one request at a time (use --connections)",
            ));
        }
        let (connections, max_connections) = match model {
            LoadModel::Closed => {
                if let Some(m) = self.max_connections {
                    if m != self.connections {
                        return Err(value_err(
                            "--max-connections",
                            m,
                            "only with --rate (open loop); closed loop uses exactly --connections",
                        ));
                    }
                }
                (self.connections, self.connections)
            }
            LoadModel::Open { .. } => {
                let max = self
                    .max_connections
                    .unwrap_or_else(|| self.connections.max(1024));
                if max < self.connections {
                    return Err(value_err(
                        "--max-connections",
                        max,
                        format!("at least --connections ({})", self.connections),
                    ));
                }
                (self.connections, max)
            }
        };
        // In closed loop a worker without a connection has nothing to do.
        let threads = match model {
            LoadModel::Closed => threads.min(connections as usize),
            LoadModel::Open { .. } => threads,
        };
        let concurrency = match model {
            LoadModel::Closed => connections,
            LoadModel::Open { .. } => max_connections,
        };
        self.finish(
            target,
            model,
            Protocol::Http1,
            (connections, max_connections, concurrency),
            threads,
        )
    }

    /// HTTP/2 and gRPC: `connections` fixed connections carrying `concurrency` streams.
    fn validate_multiplexed(
        &self,
        target: Target,
        model: LoadModel,
        protocol: Protocol,
        threads: usize,
    ) -> Result<RunConfig, ConfigError> {
        let what = if protocol == Protocol::Grpc {
            "gRPC"
        } else {
            "--http2"
        };
        if !self.keep_alive {
            return Err(value_err(
                "--keep-alive",
                "off",
                format!("{what} multiplexes streams over kept connections; leave --keep-alive on"),
            ));
        }
        if let Some(m) = self.max_connections.filter(|&m| m != self.connections) {
            return Err(value_err(
                "--max-connections",
                m,
                format!("{what} uses exactly --connections connections; the open-loop ceiling is --concurrency"),
            ));
        }
        let concurrency = match (self.concurrency, model) {
            (Some(c), _) => c,
            (None, LoadModel::Closed) => self.connections.max(DEFAULT_STREAMS),
            (None, LoadModel::Open { .. }) => self.connections.max(1024),
        };
        if concurrency < self.connections {
            return Err(value_err(
                "--concurrency",
                concurrency,
                format!(
                    "at least --connections ({}): every connection carries at least one stream",
                    self.connections
                ),
            ));
        }
        // A worker owns whole connections.
        let threads = threads.min(self.connections as usize);
        self.finish(
            target,
            model,
            protocol,
            (self.connections, self.connections, concurrency),
            threads,
        )
    }

    /// The checks and fields common to every protocol.
    fn finish(
        &self,
        mut target: Target,
        model: LoadModel,
        protocol: Protocol,
        (connections, max_connections, concurrency): (u64, u64, u64),
        threads: usize,
    ) -> Result<RunConfig, ConfigError> {
        if self.pipeline > 1 && protocol.multiplexed() {
            return Err(value_err(
                "--pipeline",
                self.pipeline,
                "1 over HTTP/2 (streams are multiplexed; use --concurrency)",
            ));
        }
        if let Some(call) = &self.grpc {
            target.path_and_query = call.path.clone();
            target.url = format!("{}{}", target.url.trim_end_matches('/'), call.path);
        }
        let method = if protocol == Protocol::Grpc {
            "POST".to_string()
        } else {
            self.method.trim().to_ascii_uppercase()
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(value_err(
                "-X/--method",
                &self.method,
                "an HTTP method such as GET or POST",
            ));
        }
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        if protocol.multiplexed() {
            if let Some((name, _)) = headers
                .iter()
                .find(|(n, _)| CONNECTION_HEADERS.iter().any(|c| n.eq_ignore_ascii_case(c)))
            {
                return Err(value_err(
                    "-H/--header",
                    name,
                    "no connection-specific headers over HTTP/2 (connection, keep-alive, proxy-connection, transfer-encoding, upgrade, host: the URL gives :authority)",
                ));
            }
        }
        let source_addrs = match &self.source_addrs {
            Some(s) => parse_source_addrs(s, target.addrs[0].ip())?,
            None => Vec::new(),
        };
        let seed = self.seed.unwrap_or_else(rand::random);
        let cpus = match &self.cpus {
            Some(list) => {
                parse_cpu_list(list).map_err(|allowed| value_err("--cpus", list, allowed))?
            }
            None => Vec::new(),
        };
        // RFC 9110 §9.2.2: a client may repeat an idempotent request it got no answer to.
        let resend_unprocessed = self.retry_unprocessed
            || matches!(
                method.as_str(),
                "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
            );
        Ok(RunConfig {
            target,
            model,
            protocol,
            connections,
            max_connections,
            concurrency,
            grpc: self.grpc.clone(),
            duration: match (self.duration, self.requests) {
                (None, None) => Some(Duration::from_secs(10)),
                (d, _) => d,
            },
            requests: self.requests,
            warmup: self.warmup,
            keep_alive: self.keep_alive,
            timeout: self.timeout,
            threads,
            method,
            headers,
            body: self.body.clone(),
            pipeline: self.pipeline,
            resend_unprocessed,
            insecure: self.insecure,
            source_addrs,
            seed,
            cpus,
        })
    }
}

fn parse_target(raw: &str) -> Result<Target, ConfigError> {
    let url = url::Url::parse(raw).map_err(|e| ConfigError::Url {
        url: raw.into(),
        reason: format!("{e} (expected e.g. http://127.0.0.1:8080/health)"),
    })?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(ConfigError::Scheme {
                url: raw.into(),
                scheme: other.into(),
            })
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => {
            return Err(ConfigError::Url {
                url: raw.into(),
                reason: "no host".into(),
            })
        }
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let mut path_and_query = url.path().to_string();
    if let Some(q) = url.query() {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| ConfigError::Resolve {
            url: raw.into(),
            host: host.clone(),
            reason: e.to_string(),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ConfigError::Resolve {
            url: raw.into(),
            host,
            reason: "no addresses".into(),
        });
    }
    Ok(Target {
        url: raw.into(),
        scheme,
        host,
        port,
        path_and_query,
        addrs,
    })
}

fn parse_header(h: &str) -> Result<(String, String), ConfigError> {
    let allowed = "`Name: value` with a token name";
    let (name, value) = h
        .split_once(':')
        .ok_or_else(|| value_err("-H/--header", h, allowed))?;
    let name = name.trim();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid_name || value.contains(['\r', '\n']) {
        return Err(value_err("-H/--header", h, allowed));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// Parses a CPU list such as `1`, `0,2` or `2-3,6` (what `taskset -c` takes).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let allowed = "CPU numbers such as 1, 0,2 or 2-3,6".to_string();
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
            (Ok(a), Ok(b)) if a <= b && b < 4096 => (a, b),
            _ => return Err(allowed),
        };
        cpus.extend(a..=b);
    }
    if cpus.is_empty() {
        return Err(allowed);
    }
    Ok(cpus)
}

/// Parses `--source-addrs`: `A-B` (IPv4 range), `A,B,...`, or a count `N` meaning
/// `127.0.0.2` onwards (loopback targets only).
pub fn parse_source_addrs(s: &str, target_ip: IpAddr) -> Result<Vec<IpAddr>, ConfigError> {
    let field = "--source-addrs";
    let allowed = "a range 127.0.0.2-127.0.0.17, a list A,B,C, or a count N (loopback targets)";
    let s = s.trim();
    let addrs: Vec<IpAddr> = if let Ok(n) = s.parse::<u32>() {
        if !target_ip.is_loopback() || !target_ip.is_ipv4() {
            return Err(value_err(
                field,
                s,
                "a count only works for an IPv4 loopback target; give addresses",
            ));
        }
        if n == 0 || n > 65_000 {
            return Err(value_err(field, s, "a count from 1 to 65000"));
        }
        (0..n)
            .map(|i| IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + i)))
            .collect()
    } else if let Some((a, b)) = s.split_once('-') {
        let a: Ipv4Addr = a.trim().parse().map_err(|_| value_err(field, s, allowed))?;
        let b: Ipv4Addr = b.trim().parse().map_err(|_| value_err(field, s, allowed))?;
        let (a, b) = (u32::from(a), u32::from(b));
        if b < a || b - a >= 65_000 {
            return Err(value_err(
                field,
                s,
                "a range whose end is not before its start, at most 65000 addresses",
            ));
        }
        (a..=b).map(|x| IpAddr::V4(Ipv4Addr::from(x))).collect()
    } else {
        s.split(',')
            .map(|p| {
                p.trim()
                    .parse::<IpAddr>()
                    .map_err(|_| value_err(field, s, allowed))
            })
            .collect::<Result<_, _>>()?
    };
    if let Some(bad) = addrs.iter().find(|a| a.is_ipv4() != target_ip.is_ipv4()) {
        return Err(value_err(
            field,
            bad,
            format!("addresses of the target's family ({target_ip})"),
        ));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str) -> RunSpec {
        RunSpec {
            url: url.into(),
            ..RunSpec::default()
        }
    }

    #[test]
    fn rejects_bad_urls_and_schemes() {
        assert!(matches!(
            spec("not a url").validate(),
            Err(ConfigError::Url { .. })
        ));
        let e = spec("ftp://127.0.0.1/").validate().unwrap_err();
        assert!(e.to_string().contains("unsupported scheme `ftp`"), "{e}");
    }

    #[test]
    fn rejects_zero_rate_and_duration() {
        let mut s = spec("http://127.0.0.1:1/");
        s.rate = Some(0.0);
        assert!(s.validate().unwrap_err().to_string().contains("--rate"));
        s.rate = Some(-3.0);
        assert!(s.validate().unwrap_err().to_string().contains("--rate"));
        let mut s = spec("http://127.0.0.1:1/");
        s.duration = Some(Duration::ZERO);
        assert!(s.validate().unwrap_err().to_string().contains("--duration"));
    }

    #[test]
    fn defaults_to_ten_seconds_and_parses_path() {
        let c = spec("http://127.0.0.1:8080/a/b?x=1").validate().unwrap();
        assert_eq!(c.duration, Some(Duration::from_secs(10)));
        assert_eq!(c.target.path_and_query, "/a/b?x=1");
        assert_eq!(c.target.port, 8080);
        assert_eq!(c.model, LoadModel::Closed);
    }

    #[test]
    fn source_addrs_forms() {
        let t = spec("http://127.0.0.1:1/").validate().unwrap().target.addrs[0].ip();
        assert_eq!(parse_source_addrs("4", t).unwrap().len(), 4);
        let r = parse_source_addrs("127.0.0.2-127.0.0.17", t).unwrap();
        assert_eq!(r.len(), 16);
        assert_eq!(r[15].to_string(), "127.0.0.17");
        assert!(parse_source_addrs("127.0.0.9-127.0.0.2", t).is_err());
        assert!(parse_source_addrs("::1", t).is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0, 2-3,6").unwrap(), vec![0, 2, 3, 6]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn headers_are_checked() {
        let mut s = spec("http://127.0.0.1:1/");
        s.headers = vec!["X-Ok: yes".into()];
        assert_eq!(
            s.validate().unwrap().headers[0],
            ("X-Ok".into(), "yes".into())
        );
        s.headers = vec!["no colon".into()];
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("-H/--header"));
    }
}
