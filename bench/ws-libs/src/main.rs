//! WebSocket client libraries, compared by CPU per message under one driver.
//!
//! `bench/ws-libs/run.sh` runs this binary once per library, under `taskset` and GNU `time`,
//! against one echo server, to say which library loadlab should build its WebSocket
//! transport on. Everything but the library is the same for the three clients:
//!
//! - a current-thread tokio runtime; `--connections` TCP connections (`TCP_NODELAY`, as
//!   loadlab's connector sets it), each upgraded before the clock starts;
//! - one task per connection, open loop: connection `i` sends its `k`-th message at
//!   `t0 + (k * connections + i) / rate` (`tokio::time::sleep_until`), so the messages
//!   leave at `--rate` in total, evenly spread over the connections; one message in flight
//!   per connection (a message whose time came while its connection waited for a reply
//!   goes as soon as the reply is in: the connection falls behind, it sends no burst);
//! - each message is the text frame "hello", each reply is awaited and counted; nothing
//!   else is recorded (no latency).
//!
//! The clients (`--lib`):
//!
//! - `tungstenite`: tokio-tungstenite 0.30 as loadlab's engine uses it
//!   (`client_async_with_config` with `read_buffer_size(4096).write_buffer_size(0)`,
//!   `SinkExt::send(Message::Text)`, `StreamExt::next` for the reply);
//! - `fastwebsockets`: fastwebsockets' `WebSocket::after_handshake(.., Role::Client)` after
//!   the upgrade done here by hand, `write_frame(Frame::text)` and `read_frame`, its
//!   defaults otherwise (auto pong and close, payload unmasked and text checked as UTF-8);
//! - `raw`: the least a client can do on tokio, to show what a library costs over it: the
//!   same hand-made upgrade, one `write_all` of a masked text frame per message (a new mask
//!   from a xorshift generator each frame: RFC 6455 asks for a strong source, the
//!   libraries draw theirs from `rand`), replies read into a `BytesMut` and walked by their
//!   headers (a data frame with FIN set is a reply; the payload is neither copied nor
//!   checked).
//!
//! After `--duration`, no message is sent; a connection still waiting for its reply waits
//! up to 2 s more. It prints one JSON object: lib, sent, replies, errors (connections ended
//! by an error or a timeout), elapsed_s (from the first release to the last reply).
//!
//! ```text
//! ws-libs --lib tungstenite|fastwebsockets|raw --addr 127.0.0.1:PORT
//!         [--connections 64] [--rate 10000] [--duration 5]
//! ```

use std::error::Error;
use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use fastwebsockets::{Frame, OpCode, Payload, Role, WebSocket};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Errors end a connection; their text is printed once, to stderr.
type BoxError = Box<dyn Error + Send + Sync>;

/// The message every connection sends, and expects back.
const BODY: &str = "hello";

/// How long a connection still waiting for its reply at the end of the run waits more.
const DRAIN: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lib {
    Tungstenite,
    FastWebSockets,
    Raw,
}

impl Lib {
    fn name(self) -> &'static str {
        match self {
            Lib::Tungstenite => "tungstenite",
            Lib::FastWebSockets => "fastwebsockets",
            Lib::Raw => "raw",
        }
    }
}

struct Args {
    lib: Lib,
    addr: SocketAddr,
    connections: usize,
    rate: f64,
    duration: Duration,
}

fn usage() -> String {
    "usage: ws-libs --lib tungstenite|fastwebsockets|raw --addr HOST:PORT \
     [--connections N] [--rate MSG_PER_S] [--duration SECONDS]"
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut lib = None;
    let mut addr = None;
    let mut connections = 64usize;
    let mut rate = 10_000f64;
    let mut duration = 5f64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))
        };
        match flag.as_str() {
            "--lib" => {
                lib = Some(match value()?.as_str() {
                    "tungstenite" => Lib::Tungstenite,
                    "fastwebsockets" => Lib::FastWebSockets,
                    "raw" => Lib::Raw,
                    other => return Err(format!("unknown --lib {other}\n{}", usage())),
                })
            }
            "--addr" => addr = Some(value()?.parse().map_err(|e| format!("--addr: {e}"))?),
            "--connections" => {
                connections = value()?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?
            }
            "--rate" => rate = value()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--duration" => duration = value()?.parse().map_err(|e| format!("--duration: {e}"))?,
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other}\n{}", usage())),
        }
    }
    // (Written so that a NaN is refused too.)
    if connections == 0 || rate.is_nan() || rate <= 0.0 || duration.is_nan() || duration <= 0.0 {
        return Err("--connections, --rate and --duration must be positive".to_string());
    }
    Ok(Args {
        lib: lib.ok_or_else(|| format!("--lib is required\n{}", usage()))?,
        addr: addr.ok_or_else(|| format!("--addr is required\n{}", usage()))?,
        connections,
        rate,
        duration: Duration::from_secs_f64(duration),
    })
}

/// One upgraded connection: sends the message and waits for its reply.
trait Client: Send + 'static {
    /// Sends `BODY` as a text frame and returns once a data frame came back.
    fn exchange(&mut self) -> impl Future<Output = Result<(), BoxError>> + Send;
}

