//! The HTTP/2 transport (plain HTTP/2 and gRPC unary calls), on a client of its own
//! ([`client`]): the `h2` crate it replaced spent 2.3× h2load's user time per request.
//!
//! A worker owns a few [`H2Conn`]s; each request loop (a *stream slot*) is bound to one of
//! them and sends its requests as streams on it, so `concurrency` slots spread over
//! `connections` connections give `concurrency` requests in flight (ghz's `-c` and
//! `--connections`, h2load's `-c` × `-m`). A connection is opened by the first slot that
//! needs it, driven by a task of its own, and reopened by the next slot after it dies.
//!
//! The request loop and deadlines are the worker's; `link` sends streams and records
//! their replies; this module provides the request [`Template`] (its header block encoded
//! once) and the shared connection.
//!
//! A server closing a connection gracefully sends `GOAWAY` with the last stream it
//! processed; the streams above it were never processed and may be sent again on another
//! connection (RFC 9113 §6.8), as may streams refused with `REFUSED_STREAM` (§8.7): the
//! client tells those apart from streams cut later ([`client::StreamFailure`]).

pub(crate) mod client;
pub(crate) mod hpack;
pub(crate) mod link;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, TE, USER_AGENT};
use tokio::sync::Notify;

use crate::config::{Protocol, RunConfig, Scheme};
use client::Client;

/// The largest response header block accepted (as sent: the client decodes only the
/// fields it reads, so it counts the block's bytes, not the decoded list).
pub const MAX_HEADER_LIST: u32 = 256 << 10;
/// Stream-level flow-control window the client announces: large enough that response
/// bodies are never held back by the client's window.
pub const STREAM_WINDOW: u32 = 1 << 20;
/// Connection-level flow-control window.
pub const CONNECTION_WINDOW: u32 = 1 << 24;

/// The request every stream sends, built once.
#[derive(Debug)]
pub struct Template {
    /// The header block (pseudo-headers, then the headers), HPACK-encoded once.
    head: Vec<u8>,
    body: Option<Bytes>,
    grpc: bool,
    /// A server-streaming call ([`Template::is_streaming`]).
    streaming: bool,
    /// A bidirectional call ([`Template::is_bidirectional`]).
    bidirectional: bool,
    /// A client-streaming call's messages ([`Template::messages_per_call`]); 0 otherwise.
    messages_per_call: u32,
    /// A server-streaming or bidirectional call's `--sent-at` field ([`Template::sent_at`]).
    sent_at: Option<loadlab_grpc::fields::FieldPath>,
    /// A bidirectional call's `--match-field` ([`Template::match_field`]).
    match_field: Option<Box<loadlab_grpc::MatchField>>,
    /// A server stream opened at a rate: its lifetime, ns ([`Template::lifetime_ns`]).
    lifetime_ns: u64,
}

/// A stream slot's last `grpc-timeout` value: in closed loop every call has the whole
/// timeout left, so the same value is sent again (not a new string per call).
#[derive(Debug, Default)]
pub(crate) struct TimeoutCache(Option<(u64, HeaderValue)>);

impl TimeoutCache {
    /// The `grpc-timeout` value for `remaining_ns`.
    pub(crate) fn value(&mut self, remaining_ns: u64) -> &HeaderValue {
        let ms = timeout_ms(remaining_ns);
        if !matches!(&self.0, Some((m, _)) if *m == ms) {
            self.0 = Some((ms, grpc_timeout(remaining_ns)));
        }
        &self.0.as_ref().expect("set above").1
    }

