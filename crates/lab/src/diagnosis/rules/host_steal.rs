//! `host_steal`: a VM's host took a large share of the time the target machine's CPUs
//! wanted to run. The server was slower than it is on a quiet host, by an amount no figure
//! of its own shows (a thread's CPU time counts none of the stolen time), so the knee
//! measured at this moment is the machine's as much as the server's. Listed after the
//! server's findings; alone, in place of `unknown`, when none fired.

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding, HOST_STEAL};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::HostSteal,
    needs: "a VM's host took at least 20 % of the time the target machine's CPUs wanted to run through the step (`/proc/stat`'s steal against busy plus steal, read by the probes); listed after the server's findings, alone when none fired",
    says: "\"a VM's host took 46 % of the time this machine's CPUs wanted to run\": the server ran slower than on a quiet host, by an amount none of its own figures show; re-run when the host is quieter, or read the knee as this machine's at this moment",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(p) = e.probes() else {
        return Check::NoEvidence("the machine's steal time (not probed)".into());
    };
    let Some(steal) = p.delta.steal_share.filter(|s| s.is_finite()) else {
        return Check::NoEvidence("the machine's steal time (`/proc/stat` not read)".into());
    };
    if steal < HOST_STEAL {
        return Check::RuledOut(format!(
            "a VM's host took {} of the time the CPUs wanted to run (below {})",
            pct(steal),
            pct(HOST_STEAL)
        ));
    }
    Check::Fired(Finding::new(
        Bottleneck::HostSteal,
        format!(
            "a VM's host took {} of the time this machine's CPUs wanted to run at {}: the \
             server ran slower than on a quiet host, by an amount none of its own figures show, \
             so this step's limit is the machine's at this moment as much as the server's",
            pct(steal),
            e.load_words()
        ),
        "re-run when the host is quieter (`loadlab doctor` reads the steal), or on a machine \
         whose CPUs are its own; compare knees only between runs the host left alike",
        &[("steal_share", steal)],
    ))
}
