//! `descriptors`: loadlab, or the target, ran out of file descriptors.

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Descriptors,
    needs: "`fd_exhaustion` in loadlab, or the target's descriptors at 90 % of its own `nofile` (from `/proc/PID/limits`), or at 80 % of it while loadlab's connections were reset or closed (a server out of descriptors drops the connections it cannot accept, and a once-a-second sample misses its peak)",
    says: "which side ran out, with the counts",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let fd_errors = e.result().errors.sum_of(&[ErrorClass::FdExhaustion]);
    let target_fds = e.probes().map(|p| {
        (
            p.delta.fds_max,
            p.limits.as_ref().and_then(|l| l.nofile_soft),
        )
    });
    // Connections the server dropped: what a server out of descriptors does to those it
    // cannot accept (Node closes them at once), seen between two samples of its count.
    let dropped = e
        .result()
        .errors
        .sum_of(&[ErrorClass::ConnectionReset, ErrorClass::ConnectionClosed]);
    let near = |share: f64| {
        target_fds.is_some_and(|(n, lim)| lim.is_some_and(|l| n as f64 >= share * l as f64))
    };
    let target_full = near(0.9) || (dropped > 0 && near(0.8));
    let (n, lim) = target_fds.unwrap_or((0, None));
    let lim_words = lim.map_or("?".into(), |l| l.to_string());
    if fd_errors == 0 && !target_full {
        return Check::RuledOut(format!(
            "no descriptor ran out (the target held up to {n} of {lim_words})"
        ));
    }
    // What failed is counted in the protocol's words (messages, events, requests).
    let sent = e.result().protocol.units().sent;
    let evidence = match (target_full, fd_errors) {
        (true, 0) if dropped > 0 => format!(
            "the target held up to {n} descriptors against its nofile limit of {lim_words}, \
             and {dropped} connections were reset or closed: it could accept no more \
             connections (nor open files)"
        ),
        (true, 0) => format!(
            "the target held up to {n} descriptors against its nofile limit of {lim_words}: \
             it could accept no more connections (nor open files)"
        ),
        (true, _) => format!(
            "the target held up to {n} descriptors against its nofile limit of {lim_words}, \
             and {fd_errors} {sent} failed for want of a file descriptor in loadlab"
        ),
        (false, _) => format!(
            "{fd_errors} {sent} failed for want of a file descriptor in loadlab; the target held \
             up to {n} descriptors against its nofile limit of {lim_words}"
        ),
    };
    Check::Fired(Finding::new(
        Bottleneck::Descriptors,
        evidence,
        "raise nofile (ulimit -n, LimitNOFILE=, docker --ulimit nofile=) on the side that ran out",
        &[
            ("client_fd_errors", fd_errors as f64),
            ("target_fds", n as f64),
        ],
    ))
}
