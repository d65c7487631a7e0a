//! `accept_queue`: the kernel's listen queue overflowed during the step, before latency rose
//! or in numbers that matter (a few overflows after latency exploded are a symptom).

use loadlab_system::probe::ProbeReport;

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::AcceptQueue,
    needs: "the kernel's listen-queue overflows or drops (`TcpExt: ListenOverflows`, `ListenDrops`, of the target's network namespace) grew during the step, before latency rose or in numbers of at least 1 % of the requests (a few overflows after latency exploded are a symptom, not the cause), and not while every connection and request of loadlab's took under the 1 s a dropped handshake costs (then the queue that overflowed was another listener's in the namespace)",
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

/// The overflow counters are the network namespace's, whoever's listener overflowed (another
/// server, a test, a service on the same host). A handshake that a full accept queue drops
/// costs its connection at least the 1 s of a retransmission: the client's SYN when the SYN
/// was dropped, the server's SYN-ACK when the final ACK was (`tcp_abort_on_overflow` resets it
/// instead, an error). So when every overflow came while loadlab measured, and none of its
/// connections took a second to connect, none of its requests a second to be answered, and
/// none failed, the queue that overflowed was not the target's: the slowest of those times,
/// ms. `None` when that cannot be said.
fn none_of_loadlabs(e: &Evidence<'_>, p: &ProbeReport) -> Option<f64> {
    const RETRANSMISSION_MS: f64 = 1000.0;
    let r = e.result();
    let onset = overflow_onset(p)?;
    if onset < e.warmup_s() || r.errors_total > 0 {
        return None;
    }
    let slowest = r.latency_ms.max?.max(r.connect_time_ms.max.unwrap_or(0.0));
    (slowest < RETRANSMISSION_MS).then_some(slowest)
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
    if let Some(slowest) = none_of_loadlabs(e, p) {
        return Check::RuledOut(format!(
            "{counts} in this network namespace, none of them on loadlab's connections to the \
             target: every one connected and was answered within {slowest:.0} ms without an \
             error, and a handshake a full queue drops costs its connection at least the 1 s \
             of a retransmission (another listener's queue overflowed)"
        ));
    }
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
