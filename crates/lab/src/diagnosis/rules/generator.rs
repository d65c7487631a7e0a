//! `generator`: loadlab fell behind its own schedule. Never blamed on the server.

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};
use crate::verdict::Limit;

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Generator,
    needs: "the verdict found loadlab's own schedule lag (or its CPU) large enough to change the load it offered",
    says: "loadlab, not the server: the step says nothing about the server, whatever else is listed",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    // A lag the verdict found too small to explain the failure is not a finding: the
    // verdict says so (`generator_excused`).
    if !e.limits().contains(&Limit::GeneratorLimited) {
        return Check::RuledOut(if r.generator_limited {
            format!(
                "loadlab sent some requests late (lag p99 {:.2} ms, worst {:.2} ms), too little to change the verdict",
                r.schedule_lag_ms.p99, r.schedule_lag_ms.max
            )
        } else {
            format!(
                "loadlab kept to its schedule (lag p99 {:.2} ms)",
                r.schedule_lag_ms.p99
            )
        });
    }
    Check::Fired(Finding::new(
        Bottleneck::Generator,
        format!(
            "loadlab fell behind its own schedule: {}",
            r.generator_notes.join("; ")
        ),
        "the step says nothing about the server: give loadlab more cores (--threads, \
         load.cpus apart from the target's) or more machines (--agents)",
        &[("schedule_lag_p99_ms", r.schedule_lag_ms.p99)],
    ))
}
