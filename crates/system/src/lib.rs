//! loadlab's view of the machine around a run: what it watches while it loads a server,
//! and what it checks before it starts.
//!
//! # Layout
//! - [`probe`]: samples the server's process tree (CPU, memory, threads, file descriptors)
//!   and the kernel's TCP counters (listen-queue overflows, resets, TIME_WAIT) on a
//!   thread of its own while a step runs; [`probe::Prober`] returns the samples and their
//!   first-to-last [`probe::ProbeDelta`].
//! - [`doctor`]: the pre-flight check. It compares a plan's [`doctor::Demand`] with the
//!   machine's [`doctor::Facts`] (limits, backlog caps, ephemeral ports, TIME_WAIT) and
//!   says which runs will fail because of the machine, not the server, and how to fix it.
//!
//! Everything is read from `/proc` of the current process and network namespace; the
//! kernel facts themselves (sysctls, `nofile`, port budget) come from
//! [`loadlab_engine::env`]. Linux only.
#![deny(missing_docs)]

pub mod doctor;
pub mod probe;
mod procfs;

pub use doctor::{diagnose, Demand, Facts, Finding, Severity};
pub use probe::{
    sample_kernel, sample_tree, KernelSample, ProbeDelta, ProbeReport, ProbeSecond, Prober,
    ProcessSample,
};
