//! A small HTTP/1.1 server for the lab's tests, built to misbehave on request:
//!
//! ```text
//! fixture_server --port P [--capacity K] [--exit-after N] [--ignore-sigterm]
//!                [--fork-child] [--never-ready] [--backlog B] [--accept-delay-ms D]
//!                [--pid-file PATH] [--latency-ms A-B] [--queue-capacity K]
//!                [--stall-at-ms T --stall-ms D] [--bind HOST] [--count-file PATH]
//! ```
//! - `--pool N --service-ms S`: a pool of N slots; each request holds one for S ms (a
//!   blocking worker pool: N × 1000 / S requests/s at most, with the CPU idle).
//! - `--burn-us U`: every request spins until its thread used U µs of CPU before answering
//!   (CPU-bound: a capacity of 1e6 / U requests/s per CPU, however many threads).
//! - `--burst-threads K` (with `--burn-us U`): each request spins on K threads at once, U µs
//!   of CPU each (a burst of K runnable threads, as a JIT or a parallel handler makes: on
//!   one CPU they wait behind each other while it is busy, and it idles between requests).
//! - `--leak-kb K`: every request leaks K KiB that are never freed (memory grows).
//! - `--websocket`: every connection is a WebSocket (tungstenite); each data message is
//!   a request as above (`--pool`, `--burn-us`, `--leak-kb`) and is echoed back.
//! - `--bind HOST`: listen on HOST (default 127.0.0.1; a test's network namespace address).
//! - `--count-file PATH`: keeps PATH up to date (every 50 ms, atomically) with the requests
//!   answered per peer address, as JSON `{"IP": {"requests": N, "first_unix_ns": T,
//!   "last_unix_ns": T}}`: the server's own count, to check what a generator reports.
//! - `--capacity K`: a token bucket of K requests/s; requests over it get `503`.
//! - `--exit-after N`: exits with status 3 after answering N requests.
//! - `--ignore-sigterm`: SIGTERM does nothing (the lab must SIGKILL).
//! - `--fork-child`: starts `sleep 300` in its process group (the lab must kill it too).
//! - `--never-ready`: answers every request `503`, so an HTTP readiness probe never passes.
//! - `--backlog B`, `--accept-delay-ms D`: a small listen queue drained slowly.
//! - `--pid-file PATH`: writes its pid (and its child's) there.
//! - `--latency-ms A-B`: every answer waits a uniformly random A to B ms first (latency
//!   spread that costs no capacity: requests wait side by side).
//! - `--queue-capacity K`: a server of capacity K requests/s that queues, never refuses:
//!   requests take one 1/K slot each, in arrival order, so above K the queue (and the
//!   latency) grows for as long as the load lasts.
//! - `--stall-at-ms T --stall-ms D`: once, T ms after the first request, every answer is
//!   held until the stall has lasted D ms.
//! - `--mode never|crash|stubborn|forker`: shorthands for `--never-ready`,
//!   `--exit-after 150`, `--ignore-sigterm`, `--fork-child` (other modes change nothing).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    latency_ms: Option<(f64, f64)>,
    queue_capacity: Option<f64>,
    stall_at_ms: Option<u64>,
    stall_ms: u64,
    bind: Option<String>,
    count_file: Option<String>,
    pool: Option<usize>,
    service_ms: u64,
    burn_us: u64,
    burst_threads: usize,
    leak_kb: usize,
    websocket: bool,
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
            "--latency-ms" => {
                let v = val();
                let (a, b) = v.split_once('-').expect("--latency-ms A-B");
                o.latency_ms = Some((a.parse().unwrap(), b.parse().unwrap()));
            }
            "--queue-capacity" => o.queue_capacity = Some(val().parse().unwrap()),
            "--stall-at-ms" => o.stall_at_ms = Some(val().parse().unwrap()),
            "--stall-ms" => o.stall_ms = val().parse().unwrap(),
            "--bind" => o.bind = Some(val()),
            "--count-file" => o.count_file = Some(val()),
            "--pool" => o.pool = Some(val().parse().unwrap()),
            "--service-ms" => o.service_ms = val().parse().unwrap(),
            "--burn-us" => o.burn_us = val().parse().unwrap(),
            "--burst-threads" => o.burst_threads = val().parse().unwrap(),
            "--leak-kb" => o.leak_kb = val().parse().unwrap(),
            "--websocket" => o.websocket = true,
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

