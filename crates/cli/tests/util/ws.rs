//! A WebSocket server of the tests' own (tungstenite, a thread per connection) that
//! behaves in one specific way: echoes and counts, stalls, closes with a code, breaks the
//! protocol, refuses or never answers the upgrade, or serves at a fixed capacity.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::CloseFrame;
use tungstenite::Message;

/// How the server treats each connection.
#[derive(Clone, Copy, Debug)]
pub enum WsBehavior {
    /// Echoes every data message.
    Echo,
    /// Upgrades, reads every message, never replies.
    Stall,
    /// Echoes this many messages on a connection, then closes it with this code.
    CloseAfter(u64, u16),
    /// Upgrades, then answers the first message with a frame of a reserved opcode.
    Malformed,
    /// Answers the upgrade request with this HTTP status (not 101) and closes.
    Status(u16),
    /// Reads the upgrade request and never answers it.
    NoHandshake,
    /// After the first message (a subscribe), sends a message every `every_ms` ms until
    /// the client goes.
    Push { every_ms: u64 },
    /// Server push whose messages say when they were sent, `late_ms` before they are:
    /// after the subscribe, every `every_ms` ms a message `{"n":N,"ts":T}` with T the time
    /// `late_ms` ago in microseconds since the Unix epoch (as a queue the message sat in
    /// would make it); every fourth message has no `ts`.
    StampedPush { every_ms: u64, late_ms: u64 },
    /// Answers each message with another message at once (a push, not its reply), then
    /// echoes it `ms` milliseconds later; keeps every message's text.
    NoiseThenEcho { ms: u64 },
    /// Echoes each message after holding one of `slots` slots for `ms` milliseconds: at
    /// most `slots * 1000 / ms` messages a second, whatever the connections.
    Pool { slots: usize, ms: u64 },
}

/// A running server; stops accepting when dropped (its threads end with their clients).
pub struct WsServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Data messages received, over every connection.
    pub received: Arc<AtomicU64>,
    /// Connections accepted.
    pub accepted: Arc<AtomicU64>,
    /// Pings received on each connection upgraded, in the order they were accepted.
    pub pings: Arc<Mutex<Vec<u64>>>,
    /// `NoiseThenEcho`: the text of every message received.
    pub texts: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl WsServer {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub fn start(behavior: WsBehavior) -> WsServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let pool = Arc::new((Mutex::new(0usize), Condvar::new()));
        let pings = Arc::new(Mutex::new(Vec::new()));
        let texts = Arc::new(Mutex::new(Vec::new()));
        let t = texts.clone();
        let (r, a, s, p) = (
            received.clone(),
            accepted.clone(),
            stop.clone(),
            pings.clone(),
        );
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        a.fetch_add(1, Ordering::Relaxed);
                        stream.set_nonblocking(false).unwrap();
                        let (r, s, pool, p) = (r.clone(), s.clone(), pool.clone(), p.clone());
                        let t = t.clone();
                        std::thread::spawn(move || serve(stream, behavior, &r, &s, &pool, &p, &t));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        WsServer {
            port,
            received,
            accepted,
            pings,
            texts,
            stop,
        }
    }

    /// `ws://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }

    /// Data messages received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    mut stream: TcpStream,
    behavior: WsBehavior,
    received: &AtomicU64,
    stop: &AtomicBool,
    pool: &(Mutex<usize>, Condvar),
    pings: &Mutex<Vec<u64>>,
    texts: &Mutex<Vec<String>>,
) {
    // No thread outlives its test by more than this.
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    match behavior {
        WsBehavior::Status(code) => {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 {code} Nope\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno"
            );
            return;
        }
        WsBehavior::NoHandshake => {
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) && matches!(stream.read(&mut buf), Ok(n) if n > 0) {
            }
            return;
        }
        _ => {}
    }
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    let me = {
        let mut p = pings.lock().unwrap();
        p.push(0);
        p.len() - 1
    };
    let mut on_this = 0u64;
    loop {
        let msg = match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => m,
            // Answered by tungstenite with a pong.
            Ok(Message::Ping(_)) => {
                pings.lock().unwrap()[me] += 1;
                continue;
            }
            Ok(_) => continue,
            Err(_) => return,
        };
        received.fetch_add(1, Ordering::Relaxed);
        on_this += 1;
        match behavior {
            WsBehavior::Echo => {
                if ws.send(msg).is_err() {
                    return;
                }
            }
            WsBehavior::Stall => {}
            WsBehavior::Push { every_ms } => {
                for n in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(every_ms));
                    if ws.send(Message::text(format!("tick {n}"))).is_err() {
                        return;
                    }
                }
            }
            WsBehavior::StampedPush { every_ms, late_ms } => {
                for n in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(every_ms));
                    let sent = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        - Duration::from_millis(late_ms);
                    let text = if n % 4 == 3 {
                        format!("{{\"n\":{n}}}")
                    } else {
                        format!("{{\"n\":{n},\"ts\":{}}}", sent.as_micros())
                    };
                    if ws.send(Message::text(text)).is_err() {
                        return;
                    }
                }
            }
            WsBehavior::NoiseThenEcho { ms } => {
                if let Message::Text(t) = &msg {
                    texts.lock().unwrap().push(t.to_string());
                }
                if ws
                    .send(Message::text("{\"push\":\"not a reply\"}"))
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(ms));
                if ws.send(msg).is_err() {
                    return;
                }
            }
            WsBehavior::CloseAfter(n, code) => {
                if on_this > n {
                    let _ = ws.close(Some(CloseFrame {
                        code: CloseCode::from(code),
                        reason: "bye".into(),
                    }));
                    // Wait for the client's close, as RFC 6455 §5.5.1 asks.
                    while ws.read().is_ok() {}
                    return;
                }
                if ws.send(msg).is_err() {
                    return;
                }
            }
            WsBehavior::Malformed => {
                // FIN, reserved opcode 0x3, no payload.
                let _ = ws.get_mut().write_all(&[0x83, 0x00]);
                let _ = ws.get_mut().flush();
                std::thread::sleep(Duration::from_millis(200));
                return;
            }
            WsBehavior::Pool { slots, ms } => {
                let (lock, cv) = pool;
                let mut busy = lock.lock().unwrap();
                while *busy >= slots {
                    busy = cv.wait(busy).unwrap();
                }
                *busy += 1;
                drop(busy);
                std::thread::sleep(Duration::from_millis(ms));
                *lock.lock().unwrap() -= 1;
                cv.notify_one();
                if ws.send(msg).is_err() {
                    return;
                }
            }
            WsBehavior::Status(_) | WsBehavior::NoHandshake => unreachable!(),
        }
    }
}
