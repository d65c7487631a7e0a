//! Shared pieces of the loadlab reference servers.
//!
//! # Layout
//! - [`proto`]: Rust code generated from `proto/hello.proto` (`hello.HelloService`) and
//!   `proto/helloworld.proto` (`helloworld.Greeter`), compiled at build time without `protoc`.
//! - [`greeter`]: the `helloworld.Greeter` service, kept apart from any server so that the
//!   same implementation can be served by several async runtimes.
//! - [`net`]: binding a listener with an explicit backlog, the `--bind` syntax and the
//!   machine-readable ready line.
//! - [`signal`]: `SIGTERM` and `SIGINT` for every server and runtime: the shutdown future a
//!   binary passes to its server's `run`, or each signal passed to a callback.
//! - `testing` (feature `testing`): helpers for the servers' integration tests.

pub mod greeter;
pub mod net;
pub mod proto;
pub mod signal;
#[cfg(feature = "testing")]
pub mod testing;
