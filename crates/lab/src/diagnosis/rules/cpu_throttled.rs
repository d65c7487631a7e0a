//! `cpu_throttled`: the target's cgroup CPU quota stopped it, however idle the machine: the
//! most common limit of a container or a Kubernetes pod (`resources.limits.cpu`), which no
//! load tool sees from outside.

use super::{Check, Rule};
use crate::diagnosis::{num, pct, Bottleneck, Evidence, Finding, THROTTLED_SHARE};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::CpuThrottled,
    needs: "the target's cgroup has a CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the smallest on the way to the root) and its `cpu.stat` shows the quota ran out in at least 20 % of the periods it had work in (`nr_throttled` of `nr_periods`, at least 5), while it used at least 80 % of the quota. Replaces `cpu_bound` when the quota is what the CPUs were capped by",
    says: "\"used 24.8 % of one CPU against a quota of 25 %: throttled in 87 of 100 periods, 7.7 s throttled\": the quota, not the machine's CPUs; said too when the cgroup also holds loadlab, whose CPU counts against the same quota",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(t) = e.throttling() else {
        return match e.cgroup() {
            None => Check::NoEvidence("the target's cgroup (not probed)".into()),
            Some(_) => Check::RuledOut("the target's cgroup has no CPU quota".into()),
        };
    };
    let words = format!(
        "used {:.1} % of one CPU against a quota of {:.1} %: throttled in {} of {} periods, {} s throttled",
        100.0 * t.used_cpus,
        100.0 * t.quota_cpus,
        t.throttled_periods,
        t.periods,
        num(t.throttled_s)
    );
    if !t.significant() || t.used_cpus < 0.8 * t.quota_cpus {
        return Check::RuledOut(format!(
            "{words} (below {} of the periods, or the quota not used)",
            pct(THROTTLED_SHARE)
        ));
    }
    let mut evidence = format!(
        "the target {words}{} at {}: its cgroup's CPU quota is the limit, not the machine's CPUs",
        t.quota_from
            .as_deref()
            .map_or(String::new(), |q| format!(" ({q})")),
        e.load_words()
    );
    let mut advice = "raise the CPU quota (Kubernetes resources.limits.cpu, docker --cpus, \
                      CPUQuota=), or make each request cheaper"
        .to_string();
    if let Some(psi) = e.cgroup().and_then(|c| c.psi_cpu_some_percent) {
        evidence.push_str(&format!(
            "; its tasks waited for a CPU {} of the time",
            pct(psi / 100.0)
        ));
    }
    if e.shares_cgroup_with_loadlab() {
        evidence
            .push_str("; the cgroup also holds loadlab, whose CPU counts against the same quota");
        advice = format!(
            "run loadlab outside the target's cgroup (another service, container or host) to \
             measure the server alone; then {advice}"
        );
    }
    let mut f = Finding::new(
        Bottleneck::CpuThrottled,
        evidence,
        &advice,
        &[
            ("quota_cpus", t.quota_cpus),
            ("used_cpus", t.used_cpus),
            ("periods", t.periods as f64),
            ("throttled_periods", t.throttled_periods as f64),
            ("throttled_s", t.throttled_s),
        ],
    );
    f.onset_s = e.latency_onset();
    Check::Fired(f)
}
