//! The ways of running the greeter (six runtimes, and the minimal runtime in four I/O
//! modes): which listeners each runtime gets, and how its threads start.
//!
//! [`start`] returns once every thread's runtime is up (an io_uring runtime that cannot
//! start fails here, before the ready line), and each thread reports on the event channel
//! when it ends. A [`CancellationToken`] stops them all: the listeners close, open
//! connections get `GOAWAY` and finish their calls.

mod async_std;
mod glommio;
mod minimal;
mod monoio;
mod smol;
mod tokio;

use std::fmt;
use std::io;
use std::net::TcpListener;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::uring::{self, Requirements, Unavailable};

pub use self::minimal::{IoMode, UnknownIoMode};

/// A runtime the greeter is served on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// tonic on one multi-threaded tokio runtime with `--threads` workers, one listener.
    Tokio,
    /// tonic on `--threads` current-thread tokio runtimes, each on its own thread with its
    /// own `SO_REUSEPORT` listener.
    TokioPerCore,
    /// h2 on one `smol::Executor` run by `--threads` threads, one listener.
    Smol,
    /// h2 on async-std's global executor with `--threads` threads, one listener.
    AsyncStd,
    /// h2 on `--threads` glommio executors (io_uring), each pinned to a CPU with its own
    /// `SO_REUSEPORT` listener.
    Glommio,
    /// h2 on `--threads` monoio runtimes (io_uring driver), each on its own thread with its
    /// own `SO_REUSEPORT` listener.
    Monoio,
    /// h2 on the minimal runtime of document 001 (`greeter-minimal`): `--threads`
    /// executors of this crate's own, each pinned to a CPU with its own `SO_REUSEPORT`
    /// listener, doing I/O in the given mode.
    Minimal(IoMode),
}

/// How a runtime's threads receive connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listeners {
    /// One listener, accepted from by one task.
    Shared,
    /// One `SO_REUSEPORT` listener per thread on the same port.
    PerThread,
}

impl Runtime {
    /// Every runtime (the minimal one in each I/O mode), in the order of the comparison.
    pub const ALL: [Runtime; 10] = [
        Runtime::Tokio,
        Runtime::TokioPerCore,
        Runtime::Smol,
        Runtime::AsyncStd,
        Runtime::Glommio,
        Runtime::Monoio,
        Runtime::Minimal(IoMode::Epoll),
        Runtime::Minimal(IoMode::UringPoll),
        Runtime::Minimal(IoMode::Uring),
        Runtime::Minimal(IoMode::Hybrid),
    ];

    /// The binary serving the greeter on this runtime.
    pub fn binary(self) -> &'static str {
        match self {
            Runtime::Tokio => "greeter-tokio",
            Runtime::TokioPerCore => "greeter-tokio-pc",
            Runtime::Smol => "greeter-smol",
            Runtime::AsyncStd => "greeter-async-std",
            Runtime::Glommio => "greeter-glommio",
            Runtime::Monoio => "greeter-monoio",
            Runtime::Minimal(_) => "greeter-minimal",
        }
    }

    /// What the runtime needs from io_uring, if it runs on io_uring.
    pub fn uring(self) -> Option<&'static Requirements> {
        match self {
            Runtime::Glommio => Some(&uring::GLOMMIO),
            Runtime::Monoio => Some(&uring::MONOIO),
            Runtime::Minimal(mode) if mode.uses_io_uring() => Some(&uring::MINIMAL),
            _ => None,
        }
    }

    /// Whether the threads share one listener or each have their own.
    pub fn listeners(self) -> Listeners {
        match self {
            Runtime::Tokio | Runtime::Smol | Runtime::AsyncStd => Listeners::Shared,
            Runtime::TokioPerCore | Runtime::Glommio | Runtime::Monoio | Runtime::Minimal(_) => {
                Listeners::PerThread
            }
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Runtime::Minimal(mode) => write!(f, "{} --io {mode}", self.binary()),
            _ => f.write_str(self.binary()),
        }
    }
}

/// What the threads of a running server report.
#[derive(Debug)]
pub enum Event {
    /// `SIGTERM` or `SIGINT` arrived (the signal number).
    Signal(i32),
    /// A thread ended; before a stop, that is a failure.
    Exited {
        /// The thread's name.
        thread: String,
        /// Its runtime's result.
        result: io::Result<()>,
    },
}

