//! A small HTTP/1.1 server for the lab's tests, built to misbehave on request:
//!
//! ```text
//! fixture_server --port P [--capacity K] [--exit-after N] [--ignore-sigterm]
//!                [--fork-child] [--never-ready] [--backlog B] [--accept-delay-ms D]
//!                [--pid-file PATH]
//! ```
//! - `--capacity K`: a token bucket of K requests/s; requests over it get `503`.
//! - `--exit-after N`: exits with status 3 after answering N requests.
//! - `--ignore-sigterm`: SIGTERM does nothing (the lab must SIGKILL).
//! - `--fork-child`: starts `sleep 300` in its process group (the lab must kill it too).
//! - `--never-ready`: answers every request `503`, so an HTTP readiness probe never passes.
//! - `--backlog B`, `--accept-delay-ms D`: a small listen queue drained slowly.
//! - `--pid-file PATH`: writes its pid (and its child's) there.
//! - `--mode never|crash|stubborn|forker`: shorthands for `--never-ready`,
//!   `--exit-after 150`, `--ignore-sigterm`, `--fork-child` (other modes change nothing).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Opts {
    port: u16,
    capacity: Option<f64>,
    exit_after: Option<u64>,
    ignore_sigterm: bool,
    fork_child: bool,
    never_ready: bool,
    backlog: Option<i32>,
    accept_delay_ms: u64,
    pid_file: Option<String>,
}

fn parse() -> Opts {
    let mut o = Opts::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("flag needs a value");
        match a.as_str() {
            "--port" => o.port = val().parse().unwrap(),
            "--capacity" => o.capacity = Some(val().parse().unwrap()),
            "--exit-after" => o.exit_after = Some(val().parse().unwrap()),
            "--ignore-sigterm" => o.ignore_sigterm = true,
            "--fork-child" => o.fork_child = true,
            "--never-ready" => o.never_ready = true,
            "--backlog" => o.backlog = Some(val().parse().unwrap()),
            "--accept-delay-ms" => o.accept_delay_ms = val().parse().unwrap(),
            "--pid-file" => o.pid_file = Some(val()),
            "--mode" => match val().as_str() {
                "never" => o.never_ready = true,
                "crash" => o.exit_after = Some(150),
                "stubborn" => o.ignore_sigterm = true,
                "forker" => o.fork_child = true,
                _ => {}
            },
            other => panic!("unknown flag {other}"),
        }
    }
    o
}

struct Bucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let burst = (self.rate / 20.0).max(1.0);
        self.tokens =
            (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn listener(port: u16, backlog: Option<i32>) -> TcpListener {
    let l = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    if let Some(b) = backlog {
        // SAFETY: re-listening on our own socket with a smaller backlog.
        unsafe { libc::listen(l.as_raw_fd(), b) };
    }
    l
}

fn serve(
    mut s: TcpStream,
    o: Arc<Opts>,
    bucket: Arc<Mutex<Option<Bucket>>>,
    served: Arc<AtomicU64>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let ok = !o.never_ready && bucket.lock().unwrap().as_mut().is_none_or(|b| b.take());
            let resp: &[u8] = if ok {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            } else {
                b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy"
            };
            if s.write_all(resp).is_err() {
                return;
            }
            let n = served.fetch_add(1, Ordering::SeqCst) + 1;
            if o.exit_after.is_some_and(|max| n >= max) {
                eprintln!("fixture: exiting after {n} requests, as asked");
                std::process::exit(3);
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn main() {
    let o = Arc::new(parse());
    if o.ignore_sigterm {
        // SAFETY: ignoring a signal.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    let mut pids = vec![std::process::id().to_string()];
    if o.fork_child {
        let child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .expect("sleep");
        pids.push(child.id().to_string());
        std::mem::forget(child);
    }
    if let Some(p) = &o.pid_file {
        std::fs::write(p, pids.join("\n")).unwrap();
    }
    let l = listener(o.port, o.backlog);
    println!("listening on {}", l.local_addr().unwrap());
    let bucket = Arc::new(Mutex::new(o.capacity.map(|rate| Bucket {
        rate,
        tokens: 0.0,
        last: Instant::now(),
    })));
    let served = Arc::new(AtomicU64::new(0));
    for s in l.incoming() {
        if o.accept_delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(o.accept_delay_ms));
        }
        let Ok(s) = s else { continue };
        let (o, b, n) = (o.clone(), bucket.clone(), served.clone());
        std::thread::spawn(move || serve(s, o, b, n));
    }
}
