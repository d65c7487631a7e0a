//! `host_steal`: a VM's host took a large share of the time the target machine's CPUs
//! wanted to run, while the target wanted its CPU. The server was slower than it is on a
//! quiet host, by an amount no figure of its own shows (a thread's CPU time counts none of
//! the stolen time), so the knee measured at this moment is the machine's as much as the
//! server's. A target that wanted little CPU (a pool of sleeping workers) was not held back
//! by it, however large the share. Listed after the server's findings; alone, in place of
//! `unknown`, when none fired.

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding, CPU_LOW, HOST_STEAL};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::HostSteal,
    needs: "a VM's host took at least 20 % of the time the target machine's CPUs wanted to run through the step (`/proc/stat`'s steal against busy plus steal, read by the probes), while the target wanted at least 50 % of its CPUs, or its busiest thread of one CPU (used, read against what the host left, plus waited for); listed after the server's findings, alone when none fired",
    says: "\"a VM's host took 46 % of the time this machine's CPUs wanted to run, while the target wanted 85 % of its CPU time\": the server ran slower than on a quiet host, by an amount none of its own figures show; re-run when the host is quieter, or read the knee as this machine's at this moment",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(p) = e.probes() else {
        return Check::NoEvidence("the machine's steal time (not probed)".into());
    };
    let Some(steal) = p.delta.steal_share.filter(|s| s.is_finite()) else {
        return Check::NoEvidence("the machine's steal time (`/proc/stat` not read)".into());
    };
    let took = format!(
        "a VM's host took {} of the time this machine's CPUs wanted to run",
        pct(steal)
    );
    if steal < HOST_STEAL {
        return Check::RuledOut(format!("{took} (below {})", pct(HOST_STEAL)));
    }
    // What the target wanted of the CPU time it could use: its CPUs, or its busiest
    // thread's one CPU, each used (against what the host left) plus waited for.
    let left = 1.0 - e.steal_share();
    let cpus = e
        .cpu
        .as_ref()
        .map(|c| ((c.used / left + c.wait) / c.cpus).min(1.0));
    let thread = e.busiest_thread().map(|(u, w)| (u + w).min(1.0));
    let Some(wanted) = cpus.into_iter().chain(thread).reduce(f64::max) else {
        return Check::NoEvidence("the target's CPU (not probed)".into());
    };
    if wanted < CPU_LOW {
        return Check::RuledOut(format!(
            "{took}, but the target wanted {} of its CPU time (below {}): not what held it back",
            pct(wanted),
            pct(CPU_LOW)
        ));
    }
    Check::Fired(Finding::new(
        Bottleneck::HostSteal,
        format!(
            "{took} at {}, while the target wanted {} of its CPU time: the server ran slower \
             than on a quiet host, by an amount none of its own figures show, so this step's \
             limit is the machine's at this moment as much as the server's",
            e.load_words(),
            pct(wanted)
        ),
        "re-run when the host is quieter (`loadlab doctor` reads the steal), or on a machine \
         whose CPUs are its own; compare knees only between runs the host left alike",
        &[("steal_share", steal), ("target_cpu_wanted", wanted)],
    ))
}
