//! Shared harness for loadlab's integration tests: in-process HTTP/1.1 servers built to
//! behave in one specific way, and a runner for the real `loadlab` binary whose JSON result
//! is always checked against the committed schema.
#![allow(dead_code)]

pub mod fabric;
pub mod goaway;
pub mod h2;
pub mod hostile_h2;
pub mod lab;
pub mod netns;
pub mod nginx;
pub mod server;
pub mod sse;
pub mod tls;
pub mod ws;

use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a test server answers.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// `200 OK`, body `ok`.
    Ok,
    /// This status, body `x`.
    Status(u16),
    /// Answers `200` after this delay.
    Delay(Duration),
    /// Once, `after` the first request: hold every response for `hold`.
    StallOnce { after: Duration, hold: Duration },
    /// Resets the connection (RST) after reading a request.
    Reset,
    /// Closes the connection cleanly after reading a request, without answering.
    Close,
    /// Reads requests and never answers.
    Silent,
    /// Answers bytes that are not HTTP.
    Malformed,
    /// `200 OK`; the n-th response of each connection says `Connection: close` and the
    /// server closes (nginx's `keepalive_requests`): requests behind it go unanswered.
    CloseAfter(u64),
    /// `200 OK` without any `Connection: close`; after the n-th response of each connection
    /// the server closes it cleanly (an idle keep-alive timeout, say).
    SilentCloseAfter(u64),
    /// `200 OK` to the first `after` requests of each connection; the next one is held for
    /// `hold`, unanswered, and its connection closed cleanly (an actix-web worker blocked
    /// past its keep-alive timeout).
    HoldThenClose { after: u64, hold: Duration },
    /// `200 OK`; the n-th response of each connection is cut in the middle of its body.
    CutAfter(u64),
    /// These bytes, as they are, answer every request (hostile framings).
    Answer(Vec<u8>),
    /// These bytes are written as soon as a connection is accepted, before any request;
    /// then every request is answered `200 OK`.
    Greet(Vec<u8>),
    /// Accepts and never reads nor answers: the client's writes fill the socket buffers.
    NeverRead,
    /// `200 OK`; 2 ms after the n-th response of each connection, one more `200 OK` no
    /// request asked for: it waits on the idle connection ahead of the next request.
    ExtraAfter(u64),
}

/// Counters a test server keeps.
#[derive(Default, Debug)]
pub struct Counters {
    /// TCP connections accepted.
    pub accepts: AtomicU64,
    /// Requests read.
    pub requests: AtomicU64,
    /// Complete responses written.
    pub answered: AtomicU64,
    /// Extra responses ([`Behavior::ExtraAfter`]) written when the next request had already
    /// come in: the two crossed, and no client can tell the extra from that request's
    /// answer (a client sending late, catching up, sends within the 2 ms).
    pub crossed: AtomicU64,
}

/// A server on 127.0.0.1:0 (or a given listener), running until dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    _rt: Background,
}

impl TestServer {
    /// Starts a server on 127.0.0.1 with an OS-chosen port.
    pub fn start(behavior: Behavior) -> TestServer {
        Self::serve(
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            behavior,
        )
    }

    /// Serves on an already bound listener (e.g. one bound inside a network namespace).
    pub fn serve(listener: std::net::TcpListener, behavior: Behavior) -> TestServer {
        let counters = Arc::new(Counters::default());
        let stall = Arc::new(Mutex::new(Stall::default()));
        let c = counters.clone();
        let (addr, rt) = accept_loop(listener, move |sock| {
            c.accepts.fetch_add(1, Ordering::Relaxed);
            connection(sock, behavior.clone(), c.clone(), stall.clone())
        });
        TestServer {
            addr,
            counters,
            _rt: rt,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn accepts(&self) -> u64 {
        self.counters.accepts.load(Ordering::Relaxed)
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }
}

/// Accepts connections on `listener` forever (until the returned runtime is dropped),
/// running `serve(socket)` for each on a task of its own. Shared by every test server.
pub fn accept_loop<F, Fut>(listener: std::net::TcpListener, serve: F) -> (SocketAddr, Background)
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let rt = Background::new();
    rt.spawn(async move {
        let listener = TcpListener::from_std(listener).unwrap();
        loop {
            if let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock));
            }
        }
    });
    (addr, rt)
}

