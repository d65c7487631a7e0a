//! tonic on tokio: one multi-threaded runtime, or one current-thread runtime per thread
//! with its own `SO_REUSEPORT` listener.

use std::io;
use std::net::TcpListener;
use std::num::NonZeroUsize;
use std::sync::mpsc;

use ::tokio::runtime::{Builder, Runtime};
use loadlab_target_common::greeter::{ChatService, GreeterService};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use super::{single, spawn_threads, Event, StartError};

/// One thread runs the accept loop (`block_on`) of a runtime with `threads` workers.
pub(super) fn start_multi_thread(
    listeners: Vec<TcpListener>,
    threads: NonZeroUsize,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    let listener = single(listeners);
    spawn_threads(
        "greeter-tokio",
        vec![listener],
        events,
        move |_, listener| {
            let runtime = Builder::new_multi_thread()
                .worker_threads(threads.get())
                .thread_name("greeter-tokio-worker")
                .enable_all()
                .build()
                .map_err(runtime_error)?;
            Ok(serve_on(runtime, listener, stop.clone()))
        },
    )
}

/// One thread per listener, each running its own current-thread runtime.
pub(super) fn start_per_core(
    listeners: Vec<TcpListener>,
    stop: CancellationToken,
    events: &mpsc::Sender<Event>,
) -> Result<usize, StartError> {
    spawn_threads("greeter-tokio-pc", listeners, events, move |_, listener| {
        let runtime = Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(runtime_error)?;
        Ok(serve_on(runtime, listener, stop.clone()))
    })
}

fn runtime_error(source: io::Error) -> StartError {
    StartError::Runtime {
        runtime: "tokio",
        source,
    }
}

/// Serves [`GreeterService`] and [`ChatService`] with tonic on `listener` until `stop`, then waits for the
/// open connections (the caller bounds that wait).
fn serve_on(
    runtime: Runtime,
    listener: TcpListener,
    stop: CancellationToken,
) -> impl FnOnce() -> io::Result<()> {
    move || {
        runtime.block_on(async move {
            let listener = ::tokio::net::TcpListener::from_std(listener)?;
            Server::builder()
                .add_service(GreeterService.into_server())
                .add_service(ChatService.into_server())
                .serve_with_incoming_shutdown(
                    TcpIncoming::from(listener).with_nodelay(Some(true)),
                    stop.cancelled_owned(),
                )
                .await
                .map_err(io::Error::other)
        })
    }
}
