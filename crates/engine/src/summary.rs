//! The text summary printed after a run.

use std::fmt::Write as _;

use crate::config::CloseBy;
use crate::error::ErrorClass;
use crate::result::{LatencyStats, RunResult, StopReason};

use crate::format::ms_unit as ms;

fn stats_line(out: &mut String, label: &str, s: &LatencyStats) {
    let _ = writeln!(
        out,
        "  {label:<15} mean {:>9}  p50 {:>9}  p90 {:>9}  p95 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}",
        ms(s.mean),
        ms(s.p50),
        ms(s.p90),
        ms(s.p95),
        ms(s.p99),
        ms(s.p999),
        ms(s.max)
    );
}

/// The delay from the server's send time each reply carried (`--sent-at`) to its arrival,
/// with what it rests on: the replies that carried one, those that did not, and those
/// stamped after they arrived (clocks that disagree: the figure is then not the delay).
fn server_delay_lines(out: &mut String, d: &crate::result::ServerDelay) {
    if d.delay_ms.count > 0 {
        stats_line(out, "server delay", &d.delay_ms);
    }
    let mut notes = vec![format!(
        "{} replies carried a time at {}",
        d.delay_ms.count + d.ahead,
        d.pointer
    )];
    if d.missing > 0 {
        notes.push(format!("{} had no time there", d.missing));
    }
    if d.ahead > 0 {
        notes.push(format!(
            "{} were stamped after they arrived, so the server's clock is ahead of this one's and no delay is claimed for them",
            d.ahead
        ));
    }
    let _ = writeln!(out, "  {:<15} {}", "", notes.join("; "));
}

/// `  label           key: n, key: n`, or nothing when `counts` is empty.
fn counts_line(out: &mut String, label: &str, counts: &std::collections::BTreeMap<String, u64>) {
    if counts.is_empty() {
        return;
    }
    let list: Vec<String> = counts.iter().map(|(c, n)| format!("{c}: {n}")).collect();
    let _ = writeln!(out, "  {label:<15} {}", list.join(", "));
}

/// One line per agent of a distributed run: its share and what it measured alone.
fn agent_lines(out: &mut String, r: &RunResult) {
    if r.agents.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  agents          {} (figures above are theirs merged exactly: histograms added); each one's share:",
        r.agents.len()
    );
    for a in &r.agents {
        let offered = a
            .offered_rps
            .map_or(format!("{} conns", a.connections), |v| {
                if r.sessions.is_some() {
                    format!("{v:.1} sessions/s")
                } else {
                    format!("{v:.1} {}", r.protocol.units().rate)
                }
            });
        match &a.lost {
            Some(why) => {
                let _ = writeln!(
                    out,
                    "    {:<12} {:<21} {offered:>14}  LOST during the step: {why}",
                    a.name, a.address
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "    {:<12} {:<21} {offered:>14}  achieved {:>9.1}  p99 {:>9}  errors {:<5} clock {:+.3}ms  start {:+.1}ms{}",
                    a.name,
                    a.address,
                    a.achieved_rps,
                    ms(a.latency_p99_ms),
                    a.errors_total,
                    a.clock_offset_ms,
                    a.start_skew_ms,
                    if a.generator_limited { "  GENERATOR-LIMITED" } else { "" }
                );
            }
        }
    }
    if r.agents.iter().any(|a| a.lost.is_some()) {
        let _ = writeln!(
            out,
            "\n  WARNING: an agent was lost during the step: its share is missing, so these figures say nothing about the server."
        );
    }
}

