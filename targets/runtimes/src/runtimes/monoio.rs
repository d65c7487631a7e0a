//! h2 on monoio (io_uring driver, thread-per-core): one runtime per thread, accepting from
//! its own `SO_REUSEPORT` listener and serving its connections itself. Threads are not
//! pinned.

use std::net::TcpListener;
use std::sync::mpsc;

use ::monoio::{IoUringDriver, RuntimeBuilder};
use monoio_compat::TcpStreamCompat;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{spawn_threads, Event, StartError};
use crate::connection;
use crate::uring::{self, Host};

pub(super) fn start(
    listeners: Vec<TcpListener>,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    spawn_threads("greeter-monoio", listeners, events, move |_, listener| {
        let mut runtime = RuntimeBuilder::<IoUringDriver>::new()
            .build()
            .map_err(|source| {
                if uring::is_refusal(&source) {
                    uring::classify(&uring::MONOIO, &Host::current(), &source).into()
                } else {
                    StartError::Runtime {
                        runtime: "monoio",
                        source,
                    }
                }
            })?;
        let stop = stop.clone();
        Ok(move || runtime.block_on(accept(listener, stop)))
    })
}

async fn accept(listener: TcpListener, stop: CancellationToken) -> std::io::Result<()> {
    let listener = ::monoio::net::TcpListener::from_std(listener)?;
    let tasks = TaskTracker::new();
    // Accept errors (EMFILE, ECONNABORTED) skip the connection, as tonic does.
    while let Some(accepted) = stop.run_until_cancelled(listener.accept()).await {
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let serve = connection::serve(TcpStreamCompat::new(stream), stop.clone());
        ::monoio::spawn(tasks.track_future(async move {
            let _ = serve.await;
        }));
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
    Ok(())
}
