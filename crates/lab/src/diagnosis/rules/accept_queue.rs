//! `accept_queue`: the kernel's listen queue overflowed during the step, before latency rose
//! or in numbers that matter (a few overflows after latency exploded are a symptom).

use loadlab_system::probe::ProbeReport;

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::AcceptQueue,
    needs: "the kernel's listen-queue overflows or drops (`TcpExt: ListenOverflows`, `ListenDrops`, of the target's network namespace) grew during the step, before latency rose or in numbers of at least 1 % of the requests (a few overflows after latency exploded are a symptom, not the cause)",
    says: "the counts, the backlog the plan set, `somaxconn`, and whether the overflow came before or after latency rose",
    check,
};

/// When the kernel's overflow or drop counters first grew (probe seconds): the start of the
/// first interval in which they did (the earliest the overflow can have happened).
fn overflow_onset(p: &ProbeReport) -> Option<f64> {
    p.samples.windows(2).find_map(|w| {
        let grew = w[1].kernel.listen_overflows > w[0].kernel.listen_overflows
            || w[1].kernel.listen_drops > w[0].kernel.listen_drops;
        grew.then_some(w[0].t_s)
    })
}

fn check(e: &Evidence<'_>) -> Check {
    let Some(p) = e.probes() else {
        return Check::NoEvidence("the kernel's listen-queue counters (not probed)".into());
    };
    let d = &p.delta;
    let counts = format!(
        "{} listen-queue overflows, {} drops",
        d.listen_overflows, d.listen_drops
    );
    if d.listen_overflows + d.listen_drops == 0 {
        return Check::RuledOut(counts);
    }
    let r = e.result();
    let onset = overflow_onset(p).map(|t| (t - e.warmup_s()).max(0.0));
    let before = match (onset, e.latency_onset()) {
        (Some(o), Some(l)) => Some(o <= l + 1.0),
        (Some(_), None) => Some(true),
        _ => None,
    };
    let requests = (r.requests + r.errors_total).max(1) as f64;
    let many = (d.listen_overflows + d.listen_drops) as f64 >= 0.01 * requests;
    if before == Some(false) && !many {
        return Check::RuledOut(format!(
            "{counts}, after latency had risen and too few to matter"
        ));
    }
    let backlog = e
        .step
        .params
        .iter()
        .find(|(k, _)| k.contains("backlog"))
        .map(|(k, v)| format!("the plan set {k}={v}"))
        .unwrap_or_else(|| "the plan set no backlog".into());
    Check::Fired(
        Finding::new(
            Bottleneck::AcceptQueue,
            format!(
                "the listen queue overflowed {} times ({} drops) {}; {backlog}, somaxconn is {}",
                d.listen_overflows,
                d.listen_drops,
                match before {
                    Some(true) => "before latency rose",
                    Some(false) => "after latency had risen",
                    None => "during the step",
                },
                e.ctx.somaxconn.map_or("unknown".into(), |s| s.to_string())
            ),
            "raise the backlog (and net.core.somaxconn, which caps it), or accept \
             faster (more acceptor threads)",
            &[
                ("listen_overflows", d.listen_overflows as f64),
                ("listen_drops", d.listen_drops as f64),
            ],
        )
        .at(onset),
    )
}
