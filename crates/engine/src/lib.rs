//! loadlab's load engine, with no CLI dependencies.
//!
//! # Layout
//! - [`config`]: a [`Workload`] (flags, a plan scenario, or the wire) validated into a
//!   [`RunConfig`].
//! - [`schedule`]: open-loop arrival schedules split across workers.
//! - [`replay`]: a timed replay: a log's arrivals read ahead by one thread, handed to the
//!   workers in turn, and how closely the sends followed them.
//! - [`transport`]: the seam between the request loop and the protocols, one folder each:
//!   [`transport::http1`] (with [`conn`]: plain TCP or TLS), [`transport::http2`] (h2c or
//!   TLS with ALPN, plain requests and gRPC unary calls, streams multiplexed over shared
//!   connections), [`transport::ws`] (WebSocket messages, pings, server push),
//!   [`transport::sse`] (server-sent events), [`transport::uring`] (HTTP/1.1 over io_uring).
//! - [`traffic`]: requests that vary, compiled: templates, data rows, a list of named
//!   requests in proportion to their weights, and what each request draws.
//! - [`session`]: user sessions of a flow: steps in order with think times, extract rules
//!   and a cookie jar, on a connection of their own.
//! - [`worker`]: one single-threaded event loop per thread, one request loop for every
//!   load model.
//! - [`recorder`]: per-worker HdrHistograms and per-second interval reports.
//! - [`records`]: what a worker records that merges exactly (a request name's record, a
//!   flow's session totals) and the histograms' text in the result format.
//! - [`runner`]: starts the workers, collects seconds, merges totals once.
//! - `achieved` (private): achieved throughput from the merged totals, with the trend
//!   that says whether the server kept pace.
//! - [`stats`]: the latency trend and the resolution tests behind achieved throughput and
//!   verdicts.
//! - [`result`]: the JSON result (schema in `schema/run-result.schema.json`).
//! - [`summary`]: the text summary.
//! - [`env`](mod@env): the environment every result records (kernel facts, limits, ports and
//!   TIME_WAIT are read by `loadlab_system`).
//!
//! Latency is measured from each request's *intended* send time, so a stalled server is
//! charged for the requests it delayed (coordinated omission corrected); service time is
//! measured from the actual write.

// The modules' docs describe their internals for the people who work on them, linking the
// private items they are made of: read them with `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

mod achieved;
pub mod clock;
pub mod config;
pub mod conn;
pub mod env;
pub mod error;
pub mod export;
pub mod format;
mod idle;
pub mod recorder;
pub mod records;
pub mod replay;
pub mod result;
pub mod runner;
pub mod schedule;
pub mod session;
pub mod stats;
pub mod summary;
pub mod traffic;
pub mod transport;
pub mod worker;

pub use config::{
    Arrival, CloseBy, ConfigError, GrpcCall, LoadModel, Model, Protocol, RunConfig, Transport,
    Units, Workload,
};
pub use error::{EngineError, ErrorClass, ErrorCounts};
pub use result::{RunResult, RunShape, SecondStats};
pub use runner::{measure, run, summarize, Measurement, RunOptions};
pub use tokio_util::sync::CancellationToken;
