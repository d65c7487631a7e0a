//! The HTTP/2 transport (plain HTTP/2 and gRPC unary calls), built on the `h2` crate.
//!
//! A worker owns a few [`H2Conn`]s; each request loop (a *stream slot*) is bound to one of
//! them and sends its requests as streams on it, so `concurrency` slots spread over
//! `connections` connections give `concurrency` requests in flight (ghz's `-c` and
//! `--connections`, h2load's `-c` × `-m`). A connection is opened by the first slot that
//! needs it, driven by a task of its own, and reopened by the next slot after it dies.
//!
//! The request loop and deadlines are the worker's; `link` sends streams and records
//! their replies; this module provides the request [`Template`], the shared connection
//! state and the reply classification.
//!
//! A server closing a connection gracefully sends `GOAWAY` with the last stream it
//! processed; the streams above it were never processed and may be sent again on another
//! connection (RFC 9113 §6.8), as may streams refused with `REFUSED_STREAM` (§8.7). `h2`
//! reports both kinds of stream, and the streams cut when the connection ends later, with
//! the same `GOAWAY` error, so [`GoAwayWatch`] reads the frame headers going by and keeps
//! the `last_stream_id` for the worker to tell them apart.

pub(crate) mod link;

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, TE, USER_AGENT};
use loadlab_grpc::GrpcStatus;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::config::{Protocol, RunConfig, Scheme};
use crate::error::ErrorClass;

/// The largest response header block accepted (decoded, as HTTP/2 counts it).
pub const MAX_HEADER_LIST: u32 = 256 << 10;
/// Stream-level flow-control window the client announces: large enough that response
/// bodies are never held back by the client's window.
pub const STREAM_WINDOW: u32 = 1 << 20;
/// Connection-level flow-control window.
pub const CONNECTION_WINDOW: u32 = 1 << 24;

/// Tells `tracing` a subscriber is set (one that wants nothing), once per process.
///
/// `h2` opens a trace span around most of what it does per frame and per stream. Release
/// builds compile the spans out (the engine names tracing's `release_max_level_off`), but
/// with tracing's `log` feature on (actix-web turns it on for the whole build) a disabled
/// span still falls back to `log` while no tracing subscriber was ever set: each one
/// records its fields and asks `log` for its level on creation, enter, exit and drop,
/// 2-3 % of an HTTP/2 worker's CPU in `perf` (`Span::log`, `Span::record_all`). Nothing
/// in loadlab installs a `log` logger or a tracing subscriber, so these spans reached
/// nothing before and reach nothing after; if one is ever installed first, this leaves it.
pub(crate) fn quiet_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if !tracing::dispatcher::has_been_set() {
            let none = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
            let _ = tracing::dispatcher::set_global_default(none);
        }
    });
}

/// The request every stream sends, built once.
#[derive(Debug)]
pub struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Option<Bytes>,
    grpc: bool,
}

/// A stream slot's last `grpc-timeout` value: in closed loop every call has the whole
/// timeout left, so the same value is sent again (a shared copy, not a new string per call).
#[derive(Debug, Default)]
pub(crate) struct TimeoutCache(Option<(u64, HeaderValue)>);

impl TimeoutCache {
    /// The `grpc-timeout` value for `remaining_ns`.
    pub(crate) fn value(&mut self, remaining_ns: u64) -> HeaderValue {
        let ms = timeout_ms(remaining_ns);
        match &self.0 {
            Some((m, v)) if *m == ms => v.clone(),
            _ => self.0.insert((ms, grpc_timeout(remaining_ns))).1.clone(),
        }
    }
}

