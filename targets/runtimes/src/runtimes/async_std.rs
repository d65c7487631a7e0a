//! h2 on async-std: its global executor with `--threads` threads; one thread accepts
//! (`block_on`) from the shared listener and spawns a task per connection.

use std::net::TcpListener;
use std::num::NonZeroUsize;
use std::sync::mpsc;

use ::async_std::{net, task};
use async_global_executor::GlobalExecutorConfig;
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{single, spawn_threads, Event, StartError};
use crate::connection;

/// async-global-executor prefers a thread count from an environment variable over the
/// configured one. Pointing it at this variable, which nothing sets, makes `--threads`
/// win over `ASYNC_GLOBAL_EXECUTOR_THREADS` and `ASYNC_STD_THREAD_COUNT`.
const THREADS_VARIABLE: &str = "LOADLAB_GREETERS_NO_THREAD_OVERRIDE";

pub(super) fn start(
    listeners: Vec<TcpListener>,
    threads: NonZeroUsize,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    // Must precede async-std's first use, which would configure the executor itself.
    async_global_executor::init_with_config(
        GlobalExecutorConfig::default()
            .with_env_var(THREADS_VARIABLE)
            .with_min_threads(threads.get())
            .with_max_threads(threads.get())
            .with_thread_name_fn(|| "greeter-async-std-worker".to_owned()),
    );
    let listener = net::TcpListener::from(single(listeners));
    spawn_threads(
        "greeter-async-std",
        vec![listener],
        events,
        move |_, listener| {
            let stop = stop.clone();
            Ok(move || {
                task::block_on(accept(listener, stop));
                Ok(())
            })
        },
    )
}

async fn accept(listener: net::TcpListener, stop: CancellationToken) {
    let tasks = TaskTracker::new();
    // Accept errors (EMFILE, ECONNABORTED) skip the connection, as tonic does.
    while let Some(accepted) = stop.run_until_cancelled(listener.accept()).await {
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let serve = connection::serve(stream.compat(), stop.clone());
        task::spawn(tasks.track_future(async move {
            let _ = serve.await;
        }));
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
}
