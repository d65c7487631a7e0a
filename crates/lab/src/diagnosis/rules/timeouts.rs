//! `timeouts`: requests timed out while the target's CPU was low: they waited for a pool or
//! a downstream, not for the CPU (document 003's case).

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{num, pct, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Timeouts,
    needs:
        "request or connect timeouts with the target's CPU demand (used, plus waited for while other processes kept its CPUs busy) below 50 % (document 003's case)",
    says: "the timeout count and the CPU figure: requests waited for a pool or a downstream",
    check,
};

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
    if !e.cpu_low() {
        return Check::RuledOut(format!(
            "{timeouts} timeouts, with the target's CPU demand at {}",
            pct(cpu.demand())
        ));
    }
    Check::Fired(
        Finding::new(
            Bottleneck::Timeouts,
            format!(
                "{timeouts} requests timed out (after {} ms) while the target used {} of its CPUs: \
                 requests waited for a pool or a downstream, not for the CPU",
                num(r.timeout_ms),
                pct(cpu.util())
            ),
            "find the pool the requests wait for (threads, actors, connections to a \
             backend) and size it to rate × service time",
            &[("timeouts", timeouts as f64), ("utilization", cpu.util())],
        )
        .at(e.first_error_second()),
    )
}
