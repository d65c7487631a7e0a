//! h2 on smol: one `smol::Executor` run by `--threads` threads; one task accepts from the
//! shared listener and spawns a task per connection onto the executor.

use std::net::TcpListener;
use std::num::NonZeroUsize;
use std::sync::{mpsc, Arc};

use ::smol::{net, Executor};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{single, spawn_threads, Event, StartError};
use crate::connection;

pub(super) fn start(
    listeners: Vec<TcpListener>,
    threads: NonZeroUsize,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    let listener =
        net::TcpListener::try_from(single(listeners)).map_err(|source| StartError::Runtime {
            runtime: "smol",
            source,
        })?;
    let executor = Arc::new(Executor::new());
    let tasks = TaskTracker::new();
    executor
        .spawn(tasks.track_future(accept(
            Arc::clone(&executor),
            listener,
            stop.clone(),
            tasks.clone(),
        )))
        .detach();
    let inputs = vec![(); threads.get()];
    spawn_threads("greeter-smol", inputs, events, move |_, ()| {
        let (executor, tasks, stop) = (Arc::clone(&executor), tasks.clone(), stop.clone());
        Ok(move || {
            // Run tasks until stopped and every connection has finished.
            ::smol::block_on(executor.run(async move {
                stop.cancelled().await;
                tasks.close();
                tasks.wait().await;
            }));
            Ok(())
        })
    })
}

async fn accept(
    executor: Arc<Executor<'static>>,
    listener: net::TcpListener,
    stop: CancellationToken,
    tasks: TaskTracker,
) {
    // Accept errors (EMFILE, ECONNABORTED) skip the connection, as tonic does.
    while let Some(accepted) = stop.run_until_cancelled(listener.accept()).await {
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let serve = connection::serve(stream.compat(), stop.clone());
        executor
            .spawn(tasks.track_future(async move {
                let _ = serve.await;
            }))
            .detach();
    }
}
