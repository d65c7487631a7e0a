//! [`Workload::validate`]: every field checked once, the target parsed and resolved, the
//! defaults that depend on the model and the protocol filled in. Errors name the
//! [`Field`], which the CLI shows as its flag and a plan as its own key.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::error::{value_err, ConfigError, Field};
use super::values::{idempotent, is_connection_header, parse_header};
use super::workload::{
    Transport, Workload, DEFAULT_DURATION, DEFAULT_MAX_CONNECTIONS, DEFAULT_OPEN_STREAMS,
    DEFAULT_STREAMS, MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_TIMEOUT, MAX_WARMUP,
};
use super::{available_cores, LoadModel, Protocol, RunConfig, Scheme, Target};

/// Whether the target's host is looked up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolve {
    /// Resolve it (a run is about to start).
    Yes,
    /// Only an address literal or `localhost` (a plan is checked before its targets run).
    Offline,
}

impl Workload {
    /// Checks every field, resolves the target and fills in the defaults.
    pub fn validate(&self) -> Result<RunConfig, ConfigError> {
        self.build(Resolve::Yes)
    }

    /// Checks every field without looking the host up (a plan checks its scenarios this
    /// way when it loads, before its targets run), and returns the names its requests'
    /// results count under (empty for requests without names).
    pub fn check(&self) -> Result<Vec<String>, ConfigError> {
        self.build(Resolve::Offline)
            .map(|cfg| cfg.traffic.map(|t| t.names.clone()).unwrap_or_default())
    }

