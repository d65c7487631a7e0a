//! The shared harness of the greeter binaries' tests: start a binary and read its ready line
//! (or see it exit), call `SayHello` with tonic's generated client, stop it with `SIGTERM`.
//! Every wait is bounded by [`WAIT_LIMIT`].

#![allow(dead_code)] // Each test file uses a different part.

use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use loadlab_target_common::greeter;
use loadlab_target_common::proto::helloworld::greeter_client::GreeterClient;
use loadlab_target_common::proto::helloworld::HelloRequest;
use tonic::transport::{Endpoint, Uri};

/// The longest any step waits before failing the test.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);

/// The exit status of a greeter whose runtime cannot start on io_uring.
pub const EXIT_UNAVAILABLE: i32 = 3;

/// A binary that printed its ready line; killed on drop if still running.
pub struct Server {
    name: String,
    child: Child,
    addr: SocketAddr,
}

/// What became of a started binary.
pub enum Started {
    /// It printed `listening on ADDR`.
    Ready(Server),
    /// It exited first.
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// Everything it wrote to stderr, trimmed.
        stderr: String,
    },
}

/// Starts `program` (a path from `env!("CARGO_BIN_EXE_…")`) with `args`.
pub fn start(program: &str, args: &[&str]) -> Started {
    start_with(program, args, |_| {})
}

/// [`start`], after `customize` adjusts the command (for example with `pre_exec`).
pub fn start_with(program: &str, args: &[&str], customize: impl FnOnce(&mut Command)) -> Started {
    let name = program.rsplit('/').next().unwrap_or(program).to_owned();
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    customize(&mut command);
    let mut child = command.spawn().expect("start greeter binary");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (lines_tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // Collected in full once the process exits; shown as it comes otherwise.
    let errors: JoinHandle<String> = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        match lines.recv_timeout(Duration::from_millis(20)) {
            Ok(line) => {
                let addr = line
                    .strip_prefix("listening on ")
                    .and_then(|a| a.parse().ok())
                    .unwrap_or_else(|| {
                        let _ = child.kill();
                        panic!("{name}: first line is not the ready line: {line:?}")
                    });
                return Started::Ready(Server { name, child, addr });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().expect("wait for greeter");
                let stderr = errors.join().unwrap_or_default().trim().to_owned();
                return Started::Exited { status, stderr };
            }
        }
        if let Some(status) = child.try_wait().expect("poll greeter") {
            let stderr = errors.join().unwrap_or_default().trim().to_owned();
            return Started::Exited { status, stderr };
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{name}: no ready line within {WAIT_LIMIT:?}");
        }
    }
}

impl Server {
    /// The address of the ready line.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `SIGTERM`; returns the exit status and how long the exit took.
    pub fn terminate(self) -> (ExitStatus, Duration) {
        let started = Instant::now();
        self.sigterm();
        self.wait_since(started)
    }

    /// Sends `SIGTERM` and returns at once.
    pub fn sigterm(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own child.
        assert_eq!(
            unsafe { libc::kill(pid, libc::SIGTERM) },
            0,
            "kill -TERM {pid}"
        );
    }