/// What varied, and one line per request name (its share, achieved, latency, errors and
/// status codes).
fn traffic_lines(out: &mut String, r: &RunResult) {
    let Some(t) = &r.traffic else {
        return;
    };
    if let (Some(file), Some(rows), Some(order)) = (&t.data_file, t.data_rows, t.data_order) {
        let taken = match order {
            crate::config::traffic::DataOrder::Random => "drawn at random".to_string(),
            _ if t.resume.next_row > rows => format!(
                "{} taken so far (wrapped around {} times)",
                t.resume.next_row,
                t.resume.next_row / rows.max(1)
            ),
            _ => format!("{} taken so far", t.resume.next_row),
        };
        let _ = writeln!(
            out,
            "  data            {file}: {rows} rows, {}; {taken}",
            order.name()
        );
    }
    if let Some(f) = &t.replay {
        let _ = writeln!(out, "  replay          {}", f.describe());
    }
    if !r.by_name.is_empty() {
        if r.sessions.is_some() {
            let _ = writeln!(
                out,
                "  by step         {} requests of {} steps (shares: turns per session):",
                r.by_name.iter().map(|n| n.attempts()).sum::<u64>(),
                t.requests
            );
        } else {
            let _ = writeln!(
                out,
                "  by name         {} requests of {} kinds, {}:",
                r.by_name.iter().map(|n| n.attempts()).sum::<u64>(),
                t.requests,
                if t.replay.is_some() {
                    "in the log's order and time"
                } else {
                    t.order.name()
                }
            );
        }
        let width = r
            .by_name
            .iter()
            .map(|n| n.name.len())
            .max()
            .unwrap_or(0)
            .min(40);
        for n in &r.by_name {
            let offered = n
                .offered_rps
                .map(|o| format!(" of {o:.1}"))
                .unwrap_or_default();
            let codes: Vec<String> = n
                .status_codes
                .iter()
                .map(|(c, k)| format!("{c}: {k}"))
                .collect();
            let _ = writeln!(
                out,
                "    {:<width$}  {:>5.1} %  achieved {:>9.1}{offered} req/s  p50 {:>9}  p99 {:>9}  errors {:<6} {}",
                n.name,
                100.0 * n.share,
                n.achieved_rps,
                ms(n.latency_ms.p50),
                ms(n.latency_ms.p99),
                n.errors_total,
                codes.join(", ")
            );
        }
    }
    for note in &t.notes {
        let _ = writeln!(out, "  note            {note}");
    }
}