    /// Appends the `grpc-timeout` field for `remaining_ns` to a header block.
    pub(crate) fn encode(&mut self, out: &mut Vec<u8>, remaining_ns: u64) {
        hpack::encode_literal(out, b"grpc-timeout", self.value(remaining_ns).as_bytes());
    }
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2): they describe an HTTP/1.1 connection (the
/// flags' and plans' headers are refused earlier, by name; this also covers gRPC metadata
/// and `te` other than `trailers`). `value` is `None` when it is a template (rendered per
/// request): only the name is checked.
fn connection_specific(name: &HeaderName, value: Option<&[u8]>) -> bool {
    crate::config::values::is_connection_header(name.as_str())
        || (name == TE && value.is_some_and(|v| v != b"trailers"))
}

/// Checks a header HTTP/2 is to carry; `Err` says why it cannot.
fn check_header(name: &HeaderName, value: Option<&[u8]>) -> Result<(), String> {
    if connection_specific(name, value) {
        return Err(format!(
            "{name} (a connection-specific header, which HTTP/2 forbids: RFC 9113 §8.2.2)"
        ));
    }
    Ok(())
}

impl Template {
    /// Builds the request of `cfg`; `Err` names a header that HTTP/2 cannot carry.
    pub fn new(cfg: &RunConfig) -> Result<Template, String> {
        let t = &cfg.target;
        let uri: http::Uri = format!("{}{}", origin(cfg), t.path_and_query)
            .parse()
            .map_err(|e| format!("{} ({e})", t.url))?;
        let method = http::Method::from_bytes(cfg.method.as_bytes())
            .map_err(|e| format!("{} ({e})", cfg.method))?;
        let mut headers = http::HeaderMap::new();
        let protocol = cfg.transport.protocol();
        let grpc = protocol.grpc();
        let streaming = matches!(
            protocol,
            Protocol::GrpcServerStream | Protocol::GrpcStreamOpens
        );
        let lifetime_ns = cfg
            .transport
            .stream_lifetime()
            .map_or(0, |d| d.as_nanos() as u64);
        let bidirectional = protocol == Protocol::GrpcBidi;
        let messages_per_call = match cfg.transport.grpc() {
            Some(call) if call.client_streaming => call.messages_per_call.max(1),
            _ => 0,
        };
        let mut add = |name: &str, value: &str| -> Result<(), String> {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name} ({e})"))?;
            let v = HeaderValue::from_str(value).map_err(|e| format!("{name}: {value} ({e})"))?;
            check_header(&n, Some(v.as_bytes()))?;
            headers.append(n, v);
            Ok(())
        };
        for (name, value) in &cfg.headers {
            add(name, value)?;
        }
        let body = match cfg.transport.grpc() {
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
        let mut head = Vec::new();
        let authority = uri.authority().map_or("", |a| a.as_str());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        client::encode_head(
            &mut head,
            method.as_str().as_bytes(),
            t.scheme == Scheme::Https,
            authority.as_bytes(),
            path.as_bytes(),
            headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        );
        let sent_at = cfg
            .transport
            .grpc()
            .and_then(|c| c.sent_at.clone())
            .filter(|_| streaming || bidirectional);
        let match_field = cfg
            .transport
            .grpc()
            .and_then(|c| c.match_field.clone())
            .filter(|_| bidirectional);
        Ok(Template {
            head,
            body,
            grpc,
            streaming,
            bidirectional,
            messages_per_call,
            sent_at,
            match_field,
            lifetime_ns,
        })
    }

    /// The request's header block (a gRPC call's `grpc-timeout` follows it, per call).
    pub(crate) fn head(&self) -> &[u8] {
        &self.head
    }

    /// The request body (the gRPC frame), if any.
    pub fn body(&self) -> Option<&Bytes> {
        self.body.as_ref()
    }

    /// True for gRPC calls.
    pub fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// True for server-streaming gRPC calls: a stream is held, each message a reply.
    pub fn is_streaming(&self) -> bool {
        self.streaming
    }

    /// A server stream opened at a rate: each stream's lifetime, ns (0: streams held).
    pub fn lifetime_ns(&self) -> u64 {
        self.lifetime_ns
    }

    /// True for bidirectional gRPC calls: a stream is held, the body sent on it as one
    /// message after another, each message the server sends a reply.
    pub fn is_bidirectional(&self) -> bool {
        self.bidirectional
    }

    /// A client-streaming gRPC call: the messages each call sends (on a stream held until
    /// then, the body once per message) before it ends its side and the server's one reply
    /// answers them all; `None` for the other kinds.
    pub fn messages_per_call(&self) -> Option<u32> {
        (self.messages_per_call > 0).then_some(self.messages_per_call)
    }

    /// A server-streaming call's field saying when the server sent each message
    /// (`--sent-at`).
    pub(crate) fn sent_at(&self) -> Option<&loadlab_grpc::fields::FieldPath> {
        self.sent_at.as_ref()
    }

    /// A bidirectional call's field its replies echo from their messages (`--match-field`).
    pub(crate) fn match_field(&self) -> Option<&loadlab_grpc::MatchField> {
        self.match_field.as_deref()
    }

    /// The fields each message the server sends is read for: `--sent-at`'s, then
    /// `--match-field`'s (`None` when neither is asked for).
    pub(crate) fn taps(&self) -> Option<[Option<loadlab_grpc::fields::FieldPath>; 2]> {
        let fields = [
            self.sent_at.clone(),
            self.match_field.as_ref().map(|m| m.reply.clone()),
        ];
        fields.iter().any(Option::is_some).then_some(fields)
    }

    /// True for the calls whose stream is held and whose messages go as arrivals come
    /// (bidirectional and client streaming).
    pub fn sends_messages(&self) -> bool {
        self.bidirectional || self.messages_per_call > 0
    }
}

/// One kind of request of a run whose requests vary, as HTTP/2 parts compiled once: what
/// is fixed is built here, the templates are rendered per stream into its header block.
#[derive(Debug)]
pub struct H2Request {
    method: http::Method,
    https: bool,
    /// `host:port` (an IPv6 host in brackets).
    authority: Vec<u8>,
    path: Template2,
    /// The fixed headers (and `user-agent` unless given).
    headers: http::HeaderMap,
    /// Headers whose values are templates.
    varying: Vec<(HeaderName, Template2)>,
    body: Template2,
    /// gRPC: the message rendered into its frame per call (the body unused).
    message: Option<loadlab_grpc::CompiledMessage>,
}

/// A template, or what it renders to when it is fixed (built once).
#[derive(Debug)]
enum Template2 {
    Fixed(Bytes),
    Varies(loadlab_template::Template),
}

impl Template2 {
    fn of(t: &loadlab_template::Template) -> Template2 {
        match t.as_literal() {
            Some(b) => Template2::Fixed(Bytes::copy_from_slice(b)),
            None => Template2::Varies(t.clone()),
        }
    }

    fn render(
        &self,
        draw: &loadlab_template::Draw<'_>,
        gen: &mut loadlab_template::Generator,
        scratch: &mut Vec<u8>,
    ) -> Bytes {
        match self {
            Template2::Fixed(b) => b.clone(),
            Template2::Varies(t) => {
                scratch.clear();
                t.render(draw, gen, scratch);
                Bytes::copy_from_slice(scratch)
            }
        }
    }
}

impl H2Request {
    /// Kind `k` on `cfg`'s target; `Err` names a header HTTP/2 cannot carry.
    pub fn new(cfg: &RunConfig, k: &crate::traffic::Kind) -> Result<H2Request, String> {
        let method = http::Method::from_bytes(k.method.as_bytes())
            .map_err(|e| format!("{} ({e})", k.method))?;
        let mut headers = http::HeaderMap::new();
        let mut varying = Vec::new();
        for (name, value) in &k.headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name} ({e})"))?;
            match value.as_literal() {
                Some(v) => {
                    let v = HeaderValue::from_bytes(v)
                        .map_err(|e| format!("{name}: {} ({e})", String::from_utf8_lossy(v)))?;
                    check_header(&n, Some(v.as_bytes()))?;
                    headers.append(n, v);
                }
                None => {
                    check_header(&n, None)?;
                    varying.push((n, Template2::of(value)));
                }
            }
        }
        if let (Some(_), Some(call)) = (&k.message, cfg.transport.grpc()) {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            headers.insert(TE, HeaderValue::from_static("trailers"));
            for (name, value) in &call.metadata {
                let n =
                    HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name} ({e})"))?;
                let v =
                    HeaderValue::from_str(value).map_err(|e| format!("{name}: {value} ({e})"))?;
                check_header(&n, Some(v.as_bytes()))?;
                headers.append(n, v);
            }
        }
        if !headers.contains_key(USER_AGENT) && !varying.iter().any(|(n, _)| n == USER_AGENT) {
            let agent = concat!("loadlab/", env!("CARGO_PKG_VERSION"));
            headers.insert(USER_AGENT, HeaderValue::from_static(agent));
        }
        let origin = origin(cfg);
        let authority = origin.split_once("://").map_or("", |(_, a)| a);
        Ok(H2Request {
            method,
            https: cfg.target.scheme == Scheme::Https,
            authority: authority.as_bytes().to_vec(),
            path: Template2::of(&k.path),
            headers,
            varying,
            body: Template2::of(&k.body),
            message: k.message.clone(),
        })
    }

    /// A gRPC call (its reply's `grpc-status` decides success).
    pub(crate) fn is_grpc(&self) -> bool {
        self.message.is_some()
    }

    /// The header block of one stream, drawn as `draw` says, into `head`, and its body
    /// (`None`: empty). A rendered path or value HTTP/2 cannot carry is `Err` (the data
    /// were checked before the run; this does not happen).
    pub(crate) fn render(
        &self,
        draw: &loadlab_template::Draw<'_>,
        gen: &mut loadlab_template::Generator,
        scratch: &mut Vec<u8>,
        head: &mut Vec<u8>,
    ) -> Result<Option<Bytes>, ()> {
        let path = self.path.render(draw, gen, scratch);
        // The `http` crate's rules (a shared copy of the bytes, no allocation).
        if http::uri::PathAndQuery::from_maybe_shared(path.clone()).is_err() {
            return Err(());
        }
        let mut varying = Vec::with_capacity(self.varying.len());
        for (name, value) in &self.varying {
            let v = value.render(draw, gen, scratch);
            if HeaderValue::from_maybe_shared(v.clone()).is_err() {
                return Err(());
            }
            varying.push((name, v));
        }
        head.clear();
        client::encode_head(
            head,
            self.method.as_str().as_bytes(),
            self.https,
            &self.authority,
            &path,
            self.headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
                .chain(varying.iter().map(|(n, v)| (n.as_str().as_bytes(), &v[..]))),
        );
        let body = self.render_body(draw, gen, scratch);
        Ok((!body.is_empty()).then_some(body))
    }

    /// The body alone, drawn as `draw` says: a gRPC call's request message in its frame
    /// (a streaming call's next message, on a stream already open).
    pub(crate) fn render_body(
        &self,
        draw: &loadlab_template::Draw<'_>,
        gen: &mut loadlab_template::Generator,
        scratch: &mut Vec<u8>,
    ) -> Bytes {
        match &self.message {
            Some(m) => {
                let mut frame = Vec::with_capacity(64);
                m.render_frame(draw, gen, &mut frame, scratch);
                Bytes::from(frame)
            }
            None => self.body.render(draw, gen, scratch),
        }
    }
}

