//! `memory_limit`: the target's cgroup reached its memory limit: the kernel reclaimed its
//! pages under pressure, or killed its processes (OOM).

use super::{Check, Rule};
use crate::diagnosis::{num, pct, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::MemoryLimit,
    needs: "the target's cgroup has a memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) and during the step the OOM killer killed in it (`memory.events` `oom_kill`, v1 `memory.oom_control`), or usage hit the limit (`memory.events` `max`, v1 `memory.failcnt`), or its peak reached 95 % of the limit",
    says: "the peak against the limit, the OOM kills and the times the limit was hit, and the memory pressure (PSI) when the kernel has it",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(c) = e.cgroup() else {
        return Check::NoEvidence("the target's cgroup (not probed)".into());
    };
    let Some(limit) = c.memory_limit_bytes else {
        return Check::RuledOut("the target's cgroup has no memory limit".into());
    };
    let mb = |b: u64| num(b as f64 / 1048576.0);
    let peak = c.memory_peak_bytes.unwrap_or(0);
    let kills = c.oom_kills.unwrap_or(0);
    let hits = c.memory_max_events.unwrap_or(0);
    let near = peak as f64 >= 0.95 * limit as f64;
    let words = format!(
        "memory peaked at {} of its {} MB limit ({} MB), {kills} OOM kills, the limit hit {hits} times",
        pct(peak as f64 / limit.max(1) as f64),
        mb(limit),
        mb(peak)
    );
    if kills == 0 && hits == 0 && !near {
        return Check::RuledOut(words);
    }
    let psi = c.psi_memory_some_percent.map_or(String::new(), |p| {
        format!(
            "; its tasks stalled on memory {} of the time",
            pct(p / 100.0)
        )
    });
    Check::Fired(Finding::new(
        Bottleneck::MemoryLimit,
        format!(
            "the target's cgroup {words}{psi}: {}",
            if kills > 0 {
                "the kernel killed its processes for want of memory"
            } else {
                "it ran at its memory limit, the kernel reclaiming its pages"
            }
        ),
        "raise the memory limit (Kubernetes resources.limits.memory, docker --memory, \
         MemoryMax=), or bound what the server holds per request (queues, caches, buffers)",
        &[
            ("memory_peak_bytes", peak as f64),
            ("memory_limit_bytes", limit as f64),
            ("oom_kills", kills as f64),
            ("memory_max_events", hits as f64),
        ],
    ))
}
