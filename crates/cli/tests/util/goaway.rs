//! A bare HTTP/2 (h2c, prior knowledge) responder that closes connections the way nginx
//! does after `keepalive_requests`: after the n-th stream of a connection it sends `GOAWAY`
//! with that stream as `last_stream_id`, answers every stream up to it, ignores the
//! streams above it (the client already sent them: they were never processed), and closes.
//!
//! Written by hand because a server library will not send such a `GOAWAY` and then go on
//! serving: it needs no HPACK decoding (every request gets the same answer, and the answer
//! is one static-table byte, `:status: 200`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{accept_loop, Background};

/// What to do with the n-th stream, the `last_stream_id` of the `GOAWAY`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LastStream {
    /// Answer it like the others.
    Answer,
    /// Reset it (`RST_STREAM` INTERNAL_ERROR): the server processed and then failed it.
    Reset,
}

/// What the server saw.
#[derive(Default, Debug)]
pub struct GoAwayCounters {
    /// Connections accepted.
    pub accepts: AtomicU64,
    /// Streams answered with `200`.
    pub answered: AtomicU64,
    /// Streams reset.
    pub reset: AtomicU64,
}

pub struct GoAwayServer {
    pub addr: SocketAddr,
    pub counters: Arc<GoAwayCounters>,
    _rt: Background,
}

impl GoAwayServer {
    /// Serves on 127.0.0.1: `GOAWAY` after `per_connection` streams on each connection;
    /// with `grpc`, every answer is an empty gRPC reply with `grpc-status: 0`.
    pub fn start(per_connection: u64, last: LastStream, grpc: bool) -> GoAwayServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let counters = Arc::new(GoAwayCounters::default());
        let c = counters.clone();
        let (addr, rt) = accept_loop(listener, move |sock| {
            c.accepts.fetch_add(1, Ordering::Relaxed);
            connection(sock, per_connection, last, grpc, c.clone())
        });
        GoAwayServer {
            addr,
            counters,
            _rt: rt,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;

/// Appends one frame: 9-byte header, then the payload.
pub fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let n = payload.len();
    out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8, ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Reads one frame: `(type, flags, stream id, payload)`, `None` at the end of the stream.
pub async fn read_frame(sock: &mut TcpStream) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    sock.read_exact(&mut head).await.ok()?;
    let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    sock.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], id, payload))
}

async fn connection(
    mut sock: TcpStream,
    per_connection: u64,
    last: LastStream,
    grpc: bool,
    c: Arc<GoAwayCounters>,
) {
    let mut preface = [0u8; 24];
    if sock.read_exact(&mut preface).await.is_err() || preface != PREFACE {
        return;
    }
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    if sock.write_all(&out).await.is_err() {
        return;
    }
    let mut streams = 0u64;
    loop {
        let Some((ty, flags, id, payload)) = read_frame(&mut sock).await else {
            return;
        };
        out.clear();
        match ty {
            SETTINGS if flags & ACK == 0 => frame(&mut out, SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(&mut out, PING, ACK, 0, &payload),
            HEADERS => {
                // Answered in order as they come: every stream below this one already is.
                streams += 1;
                let closing = streams == per_connection;
                if closing {
                    let mut g = id.to_be_bytes().to_vec();
                    g.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
                    frame(&mut out, GOAWAY, 0, 0, &g);
                }
                if closing && last == LastStream::Reset {
                    frame(&mut out, RST_STREAM, 0, id, &2u32.to_be_bytes());
                    c.reset.fetch_add(1, Ordering::Relaxed);
                } else {
                    frame(&mut out, HEADERS, END_HEADERS, id, &[0x88]); // :status 200
                    if grpc {
                        // An empty message, then trailers: grpc-status 0 (a literal).
                        frame(&mut out, DATA, 0, id, &[0, 0, 0, 0, 0]);
                        let mut t = vec![0x00, 11];
                        t.extend_from_slice(b"grpc-status");
                        t.extend_from_slice(&[1, b'0']);
                        frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &t);
                    } else {
                        frame(&mut out, DATA, END_STREAM, id, b"ok");
                    }
                    c.answered.fetch_add(1, Ordering::Relaxed);
                }
                if closing {
                    // Streams above the last are read and never answered; close once the
                    // client has had time to read the answers.
                    let _ = sock.write_all(&out).await;
                    let mut sink = [0u8; 4096];
                    let _ = tokio::time::timeout(Duration::from_millis(200), async {
                        while matches!(sock.read(&mut sink).await, Ok(n) if n > 0) {}
                    })
                    .await;
                    return;
                }
            }
            _ => {}
        }
        if !out.is_empty() && sock.write_all(&out).await.is_err() {
            return;
        }
    }
}
