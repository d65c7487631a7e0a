//! loadlab's experiment runner.
//!
//! # Layout
//! - [`plan`]: the TOML plan, validated (every error names its field).
//! - [`template`]: `{placeholder}` rendering.
//! - [`matrix`]: configurations = product of parameter lists minus excludes.
//! - [`target`]: servers under test: process groups, readiness, stop, no orphans.
//! - [`build`]: targets' `build` commands, run once per plan before the first configuration.
//! - [`verdict`], [`knee`]: sustained or not, and the knee search.
//! - [`watch`]: what the probes watch: the targets, or a server loadlab did not start
//!   (pid, pid file, cgroup, container, listener, or `loadlab probe` on another host).
//! - [`experiment`]: runs a plan, step by step, with probes.
//! - [`bundle`]: the result directory, written as results arrive.
//! - [`doctor`]: what a plan asks of the machine, for the pre-flight checks.

// The modules' docs describe their internals for the people who work on them, linking the
// private items they are made of: read them with `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod build;
pub mod bundle;
pub mod diagnosis;
pub mod doctor;
pub mod experiment;
pub mod gate;
pub mod http_once;
pub mod junit;
pub mod knee;
pub mod matrix;
pub mod plan;
pub mod replay;
pub mod target;
pub mod template;
pub mod tune;
pub mod verdict;
pub mod watch;

pub use experiment::{run_plan, LabError, LabOptions, LabProgress, LabSummary, StepStart};
pub use plan::{Plan, PlanError};