    fn build(&self, resolve: Resolve) -> Result<RunConfig, ConfigError> {
        // A templated URL: its server is parsed as usual, its path and query kept as written.
        let (mut target, templated_path, path_col) = match split_templated(&self.url) {
            Some(split) => {
                let (base, path) = split?;
                let mut t = parse_target(base, resolve)?;
                t.url = self.url.clone();
                t.path_and_query = path;
                (t, true, base.chars().count() + 1)
            }
            None => (parse_target(&self.url, resolve)?, false, 1),
        };
        if let LoadModel::Open { rate, .. } = self.load {
            if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
                return Err(value_err(
                    Field::Rate,
                    rate,
                    format!("a number of requests per second above 0 and at most {MAX_RATE:.0}"),
                ));
            }
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return Err(value_err(
                Field::Connections,
                self.connections,
                format!("1 to {MAX_CONNECTIONS}"),
            ));
        }
        check_duration(Field::Duration, self.duration, MAX_DURATION, "10s")?;
        check_duration(Field::Warmup, Some(self.warmup), MAX_WARMUP, "")?;
        check_duration(Field::Timeout, Some(self.timeout), MAX_TIMEOUT, "5s")?;
        if self.requests == Some(0) {
            return Err(value_err(Field::Requests, 0, "at least 1"));
        }
        let threads = self.threads.unwrap_or_else(available_cores);
        if threads == 0 || threads > 1024 {
            return Err(value_err(Field::Threads, threads, "1 to 1024"));
        }
        let protocol = self.transport.protocol();
        let (connections, max_connections, concurrency, threads) = match &self.transport {
            Transport::Http1 {
                keep_alive,
                pipeline,
                max_connections,
                ..
            } => self.http1_pool(*keep_alive, *pipeline, *max_connections, threads)?,
            // One message in flight per connection: the pool of HTTP/1.1.
            Transport::WebSocket {
                max_connections,
                push,
                ..
            } => {
                if let (true, LoadModel::Open { rate, .. }) = (*push, self.load) {
                    return Err(value_err(
                        Field::Rate,
                        rate,
                        "not with --push: the server sends at its own pace over --connections connections held (closed loop)",
                    ));
                }
                self.http1_pool(true, 1, *max_connections, threads)?
            }
            Transport::Sse { .. } => {
                if let LoadModel::Open { rate, .. } = self.load {
                    return Err(value_err(
                        Field::Rate,
                        rate,
                        "not with --sse: streams are held, --connections of them (closed loop); each event is a reply",
                    ));
                }
                self.http1_pool(true, 1, None, threads)?
            }
            // Bidirectional and client streaming: streams held, --concurrency of them, open
            // or closed loop (64 by default in both: an open loop's 1,024 are for calls in
            // flight, and held streams that each carried a message or two would measure
            // opening streams).
            Transport::Grpc { call, concurrency }
                if call.bidirectional || call.client_streaming =>
            {
                self.streams(
                    Some(concurrency.unwrap_or(self.connections.max(DEFAULT_STREAMS))),
                    threads,
                )?
            }
            Transport::Grpc { call, .. } if call.lifetime_ms > 0 && !call.server_streaming => {
                return Err(value_err(
                    Field::StreamLifetime,
                    format_ms(call.lifetime_ms),
                    "only with a server-streaming method (`rpc M(A) returns (stream B)`)",
                ));
            }
            Transport::Grpc { call, concurrency } if call.lifetime_ms > 0 => {
                self.stream_opens(call.lifetime_ms, *concurrency, threads)?
            }
            Transport::Grpc { call, concurrency } if call.server_streaming => {
                if let LoadModel::Open { rate, .. } = self.load {
                    return Err(value_err(
                        Field::Rate,
                        rate,
                        "not with a server-streaming method: streams are held, --concurrency of them over --connections connections (closed loop); each message the server sends is a reply",
                    ));
                }
                self.streams(*concurrency, threads)?
            }
            Transport::Http2 { concurrency } | Transport::Grpc { concurrency, .. } => {
                self.streams(*concurrency, threads)?
            }
        };
        let pipeline = self.transport.pipeline();
        let grpc = match &self.transport {
            Transport::Grpc { call, .. } => {
                target.path_and_query = call.path.clone();
                target.url = format!("{}{}", target.url.trim_end_matches('/'), call.path);
                Some(call.clone())
            }
            _ => None,
        };
        if target.websocket != (protocol == Protocol::Ws) {
            let allowed = if target.websocket {
                "a ws:// or wss:// URL is a WebSocket target: its scenario's protocol is \"ws\""
            } else {
                "a WebSocket target's URL starts with ws:// or wss://"
            };
            return Err(value_err(Field::Url, &self.url, allowed));
        }
        let method = if protocol.grpc() {
            "POST".to_string()
        } else if matches!(protocol, Protocol::Ws | Protocol::Sse) {
            // The opening handshake is a GET (RFC 6455 §4.1); so is an event stream's.
            "GET".to_string()
        } else {
            self.request.method.trim().to_ascii_uppercase()
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(value_err(
                Field::Method,
                &self.request.method,
                "an HTTP method such as GET or POST",
            ));
        }
        let headers = self
            .request
            .headers
            .iter()
            .map(|h| parse_header(h).map_err(|allowed| value_err(Field::Header, h, allowed)))
            .collect::<Result<Vec<_>, _>>()?;
        if protocol.multiplexed() {
            if let Some((name, _)) = headers.iter().find(|(n, _)| is_connection_header(n)) {
                return Err(value_err(
                    Field::Header,
                    name,
                    "no connection-specific headers over HTTP/2 (connection, keep-alive, proxy-connection, transfer-encoding, upgrade, host: the URL gives :authority)",
                ));
            }
        }
        let source_addrs = match (&self.source_addrs, target.addrs.first()) {
            (Some(s), Some(addr)) => s
                .resolve(addr.ip())
                .map_err(|allowed| value_err(Field::SourceAddrs, s, allowed))?,
            _ => Vec::new(),
        };
        let traffic = crate::traffic::Traffic::compile(
            &self.traffic,
            &crate::traffic::Base {
                scheme: match target.scheme {
                    Scheme::Http => "http",
                    Scheme::Https => "https",
                },
                host: target.host.clone(),
                port: target.port,
            },
            crate::traffic::OwnRequest {
                method: &method,
                path: &target.path_and_query,
                path_col,
                headers: &headers,
                body: &self.request.body,
                message: grpc.as_ref().and_then(|c| c.template.as_ref()),
            },
            protocol.multiplexed(),
        )?;
        if templated_path && traffic.is_none() {
            unreachable!("a URL with a template compiles to varying traffic");
        }
        if protocol == Protocol::Sse && (traffic.is_some() || !self.request.body.is_empty()) {
            return Err(value_err(
                Field::Targets,
                "server-sent events",
                "one GET per stream, without a body: templates, data files, request lists, flows and bodies are for requests",
            ));
        }
        if protocol == Protocol::Ws && self.traffic.flow.is_some() {
            return Err(value_err(
                Field::Flow,
                "on a ws:// URL",
                "a flow on the server's http:// (or https://) URL: its WebSocket steps (websocket = true) open their sockets at their own paths there",
            ));
        }
        if protocol == Protocol::Ws && (templated_path || !self.traffic.requests.is_empty()) {
            return Err(value_err(
                Field::Targets,
                "WebSocket",
                "one message per WebSocket run, its body a template if need be (${seq}, --data): a templated URL and request lists are HTTP only so far",
            ));
        }
        if (protocol.grpc()) && !self.traffic.requests.is_empty() {
            return Err(value_err(
                Field::Targets,
                "gRPC",
                "one method per gRPC run: templates go in its message (-D), a list of requests is HTTP only",
            ));
        }
        if self.traffic.flow.is_some() && self.requests.is_some() {
            return Err(value_err(
                Field::Requests,
                self.requests.unwrap_or(0),
                "a duration (--duration) with a flow: its sessions run for a time, not a request count",
            ));
        }
        if traffic.is_some() && pipeline > 1 {
            return Err(value_err(
                Field::Pipeline,
                pipeline,
                "1 with requests that vary (templates, --data, --targets)",
            ));
        }
        let mut transport = self.transport.sized(max_connections, concurrency);
        match &mut transport {
            // Idempotent methods are always sent again when the server never read them.
            Transport::Http1 {
                retry_unprocessed, ..
            } => *retry_unprocessed |= idempotent(&method),
            Transport::Grpc { call, .. } => {
                *call = grpc.expect("a gRPC transport has its call");
            }
            Transport::Http2 { .. } | Transport::WebSocket { .. } | Transport::Sse { .. } => {}
        }
        let cfg = RunConfig {
            traffic: traffic.map(std::sync::Arc::new),
            target,
            model: self.load,
            transport,
            connections,
            max_connections,
            concurrency,
            duration: match (self.duration, self.requests) {
                (None, None) => Some(DEFAULT_DURATION),
                (d, _) => d,
            },
            requests: self.requests,
            warmup: self.warmup,
            timeout: self.timeout,
            threads,
            method,
            headers,
            body: self.request.body.clone(),
            insecure: self.insecure,
            ca_certs: match &self.ca_pem {
                Some(pem) => parse_ca(pem)?,
                None => Vec::new(),
            },
            client_cert: match &self.client_cert {
                Some(c) => Some(std::sync::Arc::new(parse_client_cert(c)?)),
                None => None,
            },
            source_addrs,
            seed: self.seed.unwrap_or_else(rand::random),
            cpus: self
                .cpus
                .as_ref()
                .map_or_else(Vec::new, |c| c.as_slice().to_vec()),
            io: self.io,
            replay: None,
        };
        if protocol == Protocol::Ws {
            // The upgrade request and the reply's template, built once here so that a
            // mistake is reported before any connection.
            crate::transport::ws::WsMessage::new(&cfg)?;
        }
        if protocol.multiplexed() {
            // The HTTP/2 header block is built here once, so that a value HTTP/2 refuses
            // is reported with the other mistakes, before any connection.
            crate::transport::http2::Template::new(&cfg).map_err(|e| {
                value_err(Field::Header, e, "header names and values valid in HTTP/2")
            })?;
        }
        Ok(cfg)
    }

    /// HTTP/1.1: `(connections, max_connections, concurrency, threads)`.
    fn http1_pool(
        &self,
        keep_alive: bool,
        pipeline: u32,
        max_connections: Option<u64>,
        threads: usize,
    ) -> Result<(u64, u64, u64, usize), ConfigError> {
        if pipeline == 0 || pipeline > 1024 {
            return Err(value_err(Field::Pipeline, pipeline, "1 to 1024"));
        }
        let open = matches!(self.load, LoadModel::Open { .. });
        if pipeline > 1 && (open || !keep_alive) {
            return Err(value_err(
                Field::Pipeline,
                pipeline,
                "pipelining needs closed loop (no --rate) and --keep-alive on",
            ));
        }
        let c = self.connections;
        if !open {
            if let Some(m) = max_connections.filter(|&m| m != c) {
                return Err(value_err(
                    Field::MaxConnections,
                    m,
                    "only with --rate (open loop); closed loop uses exactly --connections",
                ));
            }
            // In closed loop a worker without a connection has nothing to do.
            return Ok((c, c, c, threads.min(c as usize)));
        }
        let max = max_connections.unwrap_or_else(|| c.max(DEFAULT_MAX_CONNECTIONS));
        if max > MAX_CONNECTIONS {
            return Err(value_err(
                Field::MaxConnections,
                max,
                format!("at most {MAX_CONNECTIONS}"),
            ));
        }
        if max < c {
            return Err(value_err(
                Field::MaxConnections,
                max,
                format!("at least --connections ({c})"),
            ));
        }
        Ok((c, max, max, threads))
    }

    /// HTTP/2 and gRPC: `connections` fixed connections carrying `concurrency` streams.
    /// Server streams opened at a rate, each for `lifetime_ms`: open loop only, and a
    /// ceiling of streams in flight that holds what the rate opens over a lifetime
    /// (Little's law); by default that over a lifetime and a timeout (every first wait
    /// timing out), at least the open loop's default.
    fn stream_opens(
        &self,
        lifetime_ms: u64,
        concurrency: Option<u64>,
        threads: usize,
    ) -> Result<(u64, u64, u64, usize), ConfigError> {
        let LoadModel::Open { rate, .. } = self.load else {
            return Err(value_err(
                Field::StreamLifetime,
                format_ms(lifetime_ms),
                "with --rate: streams opened at a rate, each held this long (held at a count: without --stream-lifetime)",
            ));
        };
        if Duration::from_millis(lifetime_ms) > MAX_DURATION {
            return Err(value_err(
                Field::StreamLifetime,
                format_ms(lifetime_ms),
                format!("at most {}", humantime::format_duration(MAX_DURATION)),
            ));
        }
        let lifetime_s = lifetime_ms as f64 / 1000.0;
        let needed = (rate * lifetime_s).ceil() as u64;
        let timeout_s = self.timeout.as_secs_f64();
        let concurrency = match concurrency {
            Some(n) if n < needed => {
                return Err(value_err(
                    Field::Concurrency,
                    n,
                    format!(
                        "at least {needed}: {rate} streams/s each held {} are {needed} open at once (give a larger --concurrency, or a lower rate or a shorter lifetime)",
                        format_ms(lifetime_ms)
                    ),
                ));
            }
            Some(n) => n,
            None => ((rate * (lifetime_s + timeout_s)).ceil() as u64)
                .max(DEFAULT_OPEN_STREAMS)
                .max(self.connections),
        };
        if needed > MAX_CONNECTIONS {
            return Err(value_err(
                Field::Rate,
                rate,
                format!(
                    "at most {} streams/s with streams held {}: at most {MAX_CONNECTIONS} streams in flight",
                    MAX_CONNECTIONS as f64 / lifetime_s,
                    format_ms(lifetime_ms)
                ),
            ));
        }
        self.streams(Some(concurrency.min(MAX_CONNECTIONS)), threads)
    }

    fn streams(
        &self,
        concurrency: Option<u64>,
        threads: usize,
    ) -> Result<(u64, u64, u64, usize), ConfigError> {
        let c = self.connections;
        let concurrency = match (concurrency, self.load) {
            (Some(n), _) => n,
            (None, LoadModel::Closed) => c.max(DEFAULT_STREAMS),
            (None, LoadModel::Open { .. }) => c.max(DEFAULT_OPEN_STREAMS),
        };
        if concurrency > MAX_CONNECTIONS {
            return Err(value_err(
                Field::Concurrency,
                concurrency,
                format!("at most {MAX_CONNECTIONS} streams in flight"),
            ));
        }
        if concurrency < c {
            return Err(value_err(
                Field::Concurrency,
                concurrency,
                format!(
                    "at least --connections ({c}): every connection carries at least one stream"
                ),
            ));
        }
        // A worker owns whole connections.
        Ok((c, c, concurrency, threads.min(c as usize)))
    }
}

