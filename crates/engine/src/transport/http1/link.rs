//! An HTTP/1.1 request loop's connection: opened on demand, a batch written at once (one
//! request, or a pipelined batch), responses read in order and recorded, graceful closes
//! handled by re-sending what the server never read.

use std::cell::Cell;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::{H1Request, ResponseReader};
use crate::config::RunConfig;
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::transport::io::{Io, Varying, MAX_RESENDS};

/// What a link sends.
pub(crate) enum H1Source {
    /// One fixed request: the encoded request repeated for a pipelined batch, and the bytes
    /// of one.
    Fixed {
        /// The encoded request, repeated `pipeline` times.
        bytes: Arc<Vec<u8>>,
        /// Bytes of one request.
        len: usize,
    },
    /// Requests that vary, rendered per exchange into `buf` (reused), where request `i` of
    /// the batch starts at `starts[i]`: a request sent again after a graceful close is the
    /// same bytes.
    Varying {
        /// The kinds and how they are drawn.
        v: Arc<Varying<H1Request>>,
        /// The batch's rendered requests.
        buf: Vec<u8>,
        /// A rendered body while its length is written.
        scratch: Vec<u8>,
        /// Where each request of the batch starts in `buf`.
        starts: Vec<usize>,
    },
}

impl H1Source {
    /// The fixed request `bytes` (repeated `cfg.pipeline` times).
    pub(crate) fn fixed(bytes: &Arc<Vec<u8>>, cfg: &RunConfig) -> H1Source {
        H1Source::Fixed {
            len: bytes.len() / cfg.transport.pipeline() as usize,
            bytes: bytes.clone(),
        }
    }

    /// Requests drawn from `v`.
    pub(crate) fn varying(v: Arc<Varying<H1Request>>) -> H1Source {
        H1Source::Varying {
            v,
            buf: Vec::with_capacity(4096),
            scratch: Vec::with_capacity(1024),
            starts: Vec::new(),
        }
    }
}

/// One request loop's HTTP/1.1 connection and response parser.
pub(crate) struct Http1Link {
    /// What it sends.
    source: H1Source,
    conn: Option<Conn>,
    reader: ResponseReader,
    /// Responses read on `conn` so far.
    served: u64,
    /// When the last response on `conn` completed (clock ns).
    last_done: u64,
}

/// A kept-alive connection idle for this long is checked for bytes the server sent unasked
/// before it is reused (one non-blocking read, made only if the event loop saw the socket
/// become readable since a read emptied it: no system call on a quiet connection)...
const PEEK_IDLE_NS: u64 = 1_000_000;
/// ...and so are its first and every this-many-th reuse (closed loop reuses at once).
const PEEK_EVERY: u64 = 16;

impl Http1Link {
    /// A link that sends what `source` holds.
    pub(crate) fn new(source: H1Source, cfg: &RunConfig) -> Http1Link {
        Http1Link {
            source,
            conn: None,
            reader: ResponseReader::new(&cfg.method),
            served: 0,
            last_done: 0,
        }
    }

    /// Whether its connection is not up yet (connecting with its first request).
    pub(crate) fn connecting(&self) -> bool {
        self.conn.as_ref().is_some_and(Conn::connecting)
    }

    /// Drops the connection (after a failure, or with keep-alive off).
    pub(crate) fn close(&mut self) {
        self.conn = None;
    }

