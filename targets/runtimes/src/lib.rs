//! The `helloworld.Greeter` of document 001 on every runtime it compares: tokio
//! (multi-threaded, and one current-thread runtime per core), smol, async-std, glommio,
//! monoio, and the document's own minimal thread-per-core runtime in its four I/O modes.
//! One service implementation, [`loadlab_target_common::greeter::reply`], served by thin
//! binaries (`greeter-tokio`, `greeter-tokio-pc`, `greeter-smol`, `greeter-async-std`,
//! `greeter-glommio`, `greeter-monoio`, `greeter-minimal --io MODE`).
//!
//! # Layout
//! - [`cli`]: the command line every greeter binary (and `loadlab serve greeter-*`) runs.
//! - [`grpc`]: gRPC message framing, response headers and status trailers; no I/O.
//! - [`connection`]: one HTTP/2 connection served with `h2` over any
//!   `tokio::io::AsyncRead + AsyncWrite`, for the runtimes tonic does not run on.
//! - [`listeners`]: one listener, or one `SO_REUSEPORT` listener per thread.
//! - [`uring`]: whether io_uring starts here and, if not, the cause and the fix.
//! - [`runtimes`]: the runtimes: listeners, threads, accept loops; `runtimes::minimal` is
//!   the minimal runtime itself (executor, epoll/io_uring reactor, socket types).
//! - [`launch`]: a process from probe to exit: bind, start, ready line, signals, grace.

pub mod cli;
pub mod connection;
pub mod grpc;
pub mod launch;
pub mod listeners;
pub mod runtimes;
pub mod uring;
