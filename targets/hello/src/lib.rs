//! `loadlab-hello`: the gRPC backend of the source experiments.
//!
//! Serves `hello.HelloService/Say` (documents 000 and 004), which answers after a delay
//! drawn from a [`LatencyModel`] (an async timer, so slow calls never block the runtime),
//! `helloworld.Greeter/SayHello` (document 001), which answers at once, and
//! `ticker.Ticker/Subscribe` (proto/ticker.proto), a server stream of ticks `tick_every`
//! apart, for `loadlab grpc` on streams.
//!
//! # Layout
//! - [`latency`]: the latency model, its syntax and its sampling;
//! - `service`: the `HelloService` implementation ([`answer`] is its reply);
//! - `connections`: the accepted connections, counted into [`Counters`];
//! - [`run`]: serves both services on a bound listener until the shutdown future resolves.

pub mod cli;
pub mod latency;

mod connections;
mod service;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use loadlab_target_common::greeter::GreeterService;
use loadlab_target_common::proto::hello::hello_service_server::HelloServiceServer;
use loadlab_target_common::proto::ticker::ticker_server::TickerServer;
use tokio::sync::oneshot;
use tonic::transport::Server;

pub use latency::{LatencyError, LatencyModel};
pub use service::answer;

/// Settings of the backend.
#[derive(Debug, Clone)]
pub struct Config {
    /// Delay before each `Say` answer.
    pub latency: LatencyModel,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` advertised per connection (`None`: the
    /// server's default). A low value makes one shared client connection queue its calls.
    pub max_concurrent_streams: Option<u32>,
    /// How long in-flight calls may take to finish once shutdown starts.
    pub shutdown_timeout: Duration,
    /// The gap between two ticks of a `Ticker.Subscribe` stream.
    pub tick_every: Duration,
    /// How long each `Ticker.Chat` note takes to answer (and each `Ticker.Upload` note to
    /// take in).
    pub chat_delay: Duration,
    /// The workers every `Ticker.Chat` stream's notes share, each held for a note's delay
    /// (`None`: no limit): the method's capacity is `chat_pool / chat_delay` notes a second.
    pub chat_pool: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            latency: LatencyModel::default(),
            max_concurrent_streams: None,
            shutdown_timeout: Duration::from_secs(10),
            tick_every: Duration::from_millis(100),
            chat_delay: Duration::ZERO,
            chat_pool: None,
        }
    }
}

/// What the backend has seen; shared with the caller of [`run`].
#[derive(Debug, Default)]
pub struct Counters {
    /// TCP connections accepted.
    accepted: AtomicU64,
    /// TCP connections currently open.
    open: AtomicU64,
    /// `HelloService.Say` calls received.
    say_calls: AtomicU64,
    /// `Ticker.Subscribe` calls received.
    subscribe_calls: AtomicU64,
    /// Ticks sent on those streams.
    ticks: AtomicU64,
    /// `Ticker.Chat` calls received.
    chat_calls: AtomicU64,
    /// Notes received on them, and answers sent.
    notes_in: AtomicU64,
    notes_out: AtomicU64,
    /// `Ticker.Upload` calls received, notes received on them, and receipts sent.
    upload_calls: AtomicU64,
    upload_notes: AtomicU64,
    receipts: AtomicU64,
}

/// A copy of [`Counters`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// TCP connections accepted since start.
    pub accepted_connections: u64,
    /// TCP connections open now.
    pub open_connections: u64,
    /// `HelloService.Say` calls received since start.
    pub say_calls: u64,
    /// `Ticker.Subscribe` calls received since start.
    pub subscribe_calls: u64,
    /// Ticks sent on their streams since start (handed to the transport).
    pub ticks: u64,
    /// `Ticker.Chat` calls received since start.
    pub chat_calls: u64,
    /// Notes received on them since start.
    pub notes_in: u64,
    /// Answers sent on them since start (handed to the transport).
    pub notes_out: u64,
    /// `Ticker.Upload` calls received since start.
    pub upload_calls: u64,
    /// Notes received on them since start.
    pub upload_notes: u64,
    /// Receipts sent for them since start (handed to tonic).
    pub receipts: u64,
}

impl Counters {
    /// Reads all counters.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            accepted_connections: self.accepted.load(Relaxed),
            open_connections: self.open.load(Relaxed),
            say_calls: self.say_calls.load(Relaxed),
            subscribe_calls: self.subscribe_calls.load(Relaxed),
            ticks: self.ticks.load(Relaxed),
            chat_calls: self.chat_calls.load(Relaxed),
            notes_in: self.notes_in.load(Relaxed),
            notes_out: self.notes_out.load(Relaxed),
            upload_calls: self.upload_calls.load(Relaxed),
            upload_notes: self.upload_notes.load(Relaxed),
            receipts: self.receipts.load(Relaxed),
        }
    }
}

/// The backend could not serve.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listener could not be handed to tokio.
    #[error("cannot use the listener")]
    Listener(#[source] io::Error),
    /// The gRPC server stopped with an error.
    #[error("gRPC server failed")]
    Serve(#[source] tonic::transport::Error),
}

/// Serves `HelloService`, `Greeter` and `Ticker` on `listener` until `shutdown` resolves, then stops
/// accepting, lets in-flight calls finish for up to `config.shutdown_timeout`, and returns.
///
/// Must run inside a tokio runtime. `counters` is updated as connections and calls arrive.
pub async fn run(
    listener: std::net::TcpListener,
    config: Config,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    listener.set_nonblocking(true).map_err(Error::Listener)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(Error::Listener)?;
    let hello = service::Hello {
        latency: config.latency,
        counters: Arc::clone(&counters),
    };
    let ticks = service::Ticks {
        every: config.tick_every,
        counters: Arc::clone(&counters),
        chat_delay: config.chat_delay,
        chat_pool: config
            .chat_pool
            .map(|n| Arc::new(tokio::sync::Semaphore::new(n as usize))),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let serve = Server::builder()
        .max_concurrent_streams(config.max_concurrent_streams)
        .add_service(HelloServiceServer::new(hello))
        .add_service(GreeterService.into_server())
        .add_service(TickerServer::new(ticks))
        .serve_with_incoming_shutdown(connections::incoming(listener, counters), async {
            // Resolves on send and also if the sender is dropped: either way, stop.
            let _ = stopped.await;
        });
    tokio::pin!(serve);
    tokio::select! {
        result = &mut serve => return result.map_err(Error::Serve),
        () = shutdown => {}
    }
    let _ = stop.send(());
    match tokio::time::timeout(config.shutdown_timeout, serve).await {
        Ok(result) => result.map_err(Error::Serve),
        // Calls still running past the grace period are dropped with their connections.
        Err(_elapsed) => Ok(()),
    }
}
