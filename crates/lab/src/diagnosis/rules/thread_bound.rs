//! `thread_bound`: one thread of the target was on a CPU all the time while the process
//! used only part of the CPUs it may run on: a single event loop (Node.js, a one-worker
//! async server), an interpreter lock (CPython's GIL), or a lock every request takes. The
//! process's CPU figure alone reads "half the CPUs idle".

use super::{Check, Rule};
use crate::diagnosis::{num, pct, Bottleneck, Evidence, Finding, CPU_BOUND, STARVED};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::ThreadBound,
    needs: "the target's busiest thread (each thread's time on a CPU and waiting for one, from `/proc/PID/task/TID/schedstat`, between samples) ran or waited to run at least 90 % of the time on average through the step (or ran at least 80 % of it doing at least 90 % of its process's CPU work: a step's edges and the sampling dilute a saturated loop's figure), while the process used less than 90 % of the CPUs it may run on (more than one), both read against the time a VM's host left the machine (`/proc/stat`'s steal, which no thread's CPU time counts); the step failed on latency, throughput or errors",
    says: "\"its busiest thread (`node`) used 97 % of one CPU while the process used 51 % of its 2 CPUs\": one thread is the limit (an event loop, an interpreter lock, a lock every request takes)",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let (Some(cpu), Some(p)) = (&e.cpu, e.probes()) else {
        return Check::NoEvidence("the target's CPU (not probed)".into());
    };
    let Some(used) = p.delta.busiest_thread_cpu else {
        return Check::NoEvidence("the target's threads (not probed)".into());
    };
    let waited = p.delta.busiest_thread_wait.unwrap_or(0.0);
    let name = p.delta.busiest_thread.as_deref().unwrap_or("?");
    let starved = used < CPU_BOUND && waited >= STARVED;
    let steal = e.steal_share();
    let stolen = if steal >= 0.01 {
        format!(
            " ({} of what the host left it: a VM's host took {} of the time this machine's CPUs wanted to run, which no thread's CPU time counts)",
            pct((used / (1.0 - steal)).min(1.0)),
            pct(steal)
        )
    } else {
        String::new()
    };
    let words = format!(
        "its busiest thread (`{name}`) used {} of one CPU{stolen}{} while the process used {} of its {}",
        pct(used),
        if starved {
            format!(" and waited {} of the time for one", pct(waited))
        } else {
            String::new()
        },
        pct(cpu.util()),
        cpu.cpus_words()
    );
    // What the thread wanted (its CPU, or waited for it behind other threads: a thread that
    // could run all the time is the limit even when it shares its CPU), as every rule reads it.
    if e.busy_thread().is_none()
        || cpu.cpus < 1.5
        || cpu.util() >= CPU_BOUND
        || !e.failed_on_the_server()
    {
        return Check::RuledOut(words);
    }
    Check::Fired(
        Finding::new(
            Bottleneck::ThreadBound,
            format!(
                "{words} at {}: one thread is the limit (an event loop, an interpreter lock, or a \
                 lock every request takes), not the {} CPUs{}",
                e.load_words(),
                num(cpu.cpus),
                if starved {
                    "; it shared its CPU with other processes"
                } else {
                    ""
                }
            ),
            "run more event loops or worker processes (cluster mode, more workers), or move work \
             off that thread",
            &[
                ("busiest_thread_cpu", used),
                ("busiest_thread_wait", waited),
                ("utilization", cpu.util()),
                ("cpus", cpu.cpus),
                // The share of the CPUs' time the host took, which none of the above counts.
                ("steal_share", steal),
            ][..if steal >= 0.01 { 5 } else { 4 }],
        )
        .at(e.latency_onset()),
    )
}
