//! `concurrency_bound`: a pool (workers, threads, connections) was full with the CPU to spare.
//!
//! By Little's law, achieved × the service-time floor (the lowest service-time median of the
//! scenario's sustained steps) is the number of requests the server had in service at once.
//! Little's law counts with the mean: where the service times of the step that set the floor
//! were skewed (a mean at least 1.5 times the median: a few slow requests), the count over
//! that mean is said beside it, the pool is at least about that count (a short step's mean
//! misses part of a skewed tail), and a parameter near either count is named.
//! The rule fires when the server was saturated (a queue built up, requests waited inside
//! it, or it answered fewer than were offered) while its CPU was spare (its demand low, or
//! its CPUs idle a quarter of the time its threads waited to run): then that number is the
//! size of whatever it ran out of. This holds at the knee itself, where the load is barely
//! above the limit, as much as far beyond it.

use super::{Check, Rule};
use crate::diagnosis::{
    num, pct, waits, Bottleneck, Evidence, Finding, CPU_LOW, CPU_ROOM, PARAM_MATCH, SKEWED,
};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::ConcurrencyBound,
    needs: "the step failed on latency, throughput or errors; the server was saturated (latency grew through the step, the service-time median rose above its floor, or it answered fewer than offered); its CPU was spare: its demand (used, plus waited for while other processes kept its CPUs busy) stayed below 50 % of its CPUs, or its CPUs idled at least 25 % of the time its threads waited to run (not read under a cgroup quota); and no thread of it was busy (ran or waited to run 90 % of the time, or ran 80 % of it doing 90 % of the process's work). By Little's law, achieved × the service-time floor (the lowest service-time median of this scenario and configuration) is the number in service (for gRPC server streams opened at a rate, × the floor plus each stream's lifetime, which it holds the server for), at least about one; a matrix parameter within 20 % of it is named (a `backlog` never: it bounds a queue). Where the service times of the step that set the floor were skewed (mean ≥ 1.5 × median), achieved × that mean is counted too, and a parameter within 20 % of either is named. Not for server-sent events, whose replies are waits for the server's events",
    says: "\"≈16 requests in service at once (achieved 161 req/s × service-time floor 100 ms) with 2 % CPU: the 16 `workers` are the limit\"; at the knee, also how close the offered load was to it; what its threads waited on (the step's median of each count: a socket to an address, a lock, the disk, a sleep, …) and, when one thing held most of its busy threads (a downstream's address, one lock, the disk), that thing in the advice instead of the pool",
    check,
};

/// Matrix parameters within [`PARAM_MATCH`] of `n`, the closest (ties all named).
fn matching_params(params: &[(String, String)], n: f64) -> Vec<&(String, String)> {
    let candidates: Vec<(f64, &(String, String))> = params
        .iter()
        .filter(|(k, _)| !k.contains("backlog"))
        .filter_map(|kv| {
            let v: f64 = kv.1.parse().ok()?;
            let off = (v - n).abs() / v;
            (v > 0.0 && off <= PARAM_MATCH).then_some((off, kv))
        })
        .collect();
    let best = candidates.iter().map(|c| c.0).reduce(f64::min);
    candidates
        .into_iter()
        .filter(|c| Some(c.0) == best)
        .map(|c| c.1)
        .collect()
}

/// What the step-wide idle share of the target's CPUs is a share of
/// ([`Cpu::idle`](crate::diagnosis::Cpu::idle)).
const WAITED: &str = "the time its threads waited to run";

