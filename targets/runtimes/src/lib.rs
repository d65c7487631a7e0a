//! The `helloworld.Greeter` of document 001 on every runtime it compares: tokio
//! (multi-threaded, and one current-thread runtime per core), smol, async-std, glommio and
//! monoio. One service implementation, [`loadlab_target_common::greeter::reply`], served by
//! thin binaries (`greeter-tokio`, `greeter-tokio-pc`, `greeter-smol`,
//! `greeter-async-std`, `greeter-glommio`, `greeter-monoio`).
//!
//! # Layout
//! - [`cli`]: the command line every greeter binary (and `loadlab serve greeter-*`) runs.
//! - [`grpc`]: gRPC message framing, response headers and status trailers; no I/O.
//! - [`connection`]: one HTTP/2 connection served with `h2` over any
//!   `tokio::io::AsyncRead + AsyncWrite`, for the runtimes tonic does not run on.
//! - [`listeners`]: one listener, or one `SO_REUSEPORT` listener per thread.
//! - [`uring`]: whether io_uring starts here and, if not, the cause and the fix.
//! - [`runtimes`]: the six runtimes: listeners, threads, accept loops.
//! - [`launch`]: a process from probe to exit: bind, start, ready line, signals, grace.

pub mod cli;
pub mod connection;
pub mod grpc;
pub mod launch;
pub mod listeners;
pub mod runtimes;
pub mod uring;
