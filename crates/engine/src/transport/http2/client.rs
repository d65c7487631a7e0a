//! The client side of one HTTP/2 connection, written for a load generator's hot path
//! (RFC 9113): what it sends is a request's header block encoded once
//! ([`encode_head`]) and copied per stream, what it reads of a response is the status, the
//! gRPC status and encoding, and the body's length (gRPC: its message framing), nothing
//! copied or decoded beyond that.
//!
//! The `h2` crate it replaces spent 2.3× h2load's user time per request on the same load
//! (stream bookkeeping, frame copies, HPACK decoding of headers nobody reads): see
//! `docs/src/cpu.md`.
//!
//! One [`Client`] is shared by the stream slots bound to the connection and by its driver
//! task ([`drive`]), all on the worker's thread: a slot queues its stream's frames in the
//! connection's output and wakes the driver, which writes everything queued in one write
//! once the slots that ran in the same turn are done, reads the server's frames, and wakes
//! the slots whose streams ended.
//!
//! What the protocol asks of a client is kept: the server's SETTINGS (stream limit, window,
//! frame size) are obeyed and acknowledged, PINGs answered, flow control kept both ways
//! (a request body waits for the server's window; the client's own windows are replenished
//! as data comes in), header blocks decoded in order whatever stream they belong to (the
//! HPACK table is shared), `GOAWAY` and `REFUSED_STREAM` tell streams the server never
//! processed from the others, and anything the server gets wrong (a frame too large, a
//! header block over the limit the client was given, a flow-control breach,
//! a frame where it may not be) ends the connection as a malformed response.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use loadlab_grpc::frame::FrameScan;
use loadlab_grpc::GrpcStatus;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::hpack;
use crate::error::ErrorClass;

/// What a client sends first.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// RST_STREAM codes the client sends or reads.
const PROTOCOL_ERROR: u32 = 0x1;
const REFUSED_STREAM: u32 = 0x7;
const CANCEL: u32 = 0x8;

/// The largest frame payload the client accepts (the protocol's default; the client does
/// not raise it).
const MAX_FRAME: usize = 16_384;
/// The largest stream id: a connection that reaches it takes no new stream.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// The largest flow-control window.
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// Bytes the driver reads at once (room for several frames of the largest size).
const READ_BUF: usize = 64 * 1024;

/// The response header fields the client reads; every other one is only walked.
const WANTED: [&[u8]; 3] = [b":status", b"grpc-status", b"grpc-encoding"];

/// Why a stream ended without a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamFailure {
    /// The server never processed it (refused, above its `GOAWAY`'s last stream, or not
    /// sent because the connection is going away): it may be sent again.
    Unprocessed,
    /// A failure to count.
    Failed(ErrorClass),
}

/// What a stream's response said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The final `:status`.
    pub status: u16,
    /// gRPC: `grpc-status` of the response headers (a trailers-only reply), else of its
    /// trailers (UNKNOWN if they have none), `None` if it had neither.
    pub grpc: Option<GrpcStatus>,
    /// gRPC: the body's messages are cut short, or compressed with no `grpc-encoding`.
    pub bad_framing: bool,
    /// gRPC: a message over the 4 MiB a client receives (the stream was reset at its
    /// header).
    pub too_large: bool,
}

impl Reply {
    /// The status a gRPC client reports: a reply whose messages are cut short or
    /// compressed with no encoding named is INTERNAL, whatever its status says.
    pub(crate) fn grpc_status(self) -> Option<GrpcStatus> {
        match self.grpc {
            _ if self.too_large => Some(GrpcStatus::ResourceExhausted),
            Some(code) if code.is_ok() && self.bad_framing => Some(GrpcStatus::Internal),
            g => g,
        }
    }
}

/// One stream of the connection, from its HEADERS to the slot taking its result.
struct Stream {
    waker: Option<Waker>,
    /// A gRPC call: its body's framing is followed and its trailers read.
    grpc: bool,
    /// The final status once the response headers are in (0 before).
    status: u16,
    header_grpc: Option<GrpcStatus>,
    /// Trailers came, and their `grpc-status` if they had one.
    trailers: bool,
    trailer_grpc: Option<GrpcStatus>,
    encoded: bool,
    scan: FrameScan,
    /// Set when the response ended (or the stream failed).
    end: Option<Result<(), StreamFailure>>,
    /// The slot took the result; the stream stays only to finish sending its body.
    taken: bool,
    /// No longer counted against the server's stream limit: the response ended and the
    /// body was sent (or will not be).
    closed: bool,
    /// What the server lets this stream send.
    send_window: i64,
    /// A request body (and how much of it is sent) held back by flow control.
    body: Option<(Bytes, usize)>,
    /// What the server may still send on this stream, and what it sent since the last
    /// WINDOW_UPDATE.
    recv_window: i64,
    recv_unacked: u32,
    /// A server-streaming call ([`Client::follow_messages`]): its slot is woken by each
    /// message, not only by the response's end.
    streaming: bool,
    /// The messages its slot took ([`Client::poll_message`]).
    taken_messages: u64,
    /// A bidirectional call ([`Client::open_duplex`]): its request side stays open, each
    /// message sent ([`Client::send`]) a body of its own, with no `END_STREAM`.
    duplex: bool,
    /// Duplex: messages queued behind `body` while flow control holds it back.
    queued: std::collections::VecDeque<Bytes>,
    /// Duplex: the request side ends once the messages queued are sent
    /// ([`Client::finish`]); with no body left, its `END_STREAM` has gone out.
    finishing: bool,
}

/// What came next on a server stream ([`Client::poll_message`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// One more message.
    Message,
    /// The response ended (its result taken: the stream is forgotten).
    End(Reply),
}

/// Stream ids as their own hash (they are distinct small integers).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, n: u32) {
        // Odd ids: spread them over the table's buckets.
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Streams = HashMap<u32, Stream, BuildHasherDefault<IdHasher>>;

/// The connection's state shared by its slots and its driver.
struct Inner {
    /// Frames queued for the driver to write.
    out: Vec<u8>,
    /// The driver task, woken when frames are queued.
    driver: Option<Waker>,
    next_id: u32,
    streams: Streams,
    /// Streams not ended (what counts against the server's limit).
    open: u32,
    /// Slots waiting for the server's stream limit to allow one more.
    waiting: Vec<Waker>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS.
    max_streams: u32,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window.
    initial_send_window: i64,
    /// The server's SETTINGS_MAX_FRAME_SIZE: the largest frame the client may send.
    max_send_frame: usize,
    /// The connection's send window.
    send_window: i64,
    /// Streams with a body held back by flow control, oldest first.
    held: Vec<u32>,
    /// What the server may still send on the connection, and what it sent since the last
    /// WINDOW_UPDATE.
    recv_window: i64,
    recv_unacked: u32,
    /// `last_stream_id` of the (lowest) `GOAWAY` received.
    goaway: Option<u32>,
    /// The server's graceful close was counted.
    counted: bool,
    /// The connection failed: streams open then, and every new one, fail with this.
    failed: Option<ErrorClass>,
    /// No slot will open a stream on it any more ([`Client::retire`]): it closes once its
    /// streams are done.
    retired: bool,
    /// The client's own `GOAWAY` is queued: the connection closes once it is written.
    bye: bool,
    /// The driver ended: the connection is closed.
    ended: bool,
}

/// One HTTP/2 connection's client side, shared by the stream slots bound to it and its
/// driver task.
pub(crate) struct Client {
    inner: RefCell<Inner>,
    /// The stream window the client announces and its connection window.
    stream_window: u32,
    connection_window: u32,
    /// The largest response header block accepted (as sent, HEADERS and CONTINUATIONs).
    max_header_list: usize,
}

/// Appends a frame header.
fn frame_head(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, id: u32) {
    debug_assert!(len < 1 << 24);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, ty, flags]);
    out.extend_from_slice(&id.to_be_bytes());
}

fn rst_stream(out: &mut Vec<u8>, id: u32, code: u32) {
    frame_head(out, 4, RST_STREAM, 0, id);
    out.extend_from_slice(&code.to_be_bytes());
}