    /// Waits for the exit (after [`Server::sigterm`] at `started`); returns the status and
    /// the time since `started`.
    pub fn wait_since(mut self, started: Instant) -> (ExitStatus, Duration) {
        while started.elapsed() < WAIT_LIMIT {
            if let Some(status) = self.child.try_wait().expect("poll greeter") {
                return (status, started.elapsed());
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("{}: still running {WAIT_LIMIT:?} after SIGTERM", self.name);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A starting binary that must serve: the server, or `None` when it is an io_uring runtime
/// that exited with [`EXIT_UNAVAILABLE`] and skips are being counted. Any other exit fails.
pub fn serving_or_skipped(program: &str, args: &[&str], uses_io_uring: bool) -> Option<Server> {
    match start(program, args) {
        Started::Ready(server) => Some(server),
        Started::Exited { status, stderr }
            if uses_io_uring && status.code() == Some(EXIT_UNAVAILABLE) =>
        {
            let name = program.rsplit('/').next().unwrap_or(program);
            let cause = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            skipped(&format!("{name} did not run: {cause}"));
            None
        }
        Started::Exited { status, stderr } => {
            panic!("{program} exited before its ready line ({status}): {stderr}")
        }
    }
}

/// The file, named by `LOADLAB_SKIPPED`, where checks that could not run on this machine
/// are listed; `.ci/run` sets it and prints the list in its closing tally.
pub const SKIP_LOG: &str = "LOADLAB_SKIPPED";

/// A check that cannot run here. With [`SKIP_LOG`] set, it is appended there (test name and
/// reason) and the test goes on; without it the test fails: a skipped check is never
/// reported as a passing one.
pub fn skipped(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    let Some(path) = std::env::var_os(SKIP_LOG) else {
        panic!(
            "{test}: {reason}\nThis check cannot run on this machine. To count it as skipped \
             instead of failed, set {SKIP_LOG}=FILE (as .ci/run does): each skip is then listed \
             with its reason in the closing tally."
        );
    };
    use std::io::Write;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{SKIP_LOG}={}: {e}", path.to_string_lossy()));
    writeln!(log, "targets/runtimes {test}: {reason}").expect("writing the skip log");
    eprintln!("SKIPPED: {test}: {reason}");
}

fn request(name: &str) -> HelloRequest {
    HelloRequest { name: name.into() }
}

/// Calls `SayHello` once, then `concurrent` times at once over one HTTP/2 connection, and
/// checks every reply against [`greeter::reply`]. Returns the TCP connections opened.
pub fn check_say_hello(addr: SocketAddr, concurrent: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async move {
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        let connector = tower::service_fn(move |_: Uri| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let stream = tokio::net::TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                Ok::<_, io::Error>(TokioIo::new(stream))
            }
        });
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect_timeout(WAIT_LIMIT)
            .timeout(WAIT_LIMIT)
            .connect_with_connector(connector)
            .await
            .expect("connect to greeter");
        let mut client = GreeterClient::new(channel);

        let reply = client
            .say_hello(request("loadlab"))
            .await
            .expect("SayHello")
            .into_inner();
        assert_eq!(reply, greeter::reply(&request("loadlab")));

        let calls = (0..concurrent).map(|i| {
            let mut client = client.clone();
            async move {
                let name = format!("caller {i}");
                let reply = client.say_hello(request(&name)).await;
                (name, reply)
            }
        });
        let replies = futures::future::join_all(calls).await;
        assert_eq!(replies.len(), concurrent);
        for (name, reply) in replies {
            let reply = reply.unwrap_or_else(|status| panic!("SayHello({name}): {status}"));
            assert_eq!(reply.into_inner(), greeter::reply(&request(&name)));
        }
        connections.load(Ordering::SeqCst)
    })
}

/// A tonic client on its own multi-threaded runtime, so its connection keeps being served
/// (pings, `GOAWAY`) while the test thread blocks.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    client: GreeterClient<tonic::transport::Channel>,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("client runtime");
        let channel = runtime
            .block_on(
                Endpoint::from_shared(format!("http://{addr}"))
                    .expect("endpoint")
                    .connect_timeout(WAIT_LIMIT)
                    .timeout(WAIT_LIMIT)
                    .connect(),
            )
            .expect("connect to greeter");
        Client {
            runtime,
            client: GreeterClient::new(channel),
        }
    }

    /// Calls `SayHello(name)` and checks the reply.
    pub fn say_hello(&self, name: &str) {
        let mut client = self.client.clone();
        let reply = self
            .runtime
            .block_on(client.say_hello(request(name)))
            .expect("SayHello")
            .into_inner();
        assert_eq!(reply, greeter::reply(&request(name)));
    }
}

/// Makes the child's `io_uring_setup` fail with `EPERM` through a seccomp filter, as
/// container runtimes' default profiles do.
pub fn refuse_io_uring(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only makes two prctl(2) calls on
    // data it owns, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            let filter = [
                // A = seccomp_data.nr
                bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
                // if A == io_uring_setup: next, else skip one
                bpf(
                    libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                    0,
                    1,
                    libc::SYS_io_uring_setup as u32,
                ),
                bpf(
                    libc::BPF_RET | libc::BPF_K,
                    0,
                    0,
                    libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA),
                ),
                bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
            ];
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Lowers the child's soft `RLIMIT_MEMLOCK` to `bytes` (allowed without privileges).
pub fn limit_memlock(command: &mut Command, bytes: u64) {
    // SAFETY: the closure runs between fork and exec and only calls getrlimit/setrlimit on
    // a local struct, which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) != 0 {
                return Err(io::Error::last_os_error());
            }
            limit.rlim_cur = bytes.min(limit.rlim_max);
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Calls `SayHello` `calls` times at once on each of `connections` HTTP/2 connections (all
/// in flight together) and checks every reply against [`greeter::reply`]; returns the
/// number of calls answered, which must be `connections * calls`.
pub fn check_many(addr: SocketAddr, connections: usize, calls: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async move {
        let mut clients = Vec::with_capacity(connections);
        for _ in 0..connections {
            let channel = Endpoint::from_shared(format!("http://{addr}"))
                .expect("endpoint")
                .connect_timeout(WAIT_LIMIT)
                .timeout(WAIT_LIMIT)
                .connect()
                .await
                .expect("connect to greeter");
            clients.push(GreeterClient::new(channel));
        }
        let calls = clients.iter().enumerate().flat_map(|(c, client)| {
            (0..calls).map(move |i| {
                let mut client = client.clone();
                async move {
                    let name = format!("connection {c} call {i}");
                    let reply = client.say_hello(request(&name)).await;
                    (name, reply)
                }
            })
        });
        let replies = futures::future::join_all(calls).await;
        let mut answered = 0;
        for (name, reply) in replies {
            let reply = reply.unwrap_or_else(|status| panic!("SayHello({name}): {status}"));
            assert_eq!(reply.into_inner(), greeter::reply(&request(&name)));
            answered += 1;
        }
        answered
    })
}

