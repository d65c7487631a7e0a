//! Integration tests of the scenario server, split by topic, sharing one harness (`util`).
//! One test binary, so the heavy dependencies are linked once.

mod util;

mod actor;
mod basics;
mod blocking;
mod cli;
mod flow;
mod grpc;