/// The once-only stall of `StallOnce`, shared by a server's connections (HTTP/1.1 and
/// HTTP/2 test servers alike).
#[derive(Default)]
pub struct Stall {
    first: Option<Instant>,
    until: Option<Instant>,
}

impl Stall {
    /// When a response due now may go: the stall starts `after` the first request and
    /// lasts `hold`; `None` outside it.
    pub fn hold_until(stall: &Mutex<Stall>, after: Duration, hold: Duration) -> Option<Instant> {
        let mut s = stall.lock().unwrap();
        let now = Instant::now();
        let first = *s.first.get_or_insert(now);
        if s.until.is_none() && now >= first + after {
            s.until = Some(now + hold);
        }
        s.until.filter(|u| *u > now)
    }
}

/// The runtime a test server runs on (one worker thread), shut down when dropped.
pub struct Background(Option<tokio::runtime::Runtime>);

impl Background {
    pub fn new() -> Background {
        Background(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
        ))
    }

    pub fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.0.as_ref().expect("running").spawn(f);
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Reads one request head (and a Content-Length body); returns whether the client asked
/// to close, or `None` at end of stream.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<bool> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body_len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let total = end + 4 + body_len;
            while buf.len() < total {
                let mut more = [0u8; 4096];
                let n = sock.read(&mut more).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&more[..n]);
            }
            buf.drain(..total);
            return Some(head.contains("connection: close"));
        }
        let mut more = [0u8; 4096];
        let n = sock.read(&mut more).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&more[..n]);
    }
}

