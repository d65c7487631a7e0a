//! `SIGTERM` and `SIGINT`, one way for every server: a [`signal_hook`] iterator on a thread
//! of its own, which works under any async runtime or none. [`on_stop_signals`] passes each
//! signal on; [`shutdown_signal`] is the future a binary passes to its server's `run`.

use std::future::Future;
use std::io;
use std::thread;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// The signals that stop a server.
pub const STOP_SIGNALS: [i32; 2] = [SIGTERM, SIGINT];

/// The thread started by [`on_stop_signals`].
#[derive(Debug)]
pub struct SignalThread {
    handle: Handle,
}

impl SignalThread {
    /// Ends the thread. The handlers stay installed: later signals are ignored.
    pub fn close(&self) {
        self.handle.close();
    }
}

/// Registers handlers for [`STOP_SIGNALS`] now, then calls `each` with every one that
/// arrives, from a thread named `name`, until `each` returns `false` or the thread is
/// [closed](SignalThread::close). Registering before the ready line means a signal sent
/// right after it is not lost.
pub fn on_stop_signals(
    name: &str,
    mut each: impl FnMut(i32) -> bool + Send + 'static,
) -> io::Result<SignalThread> {
    let mut signals = Signals::new(STOP_SIGNALS)?;
    let handle = signals.handle();
    thread::Builder::new().name(name.into()).spawn(move || {
        for signal in signals.forever() {
            if !each(signal) {
                break;
            }
        }
    })?;
    Ok(SignalThread { handle })
}

/// Registers handlers for `SIGTERM` and `SIGINT` and returns a future that resolves when
/// either arrives (later ones are ignored). Registering early means a signal sent right after
/// the ready line is not lost. Needs no runtime to be called; the future runs on any.
pub fn shutdown_signal() -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let (arrived, wait) = tokio::sync::oneshot::channel();
    let mut arrived = Some(arrived);
    on_stop_signals("shutdown-signal", move |_| {
        if let Some(arrived) = arrived.take() {
            // The server may be gone already; nothing to tell then.
            let _ = arrived.send(());
        }
        true
    })?;
    Ok(async move {
        // Only a panic on the signal thread drops the sender: then no signal can end the wait.
        if wait.await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn sigterm_resolves_the_shutdown_future() {
        let shutdown = shutdown_signal().unwrap();
        signal_hook::low_level::raise(SIGTERM).unwrap();
        tokio::time::timeout(Duration::from_secs(10), shutdown)
            .await
            .expect("SIGTERM did not resolve the shutdown future");
    }
}