fn window_update(out: &mut Vec<u8>, id: u32, increment: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, id);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Encodes a request's header block (no dynamic table: every field a literal, or an
/// index into the static table), pseudo-headers first. `headers` are lowercase names.
pub(crate) fn encode_head<'a>(
    out: &mut Vec<u8>,
    method: &[u8],
    https: bool,
    authority: &[u8],
    path: &[u8],
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    match method {
        b"GET" => hpack::encode_indexed(out, 2),
        b"POST" => hpack::encode_indexed(out, 3),
        m => hpack::encode_indexed_name(out, 2, m),
    }
    hpack::encode_indexed(out, if https { 7 } else { 6 });
    hpack::encode_indexed_name(out, 1, authority);
    match path {
        b"/" => hpack::encode_indexed(out, 4),
        p => hpack::encode_indexed_name(out, 4, p),
    }
    for (name, value) in headers {
        if let Some(i) = hpack::static_index(name, value) {
            hpack::encode_indexed(out, i);
            continue;
        }
        match hpack::static_name_index(name) {
            Some(i) => hpack::encode_indexed_name(out, i, value),
            None => hpack::encode_literal(out, name, value),
        }
    }
}

impl Client {
    /// A connection about to start: the preface, the client's SETTINGS (no push, the
    /// stream window, the header list limit) and its connection window are queued for
    /// the driver's first write. A request may be queued behind them at once (the
    /// server's SETTINGS need not have arrived).
    pub(crate) fn new(stream_window: u32, connection_window: u32, max_header_list: u32) -> Client {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(PREFACE);
        let settings: [(u16, u32); 3] = [(0x2, 0), (0x4, stream_window), (0x6, max_header_list)];
        frame_head(&mut out, 6 * settings.len(), SETTINGS, 0, 0);
        for (id, value) in settings {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes());
        }
        if connection_window > 65_535 {
            window_update(&mut out, 0, connection_window - 65_535);
        }
        Client {
            inner: RefCell::new(Inner {
                out,
                driver: None,
                next_id: 1,
                streams: Streams::default(),
                open: 0,
                waiting: Vec::new(),
                max_streams: u32::MAX,
                initial_send_window: 65_535,
                max_send_frame: MAX_FRAME,
                send_window: 65_535,
                held: Vec::new(),
                recv_window: i64::from(connection_window.max(65_535)),
                recv_unacked: 0,
                goaway: None,
                counted: false,
                failed: None,
                retired: false,
                bye: false,
                ended: false,
            }),
            stream_window,
            connection_window,
            max_header_list: max_header_list as usize,
        }
    }

    /// `last_stream_id` of the `GOAWAY` the server sent, if it sent one.
    pub(crate) fn goaway(&self) -> Option<u32> {
        self.inner.borrow().goaway
    }

    /// Whether new streams may go on this connection: it has not failed and its server is
    /// not going away.
    pub(crate) fn usable(&self) -> bool {
        let i = self.inner.borrow();
        i.failed.is_none() && i.goaway.is_none() && i.next_id <= MAX_STREAM_ID
    }

    /// The requests the server processed on this connection when it closed it gracefully
    /// (client streams 1, 3, ..., `last_stream_id`): `Some` once, after a `GOAWAY`.
    pub(crate) fn take_close(&self) -> Option<u64> {
        let mut i = self.inner.borrow_mut();
        let last = i.goaway?;
        if std::mem::replace(&mut i.counted, true) {
            return None;
        }
        Some(u64::from(last).div_ceil(2))
    }

    /// No new stream goes on this connection (another replaced it): its driver closes it
    /// once the streams open on it are done.
    pub(crate) fn retire(&self) {
        let mut i = self.inner.borrow_mut();
        i.retired = true;
        if let Some(w) = i.driver.take() {
            w.wake();
        }
    }

    /// Whether its driver ended (the connection is closed).
    pub(crate) fn ended(&self) -> bool {
        self.inner.borrow().ended
    }

    /// Ready when one more stream may open (the server's limit), or with why none will on
    /// this connection.
    pub(crate) fn poll_capacity(&self, cx: &Context<'_>) -> Poll<Result<(), StreamFailure>> {
        let mut i = self.inner.borrow_mut();
        if let Some(class) = i.failed {
            // Not sent: on a connection its server is closing, that is "never processed".
            return Poll::Ready(Err(if i.goaway.is_some() {
                StreamFailure::Unprocessed
            } else {
                StreamFailure::Failed(class)
            }));
        }
        if i.goaway.is_some() || i.next_id > MAX_STREAM_ID {
            return Poll::Ready(Err(StreamFailure::Unprocessed));
        }
        if i.open >= i.max_streams {
            if !i.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                i.waiting.push(cx.waker().clone());
            }
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    /// Opens a stream (after [`Client::poll_capacity`]): queues its HEADERS, the header
    /// block `head` followed by what `extra` appends, and its body as far as the windows
    /// allow. Returns the stream's id; its result is [`Client::poll_stream`]'s.
    pub(crate) fn open(
        &self,
        head: &[u8],
        extra: impl FnOnce(&mut Vec<u8>),
        body: Option<&Bytes>,
        grpc: bool,
    ) -> u32 {
        self.open_stream(head, extra, body, grpc, false)
    }

    /// Opens a bidirectional gRPC call's stream (after [`Client::poll_capacity`]): its
    /// HEADERS with no `END_STREAM`, its request side left open for the messages
    /// [`Client::send`] queues; the slot takes the server's messages one by one
    /// ([`Client::poll_message`]).
    pub(crate) fn open_duplex(&self, head: &[u8]) -> u32 {
        self.open_stream(head, |_| {}, None, true, true)
    }

    /// Sends one more message on duplex stream `id`, as far as the windows allow: `true`
    /// if flow control held it back (the server's window is used up: it goes out as the
    /// server grants more), `Err` if the stream has ended (its end is
    /// [`Client::poll_message`]'s to take).
    pub(crate) fn send(&self, id: u32, message: &Bytes) -> Result<bool, StreamFailure> {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        let Some(s) = i
            .streams
            .get_mut(&id)
            .filter(|s| s.end.is_none() && !s.closed && !s.finishing)
        else {
            return Err(StreamFailure::Failed(ErrorClass::StreamReset));
        };
        if s.body.is_some() {
            s.queued.push_back(message.clone());
            return Ok(true);
        }
        s.body = Some((message.clone(), 0));
        i.held.push(id);
        i.send_held();
        i.wake_driver();
        Ok(i.streams.get(&id).is_some_and(|s| s.body.is_some()))
    }

    /// Ends duplex stream `id`'s request side once the messages queued on it are sent (an
    /// empty DATA with `END_STREAM` after them): a client-streaming call's messages are
    /// all sent, the server's reply answers them. Nothing if the stream has ended.
    pub(crate) fn finish(&self, id: u32) {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        let Some(s) = i
            .streams
            .get_mut(&id)
            .filter(|s| s.duplex && s.end.is_none() && !s.finishing)
        else {
            return;
        };
        s.finishing = true;
        if s.body.is_none() {
            frame_head(&mut i.out, 0, DATA, END_STREAM, id);
            i.wake_driver();
        }
    }

    /// [`Client::open`], or with `duplex` [`Client::open_duplex`].
    fn open_stream(
        &self,
        head: &[u8],
        extra: impl FnOnce(&mut Vec<u8>),
        body: Option<&Bytes>,
        grpc: bool,
        duplex: bool,
    ) -> u32 {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        let id = i.next_id;
        i.next_id += 2;
        let body = body.filter(|b| !b.is_empty());
        let start = i.out.len();
        frame_head(&mut i.out, 0, HEADERS, 0, id);
        i.out.extend_from_slice(head);
        extra(&mut i.out);
        let block_len = i.out.len() - start - 9;
        let end_stream = if body.is_none() && !duplex {
            END_STREAM
        } else {
            0
        };
        if block_len <= i.max_send_frame {
            let h = &mut i.out[start..start + 5];
            h[0] = (block_len >> 16) as u8;
            h[1] = (block_len >> 8) as u8;
            h[2] = block_len as u8;
            h[4] = END_HEADERS | end_stream;
        } else {
            // Larger than a frame: HEADERS, then CONTINUATIONs.
            let block = i.out.split_off(start + 9);
            i.out.truncate(start);
            let mut chunks = block.chunks(i.max_send_frame).peekable();
            let mut ty = HEADERS;
            let mut flags = end_stream;
            while let Some(c) = chunks.next() {
                let last = chunks.peek().is_none();
                let f = flags | if last { END_HEADERS } else { 0 };
                frame_head(&mut i.out, c.len(), ty, f, id);
                i.out.extend_from_slice(c);
                ty = CONTINUATION;
                flags = 0;
            }
        }
        i.open += 1;
        i.streams.insert(
            id,
            Stream {
                waker: None,
                grpc,
                status: 0,
                header_grpc: None,
                trailers: false,
                trailer_grpc: None,
                encoded: false,
                scan: FrameScan::default(),
                end: None,
                taken: false,
                closed: false,
                send_window: i.initial_send_window,
                body: body.map(|b| (b.clone(), 0)),
                recv_window: i64::from(self.stream_window),
                recv_unacked: 0,
                streaming: duplex,
                taken_messages: 0,
                duplex,
                queued: std::collections::VecDeque::new(),
                finishing: false,
            },
        );
        if body.is_some() {
            i.held.push(id);
            i.send_held();
        }
        i.wake_driver();
        id
    }

    /// Stream `id` (just opened) is a server-streaming call: its slot takes its messages one
    /// by one ([`Client::poll_message`]) and is woken by each.
    pub(crate) fn follow_messages(&self, id: u32) {
        if let Some(s) = self.inner.borrow_mut().streams.get_mut(&id) {
            s.streaming = true;
        }
    }

    /// Stream `id` (a streaming call just opened) reads `fields` from each message
    /// (`--sent-at`, `--match-field`), for [`Client::take_value`].
    pub(crate) fn tap_messages(
        &self,
        id: u32,
        fields: [Option<loadlab_grpc::fields::FieldPath>; 2],
    ) {
        if let Some(s) = self.inner.borrow_mut().streams.get_mut(&id) {
            s.scan = FrameScan::tapping(fields);
        }
    }

    /// The numbers read from stream `id`'s oldest message not yet taken (see
    /// [`Client::tap_messages`]), each `None` where it held none.
    pub(crate) fn take_value(&self, id: u32) -> loadlab_grpc::frame::Tapped {
        let mut i = self.inner.borrow_mut();
        i.streams
            .get_mut(&id)
            .and_then(|s| s.scan.take_value())
            .unwrap_or_default()
    }

    /// Stream `id`'s next message, or its end once every message came (the result then
    /// taken, as [`Client::poll_stream`] takes it).
    pub(crate) fn poll_message(
        &self,
        id: u32,
        cx: &Context<'_>,
    ) -> Poll<Result<Next, StreamFailure>> {
        {
            let mut i = self.inner.borrow_mut();
            let Some(s) = i.streams.get_mut(&id) else {
                return Poll::Ready(Err(StreamFailure::Failed(ErrorClass::Other)));
            };
            if s.scan.frames() > s.taken_messages {
                s.taken_messages += 1;
                return Poll::Ready(Ok(Next::Message));
            }
        }
        self.poll_stream(id, cx).map_ok(Next::End)
    }

    /// The result of stream `id` once it ended (taken: the stream is forgotten).
    pub(crate) fn poll_stream(
        &self,
        id: u32,
        cx: &Context<'_>,
    ) -> Poll<Result<Reply, StreamFailure>> {
        let mut i = self.inner.borrow_mut();
        let Some(s) = i.streams.get_mut(&id) else {
            return Poll::Ready(Err(StreamFailure::Failed(ErrorClass::Other)));
        };
        let Some(end) = s.end else {
            match &s.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => s.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        };
        let grpc = s.header_grpc.or_else(|| {
            s.trailers
                .then(|| s.trailer_grpc.unwrap_or(GrpcStatus::Unknown))
        });
        let reply = Reply {
            status: s.status,
            grpc,
            bad_framing: s.grpc && s.scan.finish(s.encoded).is_err(),
            too_large: s.grpc && s.scan.too_large().is_some(),
        };
        if s.body.is_some() {
            // A complete response before the whole body went out (RFC 9113 §8.1): the
            // body is still sent, unless the server resets the stream.
            s.taken = true;
        } else {
            i.streams.remove(&id);
        }
        end?;
        Poll::Ready(Ok(reply))
    }

    /// Whether stream `id`'s response was taken before its body was all sent: the body goes
    /// on ([`Client::poll_sent`]).
    pub(crate) fn sending(&self, id: u32) -> bool {
        self.inner
            .borrow()
            .streams
            .get(&id)
            .is_some_and(|s| s.taken && !s.closed)
    }

    /// Ready once the body of stream `id`, whose response its slot took before the body
    /// was all sent, is sent or stopped (the server reset the stream, or the connection
    /// ended): the stream no longer counts against the server's limit, and the slot may
    /// send its next request. Until then the stream is open on the server, so a slot that
    /// moved on would have more streams open than `--concurrency` says.
    pub(crate) fn poll_sent(&self, id: u32, cx: &Context<'_>) -> Poll<()> {
        let mut i = self.inner.borrow_mut();
        match i.streams.get_mut(&id) {
            Some(s) if !s.closed => {
                match &s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => s.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Some(_) => {
                i.streams.remove(&id);
                Poll::Ready(())
            }
            None => Poll::Ready(()),
        }
    }

    /// Gives up on the rest of stream `id`'s body, its response taken (its deadline
    /// passed): resets the stream (`CANCEL`).
    pub(crate) fn stop_body(&self, id: u32) {
        self.inner.borrow_mut().give_up(id, true);
    }

    /// Forgets stream `id` whose slot gave up on it (its deadline passed): a stream still
    /// open is reset (`CANCEL`), so the server stops working on it. A stream whose result
    /// was taken is left to finish its body ([`Client::stop_body`] gives up on it).
    pub(crate) fn cancel(&self, id: u32) {
        self.inner.borrow_mut().give_up(id, false);
    }
}

impl Inner {
    /// Forgets stream `id` if its result was taken (`taken`) or not (`!taken`), and
    /// resets it (`CANCEL`) if it is still open.
    fn give_up(&mut self, id: u32, taken: bool) {
        if self.streams.get(&id).is_none_or(|s| s.taken != taken) {
            return;
        }
        let s = self.streams.remove(&id).expect("looked up above");
        if !s.closed && self.failed.is_none() {
            rst_stream(&mut self.out, id, CANCEL);
            self.stream_closed();
            self.wake_driver();
        }
    }

    fn wake_driver(&mut self) {
        if let Some(w) = self.driver.take() {
            w.wake();
        }
    }

    /// A stream ended: one more may open.
    fn stream_closed(&mut self) {
        self.open -= 1;
        for w in self.waiting.drain(..) {
            w.wake();
        }
    }

    /// Ends stream `id` with `end` (if its response has not ended yet) and wakes its
    /// slot. A failure (a reset, the connection's end) also stops its body; a reset after
    /// a complete response (`NO_ERROR`: the server wants no more of the body) only that.
    fn end_stream(&mut self, id: u32, end: Result<(), StreamFailure>) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if end.is_err() {
            s.body = None;
        }
        if s.duplex && s.end.is_none() {
            // The server ended the call: the messages not sent yet never will be, and the
            // request side ends too (an empty DATA with END_STREAM), unless it was reset or
            // has ended already.
            let ended = s.finishing && s.body.is_none();
            s.body = None;
            s.queued.clear();
            if end.is_ok() && !ended {
                frame_head(&mut self.out, 0, DATA, END_STREAM, id);
                self.wake_driver();
            }
        }
        let s = self.streams.get_mut(&id).expect("looked up above");
        if s.end.is_none() {
            s.end = Some(end);
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
        self.settle(id);
    }

    /// Stream `id` no longer counts against the server's limit once its response ended and
    /// its body is sent (or stopped); it is forgotten then if its slot took the result.
    fn settle(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.closed || s.end.is_none() || s.body.is_some() {
            return;
        }
        s.closed = true;
        if s.taken {
            // Its slot waits for the body's end ([`Client::poll_sent`]).
            if let Some(w) = s.waker.take() {
                w.wake();
            }
            self.streams.remove(&id);
        }
        self.stream_closed();
    }

    /// Sends what flow control now allows of the bodies held back, oldest first.
    fn send_held(&mut self) {
        let mut k = 0;
        while k < self.held.len() {
            let id = self.held[k];
            // Whether the stream leaves the list, and whether its body went out whole.
            let (done, sent_all) = match self.streams.get_mut(&id) {
                Some(s) => match &mut s.body {
                    None => (true, false),
                    Some(_) => {
                        // A duplex stream's messages, one body after another, none the last.
                        let last = if s.duplex { 0 } else { END_STREAM };
                        loop {
                            let (body, sent) = s.body.as_mut().expect("checked above");
                            let left = body.len() - *sent;
                            let room = self.send_window.min(s.send_window).max(0) as usize;
                            let n = left.min(room).min(self.max_send_frame);
                            if n > 0 {
                                let flags = if n == left { last } else { 0 };
                                frame_head(&mut self.out, n, DATA, flags, id);
                                self.out.extend_from_slice(&body[*sent..*sent + n]);
                                *sent += n;
                                self.send_window -= n as i64;
                                s.send_window -= n as i64;
                            }
                            if *sent < body.len() {
                                break;
                            }
                            match s.queued.pop_front() {
                                Some(next) => s.body = Some((next, 0)),
                                None => {
                                    s.body = None;
                                    if s.finishing {
                                        // A client-streaming call's last message is out.
                                        frame_head(&mut self.out, 0, DATA, END_STREAM, id);
                                    }
                                    break;
                                }
                            }
                        }
                        let finished = s.body.is_none();
                        (finished, finished)
                    }
                },
                None => (true, false),
            };
            if done {
                self.held.remove(k);
            } else {
                k += 1;
            }
            if sent_all {
                self.settle(id);
            }
            if self.send_window <= 0 {
                break;
            }
        }
    }

    /// The connection failed: every stream open ends (those its server never processed as
    /// such; a body still going out stops), and every slot waiting for a stream learns it.
    fn fail(&mut self, class: ErrorClass) {
        if self.failed.is_some() {
            return;
        }
        self.failed = Some(class);
        let last = self.goaway;
        let ids: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.closed)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let end = match last {
                Some(last) if id > last => StreamFailure::Unprocessed,
                _ => StreamFailure::Failed(class),
            };
            self.end_stream(id, Err(end));
        }
        for w in self.waiting.drain(..) {
            w.wake();
        }
    }
}