/// Shared state of the timing modes.
#[derive(Default)]
struct Timing {
    /// `--queue-capacity`: when the next slot is free.
    next_free: Option<Instant>,
    /// First request seen.
    first: Option<Instant>,
    /// xorshift state for `--latency-ms`.
    rng: u64,
}

impl Timing {
    fn uniform(&mut self) -> f64 {
        if self.rng == 0 {
            self.rng = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// When the answer to a request read now may go, under the timing modes.
fn answer_at(o: &Opts, timing: &Mutex<Timing>) -> Instant {
    let now = Instant::now();
    let mut t = timing.lock().unwrap();
    let first = *t.first.get_or_insert(now);
    let mut at = now;
    if let Some(k) = o.queue_capacity {
        let start = t.next_free.map_or(now, |f| f.max(now));
        let end = start + Duration::from_secs_f64(1.0 / k);
        t.next_free = Some(end);
        at = end;
    }
    if let Some((a, b)) = o.latency_ms {
        at += Duration::from_secs_f64((a + (b - a) * t.uniform()) / 1000.0);
    }
    if let Some(s) = o.stall_at_ms {
        let begin = first + Duration::from_millis(s);
        let end = begin + Duration::from_millis(o.stall_ms);
        if at >= begin && at < end {
            at = end;
        }
    }
    at
}

fn listener(host: &str, port: u16, backlog: Option<i32>) -> TcpListener {
    let l = TcpListener::bind((host, port)).expect("bind");
    if let Some(b) = backlog {
        // SAFETY: re-listening on our own socket with a smaller backlog.
        unsafe { libc::listen(l.as_raw_fd(), b) };
    }
    l
}

/// `--pool`: free slots.
static POOL: (Mutex<usize>, std::sync::Condvar) = (Mutex::new(0), std::sync::Condvar::new());
/// `--leak-kb`: what was never freed.
static LEAKED: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Holds a pool slot for the service time (`--pool`), spins (`--burn-us`), leaks
/// (`--leak-kb`).
fn work(o: &Opts) {
    if o.pool.is_some() {
        let (lock, cv) = &POOL;
        let mut free = lock.lock().unwrap();
        while *free == 0 {
            free = cv.wait(free).unwrap();
        }
        *free -= 1;
        drop(free);
        std::thread::sleep(Duration::from_millis(o.service_ms));
        *lock.lock().unwrap() += 1;
        cv.notify_one();
    }
    if o.burn_us > 0 {
        // The burst's other threads are a pool's, alive for the whole run (as a JIT's are):
        // what they wait for shows in the process's threads, not in threads gone.
        let helpers = o.burst_threads.saturating_sub(1);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for _ in 0..helpers {
            burst_pool()
                .lock()
                .unwrap()
                .send((o.burn_us, done_tx.clone()))
                .expect("the burst pool");
        }
        burn(o.burn_us);
        for _ in 0..helpers {
            done_rx.recv().expect("a burst thread");
        }
    }
    if o.leak_kb > 0 {
        LEAKED.lock().unwrap().push(vec![1u8; o.leak_kb * 1024]);
    }
}

/// A job of the burst pool: µs to burn, and where to say it is done.
type BurstJob = (u64, std::sync::mpsc::Sender<()>);

/// The burst pool's queue: 32 threads started at its first use, each burning what it takes.
fn burst_pool() -> &'static std::sync::Mutex<std::sync::mpsc::Sender<BurstJob>> {
    static POOL: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<BurstJob>>> =
        std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<BurstJob>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        for _ in 0..32 {
            let rx = rx.clone();
            std::thread::spawn(move || loop {
                let job = rx.lock().unwrap().recv();
                let Ok((us, done)) = job else { return };
                burn(us);
                let _ = done.send(());
            });
        }
        std::sync::Mutex::new(tx)
    })
}