/// `scheme://host:port` of the run's target (an IPv6 host in brackets), which a stream's
/// URI starts with.
fn origin(cfg: &RunConfig) -> String {
    let t = &cfg.target;
    let scheme = match t.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    if t.host.contains(':') {
        format!("{scheme}://[{}]:{}", t.host, t.port)
    } else {
        format!("{scheme}://{}:{}", t.host, t.port)
    }
}

/// The `grpc-timeout` value for `ns` nanoseconds: whole milliseconds rounded up (at most
/// 8 digits, as the gRPC spec allows), or seconds beyond that.
pub fn grpc_timeout(ns: u64) -> HeaderValue {
    let ms = timeout_ms(ns);
    let text = if ms <= 99_999_999 {
        format!("{ms}m")
    } else {
        format!("{}S", ms.div_ceil(1000).min(99_999_999))
    };
    HeaderValue::from_str(&text).expect("digits and a unit letter")
}

/// Whole milliseconds, rounded up, at least one.
fn timeout_ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000).max(1)
}

/// A live connection as a slot holds it: its generation and its client side.
pub(crate) type Live = (u64, Rc<Client>);

/// One HTTP/2 connection shared by the stream slots bound to it.
#[derive(Default)]
pub struct H2Conn {
    /// The live connection, `None` before the first connect, after it died, and after its
    /// server sent `GOAWAY` (it takes no new streams).
    live: RefCell<Option<Rc<Client>>>,
    /// Increments with each new connection, so a slot can tell its cached handle is stale.
    generation: Cell<u64>,
    /// A slot is connecting; the others wait on `changed`.
    connecting: Cell<bool>,
    changed: Notify,
    /// Every connection this slot opened, so that each one's graceful close is counted
    /// once, at the end.
    opened: RefCell<Vec<Rc<Client>>>,
}

