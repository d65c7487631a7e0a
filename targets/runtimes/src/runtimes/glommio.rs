//! h2 on glommio (io_uring, thread-per-core): one executor per thread, pinned to one of the
//! CPUs this process may use, accepting from its own `SO_REUSEPORT` listener and serving its
//! connections itself.

use std::io;
use std::net::TcpListener;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::mpsc;

use ::glommio::{GlommioError, LocalExecutorBuilder, Placement, ReactorErrorKind};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{spawn_threads, Event, StartError};
use crate::connection;
use crate::uring::{self, Host, Unavailable};

pub(super) fn start(
    listeners: Vec<TcpListener>,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    let cpus = super::allowed_cpus().map_err(|source| StartError::Runtime {
        runtime: "glommio",
        source,
    })?;
    spawn_threads(
        "greeter-glommio",
        listeners,
        events,
        move |index, listener| {
            let executor = LocalExecutorBuilder::new(Placement::Fixed(cpus[index % cpus.len()]))
                .name("greeter-glommio")
                .make()
                .map_err(start_error)?;
            let stop = stop.clone();
            Ok(move || {
                executor.run(accept(listener, stop));
                Ok(())
            })
        },
    )
}

async fn accept(listener: TcpListener, stop: CancellationToken) {
    // SAFETY: the descriptor comes from a bound, listening socket that we own.
    let listener = unsafe { ::glommio::net::TcpListener::from_raw_fd(listener.into_raw_fd()) };
    let tasks = TaskTracker::new();
    // Accept errors (EMFILE, ECONNABORTED) skip the connection, as tonic does.
    while let Some(accepted) = stop.run_until_cancelled(listener.accept()).await {
        let Ok(stream) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let serve = connection::serve(stream.compat(), stop.clone());
        ::glommio::spawn_local(tasks.track_future(async move {
            let _ = serve.await;
        }))
        .detach();
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
}

/// Sorts a glommio start failure into "io_uring unavailable" and other errors.
fn start_error(error: GlommioError<()>) -> StartError {
    let host = Host::current();
    match error {
        GlommioError::ReactorError(ReactorErrorKind::MemLockLimit(limit, needed)) => {
            Unavailable::MemlockTooLow {
                runtime: uring::GLOMMIO.runtime,
                limit_kib: limit / 1024,
                need: format!("at least {} KiB", needed / 1024),
            }
            .into()
        }
        GlommioError::IoError(source) | GlommioError::EnhancedIoError { source, .. }
            if uring::is_refusal(&source) =>
        {
            uring::classify(&uring::GLOMMIO, &host, &source).into()
        }
        other => StartError::Runtime {
            runtime: "glommio",
            source: io::Error::other(other.to_string()),
        },
    }
}