fn check(e: &Evidence<'_>) -> Check {
    // An event's latency is the wait for the server's next event: not a request in
    // service, and Little's law over it counts nothing the server holds. So is a server
    // stream's message.
    match e.result().protocol {
        loadlab_engine::Protocol::Sse => return Check::RuledOut(
            "server-sent events: a reply is the wait for the server's next event, not a request in service, so there is no pool to count".into(),
        ),
        loadlab_engine::Protocol::GrpcServerStream => return Check::RuledOut(
            "gRPC server streams: a reply is the wait for the stream's next message, not a call in service, so there is no pool to count".into(),
        ),
        _ => {}
    }
    let Some(cpu) = &e.cpu else {
        return Check::NoEvidence("the target's CPU (not probed)".into());
    };
    let (Some(in_service), Some(floor)) = (e.in_service, e.floor_ms) else {
        return Check::RuledOut(
            "no service-time floor: no earlier step of this scenario was sustained, so the requests in service cannot be counted".into(),
        );
    };
    if !e.failed_on_the_server() {
        return Check::RuledOut("the step did not fail on latency, throughput or errors".into());
    }
    if !e.cpu_spare() {
        return Check::RuledOut(e.not_spare_words(cpu.idle(), WAITED));
    }
    // A thread that ran all the time is not an idle slot of a pool waiting on something.
    if let Some((used, waited, name)) = e.busy_thread() {
        return Check::RuledOut(format!(
            "the busiest thread (`{name}`) ran {} and waited {} of the time: busy on a CPU, not waiting in a pool (see one thread CPU-bound)",
            pct(used),
            pct(waited)
        ));
    }
    let r = e.result();
    // Counted in the protocol's words: messages in service at msg/s over a WebSocket.
    let units = r.protocol.units();
    // Skewed service times: Little's law over the floor step's mean counts more.
    let by_mean = e
        .ctx
        .service_floor_mean_ms
        .filter(|m| e.mix.is_empty() && *m >= SKEWED * floor)
        .map(|m| (m, r.achieved_rps * (m + e.lifetime_ms) / 1000.0));
    let little = if e.mix.is_empty() {
        let skew = by_mean.map_or(String::new(), |(m, n)| {
            format!(
                "; the service times were skewed, a mean of {} ms at that floor, which counts ≈{}",
                num(m),
                num(n)
            )
        });
        // A stream opened at a rate holds the server for its lifetime too.
        let held = if e.lifetime_ms > 0.0 {
            format!(
                "(service-time floor {} ms + lifetime {} ms)",
                num(floor),
                num(e.lifetime_ms)
            )
        } else {
            format!("service-time floor {} ms", num(floor))
        };
        format!(
            "≈{} {} in service at once (achieved {} {} × {held}{skew})",
            num(in_service),
            units.sent,
            num(r.achieved_rps),
            units.rate,
        )
    } else {
        // A mix: each name holds its slots for its own time.
        let parts: Vec<String> = e
            .mix
            .iter()
            .map(|(name, a, f)| format!("{name} {} {} × {} ms", num(*a), units.rate, num(*f)))
            .collect();
        format!(
            "≈{} {} in service at once ({})",
            num(in_service),
            units.sent,
            parts.join(" + ")
        )
    };
    if in_service < 0.8 {
        return Check::RuledOut(format!("{little}: less than one at a time"));
    }
    let Some(sign) = e.saturation.first() else {
        return Check::RuledOut(format!(
            "{little}, but no sign the server was saturated: latency did not grow, the service time stayed at its floor, it answered what was offered"
        ));
    };
    let mut tied = matching_params(e.step.params, in_service);
    if let (true, Some((_, n))) = (tied.is_empty(), by_mean) {
        tied = matching_params(e.step.params, n);
    }
    let limit = match (tied.as_slice(), by_mean) {
        ([], None) => {
            "a pool of about that size (workers, threads, connections) is the limit".to_string()
        }
        // The mean of a short step's skewed service times misses part of their tail: the
        // count over it is no upper bound (gunicorn with 4 workers sleeping 20 ms at the
        // median and 300 ms at p99 counted ≈1.7 by the median, ≈2.9 by the mean).
        ([], Some((_, n))) => format!(
            "a pool (workers, threads, connections) of at least ≈{} is the limit (the count over the mean; a short step's mean misses part of a skewed tail)",
            num(n)
        ),
        ([(_, v), ..], _) => format!(
            "the {v} `{}` are the limit",
            tied.iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join("` or the `")
        ),
    };
    // Close readings are said with both figures: at the knee the offered load is barely
    // above the limit, and a CPU demand near the threshold could be read either way.
    let mut close = Vec::new();
    if let Some(offered) = e.offered_in_service() {
        if offered < in_service {
            // The window also served what was sent before it (a queue's backlog, a flow's
            // sessions begun in the warm-up): served can exceed offered.
            close.push(format!(
                "the step offered ≈{offered:.2} at once, no more than the ≈{in_service:.2} served: at the limit, not beyond it"
            ));
        } else if offered < 1.1 * in_service {
            close.push(format!(
                "the step offered ≈{offered:.2} at once, just above the ≈{in_service:.2} served: at the limit, not far beyond it"
            ));
        }
    }
    if e.cpu_low() && cpu.demand() >= 0.8 * CPU_LOW {
        close.push(format!(
            "the CPU demand of {} is close to the {} above which the CPU is not called low",
            pct(cpu.demand()),
            pct(CPU_LOW)
        ));
    } else if let Some(idle) = e.cpu_room().filter(|i| !e.cpu_low() && *i < 1.2 * CPU_ROOM) {
        close.push(format!(
            "its CPUs idled {} of the time its threads waited to run, close to the {} below which they are not called idle",
            pct(idle),
            pct(CPU_ROOM)
        ));
    }
    let waits = waits::typical(e);
    let held = waits.as_ref().and_then(waits::held);
    let mut f = Finding::new(
        Bottleneck::ConcurrencyBound,
        format!(
            "{little} with {} CPU{}, and {}: {limit}{}{}",
            pct(cpu.util()),
            e.room_words(cpu.idle(), WAITED),
            sign.describe(),
            if close.is_empty() {
                String::new()
            } else {
                format!(" ({})", close.join("; "))
            },
            waits
                .as_ref()
                .map_or(String::new(), |w| format!("; {}", waits::words(w)))
        ),
        held.as_ref()
            .map_or(
                "raise that pool, or make each request hold its slot for less time (async \
             handlers instead of blocking ones)"
                    .to_string(),
                waits::advice,
            )
            .as_str(),
        &[
            ("in_service", in_service),
            ("achieved_rps", r.achieved_rps),
            ("service_floor_ms", floor),
            ("utilization", cpu.util()),
        ],
    )
    .at(e.latency_onset());
    if let Some(o) = e.offered_in_service() {
        f.figures.insert("offered_in_service".into(), o);
    }
    if let Some(h) = &held {
        let (k, n) = waits::figure(h);
        f.figures.insert(k.into(), n);
    }
    if let Some((m, n)) = by_mean {
        f.figures.insert("service_floor_mean_ms".into(), m);
        f.figures.insert("in_service_by_mean".into(), n);
    }
    f.parameter = (!tied.is_empty()).then(|| {
        tied.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    });
    Check::Fired(f)
}