impl H2Conn {
    /// The requests each connection opened here had processed when its server closed it
    /// gracefully (see [`Client::take_close`]): each close once.
    pub(crate) fn take_closes(&self) -> Vec<u64> {
        self.opened
            .borrow()
            .iter()
            .filter_map(|c| c.take_close())
            .collect()
    }

    /// The run is over: the live connection takes no new stream and closes (with its
    /// `GOAWAY`) once its streams are done.
    pub(crate) fn retire(&self) {
        self.invalidate(self.generation.get());
    }

    /// Whether a connection opened here is still open.
    pub(crate) fn any_open(&self) -> bool {
        self.opened.borrow().iter().any(|c| !c.ended())
    }

    /// The live connection, if any.
    pub(crate) fn current(&self) -> Option<Live> {
        self.live
            .borrow()
            .as_ref()
            .map(|c| (self.generation.get(), c.clone()))
    }

    /// Installs a new connection; returns its generation.
    pub(crate) fn install(&self, client: Rc<Client>) -> u64 {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        if let Some(old) = self.live.borrow_mut().take() {
            old.retire();
        }
        self.opened.borrow_mut().push(client.clone());
        *self.live.borrow_mut() = Some(client);
        generation
    }

    /// Forgets the connection of `generation` (it failed, its driver ended, or its server
    /// is going away).
    pub(crate) fn invalidate(&self, generation: u64) {
        if self.generation.get() == generation {
            if let Some(c) = self.live.borrow_mut().take() {
                c.retire();
            }
        }
    }