fn response(status: u16, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sets SO_LINGER 0 so that closing sends RST.
fn set_linger_zero(sock: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket and option buffer.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Whether bytes wait unread on `sock` (a non-blocking peek).
fn has_bytes(sock: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: a valid socket and a one-byte buffer.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

async fn connection(
    mut sock: TcpStream,
    behavior: Behavior,
    c: Arc<Counters>,
    stall: Arc<Mutex<Stall>>,
) {
    match &behavior {
        Behavior::Greet(bytes) if sock.write_all(bytes).await.is_err() => return,
        // Without it the extra response waits (Nagle) for the client's ACK of the one
        // before, which rides on the next request: it would never arrive ahead of it.
        Behavior::ExtraAfter(_) => sock.set_nodelay(true).unwrap(),
        Behavior::NeverRead => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        _ => {}
    }
    let mut buf = Vec::new();
    let mut on_conn = 0u64;
    while let Some(close) = read_request(&mut sock, &mut buf).await {
        c.requests.fetch_add(1, Ordering::Relaxed);
        on_conn += 1;
        let mut server_close = false;
        let out = match &behavior {
            Behavior::Ok => response(200, "ok"),
            Behavior::Status(s) => response(*s, "x"),
            Behavior::Delay(d) => {
                tokio::time::sleep(*d).await;
                response(200, "ok")
            }
            Behavior::StallOnce { after, hold } => {
                if let Some(u) = Stall::hold_until(&stall, *after, *hold) {
                    tokio::time::sleep_until(u.into()).await;
                }
                response(200, "ok")
            }
            Behavior::Reset => {
                set_linger_zero(&sock);
                return;
            }
            Behavior::Close => return,
            Behavior::Silent => {
                // Hold the connection until the client gives up.
                let mut sink = [0u8; 1024];
                while matches!(sock.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Behavior::Malformed => b"garbage\r\n\r\n".to_vec(),
            Behavior::CloseAfter(n) if on_conn == *n => {
                server_close = true;
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec()
            }
            Behavior::SilentCloseAfter(n) => {
                server_close = on_conn == *n;
                response(200, "ok")
            }
            Behavior::HoldThenClose { after, hold } if on_conn > *after => {
                tokio::time::sleep(*hold).await;
                return;
            }
            Behavior::CutAfter(n) if on_conn == *n => {
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
                    .await;
                let _ = sock.shutdown().await;
                return;
            }
            Behavior::Answer(bytes) => bytes.clone(),
            Behavior::CloseAfter(_)
            | Behavior::HoldThenClose { .. }
            | Behavior::CutAfter(_)
            | Behavior::Greet(_)
            | Behavior::ExtraAfter(_)
            | Behavior::NeverRead => response(200, "ok"),
        };
        if sock.write_all(&out).await.is_err() {
            return;
        }
        c.answered.fetch_add(1, Ordering::Relaxed);
        if matches!(behavior, Behavior::ExtraAfter(n) if n == on_conn) {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if !buf.is_empty() || has_bytes(&sock) {
                c.crossed.fetch_add(1, Ordering::Relaxed);
            }
            if sock.write_all(&out).await.is_err() {
                return;
            }
        }
        if server_close {
            // What was pipelined behind is dropped unread; FIN, not RST, goes first.
            let _ = sock.shutdown().await;
            let mut sink = [0u8; 4096];
            let _ = tokio::time::timeout(Duration::from_millis(500), async {
                while matches!(sock.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
            return;
        }
        if close || matches!(behavior, Behavior::Malformed) {
            // Let the client close first, so that TIME_WAIT lands on the client's port.
            let mut sink = [0u8; 64];
            let _ = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut sink)).await;
            return;
        }
    }
}

/// The loadlab binary under test.
pub fn loadlab_bin() -> &'static str {
    env!("CARGO_BIN_EXE_loadlab")
}

/// `cmd` (the loadlab binary, or a wrapper that runs it) made `loadlab agent` of
/// `coordinator` holding `token`, named `name`, with one worker thread, waiting up to a
/// minute for the coordinator; its stderr to a temporary file named after it. Spawned.
pub fn spawn_agent(
    cmd: &mut Command,
    coordinator: &str,
    token: &std::path::Path,
    name: &str,
) -> std::process::Child {
    cmd.args(["agent", "--coordinator", coordinator, "--token-file"])
        .arg(token)
        .args(["--name", name, "--threads", "1", "--wait", "60s"])
        .stderr(std::fs::File::create(temp_path(&format!("agent-{name}.log"))).unwrap())
        .spawn()
        .unwrap()
}

/// A fresh temporary path.
pub fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    static FRESH: std::sync::Once = std::sync::Once::new();
    let dir = std::env::temp_dir().join(format!("loadlab-test-{}", std::process::id()));
    // A directory left by an earlier process with the same id (ids are reused) must not
    // hand this one its files: a stale result.json reads as a result this run wrote.
    // Those of test processes that have ended go too, so that runs do not pile them up.
    FRESH.call_once(|| {
        let _ = std::fs::remove_dir_all(&dir);
        let ended = std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let pid = name.to_str().and_then(|n| n.strip_prefix("loadlab-test-"));
                pid.and_then(|p| p.parse::<u32>().ok())
                    .is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists())
            });
        for e in ended {
            let _ = std::fs::remove_dir_all(e.path());
        }
    });
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{name}", N.fetch_add(1, Ordering::Relaxed)))
}

/// What a `loadlab run` produced.
pub struct RunOutput {
    pub output: Output,
    pub stdout: String,
    pub stderr: String,
    /// The JSON result, validated against the schema (None if none was written).
    pub json: Option<Value>,
    /// From start to exit (zero when the output was not timed).
    pub took: Duration,
}

impl RunOutput {
    pub fn json(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| {
            panic!(
                "no JSON result; stdout:\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn error_count(&self, class: &str) -> u64 {
        self.json()["errors"][class]
            .as_u64()
            .unwrap_or_else(|| panic!("no error class {class}"))
    }

    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }
}

/// Runs `loadlab run ARGS --json TMP` through `cmd_prefix` (e.g. `ip netns exec NS`).
pub fn run_with(cmd_prefix: &[&str], args: &[&str]) -> RunOutput {
    subcommand(cmd_prefix, "run", args)
}

/// Runs `loadlab grpc ARGS --json TMP`.
pub fn grpc(args: &[&str]) -> RunOutput {
    subcommand(&[], "grpc", args)
}

/// The helloworld proto of the repository.
pub fn helloworld_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/helloworld.proto").into()
}

fn subcommand(cmd_prefix: &[&str], sub: &str, args: &[&str]) -> RunOutput {
    let json_path = temp_path("result.json");
    let mut argv: Vec<String> = cmd_prefix.iter().map(|s| s.to_string()).collect();
    argv.push(loadlab_bin().into());
    argv.push(sub.into());
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push("--json".into());
    argv.push(json_path.display().to_string());
    let (output, took) = output_within(Command::new(&argv[0]).args(&argv[1..]), run_bound(args));
    let mut r = finish(output, &json_path);
    r.took = took;
    r
}

/// How long `loadlab run`/`grpc` with `args` may take before it counts as hung: twice its
/// measured duration (10 s when `-d` is not given, `-n` runs included), warmup and request
/// timeout (5 s by default), plus a minute for a loaded machine; at most 5 minutes (a value
/// past loadlab's own limits is refused at once). A backstop that turns a hang into a
/// failure, far above any test's own time check, not a performance threshold.
pub fn run_bound(args: &[&str]) -> Duration {
    let value = |names: &[&str]| {
        let mut found = None;
        for (i, a) in args.iter().enumerate() {
            for n in names {
                if a == n {
                    found = args.get(i + 1).copied();
                } else if let Some(v) = a.strip_prefix(n).and_then(|v| v.strip_prefix('=')) {
                    found = Some(v);
                }
            }
        }
        found.and_then(|v| loadlab_engine::config::parse_duration(v).ok())
    };
    let duration = value(&["-d", "--duration"]).unwrap_or(Duration::from_secs(10));
    let warmup = value(&["--warmup"]).unwrap_or_default();
    let timeout = value(&["--timeout"]).unwrap_or(Duration::from_secs(5));
    let bound = Duration::from_secs(60) + 2 * (duration + warmup + timeout);
    bound.min(Duration::from_secs(300))
}

/// Runs `cmd` (stdin empty, stdout and stderr captured as `Command::output` does), and
/// returns its output with the time it took. A command still running after `bound` is
/// killed, and the test fails with `loadlab hung: ...` and what it had written: a hang
/// fails the test instead of hanging it (and CI).
pub fn output_within(cmd: &mut Command, bound: Duration) -> (Output, Duration) {
    let what = format!("{cmd:?}");
    let started = Instant::now();
    let deadline = started + bound;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    let stdout = Drain::start(child.stdout.take().expect("piped"));
    let stderr = Drain::start(child.stderr.take().expect("piped"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for loadlab") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        // What it wrote before the kill (a descendant may still hold the pipes).
        let grace = Instant::now() + Duration::from_secs(2);
        stdout.finished_by(grace);
        stderr.finished_by(grace);
        panic!(
            "loadlab hung: {what} still running after {bound:?} (killed)\nstdout:\n{}\nstderr:\n{}",
            stdout.tail(),
            stderr.tail()
        );
    };
    // Exited, but the output ends only when every holder of the pipes has closed them.
    if !(stdout.finished_by(deadline) && stderr.finished_by(deadline)) {
        panic!(
            "loadlab hung: {what} exited ({status}) but its output was still open after {bound:?} (a descendant holds it)\nstdout:\n{}\nstderr:\n{}",
            stdout.tail(),
            stderr.tail()
        );
    }
    let output = Output {
        status,
        stdout: stdout.take(),
        stderr: stderr.take(),
    };
    (output, took)
}

/// A pipe read to its end on a thread of its own, its bytes readable at any time.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Drain {
    fn start(mut pipe: impl Read + Send + 'static) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let into = bytes.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 16 << 10];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => into.lock().unwrap().extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
        Drain { bytes, done }
    }

    /// Whether the pipe reached its end by `deadline`.
    fn finished_by(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        !matches!(
            self.done.recv_timeout(left),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.bytes.lock().unwrap())
    }

    /// The last 16 KiB read, as text (for a failure message).
    fn tail(&self) -> String {
        let b = self.bytes.lock().unwrap();
        String::from_utf8_lossy(&b[b.len().saturating_sub(16 << 10)..]).into_owned()
    }
}

/// Runs `loadlab run ARGS --json TMP`.
pub fn run(args: &[&str]) -> RunOutput {
    run_with(&[], args)
}

/// Collects a finished run's output and validates its JSON.
pub fn finish(output: Output, json_path: &std::path::Path) -> RunOutput {
    let json = std::fs::read_to_string(json_path).ok().map(|text| {
        let v: Value = serde_json::from_str(&text).expect("result is JSON");
        assert_schema_valid(&v);
        v
    });
    RunOutput {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        output,
        json,
        took: Duration::ZERO,
    }
}

/// The committed result schema.
pub fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schema/run-result.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Panics with every violation if `v` does not match the schema.
pub fn assert_schema_valid(v: &Value) {
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "result violates the schema:\n{}",
        errors.join("\n")
    );
}

