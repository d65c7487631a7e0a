//! Distributed load for loadlab: many machines drive one step as if they were one.
//!
//! - An **agent** ([`agent::run_agent`], `loadlab agent`) dials out to the coordinator and
//!   never listens. It runs the steps it is given with the same engine as `loadlab run`,
//!   streams each second as it finishes and returns the step's full, unsummarized
//!   [`Measurement`](loadlab_engine::Measurement).
//! - The **coordinator** ([`coordinator::Coordinator`], inside `loadlab run --agents N` and
//!   `loadlab lab --agents N`) waits for its agents, measures each one's clock offset at
//!   join, splits every step ([`split`]), sends one start instant, and merges the agents'
//!   measurements exactly ([`merge`]): histograms added, seconds aligned by wall clock, then
//!   summarized and judged once, as a local run is.
//! - A **remote probe** ([`probe::run_probe`], `loadlab probe`) runs on the server's host,
//!   dials the coordinator as an agent does, and streams a sample of the server's process
//!   tree, TCP counters and cgroup every second; the coordinator hands them to the lab's
//!   probes ([`Coordinator::probe_source`]). One per run; with no agents, the coordinator
//!   only waits for the probe and the load runs on its own machine.
//!
//! The control channel is gRPC (tonic) carrying JSON messages ([`proto`]); the shared token
//! travels in metadata and is compared in constant time; TLS is used when the coordinator
//! has a certificate. Placing, starting and restarting agents is left to whatever runs them
//! (Kubernetes, in `deploy/kubernetes/`).

pub mod agent;
pub mod clock;
pub mod coordinator;
pub mod merge;
pub mod probe;
pub mod proto;
pub mod split;

pub use agent::{run_agent, AgentError, AgentOptions};
pub use coordinator::{Coordinator, CoordinatorOptions, FleetError, OnAgentLoss};
pub use probe::{run_probe, ProbeError, ProbeOptions};

/// The version an agent or probe and its coordinator must share: the crate version and the
/// control protocol's revision.
pub fn version() -> String {
    format!(
        "{} (fleet protocol {})",
        env!("CARGO_PKG_VERSION"),
        proto::PROTOCOL
    )
}