/// A connection error of the server's making: the connection ends as a malformed response.
#[derive(Debug)]
struct Malformed(#[allow(dead_code)] &'static str);

/// The driver's reading state: the HPACK table and a header block being gathered.
struct Reader {
    decoder: hpack::Decoder,
    /// The header block of stream `.0` (flags of its HEADERS frame `.1`) while its
    /// CONTINUATIONs are due.
    block: Vec<u8>,
    in_block: Option<(u32, u8)>,
    /// The server's first frame (its SETTINGS) is in.
    greeted: bool,
    /// The largest header block accepted (as sent).
    max_header_list: usize,
}

impl Reader {
    /// Handles one frame of type `ty` on stream `id`.
    fn frame(
        &mut self,
        c: &Client,
        i: &mut Inner,
        ty: u8,
        flags: u8,
        id: u32,
        payload: &[u8],
    ) -> Result<(), Malformed> {
        if !self.greeted {
            if ty != SETTINGS || flags & ACK != 0 {
                return Err(Malformed("the server's first frame is not SETTINGS"));
            }
            self.greeted = true;
        }
        if let Some((block_id, _)) = self.in_block {
            if ty != CONTINUATION || id != block_id {
                return Err(Malformed("a frame inside a header block"));
            }
        }
        let opened = |id: u32| id != 0 && id < i.next_id;
        match ty {
            DATA => {
                if id == 0 {
                    return Err(Malformed("DATA on stream 0"));
                }
                let data = unpad(flags, payload)?;
                let len = payload.len() as i64;
                i.recv_window -= len;
                if i.recv_window < 0 {
                    return Err(Malformed("DATA beyond the connection window"));
                }
                i.recv_unacked += payload.len() as u32;
                if i.recv_unacked >= c.connection_window / 2 {
                    window_update(&mut i.out, 0, i.recv_unacked);
                    i.recv_window += i64::from(i.recv_unacked);
                    i.recv_unacked = 0;
                }
                let Some(s) = i.streams.get_mut(&id).filter(|s| s.end.is_none()) else {
                    return if opened(id) {
                        Ok(())
                    } else {
                        Err(Malformed("DATA on a stream never opened"))
                    };
                };
                s.recv_window -= len;
                if s.recv_window < 0 {
                    return Err(Malformed("DATA beyond the stream window"));
                }
                if s.status == 0 {
                    rst_stream(&mut i.out, id, PROTOCOL_ERROR);
                    i.end_stream(
                        id,
                        Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
                    );
                    return Ok(());
                }
                if s.grpc {
                    let before = s.scan.frames();
                    s.scan.feed(data);
                    if s.scan.too_large().is_some() {
                        // A message over what a client receives: the call has failed
                        // (RESOURCE_EXHAUSTED), and the rest of it is not read.
                        rst_stream(&mut i.out, id, CANCEL);
                        i.end_stream(id, Ok(()));
                        return Ok(());
                    }
                    if s.streaming && s.scan.frames() > before {
                        if let Some(w) = s.waker.take() {
                            w.wake();
                        }
                    }
                }
                if flags & END_STREAM != 0 {
                    i.end_stream(id, Ok(()));
                } else {
                    s.recv_unacked += payload.len() as u32;
                    if s.recv_unacked >= c.stream_window / 2 {
                        window_update(&mut i.out, id, s.recv_unacked);
                        s.recv_window += i64::from(s.recv_unacked);
                        s.recv_unacked = 0;
                    }
                }
            }
            HEADERS => {
                if id == 0 {
                    return Err(Malformed("HEADERS on stream 0"));
                }
                let mut fragment = unpad(flags, payload)?;
                if flags & PRIORITY_FLAG != 0 {
                    fragment = fragment
                        .get(5..)
                        .ok_or(Malformed("HEADERS too short for its priority"))?;
                }
                self.block.clear();
                self.block.extend_from_slice(fragment);
                if flags & END_HEADERS == 0 {
                    self.in_block = Some((id, flags));
                } else {
                    self.headers(i, id, flags)?;
                }
            }
            CONTINUATION => {
                let Some((block_id, first_flags)) = self.in_block else {
                    return Err(Malformed("CONTINUATION outside a header block"));
                };
                if self.block.len() + payload.len() > self.max_header_list {
                    return Err(Malformed("a header block over the limit"));
                }
                self.block.extend_from_slice(payload);
                if flags & END_HEADERS != 0 {
                    self.in_block = None;
                    self.headers(i, block_id, first_flags)?;
                }
            }
            PRIORITY => {}
            RST_STREAM => {
                if id == 0 || payload.len() != 4 {
                    return Err(Malformed("a malformed RST_STREAM"));
                }
                if !opened(id) {
                    return Err(Malformed("RST_STREAM on a stream never opened"));
                }
                let code = u32::from_be_bytes(payload.try_into().expect("4 bytes"));
                let end = if code == REFUSED_STREAM {
                    StreamFailure::Unprocessed
                } else {
                    StreamFailure::Failed(ErrorClass::StreamReset)
                };
                i.end_stream(id, Err(end));
            }
            SETTINGS => {
                if id != 0 {
                    return Err(Malformed("SETTINGS on a stream"));
                }
                if flags & ACK != 0 {
                    return if payload.is_empty() {
                        Ok(())
                    } else {
                        Err(Malformed("a SETTINGS acknowledgement with a payload"))
                    };
                }
                if !payload.len().is_multiple_of(6) {
                    return Err(Malformed("a SETTINGS frame of a wrong length"));
                }
                for p in payload.chunks_exact(6) {
                    let value = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
                    match u16::from_be_bytes([p[0], p[1]]) {
                        0x3 => i.max_streams = value,
                        0x4 => {
                            if i64::from(value) > MAX_WINDOW {
                                return Err(Malformed("an initial window over 2^31-1"));
                            }
                            let delta = i64::from(value) - i.initial_send_window;
                            i.initial_send_window = i64::from(value);
                            for s in i.streams.values_mut() {
                                s.send_window += delta;
                            }
                        }
                        0x5 => {
                            if !(MAX_FRAME as u32..1 << 24).contains(&value) {
                                return Err(Malformed("a maximum frame size out of range"));
                            }
                            i.max_send_frame = value as usize;
                        }
                        _ => {}
                    }
                }
                frame_head(&mut i.out, 0, SETTINGS, ACK, 0);
                i.send_held();
                // A higher stream limit lets waiting slots open.
                for w in i.waiting.drain(..) {
                    w.wake();
                }
            }
            PUSH_PROMISE => return Err(Malformed("PUSH_PROMISE, though push is off")),
            PING => {
                if id != 0 || payload.len() != 8 {
                    return Err(Malformed("a malformed PING"));
                }
                if flags & ACK == 0 {
                    frame_head(&mut i.out, 8, PING, ACK, 0);
                    i.out.extend_from_slice(payload);
                }
            }
            GOAWAY => {
                if id != 0 || payload.len() < 8 {
                    return Err(Malformed("a malformed GOAWAY"));
                }
                let last =
                    u32::from_be_bytes(payload[..4].try_into().expect("4 bytes")) & MAX_STREAM_ID;
                let last = i.goaway.map_or(last, |l| l.min(last));
                i.goaway = Some(last);
                let above: Vec<u32> = i
                    .streams
                    .iter()
                    .filter(|(&sid, s)| sid > last && s.end.is_none())
                    .map(|(&sid, _)| sid)
                    .collect();
                for sid in above {
                    i.end_stream(sid, Err(StreamFailure::Unprocessed));
                }
                for w in i.waiting.drain(..) {
                    w.wake();
                }
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(Malformed("a WINDOW_UPDATE of a wrong length"));
                }
                let inc = i64::from(
                    u32::from_be_bytes(payload.try_into().expect("4 bytes")) & MAX_STREAM_ID,
                );
                if inc == 0 {
                    return Err(Malformed("a WINDOW_UPDATE of 0"));
                }
                if id == 0 {
                    i.send_window += inc;
                    if i.send_window > MAX_WINDOW {
                        return Err(Malformed("a connection window over 2^31-1"));
                    }
                } else if let Some(s) = i.streams.get_mut(&id) {
                    s.send_window += inc;
                    if s.send_window > MAX_WINDOW {
                        return Err(Malformed("a stream window over 2^31-1"));
                    }
                }
                i.send_held();
            }
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => {}
        }
        Ok(())
    }

    /// A complete header block for stream `id` (`flags` of its HEADERS frame): decoded in
    /// any case (the HPACK table is the connection's), applied if the stream is open.
    fn headers(&mut self, i: &mut Inner, id: u32, flags: u8) -> Result<(), Malformed> {
        let mut status = None;
        let mut grpc = None;
        let mut encoded = false;
        let mut bad_status = false;
        self.decoder
            .decode(&self.block, &WANTED, |k, v| match k {
                0 => match v {
                    [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
                        status = Some(
                            u16::from(a - b'0') * 100
                                + u16::from(b - b'0') * 10
                                + u16::from(c - b'0'),
                        );
                    }
                    _ => bad_status = true,
                },
                1 => grpc = Some(GrpcStatus::from_trailer(v).unwrap_or(GrpcStatus::Unknown)),
                _ => encoded = true,
            })
            .map_err(|_| Malformed("an undecodable header block"))?;
        let Some(s) = i.streams.get_mut(&id).filter(|s| s.end.is_none()) else {
            return if id != 0 && id < i.next_id {
                Ok(())
            } else {
                Err(Malformed("HEADERS on a stream never opened"))
            };
        };
        let end = flags & END_STREAM != 0;
        if s.status == 0 {
            match status {
                // Informational: the final headers follow.
                Some(100..=199) if !end => return Ok(()),
                Some(st) if !bad_status => {
                    s.status = st;
                    s.header_grpc = grpc;
                    s.encoded = encoded;
                }
                _ => {
                    rst_stream(&mut i.out, id, PROTOCOL_ERROR);
                    i.end_stream(
                        id,
                        Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
                    );
                    return Ok(());
                }
            }
        } else {
            // Trailers: they end the stream.
            if !end || status.is_some() {
                rst_stream(&mut i.out, id, PROTOCOL_ERROR);
                i.end_stream(
                    id,
                    Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
                );
                return Ok(());
            }
            s.trailers = true;
            s.trailer_grpc = grpc;
        }
        if end {
            i.end_stream(id, Ok(()));
        }
        Ok(())
    }
}