/// A duration in ms as flags take it (`1500ms`, `2s`).
fn format_ms(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// The certificates of a PEM text (at least one; anything else in it is an error).
fn parse_ca(pem: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, ConfigError> {
    use rustls::pki_types::pem::PemObject;
    let allowed = "a PEM file of certificates (-----BEGIN CERTIFICATE-----)";
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| value_err(Field::CaCert, format!("unreadable PEM ({e})"), allowed))?;
    if certs.is_empty() {
        return Err(value_err(Field::CaCert, "no certificate", allowed));
    }
    Ok(certs)
}

/// A client certificate chain and its key, checked to belong together, ready for rustls.
fn parse_client_cert(c: &super::ClientCertPem) -> Result<rustls::sign::CertifiedKey, ConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert_allowed = "a PEM file holding the client certificate (-----BEGIN CERTIFICATE-----)";
    let chain = CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            value_err(
                Field::ClientCert,
                &c.cert_file,
                format!("{cert_allowed}; this one is not PEM ({e})"),
            )
        })?;
    if chain.is_empty() {
        return Err(value_err(
            Field::ClientCert,
            &c.cert_file,
            format!("{cert_allowed}; this one has no certificate"),
        ));
    }
    let key_allowed = "a PEM file holding the private key of the --cert certificate \
                       (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY)";
    let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => "this one has no private key".into(),
            e => format!("this one is not PEM ({e})"),
        };
        value_err(
            Field::ClientKey,
            &c.key_file,
            format!("{key_allowed}; {why}"),
        )
    })?;
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        let why = match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "the private key of the --cert certificate ({}); this one does not match it",
                c.cert_file
            ),
            e => format!("{key_allowed}; rustls refuses this one ({e})"),
        };
        value_err(Field::ClientKey, &c.key_file, why)
    })
}

