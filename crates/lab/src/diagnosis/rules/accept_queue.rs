//! `accept_queue`: the kernel's listen queue overflowed during the step, before latency rose
//! or in numbers that matter (a few overflows after latency exploded are a symptom).

use loadlab_system::probe::{ListenDelta, ProbeReport};

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::AcceptQueue,
    needs: "the target's own listening sockets dropped connections during the step (their drops, from the kernel's socket diagnostics; where those cannot be read, the listen-queue overflows or drops of the target's network namespace, `TcpExt: ListenOverflows` and `ListenDrops`, and not while every connection and request of loadlab's took under the 1 s a dropped handshake costs), before latency rose or in numbers of at least 1 % of the requests (a few overflows after latency exploded are a symptom, not the cause); overflows in the namespace at another listener's queue are ruled out by name",
    says: "the drops, the port and the backlog of the queue that overflowed (and the backlog the plan set, `somaxconn`), and whether the overflow came before or after latency rose",
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

/// Whose drops the rule reads: the target's own listeners' (with their ports, largest
/// backlog and most connections queued) or, where those were not read, the namespace's.
enum Drops<'a> {
    Own(&'a ListenDelta),
    Namespace,
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
    let whose = match &d.listen {
        Some(l) if l.drops == 0 => {
            return Check::RuledOut(format!(
                "{counts} in this network namespace, none at the target's own listening \
                 socket{} ({}): another listener's queue overflowed",
                if l.ports.len() == 1 { "" } else { "s" },
                listeners(l)
            ))
        }
        Some(l) => Drops::Own(l),
        None => Drops::Namespace,
    };
    let r = e.result();
    if let (Drops::Namespace, Some(slowest)) = (&whose, none_of_loadlabs(e, p)) {
        return Check::RuledOut(format!(
            "{counts} in this network namespace, none of them on loadlab's connections to the \
             target: every one connected and was answered within {slowest:.0} ms without an \
             error, and a handshake a full queue drops costs its connection at least the 1 s \
             of a retransmission (another listener's queue overflowed)"
        ));
    }
    let (dropped, onset) = match whose {
        Drops::Own(l) => (l.drops, l.drops_from_s),
        Drops::Namespace => (d.listen_overflows + d.listen_drops, overflow_onset(p)),
    };
    let onset = onset.map(|t| (t - e.warmup_s()).max(0.0));
    let before = match (onset, e.latency_onset()) {
        (Some(o), Some(l)) => Some(o <= l + 1.0),
        (Some(_), None) => Some(true),
        _ => None,
    };
    let requests = (r.requests + r.errors_total).max(1) as f64;
    let many = dropped as f64 >= 0.01 * requests;
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
    let when = match before {
        Some(true) => "before latency rose",
        Some(false) => "after latency had risen",
        None => "during the step",
    };
    let somaxconn = e.ctx.somaxconn.map_or("unknown".into(), |s| s.to_string());
    let mut figures = vec![
        ("listen_overflows", d.listen_overflows as f64),
        ("listen_drops", d.listen_drops as f64),
    ];
    let evidence = match whose {
        Drops::Own(l) => {
            figures.extend([
                ("listener_drops", l.drops as f64),
                ("backlog", l.backlog as f64),
                ("queued_max", l.queued_max as f64),
            ]);
            format!(
                "the target's listen queue ({}) dropped {} connection attempts {when}; {backlog}, \
                 somaxconn is {somaxconn}",
                listeners(l),
                l.drops
            )
        }
        Drops::Namespace => format!(
            "the listen queue overflowed {} times ({} drops) {when}; {backlog}, somaxconn is \
             {somaxconn}",
            d.listen_overflows, d.listen_drops
        ),
    };
    Check::Fired(
        Finding::new(
            Bottleneck::AcceptQueue,
            evidence,
            "raise the backlog (and net.core.somaxconn, which caps it), or accept \
             faster (more acceptor threads)",
            &figures,
        )
        .at(onset),
    )
}

/// `port 8080: backlog 511, up to 12 seen waiting`.
fn listeners(l: &ListenDelta) -> String {
    let ports: Vec<String> = l.ports.iter().map(|p| p.to_string()).collect();
    format!(
        "port {}: backlog {}, up to {} seen waiting",
        ports.join(", "),
        l.backlog,
        l.queued_max
    )
}