    /// Connects before the window starts, if the connection opens by `deadline`.
    /// `true` if the deadline passed before the connection (and its TLS handshake) was up.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        let c0 = io.clock.now();
        match tokio::time::timeout_at(deadline, io.connector.connect()).await {
            Ok(Ok(c)) => {
                io.recorder.borrow_mut().connect(io.clock.now() - c0);
                self.conn = Some(c);
                false
            }
            Ok(Err(_)) => false,
            Err(_elapsed) => true,
        }
    }

    /// Writes the batch on the connection (connecting first if needed) and reads its
    /// responses.
    ///
    /// A server may close a keep-alive connection gracefully: a response with
    /// `Connection: close`, or a clean close right after a complete response. Requests
    /// written behind it were never read (RFC 9112 §9.3), so they are sent again on a new
    /// connection, latency still charged from their intended send time, if their method
    /// allows it ([`Transport::resend_unprocessed`](crate::config::Transport::resend_unprocessed)). A close in the middle of a response,
    /// or before a connection answered anything, is an error.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        batch: &[Planned],
        connecting: &Cell<bool>,
        done: &Cell<usize>,
    ) -> Result<(), ErrorClass> {
        if let H1Source::Varying {
            v,
            buf,
            scratch,
            starts,
        } = &mut self.source
        {
            let mut w = io.drawing();
            buf.clear();
            starts.clear();
            for &p in batch {
                starts.push(buf.len());
                let draw = v.traffic.draw(p);
                v.kind(p).render(&draw, &mut w.gen, buf, scratch);
            }
        }
        let mut resends = 0;
        // The batch's first send: a resend after the server closed the connection unanswered
        // comes later by the time the requests spent at the server.
        let mut first_sent = None;
        'connection: loop {
            // Opened before this exchange: pre-connected, or kept alive.
            let opened_before = self.conn.is_some();
            if self.conn.is_none() {
                connecting.set(true);
                let c0 = io.clock.now();
                let c = io.connector.open(!io.cfg.transport.keep_alive()).await?;
                if !c.connecting() {
                    io.recorder.borrow_mut().connect(io.clock.now() - c0);
                }
                self.reader.reset();
                self.served = 0;
                connecting.set(false);
                self.conn = Some(c);
            }
            let c = self.conn.as_mut().expect("connected above");
            let rest = &batch[done.get()..];
            let sent = io.clock.now();
            let first = *first_sent.get_or_insert(sent);
            // Bytes on a connection no request is waiting on: the server answers out of
            // turn, and every response read from here on could be another request's.
            let peek = c.peek_is_free()
                || self.served == 1
                || self.served.is_multiple_of(PEEK_EVERY)
                || sent - self.last_done >= PEEK_IDLE_NS;
            if opened_before && self.served == 0 && c.peek_is_free() {
                // A pre-connected connection's first request: the receive armed when it
                // came up has its completion taken in first (once per connection).
                crate::transport::uring::reap_now();
            }
            if opened_before && self.reader.unsolicited(c, peek) {
                self.conn = None;
                return Err(ErrorClass::MalformedResponse);
            }
            let bytes = match &self.source {
                H1Source::Fixed { bytes, len } => &bytes[..len * rest.len()],
                H1Source::Varying { buf, starts, .. } => &buf[starts[done.get()]..],
            };
            c.write_all(bytes)
                .await
                .map_err(|e| ErrorClass::from_io(&e, false))?;
            for &t in rest {
                if let H1Source::Varying { v, .. } = &self.source {
                    self.reader.expect_head(v.kind(t).head_request);
                }
                match self.reader.read(c).await {
                    Ok(meta) => {
                        // When the response's last bytes arrived, if the kernel stamped
                        // them: a worker that reads late (busy sending, or preempted)
                        // must not charge its own delay to the server.
                        let now = io.clock.now();
                        self.last_done = c
                            .received_at()
                            .map_or(now, |at| io.clock.from_realtime(at, sent, now));
                        io.recorder.borrow_mut().response_resent(
                            t,
                            first,
                            sent,
                            self.last_done,
                            meta.status,
                        );
                        done.set(done.get() + 1);
                        self.served += 1;
                        if !meta.close {
                            continue;
                        }
                        // With keep-alive off loadlab asked for the close itself.
                        if !io.cfg.transport.keep_alive() {
                            self.conn = None;
                            return Ok(());
                        }
                    }
                    // A clean close before any byte of this response, on a connection that
                    // has answered before: an idle keep-alive connection the server closed.
                    Err(ErrorClass::ConnectionClosed)
                        if self.served > 0 && !self.reader.began() => {}
                    Err(class) => return Err(class),
                }
                self.conn = None;
                io.recorder.borrow_mut().server_close(self.served);
                if done.get() == batch.len() {
                    return Ok(());
                }
                if !io.cfg.transport.resend_unprocessed() || resends >= MAX_RESENDS {
                    return Err(ErrorClass::ConnectionClosed);
                }
                resends += 1;
                let mut rec = io.recorder.borrow_mut();
                for &t in &batch[done.get()..] {
                    rec.resent(t.intended);
                }
                continue 'connection;
            }
            return Ok(());
        }
    }
}
