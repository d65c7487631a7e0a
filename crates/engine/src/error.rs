//! Error taxonomy: cheap `Copy` classes for the hot path, and typed errors for the
//! library's callers.

use std::io;

use serde::{Deserialize, Serialize};

/// Why one request did not produce a successful response. Counted per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The target refused the TCP connection (`ECONNREFUSED`).
    ConnectRefused,
    /// The TCP (or TLS) connection was not established before the request's deadline.
    ConnectTimeout,
    /// The peer reset the connection (`ECONNRESET`, `EPIPE`).
    ConnectionReset,
    /// The peer closed the connection cleanly before a complete response arrived.
    ConnectionClosed,
    /// The response did not complete before the request's deadline.
    RequestTimeout,
    /// A complete response with a 4xx status.
    #[serde(rename = "http_4xx")]
    Http4xx,
    /// A complete response with a 5xx status.
    #[serde(rename = "http_5xx")]
    Http5xx,
    /// Bytes that are not a valid HTTP/1.1 response (or WebSocket frame).
    MalformedResponse,
    /// No local port (or address) was available for a new connection (`EADDRNOTAVAIL`).
    LocalPortExhaustion,
    /// The process or the system ran out of file descriptors (`EMFILE`, `ENFILE`).
    FdExhaustion,
    /// The TLS handshake failed (certificate, protocol).
    TlsHandshake,
    /// HTTP/2: the server reset the stream (RST_STREAM) or closed the connection (GOAWAY)
    /// before the response completed.
    StreamReset,
    /// gRPC: the call ended with a status other than OK (counted per code in
    /// `grpc_status`), including DEADLINE_EXCEEDED when the client's deadline passed.
    GrpcStatus,
    /// A session's extract rule found no value in a response (the response itself may be a
    /// success); it ends the session.
    ExtractFailed,
    /// WebSocket: the server did not switch protocols (its answer to the upgrade was not a
    /// WebSocket server's 101; a 4xx or 5xx counts as `http_4xx` or `http_5xx`).
    WsHandshake,
    /// Any other I/O failure.
    Other,
}

impl ErrorClass {
    /// Every class, in the order results list them.
    pub const ALL: [ErrorClass; 16] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectionReset,
        ErrorClass::ConnectionClosed,
        ErrorClass::RequestTimeout,
        ErrorClass::Http4xx,
        ErrorClass::Http5xx,
        ErrorClass::MalformedResponse,
        ErrorClass::LocalPortExhaustion,
        ErrorClass::FdExhaustion,
        ErrorClass::TlsHandshake,
        ErrorClass::StreamReset,
        ErrorClass::GrpcStatus,
        ErrorClass::ExtractFailed,
        ErrorClass::WsHandshake,
        ErrorClass::Other,
    ];
    /// Number of classes.
    pub const COUNT: usize = Self::ALL.len();

    /// Index into per-class counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The class's name in results (snake case).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::ConnectionReset => "connection_reset",
            ErrorClass::ConnectionClosed => "connection_closed",
            ErrorClass::RequestTimeout => "request_timeout",
            ErrorClass::Http4xx => "http_4xx",
            ErrorClass::Http5xx => "http_5xx",
            ErrorClass::MalformedResponse => "malformed_response",
            ErrorClass::LocalPortExhaustion => "local_port_exhaustion",
            ErrorClass::FdExhaustion => "fd_exhaustion",
            ErrorClass::TlsHandshake => "tls_handshake",
            ErrorClass::StreamReset => "stream_reset",
            ErrorClass::GrpcStatus => "grpc_status",
            ErrorClass::ExtractFailed => "extract_failed",
            ErrorClass::WsHandshake => "ws_handshake",
            ErrorClass::Other => "other",
        }
    }

    /// The class of a [`name`](ErrorClass::name).
    pub fn from_name(name: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.name() == name)
    }

    /// A human description for summaries.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connection refused (ECONNREFUSED)",
            ErrorClass::ConnectTimeout => "connect timed out",
            ErrorClass::ConnectionReset => "connection reset by peer",
            ErrorClass::ConnectionClosed => "connection closed before the response completed",
            ErrorClass::RequestTimeout => "request timed out",
            ErrorClass::Http4xx => "HTTP 4xx response",
            ErrorClass::Http5xx => "HTTP 5xx response",
            ErrorClass::MalformedResponse => "malformed HTTP response (or WebSocket frame)",
            ErrorClass::LocalPortExhaustion => "local port exhaustion (EADDRNOTAVAIL)",
            ErrorClass::FdExhaustion => "file-descriptor exhaustion (EMFILE/ENFILE)",
            ErrorClass::TlsHandshake => "TLS handshake failed",
            ErrorClass::StreamReset => {
                "HTTP/2 stream reset or connection closed (RST_STREAM/GOAWAY)"
            }
            ErrorClass::GrpcStatus => "gRPC status other than OK",
            ErrorClass::ExtractFailed => "a session's extract rule found no value",
            ErrorClass::WsHandshake => {
                "WebSocket upgrade not accepted (no 101 Switching Protocols)"
            }
            ErrorClass::Other => "other I/O error",
        }
    }

    /// Classifies an I/O error raised while connecting (`connecting = true`) or while
    /// exchanging a request on an established connection.
    pub fn from_io(err: &io::Error, connecting: bool) -> ErrorClass {
        match err.raw_os_error() {
            Some(libc::ECONNREFUSED) => return ErrorClass::ConnectRefused,
            Some(libc::EADDRNOTAVAIL) => return ErrorClass::LocalPortExhaustion,
            Some(libc::EMFILE) | Some(libc::ENFILE) => return ErrorClass::FdExhaustion,
            Some(libc::ETIMEDOUT) if connecting => return ErrorClass::ConnectTimeout,
            _ => {}
        }
        match err.kind() {
            io::ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ErrorClass::ConnectionReset,
            io::ErrorKind::UnexpectedEof => ErrorClass::ConnectionClosed,
            io::ErrorKind::AddrNotAvailable => ErrorClass::LocalPortExhaustion,
            io::ErrorKind::TimedOut if connecting => ErrorClass::ConnectTimeout,
            io::ErrorKind::TimedOut => ErrorClass::RequestTimeout,
            io::ErrorKind::InvalidData if !connecting => ErrorClass::MalformedResponse,
            _ if connecting && is_tls_error(err) => ErrorClass::TlsHandshake,
            _ => ErrorClass::Other,
        }
    }
}

