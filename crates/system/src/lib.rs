//! loadlab's view of the machine around a run: the kernel facts every other crate reads,
//! what it watches while it loads a server, and what it checks before it starts. It sits
//! below the engine: `loadlab-engine` and `loadlab-lab` take their machine facts from here.
//!
//! # Layout
//! - [`procfs`]: the `/proc` files of processes and of the kernel, parsed in one place
//!   (sysctls, the CPU model, processes, the kernel's TCP counters of a network namespace,
//!   the TIME_WAIT count).
//! - [`cgroup`]: control groups, v2 and v1, parsed in one place: the mounts
//!   (`/proc/self/mountinfo`), a process's cgroup (`/proc/PID/cgroup`), a cgroup by path
//!   or a container's by its ID or name, and its limits (CPU quota, memory, processes) and
//!   counters (CPU, throttling, memory, OOM kills, processes, pressure stalls) under
//!   `/sys/fs/cgroup`.
//! - [`discover`]: finds the process to probe when loadlab did not start it: the tree
//!   listening on a port (`/proc/net/tcp{,6}` and `/proc/*/fd`), or a pid file.
//! - [`sockdiag`]: the kernel's socket diagnostics (what `ss` reads): each listening
//!   socket's accept queue, backlog and drops, a listener's own where the kernel's
//!   overflow counters are the whole network namespace's.
//! - [`net`]: a host name with several addresses (`localhost` as `::1` and
//!   `127.0.0.1`): connect to the one that listens.
//! - [`os`]: every operating-system call outside the standard library (limits, CPU
//!   affinity, the scheduler slice, CPU use, `timerfd`, process groups and signals), on
//!   `rustix` where it offers the call.
//! - [`ports`]: the one model of what connections cost: file descriptors (`nofile`) and
//!   local ports held in TIME_WAIT, for the run's pre-flight, the lab and the doctor.
//! - [`probe`]: samples a [`probe::ProbeSource`] on a thread of its own while a step runs:
//!   the server's processes (CPU, memory, threads, file descriptors), the kernel's TCP
//!   counters of its network namespace (listen-queue overflows, resets, TIME_WAIT) and its
//!   cgroup; the source is a process tree ([`probe::ProcessSource`]: started by loadlab,
//!   a pid, a pid file, a port's listener) or a cgroup ([`probe::CgroupSource`]: a path,
//!   a container). [`probe::Prober`] returns the samples and their first-to-last
//!   [`probe::ProbeDelta`].
//! - [`doctor`]: the pre-flight check. It compares a plan's [`doctor::Demand`] with the
//!   machine's [`doctor::Facts`] (limits, backlog caps, ephemeral ports, TIME_WAIT) and
//!   says which runs will fail because of the machine, not the server, and how to fix it.
//!
//! Processes are those of the current PID namespace; kernel counters are of this network
//! namespace or, for a probed target, of the target's own. Linux only.
#![deny(missing_docs)]

pub mod cgroup;
pub mod discover;
pub mod doctor;
pub mod net;
pub mod os;
pub mod ports;
pub mod probe;
pub mod procfs;
pub mod sockdiag;

pub use cgroup::{Cgroup, CgroupFs, CgroupLimits, CgroupSample};
pub use doctor::{diagnose, Demand, Facts, Finding, Severity};
pub use probe::{
    sample_kernel, sample_kernel_of, sample_tree, CgroupDelta, CgroupSource, KernelSample,
    ProbeDelta, ProbeInfo, ProbeReport, ProbeSecond, ProbeSource, Prober, ProcessSample,
    ProcessSource,
};
