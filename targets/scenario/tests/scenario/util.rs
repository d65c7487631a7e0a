//! The shared harness: the scenario server and the hello backend on their own threads.

use std::sync::Arc;
use std::time::Duration;

use loadlab_hello::Counters;
use loadlab_target::{Config, Stats};
use loadlab_target_common::testing::{http_get, HttpResponse, ServerThread};

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

    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    pub fn stop(self) -> Result<(), String> {
        self.server.stop()
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
