//! `io_bound`: the target's threads waited on storage. A server that fsyncs each request
//! (a database's commit, a log written durably) or reads from a disk that cannot keep up
//! has its threads in uninterruptible sleep, not on a CPU nor on a lock: its pool fills,
//! and a larger pool only queues more at the disk.

use super::{Check, Rule};
use crate::diagnosis::{num, pct, waits, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::IoBound,
    needs: "the step failed on latency, throughput or errors, and the target's threads in uninterruptible sleep (waiting on block I/O: an fsync, a read from disk; from each thread's state in `/proc/PID/task/TID/stat`, sampled each second) were at the step's median at least one, and at least half of its busy threads (those not idle at an accept, an event loop or a client's connection)",
    says: "how many threads waited on the disk and how many of them in an fsync, the bytes per second storage read and wrote for it (`/proc/PID/io`), and the share of the time its cgroup's tasks stalled on I/O (PSI `io`, cgroup v2) where read",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(p) = e.probes() else {
        return Check::NoEvidence("the target's threads (not probed)".into());
    };
    let Some(w) = waits::typical(e) else {
        return Check::NoEvidence("what the target's threads waited on (not read)".into());
    };
    if w.disk == 0 || 2 * w.disk < w.busy() {
        return Check::RuledOut(format!(
            "{} of its {} busy threads waited on the disk (the step's median)",
            w.disk,
            w.busy()
        ));
    }
    let d = &p.delta;
    let mb = |bps: f64| num(bps / 1e6);
    let psi = e
        .cgroup()
        .and_then(|c| c.psi_io_some_percent)
        .map_or(String::new(), |s| {
            format!(
                "; some task of its cgroup stalled on I/O {} of the time (PSI io)",
                pct(s / 100.0)
            )
        });
    let mut figures = vec![
        ("threads_on_disk", w.disk as f64),
        ("threads_in_sync", w.disk_sync as f64),
        ("storage_write_bps", d.storage_write_bps),
        ("storage_read_bps", d.storage_read_bps),
    ];
    if let Some(s) = e.cgroup().and_then(|c| c.psi_io_some_percent) {
        figures.push(("psi_io_some_percent", s));
    }
    Check::Fired(
        Finding::new(
            Bottleneck::IoBound,
            format!(
                "{} of its {} busy threads waited on the disk (uninterruptible sleep{}; the \
                 step's median) while storage wrote {} MB/s and read {} MB/s for it{psi}: \
                 the disk is the limit, not its CPU or its pool",
                w.disk,
                w.busy(),
                if w.disk_sync > 0 {
                    format!(", {} of them in an fsync", w.disk_sync)
                } else {
                    String::new()
                },
                mb(d.storage_write_bps),
                mb(d.storage_read_bps),
            ),
            "make each request's I/O lighter (group commits, fewer fsyncs, a cache in memory) \
             or the disk faster; a larger pool only queues more at the disk",
            &figures,
        )
        .at(e.latency_onset()),
    )
}
