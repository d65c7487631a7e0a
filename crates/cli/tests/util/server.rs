//! Servers a test starts itself (not loadlab): the fixture server, `loadlab serve`, or any
//! program that prints its port on its first line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::lab::fixture;
use super::loadlab_bin;

/// A server started by the test (not by loadlab), killed when dropped.
pub struct Server {
    /// The process.
    pub child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl Server {
    /// Starts `cmd` and reads its port from the first line it prints on stdout.
    pub fn spawn(mut cmd: Command, port_of: impl Fn(&str) -> Option<u16>) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = port_of(line.trim()).unwrap_or_else(|| panic!("no port in {line:?}"));
        Server { child, port }
    }

    /// Python's `ThreadingHTTPServer` (a thread per connection, a listen queue of 1024)
    /// answering every GET `ok` after sleeping `seconds`, on CPU 0: a server nobody here
    /// wrote, of known service time and no pool.
    pub fn python_sleeper(seconds: f64) -> Server {
        let py = format!(
            "import time\n\
            from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler\n\
            class H(BaseHTTPRequestHandler):\n\
            \x20   def do_GET(self):\n\
            \x20       time.sleep({seconds})\n\
            \x20       self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n\
            \x20       self.wfile.write(b'ok')\n\
            \x20   def log_message(self, *a): pass\n\
            class S(ThreadingHTTPServer):\n\
            \x20   request_queue_size = 1024\n\
            s = S(('127.0.0.1', 0), H)\n\
            print('port', s.server_address[1], flush=True)\n\
            s.serve_forever()\n"
        );
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "0", "/usr/bin/python3", "-c", &py]);
        Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok())
    }

    /// The fixture server on CPU 0 (`listening on 127.0.0.1:PORT`).
    pub fn start(args: &[&str]) -> Server {
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "0", &fixture(), "--port", "0"]).args(args);
        Server::spawn(cmd, |l| l.rsplit_once(':')?.1.parse().ok())
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// gunicorn (a pre-fork Python server nobody here wrote) on CPU 0 with 2 synchronous workers,
/// serving `app:app` from `dir` with `env` added to its environment; returned once it
/// accepts connections (within 10 s, or the test fails). gunicorn logs to stderr only, so its
/// port is chosen here. Killed when dropped: a failing test leaves no server behind.
pub fn gunicorn(dir: &std::path::Path, env: &[(&str, &std::ffi::OsStr)]) -> Server {
    gunicorn_with(dir, &["-w", "2"], env)
}

/// gunicorn serving `app:app` from `dir` with `args` (workers, threads), on CPU 0.
pub fn gunicorn_with(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // taskset execs gunicorn in its own process: the child is gunicorn's master.
    let child = Command::new("taskset")
        .args(["-c", "0", "gunicorn"])
        .args(args)
        .arg("-b")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--chdir")
        .arg(dir)
        .arg("app:app")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gunicorn (Debian: apt-get install gunicorn)");
    let server = Server { child, port };
    let ready = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(ready, "gunicorn never listened on {port}");
    server
}

/// `loadlab serve ARGS` started by the test (`listening on 127.0.0.1:PORT`).
pub fn serve(args: &[&str]) -> Server {
    let mut cmd = Command::new(loadlab_bin());
    cmd.arg("serve").args(args);
    Server::spawn(cmd, |l| l.rsplit_once(':')?.1.parse().ok())
}

/// `loadlab serve hello` pinned to CPU 0 on a free port, with `args` after its `--bind`.
pub fn hello_on_cpu0(args: &[&str]) -> Server {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", loadlab_bin(), "serve", "hello"])
        .args(["--bind", "127.0.0.1:0"])
        .args(args);
    Server::spawn(cmd, |l| {
        l.strip_prefix("listening on ")?
            .rsplit_once(':')?
            .1
            .parse()
            .ok()
    })
}

/// Stops a test server that writes its counters (numbers separated by spaces) to `counts`
/// on SIGTERM, and reads them.
pub fn stop_and_read_counts(server: &mut Server, counts: &std::path::Path) -> Vec<u64> {
    let pid = server.pid().to_string();
    let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(ok.success(), "kill -TERM {pid}");
    let _ = server.child.wait();
    let text = std::fs::read_to_string(counts)
        .unwrap_or_else(|e| panic!("{}: {e} (the server wrote no counts)", counts.display()));
    text.split(' ').map(|w| w.parse().unwrap()).collect()
}

/// Protocol buffers' wire format in Python, for the test servers that build or read
/// messages by hand: `enc(n)` a varint's bytes; `varint(b, i)` the varint at `b[i]` and the
/// index after it; `fields(b)` a message's varint and length-delimited fields by number.
pub const PY_PROTO: &str = r#"
def enc(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else:
            out.append(b); return bytes(out)
def varint(b, i):
    v = 0; s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    out = {}; i = 0
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0: out[key >> 3], i = varint(b, i)
        elif key & 7 == 2:
            n, i = varint(b, i); out[key >> 3] = b[i:i + n]; i += n
        else: raise ValueError(key)
    return out
"#;

/// `/usr/bin/python3 -c SCRIPT` on CPU 0, with [`PY_PROTO`]'s helpers defined before it.
pub fn python_with_proto(script: &str) -> Command {
    let mut cmd = Command::new("taskset");
    cmd.args([
        "-c",
        "0",
        "/usr/bin/python3",
        "-c",
        &[PY_PROTO, script].concat(),
    ]);
    cmd
}

/// Python's grpcio (`/usr/bin/python3`) on CPU 0 serving `ticker.Ticker/METHOD` with
/// `body`, which defines `handle(request, context)` of the `handler` kind
/// (`stream_stream_rpc_method_handler`, ...) and reads its parameters from `sys.argv[1..]`
/// (`args`), with [`PY_PROTO`]'s helpers at hand; it counts into `counts` under `lock`. On
/// SIGTERM the server writes `counts` to the file returned ([`stop_and_read_counts`]).
pub fn grpcio_counting(
    method: &str,
    handler: &str,
    workers: u32,
    body: &str,
    args: &[String],
) -> (Server, std::path::PathBuf) {
    let py = format!(
        "import sys, time, grpc, signal, threading\n\
         from concurrent import futures\n\
         lock = threading.Lock(); counts = [0, 0, 0]\n\
         {PY_PROTO}\n\
         {body}\n\
         rpc = grpc.method_handlers_generic_handler('ticker.Ticker', {{'{method}': grpc.{handler}(handle)}})\n\
         server = grpc.server(futures.ThreadPoolExecutor(max_workers={workers}))\n\
         server.add_generic_rpc_handlers((rpc,))\n\
         port = server.add_insecure_port('127.0.0.1:0')\n\
         server.start()\n\
         def bye(*_):\n\
         \x20   with lock: text = ' '.join(str(n) for n in counts)\n\
         \x20   with open(sys.argv[-1], 'w') as f: f.write(text)\n\
         \x20   import os; os._exit(0)\n\
         signal.signal(signal.SIGTERM, bye)\n\
         print('port', port, flush=True)\n\
         while True: time.sleep(1)\n"
    );
    let counts = crate::util::temp_path(&format!("{}-counts", method.to_ascii_lowercase()));
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "/usr/bin/python3", "-c", &py])
        .args(args)
        .arg(&counts);
    let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    (server, counts)
}