/// Calls `SayHello` `concurrent` times at once over one HTTP/2 connection with names of
/// `size` bytes (each call's own letter), so that requests and replies cross in many
/// frames, reads and partial writes; checks every reply against [`greeter::reply`].
pub fn check_large(addr: SocketAddr, size: usize, concurrent: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async move {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect_timeout(WAIT_LIMIT)
            .timeout(WAIT_LIMIT)
            .connect()
            .await
            .expect("connect to greeter");
        let client = GreeterClient::new(channel);
        let calls = (0..concurrent).map(|i| {
            let mut client = client.clone();
            async move {
                let letter = char::from(b'a' + (i % 26) as u8);
                let name: String = std::iter::repeat_n(letter, size).collect();
                let reply = client.say_hello(request(&name)).await;
                (name, reply)
            }
        });
        for (name, reply) in futures::future::join_all(calls).await {
            let reply = reply
                .unwrap_or_else(|status| panic!("SayHello({} bytes): {status}", name.len()))
                .into_inner();
            assert!(
                reply == greeter::reply(&request(&name)),
                "a wrong reply to a large call"
            );
        }
    });
}

/// A gRPC call made with a bare h2 client, so that the test decides when the request body
/// ends and when the connection goes away.
pub struct RawCall {
    runtime: tokio::runtime::Runtime,
    response: Option<h2::client::ResponseFuture>,
    body: h2::SendStream<bytes::Bytes>,
    connection: tokio::task::JoinHandle<()>,
    name: String,
}

impl RawCall {
    /// Connects to `addr` and starts `SayHello(name)`: headers and the first `sent` bytes
    /// of the message, without ending the stream. Returns once the server has the bytes
    /// (a ping round trip after them).
    pub fn start(addr: SocketAddr, name: &str, sent: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("client runtime");
        let message = hello_frame(name);
        let (response, body, connection) = runtime.block_on(async {
            let stream = tokio::time::timeout(WAIT_LIMIT, tokio::net::TcpStream::connect(addr))
                .await
                .expect("connect in time")
                .expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let (client, mut connection) =
                h2::client::handshake(stream).await.expect("h2 handshake");
            let mut ping = connection.ping_pong().expect("ping_pong");
            let connection = tokio::spawn(async move {
                let _ = connection.await;
            });
            let mut client = client.ready().await.expect("h2 ready");
            let request = http::Request::post(format!("http://{addr}/helloworld.Greeter/SayHello"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .expect("request");
            let (response, mut body) = client.send_request(request, false).expect("send request");
            body.send_data(message.slice(..sent), false)
                .expect("send data");
            tokio::time::timeout(WAIT_LIMIT, ping.ping(h2::Ping::opaque()))
                .await
                .expect("ping answered in time")
                .expect("ping");
            (response, body, connection)
        });
        RawCall {
            runtime,
            response: Some(response),
            body,
            connection,
            name: name.to_owned(),
        }
    }

    /// Sends the rest of the message, ends the stream and checks the reply: status 200,
    /// the message of [`greeter::reply`], `grpc-status: 0`.
    pub fn finish(mut self, sent: usize) {
        let message = hello_frame(&self.name);
        self.body
            .send_data(message.slice(sent..), true)
            .expect("send the rest");
        let response = self.response.take().expect("not finished twice");
        let expected = greeter::reply(&request(&self.name));
        self.runtime.block_on(async move {
            let response = tokio::time::timeout(WAIT_LIMIT, response)
                .await
                .expect("response in time")
                .expect("response");
            assert_eq!(response.status(), 200);
            let mut body = response.into_body();
            let mut data = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.expect("response data");
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            let trailers = body
                .trailers()
                .await
                .expect("trailers")
                .expect("trailers sent");
            assert_eq!(trailers["grpc-status"], "0", "{trailers:?}");
            assert!(data.len() >= 5 && data[0] == 0, "{data:?}");
            let reply =
                <loadlab_target_common::proto::helloworld::HelloReply as prost::Message>::decode(
                    &data[5..],
                )
                .expect("a HelloReply");
            assert_eq!(reply, expected);
        });
    }

    /// Drops the connection with the call unfinished (the client goes away mid-call).
    pub fn disconnect(self) {
        self.connection.abort();
        drop(self.body);
        drop(self.response);
        self.runtime.shutdown_timeout(Duration::from_secs(1));
    }
}

/// `SayHello(name)` as one length-prefixed gRPC message.
pub fn hello_frame(name: &str) -> bytes::Bytes {
    let message = prost::Message::encode_to_vec(&request(name));
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    frame.into()
}
