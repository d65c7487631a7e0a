//! The HTTP/2 transport (plain HTTP/2 and gRPC unary calls), built on the `h2` crate.
//!
//! A worker owns a few [`H2Conn`]s; each request loop (a *stream slot*) is bound to one of
//! them and sends its requests as streams on it, so `concurrency` slots spread over
//! `connections` connections give `concurrency` requests in flight (ghz's `-c` and
//! `--connections`, h2load's `-c` × `-m`). A connection is opened by the first slot that
//! needs it, driven by a task of its own, and reopened by the next slot after it dies.
//!
//! The request loop, deadlines and recording are the worker's; this module provides the
//! request [`Template`], the shared connection state and the reply classification.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, TE, USER_AGENT};
use loadlab_grpc::GrpcStatus;
use tokio::sync::Notify;

use crate::config::{Protocol, RunConfig, Scheme};

/// Stream-level flow-control window the client announces: large enough that response
/// bodies are never held back by the client's window.
pub const STREAM_WINDOW: u32 = 1 << 20;
/// Connection-level flow-control window.
pub const CONNECTION_WINDOW: u32 = 1 << 24;

/// The request every stream sends, built once.
#[derive(Debug)]
pub struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Option<Bytes>,
    grpc: bool,
}

impl Template {
    /// Builds the request of `cfg`; `Err` names a header that HTTP/2 cannot carry.
    pub fn new(cfg: &RunConfig) -> Result<Template, String> {
        let t = &cfg.target;
        let scheme = match t.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let host = if t.host.contains(':') {
            format!("[{}]", t.host)
        } else {
            t.host.clone()
        };
        let uri: http::Uri = format!("{scheme}://{host}:{}{}", t.port, t.path_and_query)
            .parse()
            .map_err(|e| format!("{} ({e})", t.url))?;
        let method = http::Method::from_bytes(cfg.method.as_bytes())
            .map_err(|e| format!("{} ({e})", cfg.method))?;
        let mut headers = http::HeaderMap::new();
        let grpc = cfg.protocol == Protocol::Grpc;
        let mut add = |name: &str, value: &str| -> Result<(), String> {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name} ({e})"))?;
            let v = HeaderValue::from_str(value).map_err(|e| format!("{name}: {value} ({e})"))?;
            headers.append(n, v);
            Ok(())
        };
        for (name, value) in &cfg.headers {
            add(name, value)?;
        }
        let body = match &cfg.grpc {
            Some(call) => {
                add(CONTENT_TYPE.as_str(), "application/grpc")?;
                add(TE.as_str(), "trailers")?;
                for (name, value) in &call.metadata {
                    add(name, value)?;
                }
                Some(call.frame.clone())
            }
            None if cfg.body.is_empty() => None,
            None => Some(Bytes::from(cfg.body.clone())),
        };
        if !headers.contains_key(USER_AGENT) {
            let agent = concat!("loadlab/", env!("CARGO_PKG_VERSION"));
            headers.insert(USER_AGENT, HeaderValue::from_static(agent));
        }
        Ok(Template {
            method,
            uri,
            headers,
            body,
            grpc,
        })
    }

    /// A request to send now, `remaining_ns` before its deadline (sent to gRPC servers
    /// as `grpc-timeout`, so the server gives up when the client does).
    pub fn request(&self, remaining_ns: u64) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        if self.grpc {
            r.headers_mut()
                .insert("grpc-timeout", grpc_timeout(remaining_ns));
        }
        r
    }

    /// The request body (the gRPC frame), if any.
    pub fn body(&self) -> Option<&Bytes> {
        self.body.as_ref()
    }

    /// True for gRPC calls.
    pub fn is_grpc(&self) -> bool {
        self.grpc
    }
}

