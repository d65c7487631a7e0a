//! A tokio runtime owned by the server for work kept off the actix workers (gRPC clients,
//! the blocking pool), shut down without waiting when the server stops.

use std::io;

use tokio::runtime::{Builder, Handle, Runtime};

/// A multi-threaded runtime that may be dropped from inside another runtime.
#[derive(Debug)]
pub(crate) struct Background(Option<Runtime>);

impl Background {
    /// Builds a runtime whose threads are named `name`, after `configure` has set its sizes.
    pub(crate) fn new(
        name: &'static str,
        configure: impl FnOnce(&mut Builder) -> &mut Builder,
    ) -> io::Result<Self> {
        let mut builder = Builder::new_multi_thread();
        builder.thread_name(name);
        configure(&mut builder)
            .build()
            .map(|runtime| Background(Some(runtime)))
    }

    pub(crate) fn handle(&self) -> &Handle {
        // The runtime is only taken out in `drop`.
        self.0
            .as_ref()
            .expect("background runtime is running")
            .handle()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // A plain drop would block on its tasks and panics inside an async context.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}
