//! The shutdown future the binaries pass to their server's `run`.

use std::future::Future;
use std::io;

use tokio::signal::unix::{signal, SignalKind};

/// Registers handlers for `SIGTERM` and `SIGINT` and returns a future that resolves when
/// either arrives. Registering early means a signal sent right after the ready line is not
/// lost. Must be called inside a tokio runtime (actix-rt's counts).
pub fn shutdown_signal() -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