/// `grpc-timeout`.
pub(crate) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
/// `grpc-status`.
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
/// `grpc-encoding`.
pub(crate) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");

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
        let grpc = cfg.transport.protocol() == Protocol::Grpc;
        let mut add = |name: &str, value: &str| -> Result<(), String> {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name} ({e})"))?;
            let v = HeaderValue::from_str(value).map_err(|e| format!("{name}: {value} ({e})"))?;
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
        Ok(Template {
            method,
            uri,
            headers,
            body,
            grpc,
        })
    }

    /// A request to send now, `remaining_ns` before its deadline (sent to gRPC servers
    /// as `grpc-timeout` from `timeouts`, so the server gives up when the client does).
    pub(crate) fn request(
        &self,
        remaining_ns: u64,
        timeouts: &mut TimeoutCache,
    ) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        if self.grpc {
            r.headers_mut()
                .insert(GRPC_TIMEOUT, timeouts.value(remaining_ns));
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

/// One kind of request of a run whose requests vary, as HTTP/2 parts compiled once: what
/// is fixed is built here, the templates are rendered per stream (a stream's URI, header
/// values and body are new values; `h2` takes them by value).
#[derive(Debug)]
pub struct H2Request {
    method: http::Method,
    /// `scheme://authority` the rendered path follows.
    prefix: Vec<u8>,
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
                    headers.append(n, v);
                }
                None => varying.push((n, Template2::of(value))),
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
                headers.append(n, v);
            }
        }
        if !headers.contains_key(USER_AGENT) && !varying.iter().any(|(n, _)| n == USER_AGENT) {
            let agent = concat!("loadlab/", env!("CARGO_PKG_VERSION"));
            headers.insert(USER_AGENT, HeaderValue::from_static(agent));
        }
        Ok(H2Request {
            method,
            prefix: origin(cfg).into_bytes(),
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

    /// The request of one stream, drawn as `draw` says, and its body (`None`: empty). A
    /// rendered value HTTP/2 cannot carry is `Err` (the data were checked before the run;
    /// this does not happen).
    pub(crate) fn render(
        &self,
        draw: &loadlab_template::Draw<'_>,
        gen: &mut loadlab_template::Generator,
        scratch: &mut Vec<u8>,
    ) -> Result<(http::Request<()>, Option<Bytes>), ()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        let path = self.path.render(draw, gen, scratch);
        let mut uri = Vec::with_capacity(self.prefix.len() + path.len());
        uri.extend_from_slice(&self.prefix);
        uri.extend_from_slice(&path);
        *r.uri_mut() = http::Uri::from_maybe_shared(Bytes::from(uri)).map_err(|_| ())?;
        *r.headers_mut() = self.headers.clone();
        for (name, value) in &self.varying {
            let v = value.render(draw, gen, scratch);
            let v = HeaderValue::from_maybe_shared(v).map_err(|_| ())?;
            r.headers_mut().append(name.clone(), v);
        }
        let body = match &self.message {
            Some(m) => {
                let mut frame = Vec::with_capacity(64);
                m.render_frame(draw, gen, &mut frame, scratch);
                Bytes::from(frame)
            }
            None => self.body.render(draw, gen, scratch),
        };
        Ok((r, (!body.is_empty()).then_some(body)))
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

/// The `grpc-status` of a header block; a value that is not a defined code counts as
/// UNKNOWN, as the gRPC spec tells clients to do.
pub fn grpc_status(headers: &http::HeaderMap) -> Option<GrpcStatus> {
    headers
        .get(GRPC_STATUS)
        .map(|v| GrpcStatus::from_trailer(v.as_bytes()).unwrap_or(GrpcStatus::Unknown))
}

/// What one live HTTP/2 connection has learnt from its server.
#[derive(Debug, Default)]
pub struct ConnState {
    /// `last_stream_id` of the (lowest) `GOAWAY` received, once one was.
    goaway: Cell<Option<u32>>,
    /// The server's close of this connection was counted.
    counted: Cell<bool>,
}

impl ConnState {
    /// `last_stream_id` of the `GOAWAY` the server sent, if it sent one.
    pub fn goaway(&self) -> Option<u32> {
        self.goaway.get()
    }

    fn record_goaway(&self, last: u32) {
        let last = self.goaway.get().map_or(last, |l| l.min(last));
        self.goaway.set(Some(last));
    }

    /// True the first time it is called after a `GOAWAY` (to count each close once), with
    /// the requests the server processed on the connection (client streams 1, 3, ...,
    /// `last_stream_id`).
    pub fn take_close(&self) -> Option<u64> {
        let last = self.goaway.get()?;
        if self.counted.replace(true) {
            return None;
        }
        Some(u64::from(last).div_ceil(2))
    }

    /// Whether a stream that failed with `err` was never processed by the server: refused
    /// (`REFUSED_STREAM`), or above the `last_stream_id` of the server's `GOAWAY`.
    pub fn unprocessed(&self, err: &h2::Error, stream_id: u32) -> bool {
        if err.reason() == Some(h2::Reason::REFUSED_STREAM) && err.is_remote() {
            return true;
        }
        err.is_go_away() && err.is_remote() && self.goaway().is_some_and(|last| stream_id > last)
    }
}

/// A connection's reading side, watched for `GOAWAY` frames: it follows the frame headers
/// of what `h2` reads (length, type) and records the `last_stream_id` of each `GOAWAY`
/// into the connection's [`ConnState`]. It copies nothing and costs a few comparisons per
/// frame.
pub struct GoAwayWatch<S> {
    inner: S,
    state: Rc<ConnState>,
    scan: FrameScan,
}

impl<S> GoAwayWatch<S> {
    /// Watches `inner` (the server's bytes start with a frame: it sends no preface).
    pub fn new(inner: S, state: Rc<ConnState>) -> GoAwayWatch<S> {
        GoAwayWatch {
            inner,
            state,
            scan: FrameScan::default(),
        }
    }
}

/// Where the scan is in the server's frame stream.
#[derive(Default)]
struct FrameScan {
    header: [u8; 9],
    /// Header bytes seen of the current frame (9: in its payload).
    have: usize,
    /// Payload bytes of the current frame still to come.
    left: usize,
    /// In a `GOAWAY`: its first payload bytes (the last stream id).
    goaway: Option<([u8; 4], usize)>,
}

const FRAME_GOAWAY: u8 = 0x7;

impl FrameScan {
    fn feed(&mut self, mut bytes: &[u8], state: &ConnState) {
        while !bytes.is_empty() {
            if self.have < 9 {
                let n = (9 - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == 9 {
                    let h = &self.header;
                    self.left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    self.goaway = (h[3] == FRAME_GOAWAY).then_some(([0; 4], 0));
                    if self.left == 0 {
                        self.have = 0;
                    }
                }
                continue;
            }
            let n = self.left.min(bytes.len());
            if let Some((id, got)) = &mut self.goaway {
                let take = (4 - *got).min(n);
                id[*got..*got + take].copy_from_slice(&bytes[..take]);
                *got += take;
                if *got == 4 {
                    state.record_goaway(u32::from_be_bytes(*id) & 0x7fff_ffff);
                    self.goaway = None;
                }
            }
            self.left -= n;
            bytes = &bytes[n..];
            if self.left == 0 {
                self.have = 0;
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for GoAwayWatch<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            this.scan.feed(&buf.filled()[before..], &this.state);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for GoAwayWatch<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, b)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A live connection as a slot holds it: generation, handle, what the server told it.
pub type Live = (u64, SendRequest<Bytes>, Rc<ConnState>);

/// One HTTP/2 connection shared by the stream slots bound to it.
#[derive(Default)]
pub struct H2Conn {
    /// The live connection's handle and state, `None` before the first connect, after it
    /// died, and after its server sent `GOAWAY` (it takes no new streams).
    send: RefCell<Option<(SendRequest<Bytes>, Rc<ConnState>)>>,
    /// Increments with each new connection, so a slot can tell its cached handle is stale.
    generation: Cell<u64>,
    /// A slot is connecting; the others wait on `changed`.
    connecting: Cell<bool>,
    changed: Notify,
    /// The state of every connection this slot opened, so that each one's graceful close
    /// is counted once, at the end.
    opened: RefCell<Vec<Rc<ConnState>>>,
}

impl H2Conn {
    /// Keeps a new connection's state for [`H2Conn::take_closes`].
    pub(crate) fn opened(&self, state: Rc<ConnState>) {
        self.opened.borrow_mut().push(state);
    }

    /// The requests each connection this slot opened had processed when its server closed
    /// it gracefully (see [`ConnState::take_close`]): each close once.
    pub(crate) fn take_closes(&self) -> Vec<u64> {
        self.opened
            .borrow()
            .iter()
            .filter_map(|s| s.take_close())
            .collect()
    }

    /// The live connection, if any.
    pub fn current(&self) -> Option<Live> {
        self.send
            .borrow()
            .as_ref()
            .map(|(s, st)| (self.generation.get(), s.clone(), st.clone()))
    }

    /// Installs a new connection's handle; returns its generation.
    pub fn install(&self, send: SendRequest<Bytes>, state: Rc<ConnState>) -> u64 {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        *self.send.borrow_mut() = Some((send, state));
        generation
    }

    /// Forgets the connection of `generation` (it failed, its driver ended, or its server
    /// is going away).
    pub fn invalidate(&self, generation: u64) {
        if self.generation.get() == generation {
            self.send.borrow_mut().take();
        }
    }

    /// True if `generation` is still the live connection and its server is not going away.
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.get() == generation
            && self
                .send
                .borrow()
                .as_ref()
                .is_some_and(|(_, st)| st.goaway().is_none())
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
    /// Cached live connection.
    pub cached: Option<Live>,
}

/// Classifies an `h2` error: the transport's I/O errors as any connection's, a frame the
/// server got wrong as its malformed reply, GOAWAY and RST_STREAM as a stream reset.
pub(crate) fn from_h2(err: &h2::Error, connecting: bool) -> ErrorClass {
    if let Some(io) = err.get_io() {
        return ErrorClass::from_io(io, connecting);
    }
    // A frame the server got wrong (too large, undecodable headers, a flow-control breach,
    // a flood of CONTINUATION frames):
    // h2 closes the connection itself; that is the server's malformed reply, not a reset.
    if err.is_library()
        && matches!(
            err.reason(),
            Some(
                h2::Reason::PROTOCOL_ERROR
                    | h2::Reason::FRAME_SIZE_ERROR
                    | h2::Reason::COMPRESSION_ERROR
                    | h2::Reason::FLOW_CONTROL_ERROR
                    | h2::Reason::ENHANCE_YOUR_CALM
            )
        )
    {
        return ErrorClass::MalformedResponse;
    }
    if err.is_go_away() || err.is_reset() {
        return ErrorClass::StreamReset;
    }
    if err.is_remote() || err.reason() == Some(h2::Reason::PROTOCOL_ERROR) {
        return ErrorClass::MalformedResponse;
    }
    ErrorClass::Other
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

    fn frame(ty: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, ty, 0, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_watch_finds_goaway_frames_split_anywhere() {
        let mut stream = frame(0x4, &[0; 12]); // SETTINGS
        stream.extend(frame(0x1, &[7; 300])); // HEADERS
        stream.extend(frame(0x4, &[])); // SETTINGS ack
        let mut goaway = 999u32.to_be_bytes().to_vec();
        goaway[0] |= 0x80; // the reserved bit is not part of the id
        goaway.extend_from_slice(&[0, 0, 0, 0]);
        goaway.extend_from_slice(b"bye");
        stream.extend(frame(FRAME_GOAWAY, &goaway));
        stream.extend(frame(0x0, &[1; 40])); // DATA after it
        for chunk in [1, 2, 5, 9, 10, 64, stream.len()] {
            let state = ConnState::default();
            let mut scan = FrameScan::default();
            for piece in stream.chunks(chunk) {
                scan.feed(piece, &state);
            }
            assert_eq!(state.goaway(), Some(999), "chunks of {chunk}");
            assert_eq!(state.take_close(), Some(500));
            assert_eq!(state.take_close(), None);
        }
        // A second GOAWAY may only lower the id.
        let state = ConnState::default();
        let mut scan = FrameScan::default();
        scan.feed(&frame(FRAME_GOAWAY, &[0, 0, 0, 9, 0, 0, 0, 0]), &state);
        scan.feed(&frame(FRAME_GOAWAY, &[0, 0, 0, 21, 0, 0, 0, 0]), &state);
        assert_eq!(state.goaway(), Some(9));
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
