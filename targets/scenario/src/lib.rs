//! `loadlab-target`: the actix-web scenario server of the source experiments.
//!
//! Ten endpoints from the benchmark of documents 000 and 004 (`/health`, `/sleep`,
//! `/f_sleep`, `/count`, `/send_wait`, `/fsend_wait`, `/send_nowait`, `/grpc_wait`,
//! `/fgrpc_wait`, `/grpc_per`), the thread-pooled `/page` of document 003, and `/stats`;
//! and a stateful login flow under `/flow` for load tools that drive arriving users.
//! Each shows one way a server breaks under load: a blocked worker thread, a single slow
//! actor, an unbounded (here: bounded and counted) mailbox, one shared client connection, a
//! new connection per request, a thread pool too small for the load.
//!
//! # Layout
//! - [`config`]: the settings and their validation;
//! - `routes`: the endpoints and their handlers;
//! - `actor`: the slow actor and its bounded mailbox;
//! - `grpc`: the shared and per-request gRPC clients and their connection counts;
//! - `pool`: the bounded blocking pool behind `/page`;
//! - `flow`: the login → pages → logout flow, its session book and the [`FlowStats`] of
//!   `/flow/stats`;
//! - `stats`: request counters and the [`Stats`] document of `/stats`;
//! - `background`: the runtimes that keep client and pool work off the actix workers.

pub mod cli;
pub mod config;

mod actor;
mod background;
mod flow;
mod grpc;
mod pool;
mod routes;
mod stats;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use actix_web::dev::Service;
use actix_web::{web, App, HttpServer};

pub use actor::ActorStats;
pub use config::{Config, ConfigError, KeepAlive};
pub use flow::{FlowPages, FlowRejections, FlowRequest, FlowSession, FlowStats, FlowTotals};
pub use grpc::GrpcStats;
pub use pool::PoolStats;
pub use stats::Stats;

/// The server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A background runtime (gRPC clients, blocking pool) could not start.
    #[error("cannot start the {what} runtime")]
    Runtime {
        /// Which runtime: `gRPC` (the backend's clients) or `pool` (the blocking pool).
        what: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The listener was refused or the server failed.
    #[error("HTTP server failed")]
    Serve(#[source] io::Error),
}

/// State shared by every worker.
pub(crate) struct AppState {
    config: Config,
    requests: routes::RequestCounters,
    count: AtomicU64,
    mailbox: actor::Mailbox,
    grpc: grpc::GrpcClients,
    pool: pool::BlockingPool,
    flow: flow::Flow,
}

impl AppState {
    fn start(config: &Config) -> Result<Self, Error> {
        let runtime = |what| move |source| Error::Runtime { what, source };
        let grpc = grpc::GrpcClients::new(config.grpc_backend.clone()).map_err(runtime("gRPC"))?;
        let pool = pool::BlockingPool::new(config.blocking_threads).map_err(runtime("pool"))?;
        Ok(AppState {
            config: config.clone(),
            requests: routes::RequestCounters::default(),
            count: AtomicU64::new(0),
            mailbox: actor::Mailbox::start(config.actor_delay, config.mailbox),
            grpc,
            pool,
            flow: flow::Flow::new(config),
        })
    }

    fn stats(&self) -> Stats {
        Stats {
            requests: self.requests.snapshot(),
            count: self.count.load(SeqCst),
            actor: self.mailbox.stats(),
            grpc: self.grpc.stats(),
            blocking_pool: self.pool.stats(),
        }
    }
}

/// Serves the scenario endpoints on `listener` until `shutdown` resolves, then stops
/// accepting and gives in-flight requests up to `config.shutdown_timeout` to finish.
///
/// Must be awaited inside an actix `System` (`#[actix_web::main]`, or
/// `actix_rt::System::new().block_on(..)`), because the actor needs one.
pub async fn run(
    listener: std::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    config.validate()?;
    let state = web::Data::new(AppState::start(&config)?);
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap_fn(|request, service| {
                if let Some(state) = request.app_data::<web::Data<AppState>>() {
                    state.requests.hit(request.path());
                }
                service.call(request)
            })
            .configure(routes::configure)
            .configure(flow::configure)
    })
    .max_connections(config.max_connections)
    .max_connection_rate(config.max_connection_rate)
    .keep_alive(match config.keep_alive {
        KeepAlive::Timeout(timeout) => actix_web::http::KeepAlive::Timeout(timeout),
        KeepAlive::Off => actix_web::http::KeepAlive::Disabled,
    })
    .shutdown_timeout(config.shutdown_timeout.as_secs())
    .shutdown_signal(shutdown);
    if let Some(workers) = config.workers {
        server = server.workers(workers);
    }
    // The actor's arbiter and the background runtimes stop when the last worker drops
    // its reference to the state.
    server
        .listen(listener)
        .map_err(Error::Serve)?
        .run()
        .await
        .map_err(Error::Serve)
}