/// A duration above 0 (unless `zero_example` is empty: then 0 is allowed) and at most `max`.
fn check_duration(
    field: Field,
    value: Option<std::time::Duration>,
    max: std::time::Duration,
    zero_example: &str,
) -> Result<(), ConfigError> {
    let Some(d) = value else { return Ok(()) };
    let text = humantime::format_duration(d).to_string();
    if d.is_zero() && !zero_example.is_empty() {
        return Err(value_err(
            field,
            text,
            format!("a duration above 0, e.g. {zero_example}"),
        ));
    }
    if d > max {
        return Err(value_err(
            field,
            text,
            format!("at most {}", humantime::format_duration(max)),
        ));
    }
    Ok(())
}

/// A URL that holds a template: its `scheme://authority` and its path and query as written
/// (`/` first when it has no path). `None` for a URL without templates.
fn split_templated(raw: &str) -> Option<Result<(&str, String), ConfigError>> {
    if !loadlab_template::Template::has_expressions(raw) {
        return None;
    }
    let rest = raw.split_once("://").map_or(raw, |(_, r)| r);
    let start = raw.len() - rest.len();
    let (base, path) = match rest.find(['/', '?']) {
        Some(i) => (&raw[..start + i], &raw[start + i..]),
        None => (raw, ""),
    };
    if loadlab_template::Template::has_expressions(base) {
        return Some(Err(ConfigError::Url {
            url: raw.into(),
            reason: "templates go in the path and query, not in the scheme, host or port (every request of one load goes to one server)".into(),
        }));
    }
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Some(Ok((base, path)))
}

