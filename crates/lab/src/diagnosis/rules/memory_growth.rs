//! `memory_growth`: the target's resident memory grew steadily through the step (work
//! queueing inside it, in an unbounded queue or mailbox).

use loadlab_system::probe::ProbeReport;

use super::{Check, Rule};
use crate::diagnosis::{num, Bottleneck, Evidence, Finding};

/// Memory growth below this many bytes is noise.
const MEMORY_GROWTH_MIN: f64 = 16.0 * 1024.0 * 1024.0;

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::MemoryGrowth,
    needs: "the target's RSS grew ≥ 16 MB and ≥ 20 % through the step, rising in at least 4 of 5 intervals",
    says: "the growth per second: work queueing inside it",
    check,
};

/// The resident memory of the targets through the step: (probe seconds, bytes).
fn rss_series(p: &ProbeReport) -> Vec<(f64, f64)> {
    p.samples
        .iter()
        .filter_map(|s| Some((s.t_s, s.process.as_ref()?.rss_bytes as f64)))
        .collect()
}

fn check(e: &Evidence<'_>) -> Check {
    let Some(p) = e.probes() else {
        return Check::NoEvidence("the target's memory (not probed)".into());
    };
    let rss = rss_series(p);
    let (Some(&(t0, a)), Some(&(t1, b))) = (rss.first(), rss.last()) else {
        return Check::NoEvidence("the target's memory (no process probed)".into());
    };
    let mb = |x: f64| num(x / 1048576.0);
    let grew = b - a;
    let rising = rss.windows(2).filter(|w| w[1].1 >= w[0].1).count();
    let steady = rss.len() >= 3 && rising * 5 >= (rss.len() - 1) * 4;
    if !(grew >= MEMORY_GROWTH_MIN && grew >= 0.2 * a && steady && t1 > t0) {
        return Check::RuledOut(format!("RSS {} → {} MB", mb(a), mb(b)));
    }
    let per_s = grew / (t1 - t0);
    Check::Fired(Finding::new(
        Bottleneck::MemoryGrowth,
        format!(
            "the target's memory grew steadily from {} to {} MB (+{} MB/s) through the step: \
             work is queueing inside it (an unbounded queue or mailbox)",
            mb(a),
            mb(b),
            mb(per_s)
        ),
        "bound the queue (back-pressure), or serve faster than work arrives",
        &[
            ("rss_start_bytes", a),
            ("rss_end_bytes", b),
            ("bytes_per_s", per_s),
        ],
    ))
}