// --- tokio-tungstenite -------------------------------------------------------------------

/// tokio-tungstenite, configured as loadlab's engine (crates/engine/src/transport/ws).
struct Tungstenite(WebSocketStream<TcpStream>);

impl Tungstenite {
    async fn connect(addr: SocketAddr) -> Result<Self, BoxError> {
        let tcp = tcp_connect(addr).await?;
        let config = WebSocketConfig::default()
            .read_buffer_size(4096)
            .write_buffer_size(0);
        let url = format!("ws://{addr}/");
        let (ws, _response) =
            tokio_tungstenite::client_async_with_config(url, tcp, Some(config)).await?;
        Ok(Self(ws))
    }
}

impl Client for Tungstenite {
    async fn exchange(&mut self) -> Result<(), BoxError> {
        self.0.send(Message::Text(BODY.into())).await?;
        loop {
            match self.0.next().await {
                Some(Ok(Message::Text(_) | Message::Binary(_))) => return Ok(()),
                // A ping is answered by tungstenite itself with the next write or flush.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Close(_))) | None => return Err("closed by the server".into()),
                Some(Err(e)) => return Err(e.into()),
            }
        }
    }
}

// --- fastwebsockets ----------------------------------------------------------------------

/// fastwebsockets over the connection upgraded by hand.
struct FastWs(WebSocket<TcpStream>);

impl FastWs {
    async fn connect(addr: SocketAddr) -> Result<Self, BoxError> {
        let mut tcp = tcp_connect(addr).await?;
        let leftover = upgrade(&mut tcp, addr).await?;
        // `after_handshake` takes the stream alone: a frame read with the 101 would be lost.
        // The server sends none before the client's first message.
        if !leftover.is_empty() {
            return Err("bytes after the 101 response".into());
        }
        Ok(Self(WebSocket::after_handshake(tcp, Role::Client)))
    }
}

impl Client for FastWs {
    async fn exchange(&mut self) -> Result<(), BoxError> {
        // `write_frame` masks the payload in place: a copy on the stack, borrowed (no
        // allocation, as tungstenite's `Message::Text` of a static string has none).
        let mut body = [0u8; BODY.len()];
        body.copy_from_slice(BODY.as_bytes());
        self.0
            .write_frame(Frame::text(Payload::BorrowedMut(&mut body)))
            .await?;
        loop {
            // Pings are answered and closes echoed inside `read_frame` (auto pong, close).
            let frame = self.0.read_frame().await?;
            match frame.opcode {
                OpCode::Text | OpCode::Binary if frame.fin => return Ok(()),
                OpCode::Close => return Err("closed by the server".into()),
                _ => {}
            }
        }
    }
}

// --- hand-written codec ------------------------------------------------------------------

/// The bare minimum: a frame written by hand, replies walked by their headers.
struct Raw {
    tcp: TcpStream,
    /// Bytes read and not yet walked (the tail of a frame not all in yet).
    buf: BytesMut,
    /// State of the xorshift64 generator of mask keys.
    rng: u64,
}

impl Raw {
    async fn connect(addr: SocketAddr, seed: u64) -> Result<Self, BoxError> {
        let mut tcp = tcp_connect(addr).await?;
        let mut buf = BytesMut::with_capacity(4096);
        buf.extend_from_slice(&upgrade(&mut tcp, addr).await?);
        Ok(Self {
            tcp,
            buf,
            rng: seed | 1,
        })
    }

    fn next_mask(&mut self) -> [u8; 4] {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng as u32).to_ne_bytes()
    }

    /// Consumes the complete frames at the front of `buf`: `Ok(true)` once a data frame
    /// with FIN set was among them, `Ok(false)` if more bytes are needed.
    fn walk(&mut self) -> Result<bool, BoxError> {
        loop {
            let b = &self.buf[..];
            if b.len() < 2 {
                return Ok(false);
            }
            let (fin, opcode, masked) = (b[0] & 0x80 != 0, b[0] & 0x0f, b[1] & 0x80 != 0);
            let (header, len) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (4, u64::from(u16::from_be_bytes([b[2], b[3]]))),
                127 if b.len() >= 10 => (10, u64::from_be_bytes(b[2..10].try_into().unwrap())),
                126 | 127 => return Ok(false),
                n => (2, u64::from(n)),
            };
            let total = header as u64 + if masked { 4 } else { 0 } + len;
            if (b.len() as u64) < total {
                // Room for the rest of the frame, so that it is read in as few reads as can be.
                self.buf.reserve(total as usize - b.len());
                return Ok(false);
            }
            self.buf.advance(total as usize);
            match opcode {
                // Text, binary (or continuation) with FIN: the end of a message.
                0x0..=0x2 if fin => return Ok(true),
                0x8 => return Err("closed by the server".into()),
                // Node's ws sends no ping unless told to; a pong would not be owed either.
                _ => {}
            }
        }
    }
}