/// Spins until this thread has *used* `us` µs of CPU, not until `us` µs have passed: with
/// several requests spinning on one CPU, wall time would pass for all of them at once and
/// the capacity would be whatever the scheduler made it.
fn burn(us: u64) {
    let end = thread_cpu() + Duration::from_micros(us);
    let mut x = 1u64;
    while thread_cpu() < end {
        for _ in 0..64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
    }
    std::hint::black_box(x);
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Requests answered per peer address, for `--count-file`.
#[derive(Default)]
struct PeerCounts {
    /// Peer IP -> (requests, first and last answer, Unix ns).
    peers: std::collections::BTreeMap<String, (u64, u128, u128)>,
    changed: bool,
}

fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Writes the counts whenever they changed, every 50 ms.
fn write_counts(path: String, counts: Arc<Mutex<PeerCounts>>) {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let text = {
            let mut c = counts.lock().unwrap();
            if !c.changed {
                continue;
            }
            c.changed = false;
            let rows: Vec<String> = c
                .peers
                .iter()
                .map(|(ip, (n, first, last))| {
                    format!("\"{ip}\": {{\"requests\": {n}, \"first_unix_ns\": {first}, \"last_unix_ns\": {last}}}")
                })
                .collect();
            format!("{{{}}}\n", rows.join(", "))
        };
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
}

fn serve(
    mut s: TcpStream,
    o: Arc<Opts>,
    bucket: Arc<Mutex<Option<Bucket>>>,
    served: Arc<AtomicU64>,
    timing: Arc<Mutex<Timing>>,
    counts: Arc<Mutex<PeerCounts>>,
) {
    let peer = s
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            work(&o);
            let at = answer_at(&o, &timing);
            let wait = at.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            let ok = !o.never_ready && bucket.lock().unwrap().as_mut().is_none_or(|b| b.take());
            let resp: &[u8] = if ok {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            } else {
                b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy"
            };
            if s.write_all(resp).is_err() {
                return;
            }
            if o.count_file.is_some() {
                let now = unix_ns();
                let mut c = counts.lock().unwrap();
                let e = c.peers.entry(peer.clone()).or_insert((0, now, now));
                e.0 += 1;
                e.2 = now;
                c.changed = true;
            }
            let n = served.fetch_add(1, Ordering::SeqCst) + 1;
            if o.exit_after.is_some_and(|max| n >= max) {
                eprintln!("fixture: exiting after {n} requests, as asked");
                #[allow(clippy::exit)] // the crash this mode is for
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
        // A handler that only sets a flag nobody reads: SIGTERM does nothing.
        signal_hook::flag::register(
            signal_hook::consts::SIGTERM,
            Arc::new(AtomicBool::new(false)),
        )
        .expect("SIGTERM handler");
    }
    let mut pids = vec![std::process::id().to_string()];
    if o.fork_child {
        let child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .expect("sleep");
        pids.push(child.id().to_string());
        #[allow(clippy::mem_forget)] // the child outlives us: the lab must kill it
        std::mem::forget(child);
    }
    if let Some(p) = &o.pid_file {
        std::fs::write(p, pids.join("\n")).unwrap();
    }
    let l = listener(o.bind.as_deref().unwrap_or("127.0.0.1"), o.port, o.backlog);
    println!("listening on {}", l.local_addr().unwrap());
    let bucket = Arc::new(Mutex::new(o.capacity.map(|rate| Bucket {
        rate,
        tokens: 0.0,
        last: Instant::now(),
    })));
    let served = Arc::new(AtomicU64::new(0));
    let timing = Arc::new(Mutex::new(Timing::default()));
    let counts = Arc::new(Mutex::new(PeerCounts::default()));
    if let Some(n) = o.pool {
        *POOL.0.lock().unwrap() = n;
    }
    if let Some(path) = o.count_file.clone() {
        let c = counts.clone();
        std::thread::spawn(move || write_counts(path, c));
    }
    for s in l.incoming() {
        if o.accept_delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(o.accept_delay_ms));
        }
        let Ok(s) = s else { continue };
        if o.websocket {
            let o = o.clone();
            std::thread::spawn(move || serve_websocket(s, &o));
            continue;
        }
        let (o, b, n, t) = (o.clone(), bucket.clone(), served.clone(), timing.clone());
        let c = counts.clone();
        std::thread::spawn(move || serve(s, o, b, n, t, c));
    }
}

/// `--websocket`: upgrades the connection, then does a request's work per data message and
/// echoes it, until the client closes.
fn serve_websocket(s: TcpStream, o: &Opts) {
    let Ok(mut ws) = tungstenite::accept(s) else {
        return;
    };
    loop {
        match ws.read() {
            Ok(m @ (tungstenite::Message::Text(_) | tungstenite::Message::Binary(_))) => {
                work(o);
                if ws.send(m).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}
