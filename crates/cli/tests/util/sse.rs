//! An event-stream server of the tests' own (a thread per connection, chunked bodies) that
//! behaves in one specific way: streams events, ends its streams, stalls, refuses, answers
//! what is not a stream, or breaks the chunked coding.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server treats each stream.
#[derive(Clone, Copy, Debug)]
pub enum SseBehavior {
    /// An event every `every_ms` ms (ids counting up per stream); after `end_after`
    /// events, if set, the stream's chunked body ends (the connection stays open).
    Events {
        every_ms: u64,
        end_after: Option<u64>,
    },
    /// The head, then nothing.
    Stall,
    /// Answers with this status (not a stream) and closes.
    Status(u16),
    /// `200 OK` with `text/html`.
    NotAStream,
    /// A stream whose second chunk's size is not hexadecimal.
    BadChunk,
    /// One broadcaster: a round every `every_ms` ms (on a fixed schedule), an event to
    /// each stream in turn, each write taking `per_stream_ms` ms (a sleep: the CPU idles).
    /// A round over N streams takes N × `per_stream_ms`, so past `every_ms /
    /// per_stream_ms` streams the gaps between events grow with the streams.
    Broadcast { every_ms: u64, per_stream_ms: u64 },
}

/// A running server; stops accepting when dropped.
pub struct SseServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Events written, over every stream.
    pub sent: Arc<AtomicU64>,
    /// The `Last-Event-ID` of every request that carried one.
    pub last_ids: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl SseServer {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub fn start(behavior: SseBehavior) -> SseServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let last_ids = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, l, st) = (sent.clone(), last_ids.clone(), stop.clone());
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        if let SseBehavior::Broadcast {
            every_ms,
            per_stream_ms,
        } = behavior
        {
            let (streams, sent, stop) = (streams.clone(), sent.clone(), stop.clone());
            std::thread::spawn(move || broadcast(&streams, every_ms, per_stream_ms, &sent, &stop));
        }
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let (s, l, st) = (s.clone(), l.clone(), st.clone());
                        let streams = streams.clone();
                        std::thread::spawn(move || {
                            let _ = serve(stream, behavior, &s, &l, &st, &streams);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        SseServer {
            port,
            sent,
            last_ids,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT/events`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/events", self.port)
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Writes `data` as one chunk.
fn chunk(s: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(s, "{:x}\r\n{data}\r\n", data.len())
}

fn serve(
    mut s: TcpStream,
    behavior: SseBehavior,
    sent: &AtomicU64,
    last_ids: &Mutex<Vec<String>>,
    stop: &AtomicBool,
    streams: &Mutex<Vec<TcpStream>>,
) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    if let Some(id) = text
        .lines()
        .find_map(|l| l.strip_prefix("Last-Event-ID: ").map(str::to_string))
    {
        last_ids.lock().unwrap().push(id);
    }
    let stream_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    match behavior {
        SseBehavior::Status(code) => {
            write!(
                s,
                "HTTP/1.1 {code} No\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )?;
            return Ok(());
        }
        SseBehavior::NotAStream => {
            write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 2\r\n\r\nhi"
            )?;
            std::thread::sleep(Duration::from_millis(500));
            return Ok(());
        }
        SseBehavior::Stall => {
            s.write_all(stream_head.as_bytes())?;
            while !stop.load(Ordering::Relaxed) && matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            return Ok(());
        }
        SseBehavior::BadChunk => {
            s.write_all(stream_head.as_bytes())?;
            chunk(&mut s, "data: 1\n\n")?;
            s.write_all(b"zz\r\n")?;
            std::thread::sleep(Duration::from_millis(500));
            return Ok(());
        }
        SseBehavior::Broadcast { .. } => {
            s.write_all(stream_head.as_bytes())?;
            streams.lock().unwrap().push(s.try_clone()?);
            // Held until the client goes (the broadcaster drops it on a failed write).
            while !stop.load(Ordering::Relaxed) && matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            return Ok(());
        }
        SseBehavior::Events { .. } => s.write_all(stream_head.as_bytes())?,
    }
    let SseBehavior::Events {
        every_ms,
        end_after,
    } = behavior
    else {
        unreachable!()
    };
    // Ids go on from the one the client last saw, as a server that keeps its history does.
    let mut id: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Last-Event-ID: ")?.parse().ok())
        .unwrap_or(0);
    chunk(&mut s, ": a comment, not an event\n\n")?;
    let mut on_this = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(every_ms));
        if end_after.is_some_and(|n| on_this >= n) {
            s.write_all(b"0\r\n\r\n")?;
            // The connection stays open: the client must see the end of the body.
            std::thread::sleep(Duration::from_millis(500));
            return Ok(());
        }
        id += 1;
        on_this += 1;
        chunk(&mut s, &format!("id: {id}\ndata: event {id}\n\n"))?;
        sent.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// `Broadcast`'s one thread: a round every `every_ms`, an event to each stream in turn.
fn broadcast(
    streams: &Mutex<Vec<TcpStream>>,
    every_ms: u64,
    per_stream_ms: u64,
    sent: &AtomicU64,
    stop: &AtomicBool,
) {
    let mut id = 0u64;
    let start = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // Rounds start every `every_ms` on a fixed schedule; one that ends late is followed
        // at once by the next.
        let next = start + Duration::from_millis(every_ms * (id + 1));
        std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
        id += 1;
        let round: Vec<TcpStream> = streams
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| s.try_clone().ok())
            .collect();
        let mut gone = Vec::new();
        // Write `i` is due `i + 1` writes after the round began: a sleep that overshoots
        // (a busy host) delays one write, not every one after it.
        let round_start = std::time::Instant::now();
        for (i, mut s) in round.into_iter().enumerate() {
            let due = round_start + Duration::from_millis(per_stream_ms * (i as u64 + 1));
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
            if chunk(&mut s, &format!("id: {id}\ndata: {id}\n\n")).is_err() {
                gone.push(i);
            } else {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut all = streams.lock().unwrap();
        for i in gone.into_iter().rev() {
            if i < all.len() {
                all.remove(i);
            }
        }
    }
}