    /// True if `generation` is still the live connection and takes new streams.
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation.get() == generation
            && self.live.borrow().as_ref().is_some_and(|c| c.usable())
    }

    /// Claims the right to connect; `None` while another slot is connecting (wait with
    /// [`H2Conn::changed`] and look again).
    pub(crate) fn begin_connect(&self) -> Option<ConnectingGuard<'_>> {
        if self.connecting.replace(true) {
            return None;
        }
        Some(ConnectingGuard(self))
    }

    /// Resolves when a connect attempt ends (created before looking, so no wake-up is lost).
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// Held while a slot connects; dropping it (success, failure or a timeout cancelling the
/// attempt) lets the waiting slots look again.
pub(crate) struct ConnectingGuard<'a>(&'a H2Conn);

impl Drop for ConnectingGuard<'_> {
    fn drop(&mut self) {
        self.0.connecting.set(false);
        self.0.changed.notify_waiters();
    }
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
    fn a_slot_resends_its_last_timeout_only_while_the_milliseconds_match() {
        let mut cache = TimeoutCache::default();
        assert_eq!(cache.value(4_999_000_001), "5000m");
        // The same whole millisecond: the cached value.
        assert_eq!(cache.value(5_000_000_000), "5000m");
        // Another one: a new value, then that one is kept.
        assert_eq!(cache.value(4_998_500_000), "4999m");
        assert_eq!(cache.value(1), "1m");
        assert_eq!(cache.value(200_000_000_000_000), "200000S");
        assert_eq!(cache.value(5_000_000_000), "5000m");
    }
}
