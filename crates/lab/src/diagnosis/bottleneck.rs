//! [`Bottleneck`]: what limited a step, the names the bundle, the report and
//! `[tune.knobs] relieves` use. Below the rules and the plan, which both name them.

use serde::{Deserialize, Serialize};

/// What limited a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// loadlab fell behind.
    Generator,
    /// An agent of a distributed run was lost.
    AgentLost,
    /// A target exited.
    Crash,
    /// The target's CPUs were full.
    CpuBound,
    /// The target's cgroup CPU quota throttled it.
    CpuThrottled,
    /// One thread of the target was on a CPU all the time (an event loop, an interpreter
    /// lock) while its CPUs had room.
    ThreadBound,
    /// The target's threads waited on storage (an fsync, a read from disk).
    IoBound,
    /// A pool (workers, threads, connections) was full with the CPU to spare.
    ConcurrencyBound,
    /// The listen queue overflowed.
    AcceptQueue,
    /// Requests timed out with the CPU to spare (its demand low, or its CPUs idle).
    Timeouts,
    /// loadlab found no local port.
    ClientPorts,
    /// A side ran out of file descriptors.
    Descriptors,
    /// The target's memory grew through the step.
    MemoryGrowth,
    /// The target's cgroup reached its memory limit (reclaim, OOM kills).
    MemoryLimit,
    /// The target's cgroup reached its limit of processes and threads.
    PidsLimit,
    /// A proxy answered 502 or 504: its upstream broke or was too slow.
    Upstream,
    /// The server answered with 5xx statuses: it shed work.
    Refused,
    /// The server answered most requests with a 4xx status: the request is wrong.
    Rejected,
    /// Nothing listens at the address: every connection was refused.
    Unreachable,
    /// A VM's host took a large share of the machine's CPU time.
    HostSteal,
    /// The latency at the lowest load was already above the SLO's bound: no load meets it.
    LatencyFloor,
    /// No rule had its evidence.
    Unknown,
}

impl Bottleneck {
    /// Words for tables.
    pub fn label(self) -> &'static str {
        match self {
            Bottleneck::Generator => "generator-limited (not the server)",
            Bottleneck::AgentLost => "agent lost (not the server)",
            Bottleneck::Crash => "target crashed",
            Bottleneck::CpuBound => "CPU-bound",
            Bottleneck::CpuThrottled => "CPU quota (throttled)",
            Bottleneck::ThreadBound => "one thread CPU-bound",
            Bottleneck::IoBound => "I/O-bound (the disk)",
            Bottleneck::ConcurrencyBound => "concurrency-bound",
            Bottleneck::AcceptQueue => "accept queue",
            Bottleneck::Timeouts => "timeouts with the CPU to spare",
            Bottleneck::ClientPorts => "client ports",
            Bottleneck::Descriptors => "file descriptors",
            Bottleneck::MemoryGrowth => "memory growth",
            Bottleneck::MemoryLimit => "memory limit",
            Bottleneck::PidsLimit => "pids limit",
            Bottleneck::Upstream => "upstream (502, 504)",
            Bottleneck::Refused => "server refused (5xx)",
            Bottleneck::Rejected => "request rejected (4xx)",
            Bottleneck::Unreachable => "nothing listens at the address",
            Bottleneck::HostSteal => "the VM's host took the CPUs",
            Bottleneck::LatencyFloor => "latency floor above the SLO",
            Bottleneck::Unknown => "unknown",
        }
    }

    /// The name in the bundle (`concurrency_bound`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// What `[tune.knobs] X = { relieves = ... }` accepts, for errors.
    pub const RELIEF_WORDS: &'static str = "a bottleneck a knob can relieve: concurrency, cpu, \
        thread, accept_queue, timeouts, descriptors, memory, pids, disk, refused, or a diagnosis name \
        such as concurrency_bound or cpu_throttled";

    /// The bottlenecks a word of `relieves` names: `concurrency`, `cpu` (CPU-bound and
    /// throttled), `accept_queue` (also `backlog`, `listen_queue`), or any name in the
    /// bundle (`concurrency_bound`). `None` for a word that names none.
    pub fn from_relief(word: &str) -> Option<Vec<Bottleneck>> {
        use Bottleneck::{
            AcceptQueue, ConcurrencyBound, CpuBound, CpuThrottled, Crash, HostSteal, IoBound,
            LatencyFloor, MemoryGrowth, MemoryLimit, PidsLimit, Rejected, ThreadBound, Unknown,
            Unreachable,
        };
        let w = word.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        Some(match w.as_str() {
            "concurrency" | "pool" | "workers" => vec![ConcurrencyBound],
            "cpu" => vec![CpuBound, CpuThrottled],
            "thread" | "threads" | "event_loop" => vec![ThreadBound],
            "accept_queue" | "backlog" | "listen_queue" => vec![AcceptQueue],
            "memory" => vec![MemoryGrowth, MemoryLimit],
            "pids" => vec![PidsLimit],
            "disk" | "io" => vec![IoBound],
            other => {
                let b: Bottleneck =
                    serde_json::from_value(serde_json::Value::String(other.into())).ok()?;
                if b.not_the_server()
                    || matches!(
                        b,
                        Unknown | Unreachable | Rejected | Crash | HostSteal | LatencyFloor
                    )
                {
                    return None;
                }
                vec![b]
            }
        })
    }

    /// True for what is not the server's doing: loadlab fell behind, an agent was lost.
    pub fn not_the_server(self) -> bool {
        matches!(self, Bottleneck::Generator | Bottleneck::AgentLost)
    }

    /// Where a diagnosis lists the finding: what is not the server's doing and a crash
    /// first (0), then a limit reached (1: descriptors, the cgroup's processes or memory,
    /// its CPU quota), which caps the concurrency and causes the timeouts and refusals that
    /// show it, so it leads them whatever moved first; then the rest (2), in the order their
    /// signals moved.
    pub fn tier(self) -> u8 {
        match self {
            Bottleneck::Generator | Bottleneck::AgentLost | Bottleneck::Crash => 0,
            Bottleneck::Descriptors
            | Bottleneck::PidsLimit
            | Bottleneck::MemoryLimit
            | Bottleneck::CpuThrottled => 1,
            Bottleneck::CpuBound
            | Bottleneck::ThreadBound
            | Bottleneck::IoBound
            | Bottleneck::ConcurrencyBound
            | Bottleneck::AcceptQueue
            | Bottleneck::Timeouts
            | Bottleneck::ClientPorts
            | Bottleneck::MemoryGrowth
            | Bottleneck::Upstream
            | Bottleneck::Refused
            | Bottleneck::Rejected
            | Bottleneck::Unreachable
            | Bottleneck::HostSteal
            | Bottleneck::LatencyFloor
            | Bottleneck::Unknown => 2,
        }
    }
}
