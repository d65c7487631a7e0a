//! `pids_limit`: the target's cgroup reached its limit of processes and threads: a server
//! that starts a thread or a process per connection can take no more.

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::PidsLimit,
    needs: "the target's cgroup has a `pids.max` and during the step a fork or thread creation was refused at it (`pids.events` `max`), or its tasks reached 95 % of it",
    says: "the tasks against the limit and the refused forks",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(c) = e.cgroup() else {
        return Check::NoEvidence("the target's cgroup (not probed)".into());
    };
    let Some(limit) = c.pids_limit else {
        return Check::RuledOut("the target's cgroup has no pids limit".into());
    };
    let peak = c.pids_peak.unwrap_or(0);
    let refused = c.pids_max_events.unwrap_or(0);
    let words =
        format!("{peak} of its {limit} tasks (processes and threads), {refused} forks refused");
    if refused == 0 && (peak as f64) < 0.95 * limit as f64 {
        return Check::RuledOut(words);
    }
    Check::Fired(Finding::new(
        Bottleneck::PidsLimit,
        format!("the target's cgroup ran {words}: it could start no more threads or processes"),
        "raise pids.max (Kubernetes pod pid limit, docker --pids-limit, TasksMax=), or use a \
         bounded pool instead of a thread per connection",
        &[
            ("pids_peak", peak as f64),
            ("pids_limit", limit as f64),
            ("pids_max_events", refused as f64),
        ],
    ))
}
