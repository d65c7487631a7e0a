//! `upstream`: a proxy answered 502 (bad gateway) or 504 (gateway timeout) to most of the
//! failed requests: its upstream broke or was too slow. Not a server shedding work (503,
//! 429: `refused`): a 504 is the proxy's timeout running out while the upstream's pool was
//! full (nginx's `proxy_read_timeout` in front of a few gunicorn workers).

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding};

/// The statuses a proxy answers for its upstream.
pub(super) const GATEWAY: [&str; 2] = ["502", "504"];

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Upstream,
    needs: "502 (bad gateway) and 504 (gateway timeout) answers are at least half of the failed requests",
    says: "the counts by status: 504, the upstream did not answer within the proxy's timeout (its pool or CPU full); 502, it refused or broke the proxy's connection; the upstream's address from the proxy's own connections (where it was probed) and the proxy's CPU beside them",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let count = |code: &str| {
        r.status_codes
            .iter()
            .find(|(c, _)| c.as_str() == code)
            .map_or(0, |(_, n)| *n)
    };
    let (bad, timed_out) = (count("502"), count("504"));
    let gateway = bad + timed_out;
    if gateway == 0 || gateway * 2 < r.errors_total {
        return Check::RuledOut(format!("{gateway} 502 or 504 answers"));
    }
    let mut parts = Vec::new();
    if timed_out > 0 {
        parts.push(format!(
            "{timed_out} with 504 (gateway timeout: its upstream did not answer within the proxy's timeout)"
        ));
    }
    if bad > 0 {
        parts.push(format!(
            "{bad} with 502 (bad gateway: its upstream refused or broke the connection)"
        ));
    }
    let at = e.cpu.as_ref().map_or(String::new(), |c| {
        format!(", the proxy itself at {} CPU", pct(c.util()))
    });
    // The upstream by the proxy's own connections, most connections first.
    let mut peers: Vec<(&String, &u64)> = e
        .probes()
        .map(|p| p.delta.upstreams_max.iter().collect())
        .unwrap_or_default();
    peers.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let upstream = match peers.as_slice() {
        [] => "its upstream".to_string(),
        [(addr, n)] => format!("its upstream {addr} (up to {n} connections open to it)"),
        more => format!(
            "its upstreams {} (connections open to each at most)",
            more.iter()
                .take(3)
                .map(|(a, n)| format!("{a}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Check::Fired(
        Finding::new(
            Bottleneck::Upstream,
            format!(
                "the proxy answered {gateway} of {} requests for {upstream}, {}{at}: the upstream is the limit, not the proxy shedding work",
                r.requests,
                parts.join(" and ")
            ),
            "find the upstream's bottleneck: run loadlab against it directly, or probe it \
             (--probe-pid of the upstream); a longer proxy timeout only hides it",
            &[
                ("bad_gateway", bad as f64),
                ("gateway_timeout", timed_out as f64),
                ("requests", r.requests as f64),
            ],
        )
        .at(e.first_error_second()),
    )
}