/// A flow's sessions: how many started, completed, failed (by step) and were still running,
/// and how long they took with and without think time.
fn session_lines(out: &mut String, r: &RunResult) {
    let Some(s) = &r.sessions else {
        return;
    };
    let offered = r
        .offered_rps
        .map(|o| format!(" of {o} started per second"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  sessions        {} started, {} completed ({:.1}/s{offered}), {} aborted, {} still running at the end",
        s.started, s.completed, s.completed_per_s, s.aborted, s.running_at_end
    );
    if !s.aborted_by_step.is_empty() {
        let by: Vec<String> = s
            .aborted_by_step
            .iter()
            .map(|a| {
                let why = r
                    .by_name
                    .iter()
                    .find(|n| n.name == a.step)
                    .map(crate::result::NameResult::failures_text)
                    .unwrap_or_default();
                format!("{} {} ({why})", a.step, a.sessions)
            })
            .collect();
        let _ = writeln!(out, "  aborted by      {}", by.join("; "));
    }
    if s.duration_ms.count > 0 {
        let _ = writeln!(
            out,
            "  session time    with think time p50 {}  p99 {}; waiting for responses only p50 {}  p99 {}",
            ms(s.duration_ms.p50),
            ms(s.duration_ms.p99),
            ms(s.active_ms.p50),
            ms(s.active_ms.p99)
        );
    }
}

/// Renders the summary of a run.
pub fn render(r: &RunResult) -> String {
    let mut out = String::new();
    let units = r.protocol.units();
    let model = match (r.offered_rps, &r.sessions) {
        (Some(rate), Some(s)) => format!(
            "open loop at {rate} sessions/s of {} requests each ({})",
            s.requests_per_session,
            match r.arrival {
                Some(crate::config::Arrival::Poisson) => "poisson arrivals",
                _ => "constant arrivals",
            }
        ),
        (None, Some(s)) => format!(
            "closed loop, {} users (sessions of {} requests, back to back)",
            r.connections, s.requests_per_session
        ),
        (Some(rate), None) if r.traffic.as_ref().is_some_and(|t| t.replay.is_some()) => {
            let speed = r
                .traffic
                .as_ref()
                .and_then(|t| t.replay.as_ref())
                .map_or(1.0, |f| f.speed);
            format!(
                "open loop, a log replayed at its times ×{} ({} {} on average)",
                crate::format::load(speed),
                crate::format::load(rate),
                units.rate
            )
        }
        (Some(rate), None) => format!(
            "open loop at {rate} {} ({})",
            units.rate,
            match r.arrival {
                Some(crate::config::Arrival::Poisson) => "poisson arrivals",
                _ => "constant arrivals",
            }
        ),
        (None, None) if r.protocol.multiplexed() => format!(
            "closed loop, {} over {}",
            counted(r.concurrency, "stream"),
            counted(r.connections, "connection")
        ),
        (None, None) => format!("closed loop, {} {}", r.connections, units.held),
    };
    let protocol = r.protocol.label();
    let _ = writeln!(out, "loadlab {} {}{protocol}", r.method, r.url);
    let transport = if r.protocol.multiplexed() {
        match r.offered_rps {
            Some(_) => format!(
                "{}, at most {}",
                counted(r.connections, "connection"),
                counted(r.concurrency, "stream")
            ),
            None => counted(r.connections, "connection"),
        }
    } else if matches!(
        r.protocol,
        crate::config::Protocol::Ws | crate::config::Protocol::Sse
    ) {
        // Held connections: keep-alive, close_by and pipelining mean nothing to them.
        format!(
            "pool {}..{} connections, {}",
            r.connections,
            r.max_connections,
            if r.protocol == crate::config::Protocol::Sse {
                "a stream held on each"
            } else {
                "each upgraded once and kept"
            }
        ) + if r.io == crate::config::IoUsed::Uring {
            " (io_uring)"
        } else {
            ""
        }
    } else {
        format!(
            "keep-alive {}{}; pool {}..{} connections",
            match (r.keep_alive, r.close_by) {
                (true, _) => "on",
                (false, Some(CloseBy::Client)) => "off (loadlab closes each connection)",
                (false, _) => "off (the server closes each connection)",
            },
            if r.pipeline > 1 {
                format!(", pipeline {}", r.pipeline)
            } else {
                String::new()
            },
            r.connections,
            r.max_connections,
        ) + if r.io == crate::config::IoUsed::Uring {
            " (io_uring)"
        } else {
            ""
        }
    };
    let _ = writeln!(
        out,
        "  {model}; {}; timeout {}; {transport}",
        counted(r.threads as u64, "thread"),
        ms(Some(r.timeout_ms)),
    );
    let stop = match r.stop_reason {
        StopReason::Duration => "duration elapsed",
        StopReason::Requests => "request count reached",
        StopReason::Interrupted => "INTERRUPTED: partial result",
        StopReason::RowsUsedUp => {
            "every data row sent once (--data-order unique): the run ends there"
        }
    };
    let _ = writeln!(
        out,
        "  measured {:.2}s{} ({stop})\n",
        r.duration_s,
        if r.warmup_s > 0.0 {
            format!(" after {:.1}s warm-up", r.warmup_s)
        } else {
            String::new()
        }
    );

    let errors = r.nonzero_errors();
    if r.all_failed() {
        let _ = writeln!(
            out,
            "  EVERY REQUEST FAILED: no successful response, so no latency figures."
        );
        for (class, n) in &errors {
            let _ = writeln!(out, "    {n:>10}  {}", class.name());
        }
        if r.requests == 0
            && errors
                .iter()
                .any(|(c, _)| matches!(c, ErrorClass::ConnectRefused | ErrorClass::ConnectTimeout))
        {
            let _ = writeln!(
                out,
                "  The target did not accept connections: is the server running at {}?",
                r.url
            );
        }
    } else {
        // A flow's rate counts sessions: its requests were offered at that times the
        // requests of one session.
        // Sessions still running when the window ended had steps left to send: without a
        // warm-up as long as a session, achieved reads below offered by those.
        let left = r
            .sessions
            .as_ref()
            .filter(|s| s.running_at_end > 0)
            .map(|s| {
                format!(
                    "; {} sessions still running at the end had steps left to send",
                    s.running_at_end
                )
            })
            .unwrap_or_default();
        let offered = r
            .offered_requests_rps()
            .map(|o| {
                format!(
                    " of {} offered ({:.1} %{left})",
                    crate::format::num(o),
                    100.0 * r.achieved_rps / o
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<15} {} {}, {} successful, {} errors; achieved {:.1} {}{offered}",
            units.sent,
            r.requests,
            units.replies,
            r.successful,
            r.errors_total,
            r.achieved_rps,
            units.rate
        );
        if let Some(k) = r.messages_per_call {
            let _ = writeln!(
                out,
                "  calls           {k} messages each (the run's last may carry fewer), answered by the call's one reply, timed from its last message's intended send"
            );
        }
        if let (Some(_), Some(t)) = (r.offered_rps, &r.latency_trend) {
            if t.resolved {
                let _ = writeln!(
                    out,
                    "  trend           the server fell behind: latency grew {:.0} ms per second of arrivals (±{:.0}); it delivered its successes at {:.1} % of the rate they were sent",
                    1000.0 * t.slope,
                    1000.0 * t.stderr,
                    100.0 * t.pace
                );
            }
        }
        stats_line(&mut out, "latency", &r.latency_ms);
        stats_line(&mut out, "service time", &r.service_time_ms);
        if r.connect_time_ms.count > 0 {
            stats_line(&mut out, "connect time", &r.connect_time_ms);
        }
        if let Some(t) = &r.stream_timing {
            if t.first_message_ms.count > 0 {
                stats_line(&mut out, "first message", &t.first_message_ms);
            }
            if t.gap_ms.count > 0 {
                stats_line(&mut out, "gaps", &t.gap_ms);
            }
            match &t.opened {
                // The latency above is the first messages' only.
                Some(o) => {
                    let messages = t.first_message_ms.count + t.gap_ms.count;
                    let _ = writeln!(
                        out,
                        "  {:<15} each held {} after its first message: {} held to it, {} ended by the server before it, {} broken (a gap past the timeout, an error status, a reset); {} messages per stream-second",
                        "lifetimes",
                        humantime::format_duration(std::time::Duration::from_millis(o.lifetime_ms as u64)),
                        o.ends.lived,
                        o.ends.ended,
                        o.ends.broken,
                        crate::format::num(messages as f64 / t.stream_seconds.max(1) as f64),
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "  {:<15} {} streams' first {units}, {} gaps between {units} on a stream (both in the latency above)",
                        "",
                        t.first_message_ms.count,
                        t.gap_ms.count,
                        units = units.sent
                    );
                }
            }
            if let Some((failed, held)) = t.starved() {
                let _ = writeln!(
                    out,
                    "  {:<15} {failed} of {held} stream-seconds ({}) missed {what}: a wait for it timed out or ended in an error in that second",
                    "starved",
                    crate::format::pct_abs(failed as f64 / held as f64),
                    what = if units.sent == "events" { "an event" } else { "a message" },
                );
            }
        }
        if let Some(d) = &r.server_delay {
            server_delay_lines(&mut out, d);
        }
        if r.offered_rps.is_some() {
            let _ = writeln!(
                out,
                "  schedule lag    p50 {}  p99 {}  max {}",
                ms(Some(r.schedule_lag_ms.p50)),
                ms(Some(r.schedule_lag_ms.p99)),
                ms(Some(r.schedule_lag_ms.max))
            );
        }
        if !errors.is_empty() {
            let list: Vec<String> = errors
                .iter()
                .map(|(class, n)| format!("{} {n}", class.name()))
                .collect();
            let _ = writeln!(out, "  errors          {}", list.join(", "));
        }
    }
    // A gRPC call answers 200 unless a proxy stood in the way: its status is the gRPC one.
    if r.grpc_status.is_empty() || r.status_codes.keys().any(|c| c != "200") {
        counts_line(&mut out, "status codes", &r.status_codes);
    }
    counts_line(&mut out, "gRPC status", &r.grpc_status);
    counts_line(&mut out, "close codes", &r.ws_close_codes);
    session_lines(&mut out, r);
    traffic_lines(&mut out, r);
    if let Some(m) = &r.matched_by {
        let _ = writeln!(
            out,
            "  matched by      {} (each reply answers the message whose request held the number it echoes); {} replies matched no message waiting{}",
            m.field,
            m.unmatched,
            if m.unmatched > 0 { " and were passed over" } else { "" }
        );
    }
    if let Some(stalls) = r.window_stalls.filter(|n| *n > 0) {
        let _ = writeln!(
            out,
            "  flow control    {stalls} {} waited for the server's flow-control window (it granted too little to send them when due; the wait is in their latency)",
            units.sent
        );
    }
    if r.server_closes > 0 || r.resent_unprocessed > 0 {
        let _ = writeln!(
            out,
            "  server closes   {} connections closed gracefully by the server{}; {} requests it never processed re-sent",
            r.server_closes,
            r.requests_per_server_close
                .map(|n| format!(" (after {n:.0} requests on average)"))
                .unwrap_or_default(),
            r.resent_unprocessed
        );
    }
    let _ = writeln!(
        out,
        "  generator       {:.2} CPU-s ({:.0} {} per CPU-second), peak RSS {:.1} MB, {} connections opened",
        r.generator_cpu_seconds,
        // Every request either succeeded or failed once.
        if r.generator_cpu_seconds > 0.0 { (r.successful + r.errors_total) as f64 / r.generator_cpu_seconds } else { 0.0 },
        units.sent,
        r.generator_peak_rss_bytes as f64 / 1e6,
        r.connections_opened
    );
    if let Some(held) = r.connections_held {
        let _ = writeln!(
            out,
            "  held            {held} of {} {} still open when the run ended",
            // gRPC streams are held over a few connections: --concurrency of them.
            if r.protocol.multiplexed() {
                r.concurrency
            } else {
                r.connections
            },
            if r.protocol == crate::config::Protocol::Sse || r.protocol.grpc_stream() {
                "streams"
            } else {
                "connections"
            }
        );
    }
    agent_lines(&mut out, r);
    if r.generator_limited {
        let _ = writeln!(
            out,
            "\n  WARNING: generator-limited. loadlab itself may have limited this run; do not blame the server for it:"
        );
        for n in &r.generator_notes {
            let _ = writeln!(out, "    - {n}");
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "\n  WARNING: {w}");
    }
    out
}

/// `n` of a thing, its noun in the plural unless one: "1 thread", "2 threads".
fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
