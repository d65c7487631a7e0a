//! `client_ports`: loadlab ran out of local ports (document 002: `ab` without keep-alive).

use loadlab_engine::{CloseBy, ErrorClass};

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::ClientPorts,
    needs: "`local_port_exhaustion` errors, or TIME_WAIT at 90 % of the port range when loadlab closed the connections itself (`close_by = \"client\"`: a server that closes keeps the TIME_WAIT on its side)",
    says: "the failures and the TIME_WAIT count against the ports: the client ran out, not the server",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let port_errors = r.errors.sum_of(&[ErrorClass::LocalPortExhaustion]);
    let tw = e.probes().map_or(0, |p| p.delta.time_wait_max);
    // TIME_WAIT counts every socket of the namespace: it holds loadlab's ports only when
    // loadlab closed the connections (a server that closes keeps the TIME_WAIT itself).
    let client_closed = r.close_by == Some(CloseBy::Client);
    let ports = e.ctx.ports;
    if port_errors == 0 && !(client_closed && ports.is_some_and(|n| tw as f64 >= 0.9 * n as f64)) {
        return Check::RuledOut(format!("no local port ran out ({tw} sockets in TIME_WAIT)"));
    }
    Check::Fired(
        Finding::new(
            Bottleneck::ClientPorts,
            format!(
                "loadlab found no free local port {port_errors} times, with {tw} sockets in TIME_WAIT \
                 for {} ephemeral ports{}",
                ports.map_or("?".into(), |n| n.to_string()),
                if client_closed {
                    "; loadlab closed each connection itself (close_by = client), so each held its port for 60 s"
                } else {
                    ""
                }
            ),
            "the client ran out, not the server: keep-alive, more source addresses \
             (--source-addrs), or net.ipv4.tcp_tw_reuse=1",
            &[("port_errors", port_errors as f64), ("time_wait", tw as f64)],
        )
        .at(e.first_error_second()),
    )
}
