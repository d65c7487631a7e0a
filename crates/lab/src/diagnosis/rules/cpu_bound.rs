//! `cpu_bound`: the target used the CPUs it may run on, or wanted them and waited behind
//! other processes (a CPU it shares is still the limit, but not one its handlers alone fill).

use loadlab_system::probe::ProbeReport;

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding, CPU_BOUND, STARVED};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::CpuBound,
    needs: "target CPU ≥ 90 % of the CPUs **it may run on**: its affinity (`Cpus_allowed_list`), capped by its cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us`), read when the step starts; not the machine's core count. Or, on a shared machine, CPU used plus CPU waited for (its threads runnable but not running, from `/proc/PID/task/*/schedstat`) ≥ 90 %, with at least 10 % waited, while its CPUs were idle less than 10 % of the time it waited (`/proc/stat`'s lines of its CPUs, each second weighted by the target's wait in it; steal counts as busy): threads that wait behind each other while their CPUs idle between bursts are not CPU-bound",
    says: "\"the target used 98 % of its 1 CPU (affinity: 1 CPU) at 1000 req/s: CPU-bound\"; or \"used 55 % … and waited 40 % of the time for them, runnable behind other processes …: CPU-bound on CPUs it shares\"",
    check,
};

/// Per-interval CPU use of the targets (CPUs), with the interval's end (probe seconds).
fn cpu_series(p: &ProbeReport) -> Vec<(f64, f64)> {
    let with: Vec<(f64, f64)> = p
        .samples
        .iter()
        .filter_map(|s| {
            let pr = s.process.as_ref()?;
            Some((s.t_s, pr.cpu_user_s + pr.cpu_system_s))
        })
        .collect();
    with.windows(2)
        .filter_map(|w| {
            let dt = w[1].0 - w[0].0;
            (dt > 0.05).then(|| (w[1].0, ((w[1].1 - w[0].1) / dt).max(0.0)))
        })
        .collect()
}

fn check(e: &Evidence<'_>) -> Check {
    let (Some(cpu), Some(p)) = (&e.cpu, e.probes()) else {
        return Check::NoEvidence("the target's CPU (not probed)".into());
    };
    // A quota that throttled the target is the finer finding (`cpu_throttled`).
    if let Some(t) = e.throttling().filter(|t| t.significant()) {
        if t.used_cpus >= 0.8 * t.quota_cpus {
            return Check::RuledOut(format!(
                "the CPUs it used were capped by its cgroup quota of {} CPUs (see the CPU quota)",
                crate::diagnosis::num(t.quota_cpus)
            ));
        }
    }
    let util = cpu.util();
    let waited = cpu.waited_all();
    let idle = cpu.idle();
    // Its CPUs were full (not idle a tenth of the time), or not read: a target that used
    // less and waited was starved by what else ran there. Idle CPUs with waiting threads
    // are threads waiting behind each other in bursts: room the target left.
    let full = idle.is_none_or(|i| i < 1.0 - CPU_BOUND);
    let starved = util < CPU_BOUND && waited >= STARVED && util + waited >= CPU_BOUND;
    if !(util >= CPU_BOUND || (starved && full)) {
        return Check::RuledOut(match idle {
            Some(idle) if starved => format!(
                "target CPU {} of its {}, {} waiting for it, but its CPUs were idle {} of \
                 the time it waited: its threads waited behind each other in bursts, not \
                 behind full CPUs",
                pct(util),
                cpu.cpus_words(),
                pct(waited),
                pct(idle)
            ),
            _ => format!(
                "target CPU {} of its {}, {} waiting for it",
                pct(util),
                cpu.cpus_words(),
                pct(waited)
            ),
        });
    }
    let demand = cpu.demand();
    let onset = cpu_series(p)
        .into_iter()
        .find(|(_, c)| c / cpu.cpus >= CPU_BOUND)
        .map(|(t, _)| (t - e.warmup_s()).max(0.0));
    let cpu_words = cpu.cpus_words();
    let load_words = e.load_words();
    let (evidence, advice) = if starved {
        (
            format!(
                "the target used {} of its {cpu_words} and waited {} of the time for \
                 them, runnable behind other processes{}, at {load_words}: CPU-bound on \
                 CPUs it shares",
                pct(util),
                pct(waited),
                cpu.busy
                    .map(|b| format!(" (its CPUs busy {} of the time it waited)", pct(b)))
                    .unwrap_or_default()
            ),
            "keep other processes off the target's CPUs (pin loadlab and the rest \
             elsewhere), or give it more cores",
        )
    } else {
        (
            format!(
                "the target used {} of its {cpu_words} at {load_words}: CPU-bound",
                pct(util)
            ),
            "more cores for the target, or cheaper handlers",
        )
    };
    Check::Fired(
        Finding::new(
            Bottleneck::CpuBound,
            evidence,
            advice,
            &[
                ("cpu_used", cpu.used),
                ("cpu_wait", cpu.wait),
                ("cpus", cpu.cpus),
                ("utilization", util),
                ("demand", demand),
            ],
        )
        .at(onset),
    )
}
