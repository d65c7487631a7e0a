//! Server-sent events (`text/event-stream`, the HTML standard's EventSource): a request
//! loop's stream, opened with one GET and kept. Each exchange waits for the stream's next
//! event and records it as a reply whose latency is the wait: the first one's is the time
//! to first event (connect, request, head and event), every later one's the gap since the
//! event before. A stream the server ends is opened again with `Last-Event-ID`, as an
//! EventSource reconnects, within the same wait.

mod decode;
pub(crate) mod flow;

use std::cell::Cell;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::config::RunConfig;
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::transport::io::{sent_at_in, HeldMark, Io, MAX_RESENDS};

pub use decode::{Decoder, Head, Step};

/// The status every event counts under: its stream's `200 OK`.
pub const EVENT_STATUS: u16 = 200;

/// The longest wait before opening a stream again after the server ended it (a `retry:`
/// field asks for one; the event's deadline bounds it too).
const MAX_RETRY_MS: u64 = 1_000;

/// What every stream of a run sends: its GET, without the blank line that ends the head.
pub struct SseRequest {
    head: Vec<u8>,
    /// Where an event's data says when the server sent it (`--sent-at`, a JSON pointer).
    sent_at: Option<String>,
}

impl SseRequest {
    /// The GET of `cfg`, asking for `text/event-stream` unless its headers name an
    /// `Accept` of their own.
    pub fn new(cfg: &RunConfig) -> SseRequest {
        let mut head = crate::transport::http1::encode_request(cfg);
        // The encoded request ends with the blank line (a GET has no body).
        head.truncate(head.len().saturating_sub(2));
        let has = |name: &str| {
            cfg.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        if !has("accept") {
            head.extend_from_slice(b"Accept: text/event-stream\r\n");
        }
        if !has("cache-control") {
            head.extend_from_slice(b"Cache-Control: no-cache\r\n");
        }
        SseRequest {
            head,
            sent_at: cfg.transport.sent_at().map(str::to_string),
        }
    }
}

/// One request loop's stream.
pub(crate) struct SseLink {
    request: Arc<SseRequest>,
    conn: Option<Conn>,
    decoder: Decoder,
    /// Bytes read and not decoded yet.
    buf: Vec<u8>,
    pos: usize,
    /// The id of the last event seen (sent back as `Last-Event-ID` on a new stream).
    last_id: Option<String>,
    /// The reconnection time the server asked for (`retry:`), ms.
    retry_ms: u64,
    /// Events read on the current stream.
    events: u64,
    /// When loadlab began to open the current stream (its time to first event counts from
    /// here).
    opening: u64,
    /// Counts the stream as held once an event came on it (`None`: not yet, or ended).
    held: Option<HeldMark>,
}

impl SseLink {
    /// A link that opens streams with `request`, on first use.
    pub(crate) fn new(request: Arc<SseRequest>) -> SseLink {
        SseLink {
            request,
            conn: None,
            decoder: Decoder::default(),
            buf: vec![0; 4096],
            pos: 0,
            last_id: None,
            retry_ms: 0,
            events: 0,
            opening: 0,
            held: None,
        }
    }

    /// Ends the stream (after a failure: its next event would be charged to the wrong wait).
    pub(crate) fn close(&mut self) {
        self.conn = None;
        self.held = None;
    }

