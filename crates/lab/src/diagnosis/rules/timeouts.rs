//! `timeouts`: requests timed out with the CPU to spare (the target's demand low, or its
//! CPUs idle): they waited for a pool or a downstream, not for the CPU (document 003's
//! case). A JVM
//! whose two dispatcher threads are the pool uses half of its core for its own threads (the
//! JIT, the collector, the HTTP layer) while that core idles the other half: its demand is
//! not low, but its CPUs had room.

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{num, pct, waits, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Timeouts,
    needs:
        "request or connect timeouts with the CPU to spare: the target's CPU demand (used, plus waited for while other processes kept its CPUs busy) below 50 %, or its CPUs idle at least 25 % of the time the timed-out requests waited (a timeout before the first second with a timeout to the end of the last, from `/proc/stat`'s lines of its CPUs; not read under a cgroup quota) with no thread of it busy (ran or waited to run 90 % of the time, or ran 80 % of it doing 90 % of the process's work); document 003's case",
    says: "the timeout count and the CPU figure: requests waited for a pool or a downstream; what the target's threads waited on, and the downstream, lock or disk that held most of them",
    check,
};

/// What [`Evidence::timeouts_idle`] is a share of.
const WAITED: &str = "the time the timed-out requests waited";

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let timeouts = r
        .errors
        .sum_of(&[ErrorClass::RequestTimeout, ErrorClass::ConnectTimeout]);
    if timeouts == 0 {
        return Check::RuledOut("no request timed out".into());
    }
    let Some(cpu) = &e.cpu else {
        return Check::NoEvidence("the target's CPU (not probed)".into());
    };
    let idle = e.timeouts_idle();
    if !e.cpu_low() && e.room(idle).is_none() {
        return Check::RuledOut(format!(
            "{timeouts} timeouts, but {}",
            e.not_spare_words(idle, WAITED)
        ));
    }
    let mut figures = vec![
        ("timeouts", timeouts as f64),
        ("utilization", cpu.util()),
        ("demand", cpu.demand()),
    ];
    if let Some(idle) = idle {
        figures.push(("cpus_idle", idle));
    }
    let waits = waits::typical(e);
    let held = waits.as_ref().and_then(waits::held);
    if let Some(h) = &held {
        figures.push(waits::figure(h));
    }
    Check::Fired(
        Finding::new(
            Bottleneck::Timeouts,
            format!(
                "{timeouts} {sent} timed out (after {} ms) while the target used {} of its CPUs{}: \
                 {sent} waited for a pool or a downstream, not for the CPU{}",
                num(r.timeout_ms),
                pct(cpu.util()),
                e.room_words(idle, WAITED),
                waits
                    .as_ref()
                    .map_or(String::new(), |w| format!("; {}", waits::words(w))),
                sent = r.protocol.units().sent,
            ),
            held.as_ref()
                .map_or(
                    "find the pool they wait for (threads, actors, connections to a backend) and \
                 size it to rate × service time"
                        .to_string(),
                    waits::advice,
                )
                .as_str(),
            &figures,
        )
        .at(e.first_error_second()),
    )
}
