//! A greeter process from start to exit: probe io_uring, bind, start the runtime, announce
//! the address, serve until `SIGTERM`/`SIGINT`, stop within [`SHUTDOWN_GRACE`].

use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use loadlab_target_common::net::BindError;
use loadlab_target_common::signal;
use tokio_util::sync::CancellationToken;

use crate::listeners;
use crate::runtimes::{self, Event, Listeners, Runtime, StartError};
use crate::uring::{self, Unavailable};

/// How long the calls in flight may take to finish after a stop signal; a second signal
/// ends the process at once.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Validated options of a greeter binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Runtime threads: workers of a shared executor, or executors with a listener each.
    pub threads: NonZeroUsize,
}

impl Options {
    /// One thread per CPU this process may use, or one if that is unknown.
    pub fn default_threads() -> NonZeroUsize {
        thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
    }
}

/// A greeter that could not serve.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The runtime cannot run on this machine's io_uring (exit status 3).
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// `--bind` could not be bound.
    #[error("--bind")]
    Bind(#[from] BindError),
    /// The signal handlers could not be installed.
    #[error("cannot handle SIGTERM and SIGINT")]
    Signals(#[source] io::Error),
    /// The runtime did not start.
    #[error(transparent)]
    Start(StartError),
    /// A runtime thread ended before a stop signal.
    #[error("thread {thread} stopped serving")]
    Stopped {
        /// The thread's name.
        thread: String,
        /// Its error, or an "ended" error if it returned normally.
        #[source]
        source: io::Error,
    },
}

impl From<StartError> for LaunchError {
    fn from(error: StartError) -> Self {
        match error {
            StartError::Unavailable(unavailable) => LaunchError::Unavailable(unavailable),
            other => LaunchError::Start(other),
        }
    }
}

impl LaunchError {
    /// The process exit status: [`uring::EXIT_UNAVAILABLE`] when io_uring is refused, else 1.
    pub fn exit_status(&self) -> u8 {
        match self {
            LaunchError::Unavailable(_) => uring::EXIT_UNAVAILABLE,
            _ => 1,
        }
    }
}

/// Serves the greeter on `runtime` until `SIGTERM` or `SIGINT`. Calls `on_ready` with the
/// bound address once every runtime thread is up (the binaries print the ready line there).
pub fn run(
    runtime: Runtime,
    options: &Options,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), LaunchError> {
    if let Some(requirements) = runtime.uring() {
        uring::probe(requirements)?;
    }
    let listeners = match runtime.listeners() {
        Listeners::Shared => vec![listeners::bind_one(options.bind)?],
        Listeners::PerThread => listeners::bind_reuseport(options.bind, options.threads)?,
    };
    let addr = listeners[0].local_addr().map_err(|source| BindError {
        addr: options.bind,
        source,
    })?;
    let (events_tx, events) = mpsc::channel();
    // Registered before the ready line, so a signal sent right after it is not lost.
    let signals = {
        let events = events_tx.clone();
        signal::on_stop_signals("greeter-signals", move |signal| {
            events.send(Event::Signal(signal)).is_ok()
        })
        .map_err(LaunchError::Signals)?
    };
    let stop = CancellationToken::new();
    let started = runtimes::start(
        runtime,
        listeners,
        options.threads,
        stop.clone(),
        &events_tx,
    );
    let mut running = match started {
        Ok(count) => count,
        Err(error) => {
            stop.cancel();
            signals.close();
            return Err(error.into());
        }
    };
    on_ready(addr);
    let outcome = match events.recv() {
        Ok(Event::Exited { thread, result }) => {
            running -= 1;
            let source = result
                .err()
                .unwrap_or_else(|| io::Error::other("ended before a stop signal"));
            Err(LaunchError::Stopped { thread, source })
        }
        Ok(Event::Signal(_)) | Err(_) => Ok(()),
    };
    stop.cancel();
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(Event::Exited { .. }) => running -= 1,
            // A second signal, the grace period over, or no thread left to report.
            Ok(Event::Signal(_)) | Err(_) => break,
        }
    }
    signals.close();
    outcome
}