/// Failures counted per class. In JSON an object with every class's name as a key
/// (`{"connect_refused": 0, ...}`), so readers index it by [`ErrorClass`], never by string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; ErrorClass::COUNT]);

impl ErrorCounts {
    /// Counts taken from per-class counters indexed by [`ErrorClass::index`].
    pub fn from_array(counts: [u64; ErrorClass::COUNT]) -> ErrorCounts {
        ErrorCounts(counts)
    }

    /// The sum over every class.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Whether no class counted anything.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&n| n == 0)
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// Every class with its count, in [`ErrorClass::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (ErrorClass, u64)> + '_ {
        ErrorClass::ALL.iter().map(|&c| (c, self.0[c.index()]))
    }

    /// The sum over `classes`.
    pub fn sum_of(&self, classes: &[ErrorClass]) -> u64 {
        classes.iter().map(|&c| self[c]).sum()
    }
}

impl std::ops::Index<ErrorClass> for ErrorCounts {
    type Output = u64;
    fn index(&self, class: ErrorClass) -> &u64 {
        &self.0[class.index()]
    }
}

impl std::ops::IndexMut<ErrorClass> for ErrorCounts {
    fn index_mut(&mut self, class: ErrorClass) -> &mut u64 {
        &mut self.0[class.index()]
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Sorted by name, as the `BTreeMap` results were written with before this type.
        let mut by_name: Vec<_> = self.iter().map(|(c, n)| (c.name(), n)).collect();
        by_name.sort_unstable();
        let mut map = s.serialize_map(Some(by_name.len()))?;
        for (name, n) in by_name {
            map.serialize_entry(name, &n)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ErrorCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ErrorCounts, D::Error> {
        // A class missing from an older result counts 0; an unknown name is an error.
        let map = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        let mut counts = ErrorCounts::default();
        for (name, n) in map {
            let class = ErrorClass::from_name(&name)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown error class `{name}`")))?;
            counts[class] = n;
        }
        Ok(counts)
    }
}

fn is_tls_error(err: &io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// Errors that stop a run before or while it starts. Each names the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The run configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::error::ConfigError),
    /// The planned connections do not fit in the process's file-descriptor limit.
    #[error(
        "{needed} file descriptors are needed for {connections} connections, but the nofile limit is \
         {soft} (hard limit {hard}); raise it with `ulimit -n {needed}` in this shell, or \
         `nofile` in /etc/security/limits.conf (and LimitNOFILE= for systemd services), or lower \
         --connections/--max-connections"
    )]
    FdLimit {
        /// File descriptors the run needs.
        needed: u64,
        /// Connections planned.
        connections: u64,
        /// Current soft limit.
        soft: u64,
        /// Current hard limit.
        hard: u64,
    },
    /// A worker thread or its runtime could not start.
    #[error("cannot start worker thread: {0}")]
    Worker(io::Error),
    /// A worker thread panicked; results measured by the others are lost.
    #[error("a worker thread panicked: {0}")]
    WorkerPanic(String),
    /// A timed replay's log cannot be read.
    #[error("the replay's log: {0}")]
    Replay(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_indices_dense() {
        let mut names: Vec<_> = ErrorClass::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorClass::COUNT);
        for (i, c) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            // serde spells each class as results do.
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
    }

    #[test]
    fn counts_serialize_as_a_map_of_every_class_by_name() {
        let mut counts = ErrorCounts::default();
        counts[ErrorClass::Http5xx] = 3;
        counts[ErrorClass::ConnectRefused] = 1;
        let json = serde_json::to_value(counts).unwrap();
        let obj = json.as_object().unwrap();
        assert_eq!(obj.len(), ErrorClass::COUNT);
        assert_eq!(obj["http_5xx"], 3);
        assert_eq!(obj["connect_refused"], 1);
        assert_eq!(obj["other"], 0);
        let keys: Vec<_> = obj.keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "keys in name order, as before");
        let back: ErrorCounts = serde_json::from_value(json).unwrap();
        assert_eq!(back, counts);
        assert_eq!(back.total(), 4);
        let old: ErrorCounts = serde_json::from_str(r#"{"http_4xx": 2}"#).unwrap();
        assert_eq!(old[ErrorClass::Http4xx], 2);
        assert!(serde_json::from_str::<ErrorCounts>(r#"{"nope": 2}"#).is_err());
    }

    #[test]
    fn classifies_os_errors() {
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(
            ErrorClass::from_io(&e, true),
            ErrorClass::LocalPortExhaustion
        );
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(ErrorClass::from_io(&e, true), ErrorClass::FdExhaustion);
        let e = io::Error::from_raw_os_error(libc::ECONNRESET);
        assert_eq!(ErrorClass::from_io(&e, false), ErrorClass::ConnectionReset);
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(ErrorClass::from_io(&e, true), ErrorClass::ConnectRefused);
    }
}