/// The `grpc-timeout` value for `ns` nanoseconds: whole milliseconds rounded up (at most
/// 8 digits, as the gRPC spec allows), or seconds beyond that.
pub fn grpc_timeout(ns: u64) -> HeaderValue {
    let ms = ns.div_ceil(1_000_000).max(1);
    let text = if ms <= 99_999_999 {
        format!("{ms}m")
    } else {
        format!("{}S", ms.div_ceil(1000).min(99_999_999))
    };
    HeaderValue::from_str(&text).expect("digits and a unit letter")
}

/// The `grpc-status` of a header block; a value that is not a defined code counts as
/// UNKNOWN, as the gRPC spec tells clients to do.
pub fn grpc_status(headers: &http::HeaderMap) -> Option<GrpcStatus> {
    headers
        .get("grpc-status")
        .map(|v| GrpcStatus::from_trailer(v.as_bytes()).unwrap_or(GrpcStatus::Unknown))
}

/// One HTTP/2 connection shared by the stream slots bound to it.
#[derive(Default)]
pub struct H2Conn {
    /// The live connection's handle, `None` before the first connect and after it died.
    send: RefCell<Option<SendRequest<Bytes>>>,
    /// Increments with each new connection, so a slot can tell its cached handle is stale.
    generation: Cell<u64>,
    /// A slot is connecting; the others wait on `changed`.
    connecting: Cell<bool>,
    changed: Notify,
}

impl H2Conn {
    /// The live connection's handle and generation, if any.
    pub fn current(&self) -> Option<(u64, SendRequest<Bytes>)> {
        self.send
            .borrow()
            .as_ref()
            .map(|s| (self.generation.get(), s.clone()))
    }

    /// Installs a new connection's handle; returns its generation.
    pub fn install(&self, send: SendRequest<Bytes>) -> u64 {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        *self.send.borrow_mut() = Some(send);
        generation
    }

    /// Forgets the connection of `generation` (it failed or its driver ended).
    pub fn invalidate(&self, generation: u64) {
        if self.generation.get() == generation {
            self.send.borrow_mut().take();
        }
    }

    /// True if `generation` is still the live connection.
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.get() == generation && self.send.borrow().is_some()
    }

    /// Claims the right to connect; `None` while another slot is connecting (wait with
    /// [`H2Conn::changed`] and look again).
    pub fn begin_connect(&self) -> Option<ConnectingGuard<'_>> {
        if self.connecting.replace(true) {
            return None;
        }
        Some(ConnectingGuard(self))
    }

    /// Resolves when a connect attempt ends (created before looking, so no wake-up is lost).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// Held while a slot connects; dropping it (success, failure or a timeout cancelling the
/// attempt) lets the waiting slots look again.
pub struct ConnectingGuard<'a>(&'a H2Conn);

impl Drop for ConnectingGuard<'_> {
    fn drop(&mut self) {
        self.0.connecting.set(false);
        self.0.changed.notify_waiters();
    }
}

/// A stream slot's link to its connection, with the handle it last used.
pub struct Slot {
    /// The connection this slot sends on.
    pub conn: Rc<H2Conn>,
    /// Cached handle and its generation.
    pub cached: Option<(u64, SendRequest<Bytes>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_round_up_and_fit_eight_digits() {
        assert_eq!(grpc_timeout(1), "1m");
        assert_eq!(grpc_timeout(5_000_000_000), "5000m");
        assert_eq!(grpc_timeout(5_000_000_001), "5001m");
        assert_eq!(grpc_timeout(200_000_000_000_000), "200000S");
    }

    #[test]
    fn grpc_status_reads_codes_and_maps_junk_to_unknown() {
        let mut h = http::HeaderMap::new();
        assert_eq!(grpc_status(&h), None);
        h.insert("grpc-status", HeaderValue::from_static("4"));
        assert_eq!(grpc_status(&h), Some(GrpcStatus::DeadlineExceeded));
        h.insert("grpc-status", HeaderValue::from_static("99"));
        assert_eq!(grpc_status(&h), Some(GrpcStatus::Unknown));
    }
}