impl Client for Raw {
    async fn exchange(&mut self) -> Result<(), BoxError> {
        // FIN + text, masked, a 7-bit length: 2 bytes of header, 4 of mask key, the payload.
        const LEN: usize = 6 + BODY.len();
        let mask = self.next_mask();
        let mut frame = [0u8; LEN];
        frame[0] = 0x81;
        frame[1] = 0x80 | BODY.len() as u8;
        frame[2..6].copy_from_slice(&mask);
        for (i, byte) in BODY.bytes().enumerate() {
            frame[6 + i] = byte ^ mask[i % 4];
        }
        self.tcp.write_all(&frame).await?;
        while !self.walk()? {
            if self.tcp.read_buf(&mut self.buf).await? == 0 {
                return Err("closed by the server".into());
            }
        }
        Ok(())
    }
}

// --- shared ------------------------------------------------------------------------------

async fn tcp_connect(addr: SocketAddr) -> Result<TcpStream, BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// The RFC 6455 opening handshake, by hand, for `fastwebsockets` and `raw`: sends the GET
/// and reads up to the end of a 101 response; returns any bytes read past it. The key is
/// fixed and the accept value is not checked: this is a bench against a known server.
async fn upgrade(tcp: &mut TcpStream, addr: SocketAddr) -> Result<Vec<u8>, BoxError> {
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await?;
    let mut response = Vec::with_capacity(512);
    let end = loop {
        if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if response.len() > 16 * 1024 {
            return Err("no end to the upgrade response".into());
        }
        if tcp.read_buf(&mut response).await? == 0 {
            return Err("closed during the upgrade".into());
        }
    };
    if !response.starts_with(b"HTTP/1.1 101") {
        let line = response.split(|&b| b == b'\r').next().unwrap_or_default();
        return Err(format!("upgrade refused: {}", String::from_utf8_lossy(line)).into());
    }
    Ok(response.split_off(end))
}

/// What one connection did.
#[derive(Default)]
struct Counts {
    sent: u64,
    replies: u64,
    errors: u64,
}

/// One connection's share of the schedule: its `k`-th message is due at
/// `t0 + (k * connections + i) / rate`, the last ones due before `t0 + duration`.
async fn drive<C: Client>(mut client: C, i: usize, args: Schedule) -> Counts {
    let mut counts = Counts::default();
    let deadline = args.t0 + args.duration + DRAIN;
    for k in 0u64.. {
        let at = (k * args.connections as u64 + i as u64) as f64 / args.rate;
        let due = args.t0 + Duration::from_secs_f64(at);
        if due >= args.t0 + args.duration {
            break;
        }
        sleep_until(due).await;
        counts.sent += 1;
        match timeout_at(deadline, client.exchange()).await {
            Ok(Ok(())) => counts.replies += 1,
            Ok(Err(e)) => {
                counts.errors += 1;
                eprintln!("ws-libs: connection {i}: {e}");
                break;
            }
            Err(_elapsed) => {
                counts.errors += 1;
                eprintln!("ws-libs: connection {i}: no reply within {DRAIN:?} of the end");
                break;
            }
        }
    }
    counts
}

/// The run's timing, copied into each task.
#[derive(Clone, Copy)]
struct Schedule {
    t0: Instant,
    duration: Duration,
    connections: usize,
    rate: f64,
}

/// Opens every connection (one after the other, before the clock), then runs them.
async fn run_lib<C: Client, F, Fut>(args: &Args, connect: F) -> Result<(Counts, f64), BoxError>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<C, BoxError>>,
{
    let mut clients = Vec::with_capacity(args.connections);
    for i in 0..args.connections {
        clients.push(
            connect(i)
                .await
                .map_err(|e| format!("connection {i}: {e}"))?,
        );
    }
    let schedule = Schedule {
        t0: Instant::now() + Duration::from_millis(10),
        duration: args.duration,
        connections: args.connections,
        rate: args.rate,
    };
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(drive(c, i, schedule)))
        .collect();
    let mut total = Counts::default();
    for task in tasks {
        let c = task.await?;
        total.sent += c.sent;
        total.replies += c.replies;
        total.errors += c.errors;
    }
    Ok((total, schedule.t0.elapsed().as_secs_f64()))
}

async fn run(args: Args) -> Result<(Counts, f64), BoxError> {
    let addr = args.addr;
    match args.lib {
        Lib::Tungstenite => run_lib(&args, |_| Tungstenite::connect(addr)).await,
        Lib::FastWebSockets => run_lib(&args, |_| FastWs::connect(addr)).await,
        Lib::Raw => {
            run_lib(&args, |i| {
                Raw::connect(addr, 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1))
            })
            .await
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let lib = args.lib;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(args)) {
        Ok((c, elapsed)) => {
            println!(
                "{{\"lib\":\"{}\",\"sent\":{},\"replies\":{},\"errors\":{},\"elapsed_s\":{:.3}}}",
                lib.name(),
                c.sent,
                c.replies,
                c.errors,
                elapsed
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ws-libs: {e}");
            ExitCode::FAILURE
        }
    }
}
