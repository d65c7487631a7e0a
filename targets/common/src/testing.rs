//! Helpers for the servers' integration tests (feature `testing`): a server's `run` on its
//! own thread, a bare HTTP/1.1 `GET`, and a server binary driven through its ready line and
//! `SIGTERM`. Every wait is bounded by [`WAIT_LIMIT`].

use std::fmt::Display;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::pin::Pin;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::net;

/// The longest any helper waits before failing the test.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);

/// The shutdown future handed to a server's `run`.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A server running on its own thread; stopped (and waited for) on drop.
#[derive(Debug)]
pub struct ServerThread {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    result: Mutex<mpsc::Receiver<Result<(), String>>>,
}

impl ServerThread {
    /// Binds `127.0.0.1:0` and calls `serve(listener, shutdown)` on a new thread. `serve`
    /// builds its own runtime and returns when the server stops.
    pub fn spawn<E, F>(serve: F) -> Self
    where
        E: Display,
        F: FnOnce(TcpListener, Shutdown) -> Result<(), E> + Send + 'static,
    {
        let listener = net::bind(([127, 0, 0, 1], 0).into(), 1024).expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = oneshot::channel::<()>();
        let (done, result) = mpsc::channel();
        thread::spawn(move || {
            let shutdown: Shutdown = Box::pin(async move {
                let _ = stopped.await;
            });
            let _ = done.send(serve(listener, shutdown).map_err(|e| e.to_string()));
        });
        ServerThread {
            addr,
            stop: Some(stop),
            result: Mutex::new(result),
        }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Resolves the shutdown future and returns what the server's `run` returned.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop_and_wait()
    }

    fn stop_and_wait(&mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = self
            .result
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        result
            .recv_timeout(WAIT_LIMIT)
            .unwrap_or_else(|_| Err("server did not stop in time".into()))
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if self.stop.is_some() {
            let _ = self.stop_and_wait();
        }
    }
}

/// Status and body of an HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Body, as text.
    pub body: String,
}

/// Sends `GET path` with `Connection: close` on a new connection and reads the response.
pub fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    let raw = http_exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    );
    let (head, body) = raw.split_once("\r\n\r\n").expect("response head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    HttpResponse {
        status,
        body: body.to_owned(),
    }
}

/// Writes `request` on a new connection and reads until the server closes it.
pub fn http_exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(WAIT_LIMIT))
        .expect("read timeout");
    stream.write_all(request.as_bytes()).expect("send request");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read response");
    raw
}

/// Runs `f(0..n)` on `n` threads at once; returns the results in order and the wall time.
pub fn concurrently<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> (Vec<T>, Duration) {
    let start = Instant::now();
    let results = thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = (0..n).map(|i| scope.spawn(move || f(i))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread"))
            .collect()
    });
    (results, start.elapsed())
}

/// Runs `f` and returns its result with the time it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

/// A server binary that printed its ready line; killed on drop if still running.
#[derive(Debug)]
pub struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    /// Starts `program args…` and waits for its `listening on ADDR` line.
    pub fn spawn_ready(program: &str, args: &[&str]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start server binary");
        let stdout = child.stdout.take().expect("piped stdout");
        let (line_tx, line_rx) = mpsc::channel();
        thread::spawn(move || {
            // Forward every line (the first is the ready line) until the process exits.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = line_tx.send(line);
            }
        });
        let line = line_rx.recv_timeout(WAIT_LIMIT);
        let addr = line
            .as_deref()
            .ok()
            .and_then(|l| l.strip_prefix("listening on "))
            .and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => Process { child, addr },
            None => {
                let _ = child.kill();
                panic!("{program}: no ready line, got {line:?}");
            }
        }
    }

    /// The address from the ready line.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `SIGTERM` and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own child.
        let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill -TERM {pid}");
        wait_bounded(&mut self.child).expect("server did not exit after SIGTERM")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `child` until it exits or [`WAIT_LIMIT`] passes (`None`).
fn wait_bounded(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + WAIT_LIMIT;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait for child") {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `program args…`, which must refuse them: asserts a failing exit and returns its
/// stderr (for checking that the message names the flag).
pub fn refused(program: &str, args: &[&str]) -> String {
    let output = run_to_exit(program, args);
    assert!(!output.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that `program --bind ADDR` refuses an address already in use, naming `--bind`.
pub fn assert_bind_in_use_refused(program: &str) {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = refused(program, &["--bind", &addr]);
    assert!(stderr.contains("--bind"), "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
}

/// Runs `program args…` to completion (killing it after [`WAIT_LIMIT`]) and returns its
/// output. For arguments that must make the program exit at once.
pub fn run_to_exit(program: &str, args: &[&str]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start binary");
    if wait_bounded(&mut child).is_none() {
        let _ = child.kill();
        panic!("{program} {args:?} kept running");
    }
    child.wait_with_output().expect("collect output")
}
