//! `latency_floor`: the step broke a latency bound that the scenario's lowest load already
//! broke. No load meets a bound above the server's answer at rest: what breaks it is the
//! request, not the load, and saying "no rule had its evidence" would hide that.

use super::{Check, Rule};
use crate::diagnosis::{num, Bottleneck, Evidence, Finding};
use crate::plan::Model;
use crate::verdict::Limit;

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::LatencyFloor,
    needs: "the step failed a latency bound, and at the scenario's first (lowest) load in this configuration the fastest answer was already above it, or that load's latency at the bound's percentile was above it while the server kept pace there (no throughput or error clause failed: its latency at rest, not a queue's)",
    says: "\"the fastest answer at the lowest load, 62 ms at 10 req/s, is above the 40 ms bound of p99: no load meets it\", or the percentile at rest against its bound",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    if e.ctx.latency_bounds.is_empty() {
        return Check::NotApplicable;
    }
    if !e.limits().contains(&Limit::Latency) {
        return Check::RuledOut("the step met its latency bounds".into());
    }
    let Some(first) = &e.ctx.first_latency else {
        return Check::NoEvidence("the latency at the lowest load (no first step)".into());
    };
    let load = match e.step.model {
        Model::Open => format!("{} {}", num(first.load), e.result().protocol.units().rate),
        Model::Closed => format!("{} connections", num(first.load)),
    };
    let figures = |at: f64, bound: f64| {
        [
            ("lowest_load", first.load),
            ("fastest_ms", first.min_ms),
            ("at_lowest_load_ms", at),
            ("bound_ms", bound),
        ]
    };
    let mut within = Vec::new();
    for &(q, bound) in &e.ctx.latency_bounds {
        let Some(at) = first.at_bounds.iter().find(|(p, _)| *p == q).map(|p| p.1) else {
            continue;
        };
        if first.min_ms > bound {
            return Check::Fired(
                Finding::new(
                    Bottleneck::LatencyFloor,
                    format!(
                        "the fastest answer at the lowest load, {} ms at {load}, is above the \
                         {} ms bound of p{}: no load meets it",
                        num(first.min_ms),
                        num(bound),
                        num(q)
                    ),
                    "make the request itself faster (profile one request at rest), or loosen \
                     the bound: less load will not meet it",
                    &figures(at, bound),
                )
                .at(Some(0.0)),
            );
        }
        if at > bound && first.kept_pace {
            return Check::Fired(
                Finding::new(
                    Bottleneck::LatencyFloor,
                    format!(
                        "at the lowest load, {load}, p{} was already {} ms, above its {} ms \
                         bound, while the server kept pace (the fastest answer {} ms{}): its \
                         latency at rest, not the load, breaks the bound",
                        num(q),
                        num(at),
                        num(bound),
                        num(first.min_ms),
                        first
                            .p50_ms
                            .map_or(String::new(), |m| format!(", the median {} ms", num(m)))
                    ),
                    "find the slow answers at rest (their share is above the percentile's), or \
                     loosen the bound: less load will not meet it",
                    &figures(at, bound),
                )
                .at(Some(0.0)),
            );
        }
        within.push(format!(
            "p{} {} ms within {} ms",
            num(q),
            num(at),
            num(bound)
        ));
    }
    Check::RuledOut(format!(
        "at the lowest load, {load}: {}",
        if within.is_empty() {
            "its latency was not read".to_string()
        } else {
            within.join(", ")
        }
    ))
}