fn parse_target(raw: &str, resolve: Resolve) -> Result<Target, ConfigError> {
    let url = url::Url::parse(raw).map_err(|e| ConfigError::Url {
        url: raw.into(),
        reason: format!("{e} (expected e.g. http://127.0.0.1:8080/health)"),
    })?;
    let scheme = match url.scheme() {
        "http" | "ws" => Scheme::Http,
        "https" | "wss" => Scheme::Https,
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
    let mut addrs: Vec<SocketAddr> = match (resolve, host.parse::<IpAddr>()) {
        (_, Ok(ip)) => vec![SocketAddr::new(ip, port)],
        (Resolve::Offline, Err(_)) => Vec::new(),
        (Resolve::Yes, Err(_)) => (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| ConfigError::Resolve {
                url: raw.into(),
                host: host.clone(),
                reason: e.to_string(),
            })?
            .collect(),
    };
    if addrs.is_empty() && resolve == Resolve::Yes {
        return Err(ConfigError::Resolve {
            url: raw.into(),
            host,
            reason: "no addresses".into(),
        });
    }
    // A name with several addresses (`localhost` is `::1` and `127.0.0.1` on a standard
    // Debian): the run's connections go to the first one that accepts, as curl's and wrk's.
    if resolve == Resolve::Yes {
        loadlab_system::net::reachable_first(&mut addrs, std::time::Duration::from_secs(1));
    }
    Ok(Target {
        url: raw.into(),
        scheme,
        host,
        port,
        path_and_query,
        addrs,
        websocket: matches!(url.scheme(), "ws" | "wss"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Arrival;
    use std::time::Duration;

    fn workload(url: &str) -> Workload {
        Workload {
            url: url.into(),
            ..Workload::default()
        }
    }

    #[test]
    fn rejects_bad_urls_and_schemes() {
        assert!(matches!(
            workload("not a url").validate(),
            Err(ConfigError::Url { .. })
        ));
        let e = workload("ftp://127.0.0.1/").validate().unwrap_err();
        assert!(e.to_string().contains("unsupported scheme `ftp`"), "{e}");
    }

    /// A server-streaming call opened at `rate` streams/s, each held `lifetime_ms`.
    fn stream_opens(rate: Option<f64>, lifetime_ms: u64, server_streaming: bool) -> Workload {
        Workload {
            url: "http://127.0.0.1:1".into(),
            load: rate.map_or(LoadModel::Closed, |rate| LoadModel::Open {
                rate,
                arrival: Arrival::Constant,
            }),
            transport: Transport::Grpc {
                call: loadlab_grpc::GrpcCall {
                    path: "/ticker.Ticker/Subscribe".into(),
                    frame: bytes::Bytes::from_static(&[0, 0, 0, 0, 0]),
                    metadata: vec![],
                    template: None,
                    server_streaming,
                    bidirectional: false,
                    client_streaming: false,
                    messages_per_call: 0,
                    sent_at: None,
                    match_field: None,
                    lifetime_ms,
                },
                concurrency: None,
            },
            ..Workload::default()
        }
    }

    #[test]
    fn streams_opened_at_a_rate_need_the_rate_a_server_stream_and_room_for_their_lifetime() {
        let c = stream_opens(Some(200.0), 10_000, true).validate().unwrap();
        assert_eq!(c.transport.protocol(), Protocol::GrpcStreamOpens);
        assert!(c.transport.server_streams());
        // By default the ceiling holds what the rate opens over a lifetime and a timeout
        // (200/s × (10 s + 5 s)), beyond the open loop's 1,024.
        assert_eq!(c.concurrency, 3000);
        assert_eq!(
            stream_opens(Some(2.0), 500, true)
                .validate()
                .unwrap()
                .concurrency,
            DEFAULT_OPEN_STREAMS
        );
        // Closed loop: no rate to open them at.
        let e = stream_opens(None, 500, true).validate().unwrap_err();
        assert_eq!(e.field(), Field::StreamLifetime, "{e}");
        assert!(e.to_string().contains("with --rate"), "{e}");
        // A unary method has no stream to hold.
        let e = stream_opens(Some(10.0), 500, false).validate().unwrap_err();
        assert_eq!(e.field(), Field::StreamLifetime, "{e}");
        assert!(e.to_string().contains("server-streaming"), "{e}");
        // A ceiling below rate × lifetime (Little's law) would queue the arrivals in
        // loadlab and blame the server: refused with the count it needs.
        let mut w = stream_opens(Some(100.0), 2_000, true);
        if let Transport::Grpc { concurrency, .. } = &mut w.transport {
            *concurrency = Some(150);
        }
        let e = w.validate().unwrap_err();
        assert_eq!(e.field(), Field::Concurrency, "{e}");
        assert!(e.to_string().contains("at least 200"), "{e}");
    }

    #[test]
    fn rejects_zero_rate_and_duration() {
        let mut w = workload("http://127.0.0.1:1/");
        w.load = LoadModel::Open {
            rate: 0.0,
            arrival: Arrival::Constant,
        };
        assert!(w.validate().unwrap_err().to_string().contains("--rate"));
        w.load = LoadModel::Open {
            rate: -3.0,
            arrival: Arrival::Constant,
        };
        let e = w.validate().unwrap_err();
        assert_eq!(e.field(), Field::Rate);
        assert!(
            matches!(&e, ConfigError::Value { value, .. } if value == "-3"),
            "{e}"
        );
        let mut w = workload("http://127.0.0.1:1/");
        w.duration = Some(Duration::ZERO);
        assert!(w.validate().unwrap_err().to_string().contains("--duration"));
    }

    #[test]
    fn defaults_to_ten_seconds_and_parses_path() {
        let c = workload("http://127.0.0.1:8080/a/b?x=1")
            .validate()
            .unwrap();
        assert_eq!(c.duration, Some(Duration::from_secs(10)));
        assert_eq!(c.target.path_and_query, "/a/b?x=1");
        assert_eq!(c.target.port, 8080);
        assert_eq!(c.model, LoadModel::Closed);
        assert_eq!(c.connections, 64);
    }

    #[test]
    fn headers_are_checked() {
        let mut w = workload("http://127.0.0.1:1/");
        w.request.headers = vec!["X-Ok: yes".into()];
        assert_eq!(
            w.validate().unwrap().headers[0],
            ("X-Ok".into(), "yes".into())
        );
        w.request.headers = vec!["no colon".into()];
        assert!(w
            .validate()
            .unwrap_err()
            .to_string()
            .contains("-H/--header"));
        w.request.headers = vec!["Connection: close".into()];
        w.transport = Transport::Http2 { concurrency: None };
        assert_eq!(w.check().unwrap_err().field(), Field::Header);
    }

    #[test]
    fn offline_checks_skip_lookups_but_not_literal_families() {
        let mut w = workload("http://no-such-host.invalid:1/");
        assert!(w.check().is_ok());
        assert!(matches!(w.validate(), Err(ConfigError::Resolve { .. })));
        w.url = "http://[::1]:1/".into();
        w.source_addrs = Some("4".parse().unwrap());
        assert_eq!(w.check().unwrap_err().field(), Field::SourceAddrs);
    }

    #[test]
    fn open_loop_pools_and_streams_get_their_defaults() {
        let mut w = workload("http://127.0.0.1:1/");
        w.load = LoadModel::Open {
            rate: 100.0,
            arrival: Arrival::Constant,
        };
        let c = w.validate().unwrap();
        assert_eq!((c.connections, c.max_connections), (64, 1024));
        w.transport = Transport::Http2 { concurrency: None };
        let c = w.validate().unwrap();
        assert_eq!(
            (c.connections, c.max_connections, c.concurrency),
            (64, 64, 1024)
        );
        w.transport = Transport::Http2 {
            concurrency: Some(8),
        };
        assert_eq!(w.check().unwrap_err().field(), Field::Concurrency);
    }
}