/// DATA's or HEADERS' payload without its padding.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], Malformed> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(Malformed("a padded frame without its pad length"))?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or(Malformed("padding longer than the frame"))
}

/// Runs the connection on `io` until it fails, its server closes it, or nobody uses it:
/// writes what the slots queued, reads the server's frames. Returns when it ended (the
/// connection is closed as `io` drops).
pub(crate) async fn drive<S: AsyncRead + AsyncWrite + Unpin>(client: Rc<Client>, mut io: S) {
    let mut rbuf = vec![0u8; READ_BUF];
    let (mut start, mut end) = (0usize, 0usize);
    let mut wbuf: Vec<u8> = Vec::with_capacity(4096);
    let mut wpos = 0usize;
    let mut unflushed = false;
    let mut reader = Reader {
        decoder: hpack::Decoder::new(),
        block: Vec::new(),
        in_block: None,
        greeted: false,
        max_header_list: client.max_header_list,
    };
    std::future::poll_fn(|cx| {
        loop {
            // Write what is queued.
            if wpos == wbuf.len() {
                wbuf.clear();
                wpos = 0;
                std::mem::swap(&mut wbuf, &mut client.inner.borrow_mut().out);
            }
            let mut blocked = false;
            while wpos < wbuf.len() {
                match Pin::new(&mut io).poll_write(cx, &wbuf[wpos..]) {
                    Poll::Ready(Ok(0)) => {
                        client.inner.borrow_mut().fail(ErrorClass::ConnectionReset);
                        return Poll::Ready(());
                    }
                    Poll::Ready(Ok(n)) => {
                        wpos += n;
                        unflushed = true;
                    }
                    Poll::Ready(Err(e)) => {
                        client
                            .inner
                            .borrow_mut()
                            .fail(ErrorClass::from_io(&e, false));
                        return Poll::Ready(());
                    }
                    Poll::Pending => {
                        blocked = true;
                        break;
                    }
                }
            }
            if unflushed && !blocked {
                match Pin::new(&mut io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => unflushed = false,
                    Poll::Ready(Err(e)) => {
                        client
                            .inner
                            .borrow_mut()
                            .fail(ErrorClass::from_io(&e, false));
                        return Poll::Ready(());
                    }
                    Poll::Pending => {}
                }
            }
            // Read what came in.
            if start == end {
                start = 0;
                end = 0;
            } else if end == rbuf.len() {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            let mut buf = ReadBuf::new(&mut rbuf[end..]);
            match Pin::new(&mut io).poll_read(cx, &mut buf) {
                Poll::Pending => {}
                Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                    // The server closed the connection: a stream still open was cut.
                    client.inner.borrow_mut().fail(ErrorClass::ConnectionReset);
                    return Poll::Ready(());
                }
                Poll::Ready(Ok(())) => {
                    end += buf.filled().len();
                    let mut guard = client.inner.borrow_mut();
                    let i = &mut *guard;
                    while end - start >= 9 {
                        let h = &rbuf[start..start + 9];
                        let len =
                            usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                        if len > MAX_FRAME {
                            i.fail(ErrorClass::MalformedResponse);
                            return Poll::Ready(());
                        }
                        if end - start < 9 + len {
                            break;
                        }
                        let (ty, flags) = (h[3], h[4]);
                        let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID;
                        let payload = &rbuf[start + 9..start + 9 + len];
                        if reader.frame(&client, i, ty, flags, id, payload).is_err() {
                            i.fail(ErrorClass::MalformedResponse);
                            return Poll::Ready(());
                        }
                        start += 9 + len;
                    }
                    continue;
                }
                Poll::Ready(Err(e)) => {
                    client
                        .inner
                        .borrow_mut()
                        .fail(ErrorClass::from_io(&e, false));
                    return Poll::Ready(());
                }
            }
            let mut i = client.inner.borrow_mut();
            if !i.out.is_empty() && !blocked {
                // Frames queued while reading (acknowledgements, window updates).
                continue;
            }
            // The server is going away, or another connection replaced this one (or the run
            // is over), and no stream is left: close it, saying so first (RFC 9113 §6.8) with
            // a GOAWAY(NO_ERROR) that accepted no stream of the server's, so that the server
            // sees a graceful end and not a connection reset.
            if i.open == 0 && (i.goaway.is_some() || i.retired) && !blocked {
                if !i.bye {
                    i.bye = true;
                    frame_head(&mut i.out, 8, GOAWAY, 0, 0);
                    i.out.extend_from_slice(&[0; 8]);
                    continue;
                }
                if wpos == wbuf.len() && i.out.is_empty() && !unflushed {
                    return Poll::Ready(());
                }
            }
            match &i.driver {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => i.driver = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
    })
    .await;
    // The client outlives its connection (its graceful close is counted at the end of the
    // run): it keeps no buffer.
    let mut i = client.inner.borrow_mut();
    i.out = Vec::new();
    i.held = Vec::new();
    i.ended = true;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    fn frame(ty: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame_head(&mut out, payload.len(), ty, flags, id);
        out.extend_from_slice(payload);
        out
    }

    async fn read_frame(s: &mut DuplexStream) -> (u8, u8, u32, Vec<u8>) {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).await.unwrap();
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let mut payload = vec![0; len];
        s.read_exact(&mut payload).await.unwrap();
        let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
        (h[3], h[4], id, payload)
    }

    /// Reads frames until one of type `ty` (acknowledgements and window updates pass).
    async fn next_of(s: &mut DuplexStream, ty: u8) -> (u8, u32, Vec<u8>) {
        loop {
            let (t, flags, id, payload) = read_frame(s).await;
            if t == ty {
                return (flags, id, payload);
            }
        }
    }

    /// A client driven over an in-memory pipe whose other end the test plays the server
    /// on: the preface and the client's SETTINGS are read, the server's (`settings`) sent.
    async fn connected(settings: &[(u16, u32)]) -> (Rc<Client>, DuplexStream) {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let client = Rc::new(Client::new(1 << 20, 1 << 24, 256 << 10));
        tokio::task::spawn_local(drive(client.clone(), a));
        let mut preface = [0u8; 24];
        b.read_exact(&mut preface).await.unwrap();
        assert_eq!(&preface, PREFACE);
        let (ty, flags, _, _) = read_frame(&mut b).await;
        assert_eq!((ty, flags), (SETTINGS, 0));
        let mut payload = Vec::new();
        for (id, v) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&v.to_be_bytes());
        }
        b.write_all(&frame(SETTINGS, 0, 0, &payload)).await.unwrap();
        // In effect once acknowledged.
        loop {
            let (ty, flags, _, _) = read_frame(&mut b).await;
            if (ty, flags) == (SETTINGS, ACK) {
                break;
            }
        }
        (client, b)
    }

    async fn open(c: &Client, body: Option<&Bytes>, grpc: bool) -> u32 {
        std::future::poll_fn(|cx| c.poll_capacity(cx))
            .await
            .unwrap();
        c.open(&[0x82, 0x86, 0x84], |_| {}, body, grpc)
    }

    async fn result(c: &Client, id: u32) -> Result<Reply, StreamFailure> {
        std::future::poll_fn(|cx| c.poll_stream(id, cx)).await
    }

    fn local(f: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let set = tokio::task::LocalSet::new();
        set.block_on(&rt, async {
            tokio::time::timeout(std::time::Duration::from_secs(10), f)
                .await
                .expect("the test's exchange hangs");
        });
    }

    /// A retired connection (the run is over) waits for its open stream, then says
    /// GOAWAY(NO_ERROR, last stream 0) and closes: nothing cut under a stream.
    #[test]
    fn a_retired_connection_says_goaway_once_its_streams_are_done_and_closes() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let id = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            c.retire();
            tokio::task::yield_now().await;
            assert!(!c.ended(), "closed under an open stream");
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, id).await.unwrap().status, 200);
            let (flags, gid, payload) = next_of(&mut s, GOAWAY).await;
            assert_eq!((flags, gid, payload), (0, 0, vec![0; 8]));
            // Then the connection's end: nothing more, end of stream.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await.unwrap();
            assert!(rest.is_empty(), "{rest:?}");
            assert!(c.ended());
        });
    }

    #[test]
    fn a_body_held_by_the_servers_window_goes_out_as_the_window_opens() {
        local(async {
            let (c, mut s) = connected(&[(0x4, 3)]).await;
            let body = Bytes::from_static(b"0123456789");
            let id = open(&c, Some(&body), false).await;
            let (flags, hid, _) = next_of(&mut s, HEADERS).await;
            assert_eq!((flags & END_STREAM, hid), (0, id));
            // The stream window (3) allows 3 bytes, then nothing until it opens.
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"012"[..]));
            s.write_all(&frame(WINDOW_UPDATE, 0, id, &4u32.to_be_bytes()))
                .await
                .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"3456"[..]));
            // A larger initial window reaches the streams already open.
            let mut settings = 0x4u16.to_be_bytes().to_vec();
            settings.extend_from_slice(&100u32.to_be_bytes());
            s.write_all(&frame(SETTINGS, 0, 0, &settings))
                .await
                .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (END_STREAM, &b"789"[..]));
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88]))
                .await
                .unwrap();
            let r = result(&c, id).await.unwrap();
            assert_eq!(r.status, 200);
        });
    }

    /// A duplex stream's messages go as bodies of their own, none with END_STREAM; one the
    /// server's window holds back says so, and those sent behind it wait, in order, for the
    /// window; the server's end closes the client's side with an empty END_STREAM.
    #[test]
    fn a_duplex_streams_messages_go_in_order_as_the_window_allows_and_its_end_closes_it() {
        local(async {
            let (c, mut s) = connected(&[(0x4, 8)]).await;
            std::future::poll_fn(|cx| c.poll_capacity(cx))
                .await
                .unwrap();
            let id = c.open_duplex(&[0x83, 0x86, 0x84]);
            let (flags, hid, _) = next_of(&mut s, HEADERS).await;
            assert_eq!(
                (flags & END_STREAM, hid),
                (0, id),
                "the request side stays open"
            );
            // 5 bytes fit the window of 8; the next 5 go 3 now, 2 later: held back.
            assert_eq!(c.send(id, &Bytes::from_static(b"aaaaa")), Ok(false));
            assert_eq!(c.send(id, &Bytes::from_static(b"bbbbb")), Ok(true));
            assert_eq!(c.send(id, &Bytes::from_static(b"cc")), Ok(true));
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"aaaaa"[..]));
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"bbb"[..]));
            s.write_all(&frame(WINDOW_UPDATE, 0, id, &100u32.to_be_bytes()))
                .await
                .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"bb"[..]));
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"cc"[..]));
            // The server answers one message and ends the call (200, then trailers).
            s.write_all(&frame(HEADERS, END_HEADERS, id, &[0x88]))
                .await
                .unwrap();
            s.write_all(&frame(DATA, 0, id, &[0, 0, 0, 0, 1, 7]))
                .await
                .unwrap();
            let next = std::future::poll_fn(|cx| c.poll_message(id, cx)).await;
            assert_eq!(next, Ok(Next::Message));
            s.write_all(&frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                id,
                b"\x00\x0bgrpc-status\x010",
            ))
            .await
            .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!(
                (flags, data.len()),
                (END_STREAM, 0),
                "the client's side closed"
            );
            match std::future::poll_fn(|cx| c.poll_message(id, cx)).await {
                Ok(Next::End(reply)) => assert_eq!(reply.grpc_status(), Some(GrpcStatus::Ok)),
                other => panic!("{other:?}"),
            }
            // Nothing more goes on a stream that ended.
            assert!(c.send(id, &Bytes::from_static(b"late")).is_err());
        });
    }

    /// A client-streaming call's side ends after its last message, however long the window
    /// holds that one back: one empty END_STREAM after every message, none before, and none
    /// again when the server answers; a finished stream takes no more messages.
    #[test]
    fn a_finished_duplex_stream_ends_its_side_after_the_messages_held_back() {
        local(async {
            let (c, mut s) = connected(&[(0x4, 8)]).await;
            std::future::poll_fn(|cx| c.poll_capacity(cx))
                .await
                .unwrap();
            let id = c.open_duplex(&[0x83, 0x86, 0x84]);
            next_of(&mut s, HEADERS).await;
            assert_eq!(c.send(id, &Bytes::from_static(b"aaaaa")), Ok(false));
            assert_eq!(c.send(id, &Bytes::from_static(b"bbbbb")), Ok(true));
            c.finish(id);
            assert!(c.send(id, &Bytes::from_static(b"late")).is_err());
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"aaaaa"[..]));
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!(
                (flags, &data[..]),
                (0, &b"bbb"[..]),
                "held back: no end yet"
            );
            s.write_all(&frame(WINDOW_UPDATE, 0, id, &100u32.to_be_bytes()))
                .await
                .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"bb"[..]));
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, data.len()), (END_STREAM, 0), "the side ends last");
            // The reply and its trailers end the call; the client's side sends nothing more.
            s.write_all(&frame(HEADERS, END_HEADERS, id, &[0x88]))
                .await
                .unwrap();
            s.write_all(&frame(DATA, 0, id, &[0, 0, 0, 0, 1, 7]))
                .await
                .unwrap();
            s.write_all(&frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                id,
                b"\x00\x0bgrpc-status\x010",
            ))
            .await
            .unwrap();
            let next = std::future::poll_fn(|cx| c.poll_message(id, cx)).await;
            assert_eq!(next, Ok(Next::Message));
            match std::future::poll_fn(|cx| c.poll_message(id, cx)).await {
                Ok(Next::End(reply)) => assert_eq!(reply.grpc_status(), Some(GrpcStatus::Ok)),
                other => panic!("{other:?}"),
            }
            // A PING after the end: no DATA (a second END_STREAM) comes before its ACK.
            s.write_all(&frame(PING, 0, 0, &[9; 8])).await.unwrap();
            loop {
                let (ty, _, _, _) = read_frame(&mut s).await;
                assert_ne!(ty, DATA, "nothing more after the side ended");
                if ty == PING {
                    break;
                }
            }
        });
    }

    #[test]
    fn a_response_before_the_whole_body_lets_the_body_go_on_until_the_server_resets() {
        local(async {
            let (c, mut s) = connected(&[(0x4, 3), (0x3, 1)]).await;
            let body = Bytes::from_static(b"0123456789");
            let id = open(&c, Some(&body), false).await;
            next_of(&mut s, HEADERS).await;
            let (_, _, data) = next_of(&mut s, DATA).await;
            assert_eq!(&data[..], b"012");
            // A complete response (RFC 9113 §8.1): the slot has its result...
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, id).await.unwrap().status, 200);
            c.cancel(id);
            // ...the body goes on as the window opens, and the stream still counts
            // against the server's limit of 1.
            s.write_all(&frame(WINDOW_UPDATE, 0, id, &4u32.to_be_bytes()))
                .await
                .unwrap();
            let (flags, _, data) = next_of(&mut s, DATA).await;
            assert_eq!((flags, &data[..]), (0, &b"3456"[..]));
            let cx = Context::from_waker(Waker::noop());
            assert!(c.poll_capacity(&cx).is_pending());
            assert!(c.sending(id) && c.poll_sent(id, &cx).is_pending());
            // The server wants no more of it: the stream is over (its slot, waiting for the
            // body, goes on), and the client sends no reset of its own (a server limits the
            // resets it takes).
            s.write_all(&frame(RST_STREAM, 0, id, &0u32.to_be_bytes()))
                .await
                .unwrap();
            std::future::poll_fn(|cx| c.poll_sent(id, cx)).await;
            assert!(!c.sending(id));
            let next = open(&c, None, false).await;
            let (ty, _, fid, _) = read_frame(&mut s).await;
            assert_eq!((ty, fid), (HEADERS, next));
        });
    }

    /// A slot that stops waiting for the rest of a body (its deadline passed) resets the
    /// stream, and the server's limit has room again.
    #[test]
    fn a_body_given_up_on_after_its_response_is_reset() {
        local(async {
            let (c, mut s) = connected(&[(0x4, 3), (0x3, 1)]).await;
            let body = Bytes::from_static(b"0123456789");
            let id = open(&c, Some(&body), false).await;
            next_of(&mut s, DATA).await;
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, id).await.unwrap().status, 200);
            // What the slot's own guard does after a result: nothing for this stream.
            c.cancel(id);
            assert!(c.sending(id));
            c.stop_body(id);
            let (_, rid, code) = next_of(&mut s, RST_STREAM).await;
            assert_eq!((rid, code), (id, CANCEL.to_be_bytes().to_vec()));
            let cx = Context::from_waker(Waker::noop());
            assert!(c.poll_sent(id, &cx).is_ready());
            assert!(c.poll_capacity(&cx).is_ready());
        });
    }

    #[test]
    fn a_header_block_larger_than_a_frame_goes_in_continuations() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            std::future::poll_fn(|cx| c.poll_capacity(cx))
                .await
                .unwrap();
            let head: Vec<u8> = (0..40_000u32).map(|n| n as u8).collect();
            let id = c.open(&head, |out| out.push(0xff), None, false);
            let (flags, _, first) = next_of(&mut s, HEADERS).await;
            assert_eq!(flags, END_STREAM);
            assert_eq!(first.len(), MAX_FRAME);
            let mut block = first;
            loop {
                let (ty, flags, fid, part) = read_frame(&mut s).await;
                assert_eq!((ty, fid), (CONTINUATION, id));
                block.extend_from_slice(&part);
                if flags & END_HEADERS != 0 {
                    break;
                }
            }
            let mut want = head.clone();
            want.push(0xff);
            assert_eq!(block, want);
        });
    }

    #[test]
    fn trailers_padding_and_split_reads_give_the_grpc_status() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let id = open(&c, None, true).await;
            next_of(&mut s, HEADERS).await;
            let mut answer = frame(HEADERS, END_HEADERS, id, &[0x88]);
            // A padded DATA frame with one complete gRPC message (flag 0, length 2).
            let mut padded = vec![3u8];
            padded.extend_from_slice(&[0, 0, 0, 0, 2, b'h', b'i']);
            padded.extend_from_slice(&[0; 3]);
            answer.extend(frame(DATA, PADDED, id, &padded));
            let mut trailers = Vec::new();
            hpack::encode_literal(&mut trailers, b"grpc-status", b"5");
            answer.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &trailers));
            for byte in answer {
                s.write_all(&[byte]).await.unwrap();
                tokio::task::yield_now().await;
            }
            let r = result(&c, id).await.unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.grpc, Some(GrpcStatus::NotFound));
            assert!(!r.bad_framing);
        });
    }

    #[test]
    fn a_cut_message_and_trailers_without_status_are_reported() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let id = open(&c, None, true).await;
            next_of(&mut s, HEADERS).await;
            let mut answer = frame(HEADERS, END_HEADERS, id, &[0x88]);
            answer.extend(frame(DATA, 0, id, &[0, 0, 0, 0, 9, b'x']));
            let mut trailers = Vec::new();
            hpack::encode_literal(&mut trailers, b"x-other", b"1");
            answer.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &trailers));
            s.write_all(&answer).await.unwrap();
            let r = result(&c, id).await.unwrap();
            assert_eq!(r.grpc, Some(GrpcStatus::Unknown));
            assert!(r.bad_framing);
        });
    }

    #[test]
    fn a_stream_given_up_on_is_reset_and_frees_its_place() {
        local(async {
            let (c, mut s) = connected(&[(0x3, 1)]).await;
            let id = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            // The server's limit is 1: no second stream while the first is open.
            let cx = Context::from_waker(Waker::noop());
            assert!(c.poll_capacity(&cx).is_pending());
            c.cancel(id);
            let (_, rid, code) = next_of(&mut s, RST_STREAM).await;
            assert_eq!((rid, &code[..]), (id, &CANCEL.to_be_bytes()[..]));
            assert!(c.poll_capacity(&cx).is_ready());
            // The server's late answer to it is ignored, the next stream is answered.
            s.write_all(&frame(HEADERS, END_HEADERS, id, &[0x88]))
                .await
                .unwrap();
            s.write_all(&frame(DATA, END_STREAM, id, b"late"))
                .await
                .unwrap();
            let next = open(&c, None, false).await;
            assert_eq!(next, id + 2);
            next_of(&mut s, HEADERS).await;
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, next, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, next).await.unwrap().status, 200);
        });
    }

    #[test]
    fn the_connection_window_is_given_back_as_data_comes_in() {
        local(async {
            let (a, mut s) = tokio::io::duplex(1 << 20);
            // A small connection window: 70,000 (65,535 + 4,465).
            let c = Rc::new(Client::new(1 << 20, 70_000, 256 << 10));
            tokio::task::spawn_local(drive(c.clone(), a));
            let mut preface = [0u8; 24];
            s.read_exact(&mut preface).await.unwrap();
            let (ty, ..) = read_frame(&mut s).await;
            assert_eq!(ty, SETTINGS);
            let (flags, wid, inc) = next_of(&mut s, WINDOW_UPDATE).await;
            assert_eq!(
                (flags, wid, u32::from_be_bytes(inc[..].try_into().unwrap())),
                (0, 0, 4_465)
            );
            s.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
            let id = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            s.write_all(&frame(HEADERS, END_HEADERS, id, &[0x88]))
                .await
                .unwrap();
            // 3 × 16,384 bytes: past half the window, the client gives it back.
            for _ in 0..3 {
                s.write_all(&frame(DATA, 0, id, &[7; MAX_FRAME]))
                    .await
                    .unwrap();
            }
            let (_, wid, inc) = next_of(&mut s, WINDOW_UPDATE).await;
            assert_eq!(
                (wid, u32::from_be_bytes(inc[..].try_into().unwrap())),
                (0, 49_152)
            );
            s.write_all(&frame(DATA, END_STREAM, id, b"end"))
                .await
                .unwrap();
            assert_eq!(result(&c, id).await.unwrap().status, 200);
        });
    }

    #[test]
    fn goaway_ends_the_streams_above_it_as_unprocessed_and_the_others_run_on() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let first = open(&c, None, false).await;
            let second = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            next_of(&mut s, HEADERS).await;
            let mut goaway = first.to_be_bytes().to_vec();
            goaway.extend_from_slice(&0u32.to_be_bytes());
            s.write_all(&frame(GOAWAY, 0, 0, &goaway)).await.unwrap();
            assert_eq!(result(&c, second).await, Err(StreamFailure::Unprocessed));
            assert!(!c.usable());
            let cx = Context::from_waker(Waker::noop());
            assert_eq!(
                c.poll_capacity(&cx),
                Poll::Ready(Err(StreamFailure::Unprocessed))
            );
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, first, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, first).await.unwrap().status, 200);
            assert_eq!(c.take_close(), Some(1));
            assert_eq!(c.take_close(), None);
        });
    }

    /// A connection that opened its last stream id (2³¹ − 1) takes no new stream: the next
    /// request is unprocessed (its link sends it on another connection), the last stream
    /// still runs to its answer, and a response on it is read with its full id.
    #[test]
    fn a_connection_at_its_last_stream_id_takes_no_new_stream_and_ends_its_last() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let first = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, first, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, first).await.unwrap().status, 200);
            // A long-lived connection, a billion streams later.
            c.inner.borrow_mut().next_id = MAX_STREAM_ID;
            assert!(c.usable());
            let last = open(&c, None, false).await;
            assert_eq!(last, MAX_STREAM_ID);
            let (_, id, _) = next_of(&mut s, HEADERS).await;
            assert_eq!(id, MAX_STREAM_ID);
            assert!(!c.usable());
            let cx = Context::from_waker(Waker::noop());
            assert_eq!(
                c.poll_capacity(&cx),
                Poll::Ready(Err(StreamFailure::Unprocessed))
            );
            s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, last, &[0x88]))
                .await
                .unwrap();
            assert_eq!(result(&c, last).await.unwrap().status, 200);
            assert!(!c.usable());
        });
    }

    #[test]
    fn a_refused_stream_is_unprocessed_and_any_other_reset_is_a_reset() {
        local(async {
            let (c, mut s) = connected(&[]).await;
            let refused = open(&c, None, false).await;
            let reset = open(&c, None, false).await;
            next_of(&mut s, HEADERS).await;
            next_of(&mut s, HEADERS).await;
            s.write_all(&frame(
                RST_STREAM,
                0,
                refused,
                &REFUSED_STREAM.to_be_bytes(),
            ))
            .await
            .unwrap();
            s.write_all(&frame(RST_STREAM, 0, reset, &2u32.to_be_bytes()))
                .await
                .unwrap();
            assert_eq!(result(&c, refused).await, Err(StreamFailure::Unprocessed));
            assert_eq!(
                result(&c, reset).await,
                Err(StreamFailure::Failed(ErrorClass::StreamReset))
            );
            // The connection itself goes on.
            assert!(c.usable());
        });
    }

    /// Random frames from a server (any type, flags, stream, a payload of random bytes or
    /// a valid `:status`), in reads of random sizes, then the end of the connection: no
    /// panic (the test build checks the stream count never underflows), every stream ends,
    /// and none is left counted against the server's limit.
    #[test]
    fn random_frames_never_panic_and_every_stream_ends() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(33);
        for round in 0..2000 {
            let mut bytes = frame(SETTINGS, 0, 0, &[]);
            for _ in 0..rng.gen_range(0..12) {
                let ty = rng.gen_range(0..11u8);
                let flags: u8 = rng.gen();
                let id = [0, 1, 3, 5, 7, 99][rng.gen_range(0..6)];
                let payload: Vec<u8> = match rng.gen_range(0..3) {
                    0 => vec![0x88],
                    1 => (0..rng.gen_range(0..24)).map(|_| rng.gen()).collect(),
                    _ => rng.gen::<[u8; 8]>().to_vec(),
                };
                bytes.extend(frame(ty, flags, id, &payload));
            }
            let step = rng.gen_range(1..40);
            local(async move {
                let (a, mut s) = tokio::io::duplex(1 << 20);
                let c = Rc::new(Client::new(1 << 20, 1 << 24, 256 << 10));
                tokio::task::spawn_local(drive(c.clone(), a));
                let body = Bytes::from_static(b"body");
                let ids = [
                    open(&c, None, false).await,
                    open(&c, Some(&body), true).await,
                    open(&c, None, true).await,
                ];
                for chunk in bytes.chunks(step) {
                    if s.write_all(chunk).await.is_err() {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                drop(s);
                for id in ids {
                    let _ = result(&c, id).await;
                }
                assert_eq!(c.inner.borrow().open, 0, "round {round}");
            });
        }
    }

    #[test]
    fn a_frame_where_it_may_not_be_ends_the_connection_as_malformed() {
        for bad in [
            frame(DATA, 0, 0, b"x"), // DATA on stream 0
            frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]),
            frame(PING, 0, 0, b"short"),
            frame(WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
            frame(HEADERS, END_HEADERS, 99, &[0x88]), // a stream never opened
            frame(CONTINUATION, END_HEADERS, 1, &[]),
        ] {
            local(async {
                let (c, mut s) = connected(&[]).await;
                let id = open(&c, None, false).await;
                next_of(&mut s, HEADERS).await;
                s.write_all(&bad).await.unwrap();
                assert_eq!(
                    result(&c, id).await,
                    Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
                    "frame {:?}",
                    &bad[..9]
                );
            });
        }
    }
}
