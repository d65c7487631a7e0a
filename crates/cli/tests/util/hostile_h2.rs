//! A bare HTTP/2 (h2c) server that breaks the protocol one chosen way, frame by frame (no
//! library would): no preface, a wrong one, no streams allowed, a window that never opens,
//! every stream reset, a header block too large, an endless CONTINUATION, a PING flood,
//! a `GOAWAY` that covers no stream, one that covers a stream the server then drops.
//! Answers, when it gives any, are `:status: 200` (one static-table byte) and `ok`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::goaway::{
    frame, read_frame, ACK, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, PREFACE,
    RST_STREAM, SETTINGS,
};
use super::{accept_loop, Background};

const CONTINUATION: u8 = 0x9;
/// How long a flood goes on at most (the test's runs are shorter).
const FLOOD_FOR: Duration = Duration::from_secs(10);

/// How the server breaks HTTP/2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RawH2 {
    /// Reads, never writes: no server preface.
    Silent,
    /// Answers in HTTP/1.1 and closes.
    Http1Text,
    /// Its first frame is DATA on stream 0, not SETTINGS.
    WrongPreface,
    /// SETTINGS_MAX_CONCURRENT_STREAMS = 0: no stream may open.
    MaxStreamsZero,
    /// SETTINGS_INITIAL_WINDOW_SIZE = 0 and no WINDOW_UPDATE ever: a request body cannot be
    /// sent. Requests without a body (END_STREAM on HEADERS) are answered.
    ZeroWindow,
    /// RST_STREAM (INTERNAL_ERROR) for every stream.
    RstEveryStream,
    /// A HEADERS frame of 20,000 bytes, over the 16,384 the client allows.
    HugeHeaders,
    /// HEADERS without END_HEADERS, then CONTINUATION frames without end.
    ContinuationFlood,
    /// A header list of about 320 KiB, correctly framed (HEADERS, CONTINUATIONs, the last
    /// with END_HEADERS): more than the client's 256 KiB limit, every frame within size.
    HugeHeaderList,
    /// Answers every stream, with 1,000 PINGs before each answer.
    PingFlood,
    /// `GOAWAY` with `last_stream_id` 0 at the first stream of each connection: no stream
    /// is ever processed (the connection stays open until the client closes it).
    GoAwayNone,
    /// `GOAWAY` whose `last_stream_id` covers the first stream (processed), then the
    /// connection closes without answering it.
    GoAwayCoveredThenClose,
}

pub struct RawH2Server {
    pub addr: SocketAddr,
    /// Streams answered `200`.
    pub answered: Arc<AtomicU64>,
    _rt: Background,
}

impl RawH2Server {
    pub fn start(behavior: RawH2) -> RawH2Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let answered = Arc::new(AtomicU64::new(0));
        let a = answered.clone();
        let (addr, rt) = accept_loop(listener, move |sock| connection(sock, behavior, a.clone()));
        RawH2Server {
            addr,
            answered,
            _rt: rt,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (id, value) in params {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, &payload);
    out
}

/// `x-flood: aaaa...` literal header fields (never indexed), about `bytes` of them.
fn flood_headers(bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() + 110 <= bytes {
        out.extend_from_slice(&[0x10, 7]);
        out.extend_from_slice(b"x-flood");
        out.push(100);
        out.extend_from_slice(&[b'a'; 100]);
    }
    out
}

fn answer(out: &mut Vec<u8>, id: u32) {
    frame(out, HEADERS, END_HEADERS, id, &[0x88]);
    frame(out, DATA, END_STREAM, id, b"ok");
}

async fn sink(mut sock: TcpStream) {
    let mut buf = [0u8; 4096];
    while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
}

async fn connection(mut sock: TcpStream, behavior: RawH2, answered: Arc<AtomicU64>) {
    let mut preface = [0u8; 24];
    if sock.read_exact(&mut preface).await.is_err() || preface != PREFACE {
        return;
    }
    let first = match behavior {
        RawH2::Silent => return sink(sock).await,
        RawH2::Http1Text => {
            let _ = sock
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
        RawH2::WrongPreface => {
            let mut out = Vec::new();
            frame(&mut out, DATA, 0, 0, b"not settings");
            out
        }
        RawH2::MaxStreamsZero => settings(&[(0x3, 0)]),
        RawH2::ZeroWindow => settings(&[(0x4, 0)]),
        _ => settings(&[]),
    };
    if sock.write_all(&first).await.is_err() {
        return;
    }
    let started = Instant::now();
    let mut out = Vec::new();
    loop {
        let Some((ty, flags, id, payload)) = read_frame(&mut sock).await else {
            return;
        };
        out.clear();
        match ty {
            SETTINGS if flags & ACK == 0 => frame(&mut out, SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(&mut out, PING, ACK, 0, &payload),
            HEADERS => match behavior {
                RawH2::RstEveryStream => frame(&mut out, RST_STREAM, 0, id, &2u32.to_be_bytes()),
                RawH2::HugeHeaders => {
                    let mut block = vec![0x88];
                    block.extend(flood_headers(20_000 - 1));
                    block.resize(20_000, 0x88);
                    frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &block);
                }
                RawH2::HugeHeaderList => {
                    let block = flood_headers(16_000);
                    frame(&mut out, HEADERS, 0, id, &[0x88]);
                    for i in 0..20 {
                        let last = if i == 19 { END_HEADERS } else { 0 };
                        frame(&mut out, CONTINUATION, last, id, &block);
                    }
                    frame(&mut out, DATA, END_STREAM, id, b"ok");
                }
                RawH2::ContinuationFlood => {
                    frame(&mut out, HEADERS, 0, id, &[0x88]);
                    if sock.write_all(&out).await.is_err() {
                        return;
                    }
                    let block = flood_headers(16_000);
                    let mut cont = Vec::new();
                    frame(&mut cont, CONTINUATION, 0, id, &block);
                    while started.elapsed() < FLOOD_FOR {
                        if sock.write_all(&cont).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                RawH2::PingFlood => {
                    for i in 0..1000u64 {
                        frame(&mut out, PING, 0, 0, &i.to_be_bytes());
                    }
                    answer(&mut out, id);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                RawH2::GoAwayNone | RawH2::GoAwayCoveredThenClose => {
                    let last = if behavior == RawH2::GoAwayNone { 0 } else { id };
                    let mut payload = last.to_be_bytes().to_vec();
                    payload.extend_from_slice(&0u32.to_be_bytes());
                    frame(&mut out, GOAWAY, 0, 0, &payload);
                    if sock.write_all(&out).await.is_err() || last != 0 {
                        return;
                    }
                    return sink(sock).await;
                }
                RawH2::ZeroWindow if flags & END_STREAM != 0 => {
                    answer(&mut out, id);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            },
            _ => {}
        }
        if !out.is_empty() && sock.write_all(&out).await.is_err() {
            return;
        }
    }
}
