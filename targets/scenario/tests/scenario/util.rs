//! The shared harness: the scenario server and the hello backend on their own threads.

use std::sync::Arc;
use std::time::Duration;

use loadlab_hello::Counters;
use loadlab_target::{Config, FlowStats, Stats};
use loadlab_target_common::testing::{http_exchange, http_get, HttpResponse, ServerThread};

pub use loadlab_target_common::testing::{concurrently, timed, WAIT_LIMIT};

/// What the hello backend answers to the scenario server's request.
pub const BACKEND_MESSAGE: &str = "hello, rustacean loves rust";

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The scenario server, run in-process on `127.0.0.1:0`.
pub struct Target {
    server: ServerThread,
}

impl Target {
    /// Starts the server with the defaults changed by `configure` (and a short shutdown
    /// timeout, so that a failing test does not hang in drop).
    pub fn start(configure: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config {
            shutdown_timeout: Duration::from_secs(5),
            ..Config::default()
        };
        configure(&mut config);
        let server = ServerThread::spawn(move |listener, shutdown| {
            actix_rt::System::new().block_on(loadlab_target::run(listener, config, shutdown))
        });
        Target { server }
    }

    pub fn get(&self, path: &str) -> HttpResponse {
        http_get(self.server.addr(), path)
    }

    /// `GET path`, asserting a 200 and returning the body.
    pub fn ok(&self, path: &str) -> String {
        let response = self.get(path);
        assert_eq!(response.status, 200, "{path}: {}", response.body);
        response.body
    }

    pub fn stats(&self) -> Stats {
        serde_json::from_str(&self.ok("/stats")).expect("/stats is a Stats document")
    }

    /// `METHOD path` with `headers` and `body` on a new connection, closed after the reply.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let addr = self.addr();
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body);
        Reply::parse(&http_exchange(addr, &request))
    }

    pub fn flow_stats(&self) -> FlowStats {
        serde_json::from_str(&self.ok("/flow/stats")).expect("/flow/stats is a FlowStats document")
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    pub fn stop(self) -> Result<(), String> {
        self.server.stop()
    }
}

/// Status, headers and body of an HTTP response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    fn parse(raw: &str) -> Self {
        let (head, body) = raw.split_once("\r\n\r\n").expect("response head");
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .expect("status code");
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Reply {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The hello backend, run in-process on `127.0.0.1:0` with a fixed 5 ms latency.
pub struct Backend {
    server: ServerThread,
    pub counters: Arc<Counters>,
}

impl Backend {
    pub fn start() -> Self {
        let config = loadlab_hello::Config {
            latency: "fixed:5ms".parse().unwrap(),
            ..loadlab_hello::Config::default()
        };
        let counters = Arc::new(Counters::default());
        let shared = Arc::clone(&counters);
        let server = ServerThread::spawn(move |listener, shutdown| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(loadlab_hello::run(listener, config, shared, shutdown))
        });
        Backend { server, counters }
    }

    pub fn uri(&self) -> tonic::transport::Uri {
        format!("http://{}", self.server.addr()).parse().unwrap()
    }
}