    /// Opens the stream before the window starts, if it opens by `deadline`; `true` if the
    /// deadline passed first.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        match tokio::time::timeout_at(deadline, self.open(io)).await {
            Ok(Ok(())) => false,
            Ok(Err(_)) => false,
            Err(_elapsed) => true,
        }
    }

    /// Connects and writes the GET (with `Last-Event-ID` after an event with an id).
    async fn open(&mut self, io: &Io) -> Result<(), ErrorClass> {
        let c0 = io.clock.now();
        self.opening = c0;
        let mut conn = io.connector.connect().await?;
        io.recorder.borrow_mut().connect(io.clock.now() - c0);
        let mut head = self.request.head.clone();
        if let Some(id) = &self.last_id {
            head.extend_from_slice(b"Last-Event-ID: ");
            head.extend_from_slice(id.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        conn.write_all(&head)
            .await
            .map_err(|e| ErrorClass::from_io(&e, false))?;
        self.decoder = Decoder::keeping_data(self.request.sent_at.is_some());
        self.buf.truncate(0);
        self.buf.resize(4096, 0);
        self.pos = 4096;
        self.events = 0;
        self.conn = Some(conn);
        Ok(())
    }

    /// Waits for the stream's next event (opening the stream first if needed, and again
    /// with `Last-Event-ID` when the server ends it) and records it.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        batch: &[Planned],
        connecting: &Cell<bool>,
        done: &Cell<usize>,
    ) -> Result<(), ErrorClass> {
        let Some(&p) = batch.first() else {
            return Ok(());
        };
        let sent = io.clock.now();
        let mut reopened = 0;
        loop {
            if self.conn.is_none() {
                connecting.set(true);
                let opened = self.open(io).await;
                connecting.set(false);
                opened?;
            }
            match self.next_step().await {
                Ok(Step::Event { id, data }) => {
                    if let Some(id) = id {
                        self.last_id = Some(id);
                    }
                    // The stream's first event (timed from its opening), or a gap.
                    let (first, since) = if self.events == 0 {
                        (true, self.opening)
                    } else {
                        (false, sent)
                    };
                    self.events += 1;
                    if self.held.is_none() {
                        self.held = Some(HeldMark::new(io));
                    }
                    let now = io.clock.now();
                    let mut rec = io.recorder.borrow_mut();
                    rec.response(p, sent, now, EVENT_STATUS);
                    rec.stream_message(p, now.saturating_sub(since), first);
                    if let Some(pointer) = &self.request.sent_at {
                        let server = data.and_then(|d| sent_at_in(&d, pointer));
                        rec.server_delay(p, io.clock.realtime_ns(now), server);
                    }
                    drop(rec);
                    done.set(1);
                    return Ok(());
                }
                Ok(Step::Retry(ms)) => self.retry_ms = ms.min(MAX_RETRY_MS),
                Ok(Step::Refused(status)) => {
                    // A 4xx or 5xx (or 204: "stop reconnecting") instead of a stream: the
                    // status is this wait's reply.
                    self.conn = None;
                    self.held = None;
                    io.recorder
                        .borrow_mut()
                        .response(p, sent, io.clock.now(), status);
                    done.set(1);
                    return Ok(());
                }
                Ok(Step::Ended) => {
                    // The server ended the stream: an EventSource opens it again.
                    self.conn = None;
                    self.held = None;
                    io.recorder.borrow_mut().server_close(self.events);
                    reopened += 1;
                    if reopened > MAX_RESENDS {
                        return Err(ErrorClass::ConnectionClosed);
                    }
                    if self.retry_ms > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(self.retry_ms)).await;
                    }
                }
                Err(class) => return Err(class),
            }
        }
    }

    /// Decodes what was read until one step, reading more as needed.
    async fn next_step(&mut self) -> Result<Step, ErrorClass> {
        let conn = self.conn.as_mut().expect("a stream is open");
        read_step(conn, &mut self.decoder, &mut self.buf, &mut self.pos).await
    }
}

/// Decodes what `conn` sent until one step: `buf[pos..]` first (bytes read and not decoded
/// yet), then reads of up to 4 KiB.
async fn read_step(
    conn: &mut Conn,
    decoder: &mut Decoder,
    buf: &mut Vec<u8>,
    pos: &mut usize,
) -> Result<Step, ErrorClass> {
    loop {
        if *pos < buf.len() {
            let (used, step) = decoder.feed(&buf[*pos..])?;
            *pos += used;
            if let Some(step) = step {
                return Ok(step);
            }
            continue;
        }
        buf.resize(4096, 0);
        let n = conn
            .read(&mut buf[..])
            .await
            .map_err(|e| ErrorClass::from_io(&e, false))?;
        if n == 0 {
            return decoder.eof();
        }
        buf.truncate(n);
        *pos = 0;
    }
}