/// A runtime did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// io_uring refused the runtime's ring.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// The runtime failed to start for another reason.
    #[error("cannot start {runtime}")]
    Runtime {
        /// The runtime's name, e.g. `smol`.
        runtime: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A thread could not be spawned, or died while starting.
    #[error("cannot start thread {thread}")]
    Thread {
        /// The thread's name.
        thread: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The longest a thread may take to build its runtime.
const START_LIMIT: Duration = Duration::from_secs(30);

/// Starts `runtime` on `listeners` (one, or one per thread as [`Runtime::listeners`] says)
/// with `threads` threads. Returns the number of threads that report an [`Event::Exited`]
/// on `events` once they end after `stop` is cancelled.
pub fn start(
    runtime: Runtime,
    listeners: Vec<TcpListener>,
    threads: NonZeroUsize,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    match runtime {
        Runtime::Tokio => self::tokio::start_multi_thread(listeners, threads, stop, events),
        Runtime::TokioPerCore => self::tokio::start_per_core(listeners, stop, events),
        Runtime::Smol => self::smol::start(listeners, threads, stop, events),
        Runtime::AsyncStd => self::async_std::start(listeners, threads, stop, events),
        Runtime::Glommio => self::glommio::start(listeners, stop, events),
        Runtime::Monoio => self::monoio::start(listeners, stop, events),
        Runtime::Minimal(mode) => self::minimal::start(mode, listeners, stop, events),
    }
}

/// Spawns one thread per input, named `name-INDEX`. Each calls `build(index, input)` to set
/// up its runtime, then runs what `build` returned. Returns once every thread has built its
/// runtime, or with the first error.
fn spawn_threads<T, B, R>(
    name: &str,
    inputs: Vec<T>,
    events: &mpsc::Sender<Event>,
    build: B,
) -> Result<usize, StartError>
where
    T: Send + 'static,
    B: Fn(usize, T) -> Result<R, StartError> + Send + Sync + 'static,
    R: FnOnce() -> io::Result<()>,
{
    let build = Arc::new(build);
    let count = inputs.len();
    let (ready_tx, ready) = mpsc::channel::<Result<(), StartError>>();
    for (index, input) in inputs.into_iter().enumerate() {
        let thread = format!("{name}-{index}");
        let (build, ready_tx, events) = (Arc::clone(&build), ready_tx.clone(), events.clone());
        let spawned = thread::Builder::new().name(thread.clone()).spawn({
            let thread = thread.clone();
            move || {
                let built =
                    catch_unwind(AssertUnwindSafe(|| build(index, input))).unwrap_or_else(|_| {
                        Err(StartError::Thread {
                            thread: thread.clone(),
                            source: io::Error::other("panicked while starting"),
                        })
                    });
                let run = match built {
                    Ok(run) => run,
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                drop(ready_tx);
                let result = catch_unwind(AssertUnwindSafe(run))
                    .unwrap_or_else(|_| Err(io::Error::other("panicked")));
                let _ = events.send(Event::Exited { thread, result });
            }
        });
        if let Err(source) = spawned {
            return Err(StartError::Thread { thread, source });
        }
    }
    drop(ready_tx);
    for _ in 0..count {
        match ready.recv_timeout(START_LIMIT) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                return Err(StartError::Thread {
                    thread: format!("{name}-*"),
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        "runtime did not start in time",
                    ),
                })
            }
        }
    }
    Ok(count)
}

/// The single listener of a [`Listeners::Shared`] runtime.
fn single(listeners: Vec<TcpListener>) -> TcpListener {
    let mut listeners = listeners.into_iter();
    let listener = listeners
        .next()
        .expect("a shared-listener runtime gets one listener");
    debug_assert!(listeners.next().is_none());
    listener
}

/// The CPUs this thread may run on (`sched_getaffinity`), in order.
fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain old data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let status = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    if cpus.is_empty() {
        return Err(io::Error::other("no CPU in this process's affinity mask"));
    }
    Ok(cpus)
}

/// Pins the calling thread to `cpu` (`sched_setaffinity`).
fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` comes from `allowed_cpus`, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