/// The coordinated-omission checks shared by the HTTP/1.1 and HTTP/2 tests: 200 req/s for
/// 6 s against a server that holds every answer for 1 s once, with 4 requests in flight at
/// most. The stall must show in latency from the intended send time (about 200 of 1200
/// requests were intended during it: p99 near the full second, p90 near 0.4 s), and not in
/// service time (only the requests in flight when it began waited on the server).
pub fn assert_stall_in_latency_not_service_time(j: &Value) {
    let n = num(j, &["requests"]);
    assert!((n - 1200.0).abs() <= 24.0, "{n}");
    let p99 = num(j, &["latency_ms", "p99"]);
    let p90 = num(j, &["latency_ms", "p90"]);
    assert!(
        p99 > 800.0,
        "latency p99 {p99} ms should show the 1 s stall"
    );
    assert!(p90 > 250.0, "latency p90 {p90} ms should show the stall");
    let service_p99 = num(j, &["service_time_ms", "p99"]);
    assert!(
        service_p99 < 100.0,
        "service time p99 {service_p99} ms should not show the stall"
    );
    assert!(num(j, &["service_time_ms", "max"]) >= 900.0);
}

/// The warnings of result `j` that mention `needle`.
/// A listener whose accept queue is full (backlog 0, filled by the connections returned
/// with it, which must live as long as it): the kernel drops new SYNs, so connects hang
/// until their deadline.
pub fn full_listener() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: re-listening with a backlog of 0 on our own socket.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let addr = l.local_addr().unwrap();
    // Fill the queue (it holds backlog + 1); further handshakes are not completed.
    let fillers = (0..3)
        .filter_map(|_| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()
        })
        .collect();
    (l, fillers)
}

pub fn warnings_with<'a>(j: &'a Value, needle: &str) -> Vec<&'a str> {
    j["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("no warnings array: {j}"))
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains(needle))
        .collect()
}

/// `as_f64` with a helpful panic.
pub fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number: {cur}", path.join(".")))
}

/// The number right after `marker` in `line` (up to the next space), e.g. `p99 ` in
/// "[FAIL] p99<10ms: p99 52.1 ms": panics, naming the line, when there is none.
pub fn number_after(line: &str, marker: &str) -> f64 {
    line.split(marker)
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{marker}`: {line}"))
}

/// The processes whose parent is `pid` now (`/proc/*/stat`).
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let parent: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (parent == pid).then_some(child)
        })
        .collect()
}
