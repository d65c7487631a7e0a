//! One result from the agents' measurements: added exactly ([`Measurement::merge`]),
//! summarized by the engine's own [`summarize`], with each agent's share and figures in
//! `agents` and everything that concerns one agent said with its name.

use loadlab_engine::config::IoUsed;
use loadlab_engine::env::Environment;
use loadlab_engine::result::AgentShare;
use loadlab_engine::{summarize, Measurement, RunResult, RunShape};

use crate::clock::OFFSET_WARNING_MS;
use crate::split::Share;

/// Agents whose measured windows began further apart than this are a warning.
pub const START_SKEW_WARNING_MS: f64 = 50.0;

/// Who an agent is, as the coordinator knows it.
#[derive(Clone, Debug, Default)]
pub struct AgentInfo {
    /// Name.
    pub name: String,
    /// Address it connected from.
    pub address: String,
    /// Worker threads.
    pub threads: usize,
    /// Its clock minus the coordinator's, ns.
    pub offset_ns: i64,
    /// Round trip of the offset measurement, ns.
    pub rtt_ns: u64,
}

/// How one agent's part of a step ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// It measured its share.
    Done {
        /// Its engine's view of the share.
        shape: RunShape,
        /// What it measured.
        measurement: Box<Measurement>,
    },
    /// It was lost during the step: why.
    Lost(String),
}

/// One agent's part of a step.
#[derive(Clone, Debug)]
pub struct Part {
    /// The agent.
    pub agent: AgentInfo,
    /// What it was given.
    pub share: Share,
    /// What came back.
    pub outcome: Outcome,
}

/// The merged result of a step.
///
/// `shape` is the whole step as the coordinator configured it; `planned_measure_start_ns`
/// is when every agent's measured window was to begin (Unix ns, coordinator clock).
pub fn merged_result(
    shape: &RunShape,
    parts: &[Part],
    planned_measure_start_ns: u64,
    environment: Environment,
) -> Result<RunResult, String> {
    let mut measured = Vec::new();
    let mut agents = Vec::new();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    for p in parts {
        let a = &p.agent;
        let mut share = AgentShare {
            name: a.name.clone(),
            address: a.address.clone(),
            threads: p.share.threads,
            offered_rps: p.share.rate,
            connections: p.share.connections,
            concurrency: p.share.concurrency,
            request_limit: p.share.requests,
            clock_offset_ms: a.offset_ns as f64 / 1e6,
            clock_rtt_ms: a.rtt_ns as f64 / 1e6,
            ..AgentShare::default()
        };
        if share.clock_offset_ms.abs() > OFFSET_WARNING_MS {
            warnings.push(format!(
                "agent {}: its clock is {:+.1} ms off the coordinator's (measured at join, ± {:.1} ms); \
                 loadlab corrects for it, but synchronize the clocks (NTP/chrony) for seconds that line up",
                a.name,
                share.clock_offset_ms,
                share.clock_rtt_ms / 2.0
            ));
        }
        match &p.outcome {
            Outcome::Lost(why) => {
                // A warning, not a generator note: a lost agent does not make the step
                // generator-limited (the verdict reads the loss from `agents`).
                warnings.push(format!(
                    "agent {} was lost during the step ({why}): the figures are the other agents' only",
                    a.name
                ));
                share.lost = Some(why.clone());
            }
            Outcome::Done { shape, measurement } => {
                let mut m = (**measurement).clone();
                // Into the coordinator's clock.
                m.measure_start_unix_ns =
                    (m.measure_start_unix_ns as i128 - a.offset_ns as i128).max(0) as u64;
                share.start_skew_ms =
                    (m.measure_start_unix_ns as f64 - planned_measure_start_ns as f64) / 1e6;
                for w in &m.warnings {
                    warnings.push(format!("agent {}: {w}", a.name));
                }
                let own = summarize(shape, m.clone(), environment.clone());
                share.requests = own.requests;
                share.successful = own.successful;
                share.errors_total = own.errors_total;
                share.achieved_rps = own.achieved_rps;
                share.latency_p50_ms = own.latency_ms.p50;
                share.latency_p99_ms = own.latency_ms.p99;
                share.cpu_seconds = own.generator_cpu_seconds;
                share.generator_limited = own.generator_limited;
                share.generator_notes = own.generator_notes.clone();
                for n in &own.generator_notes {
                    notes.push(format!("agent {}: {n}", a.name));
                }
                measured.push(m);
            }
        }
        agents.push(share);
    }
    let starts: Vec<f64> = agents
        .iter()
        .filter(|a| a.lost.is_none())
        .map(|a| a.start_skew_ms)
        .collect();
    if let (Some(lo), Some(hi)) = (
        starts.iter().copied().reduce(f64::min),
        starts.iter().copied().reduce(f64::max),
    ) {
        if hi - lo > START_SKEW_WARNING_MS {
            warnings.push(format!(
                "the agents' measured windows began {:.0} ms apart (more than {START_SKEW_WARNING_MS} ms): \
                 an agent started late (busy, or its clock is off); per-second figures are smeared by that much",
                hi - lo
            ));
        }
    }
    let mut merged = Measurement::merge(&measured)?;
    // Rows and `${seq}` taken: every agent's together (each keeps its own place).
    merged.resume = measured.iter().filter_map(|m| m.resume).reduce(|a, b| {
        loadlab_engine::config::traffic::Resume {
            next_row: a.next_row + b.next_row,
            next_seq: a.next_seq + b.next_seq,
        }
    });
    // A timed replay shared: the agents' per-second counts added.
    merged.replay =
        loadlab_engine::replay::Fidelity::merge(measured.iter().filter_map(|m| m.replay.as_ref()));
    let mut shape = shape.clone();
    shape.threads = parts.iter().map(|p| p.share.threads).sum();
    // The interface is each agent's own (io_uring where its kernel allows it), not the one
    // the coordinator's kernel would have chosen.
    if let Some((io, warning)) = agents_io(parts) {
        shape.io = io;
        warnings.extend(warning);
    }
    let mut result = summarize(&shape, merged, environment);
    // What limited the generator is said per agent; a merged lag that no single agent
    // shows (several agents each a little late) keeps the merged note.
    if !notes.is_empty() {
        result.generator_notes = notes;
    }
    // The step is generator-limited when an agent was; a merged lag that no single agent
    // shows counts only when every agent reported (a lost agent is not the generator's
    // limit: the verdict reads it from `agents`).
    result.generator_limited = agents.iter().any(|a| a.generator_limited)
        || (result.generator_limited && agents.iter().all(|a| a.lost.is_none()));
    result.warnings.extend(warnings);
    result.agents = agents;
    Ok(result)
}

/// The interface the agents that measured used for HTTP/1.1 (`None` when none did): the one
/// most used (io_uring on a tie), with a warning naming each agent's when they differ.
fn agents_io(parts: &[Part]) -> Option<(IoUsed, Option<String>)> {
    let used: Vec<(&str, IoUsed)> = parts
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Done { shape, .. } => Some((p.agent.name.as_str(), shape.io)),
            Outcome::Lost(_) => None,
        })
        .collect();
    let on = |io: IoUsed| -> Vec<&str> { used.iter().filter(|u| u.1 == io).map(|u| u.0).collect() };
    let (uring, epoll) = (on(IoUsed::Uring), on(IoUsed::Epoll));
    let io = match (uring.len(), epoll.len()) {
        (0, 0) => return None,
        (u, e) if u >= e => IoUsed::Uring,
        _ => IoUsed::Epoll,
    };
    let warning = (!uring.is_empty() && !epoll.is_empty()).then(|| {
        format!(
            "the agents' HTTP/1.1 connections did not all use one interface: io_uring on {}, \
             epoll on {} (the result's `io` says the one most used; see each agent's warnings \
             for why)",
            uring.join(", "),
            epoll.join(", ")
        )
    });
    Some((io, warning))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_engine::config::Protocol;
    use loadlab_engine::records::encode_histogram;
    use loadlab_engine::records::{new_histogram, INTERVAL_SIGFIG};
    use loadlab_engine::result::Merged;
    use loadlab_engine::result::{SecondStats, StopReason};
    use loadlab_engine::{Arrival, LoadModel};

    fn shape(rate: f64) -> RunShape {
        RunShape {
            url: "http://10.0.0.1/".into(),
            method: "GET".into(),
            protocol: Protocol::Http1,
            load: LoadModel::Open {
                rate,
                arrival: Arrival::Constant,
            },
            connections: 4,
            max_connections: 4,
            concurrency: 0,
            threads: 1,
            keep_alive: true,
            close_by: loadlab_engine::CloseBy::Server,
            pipeline: 1,
            io: loadlab_engine::config::IoUsed::Epoll,
            timeout_ms: 5000.0,
            warmup_s: 0.0,
            traffic: None,
            sent_at: None,
            messages_per_call: None,
            match_field: None,
            stream_lifetime_ms: None,
        }
    }

    /// `n` responses of `us` µs each, one per 1/rate s, over `secs` seconds.
    fn measurement(us: u64, per_second: u64, secs: u64, start_ns: u64) -> Measurement {
        let mut totals = Merged::empty();
        let mut seconds = Vec::new();
        let mut hists = Vec::new();
        for s in 0..secs {
            let mut h = new_histogram(INTERVAL_SIGFIG);
            h.record_n(us, per_second).unwrap();
            totals.latency.record_n(us, per_second).unwrap();
            totals.service.record_n(us, per_second).unwrap();
            totals
                .success_done
                .record_n((s + 1) * 1_000_000 - 1, per_second)
                .unwrap();
            seconds.push(SecondStats {
                completed: per_second,
                successful: per_second,
                latency_p50_ms: Some(us as f64 / 1e3),
                latency_p99_ms: Some(us as f64 / 1e3),
                ..SecondStats::empty(s)
            });
            hists.push(encode_histogram(&h));
        }
        totals.responses = per_second * secs;
        totals.successful = per_second * secs;
        totals.status[200] = per_second * secs;
        totals.worker_cpu = vec![0.2];
        Measurement {
            totals,
            per_second: seconds,
            per_second_latency: hists,
            stop_reason: StopReason::Duration,
            window_ns: secs * 1_000_000_000,
            measure_start_unix_ns: start_ns,
            start_late_ns: 0,
            cpu_seconds: 0.5,
            peak_rss_bytes: 1 << 20,
            steal: None,
            warnings: vec![],
            resume: None,
            replay: None,
        }
    }

    fn part(name: &str, offset_ns: i64, outcome: Outcome) -> Part {
        Part {
            agent: AgentInfo {
                name: name.into(),
                address: "10.0.0.2:1234".into(),
                threads: 1,
                offset_ns,
                rtt_ns: 100_000,
            },
            share: Share {
                rate: Some(100.0),
                connections: 1,
                max_connections: 1,
                concurrency: 0,
                requests: None,
                seed: 1,
                threads: 1,
                part: 0,
                parts: 1,
            },
            outcome,
        }
    }

    #[test]
    fn three_agents_merge_exactly_and_keep_their_own_figures() {
        let t0 = 1_000_000_000_000u64;
        // Agent b's clock is 20 ms ahead: after correction all three start together.
        let parts = vec![
            part("a", 0, done(1_000, t0)),
            part("b", 20_000_000, done(3_000, t0 + 20_000_000)),
            part("c", 0, done(9_000, t0)),
        ];
        let r = merged_result(&shape(300.0), &parts, t0, Environment::capture(vec![])).unwrap();
        assert_eq!(r.requests, 3 * 100 * 5);
        assert_eq!(r.latency_ms.count, 1500);
        // The merged histogram is the sum: a third of the responses at each latency.
        assert!((r.latency_ms.p50.unwrap() - 3.0).abs() < 0.01);
        assert!((r.latency_ms.max.unwrap() - 9.0).abs() < 0.01);
        assert_eq!(r.per_second.len(), 5);
        assert!(r.per_second.iter().all(|s| s.completed == 300));
        assert_eq!(r.threads, 3);
        assert_eq!(r.agents.len(), 3);
        assert!((r.agents[2].latency_p99_ms.unwrap() - 9.0).abs() < 0.01);
        assert!(r.agents.iter().all(|a| a.start_skew_ms.abs() < 1e-6));
        assert!(
            r.warnings
                .iter()
                .any(|w| w.starts_with("agent b: its clock is +20.0 ms off")),
            "{:?}",
            r.warnings
        );
        assert!(!r.generator_limited);
    }

    fn done(us: u64, start: u64) -> Outcome {
        Outcome::Done {
            shape: shape(100.0),
            measurement: Box::new(measurement(us, 100, 5, start)),
        }
    }

    #[test]
    fn the_busiest_hosts_steal_time_is_kept_when_measurements_merge() {
        use loadlab_engine::runner::Steal;
        let t0 = 1_000_000_000_000u64;
        let with = |stolen_ms: f64, total_ms: f64| {
            let mut m = measurement(1_000, 100, 5, t0);
            m.steal = Some(Steal {
                stolen_ms,
                total_ms,
            });
            m
        };
        // The largest share, not the largest figure: 30 of 1,000 ms beats 40 of 4,000.
        let merged = Measurement::merge(&[
            with(40.0, 4000.0),
            measurement(1_000, 100, 5, t0),
            with(30.0, 1000.0),
        ])
        .unwrap();
        assert_eq!(
            merged.steal,
            Some(Steal {
                stolen_ms: 30.0,
                total_ms: 1000.0
            })
        );
        // No machine read it (an older agent): nothing claimed.
        let merged = Measurement::merge(&[measurement(1_000, 100, 5, t0)]).unwrap();
        assert_eq!(merged.steal, None);
    }

    #[test]
    fn a_lost_agent_is_named_and_not_blamed_on_anyone_else() {
        let t0 = 5_000_000_000u64;
        let parts = vec![
            part("a", 0, done(1_000, t0)),
            part("b", 0, Outcome::Lost("connection reset".into())),
        ];
        let r = merged_result(&shape(200.0), &parts, t0, Environment::capture(vec![])).unwrap();
        assert_eq!(r.requests, 500);
        assert_eq!(r.agents[1].lost.as_deref(), Some("connection reset"));
        assert!(!r.generator_limited);
        // Notes explain the flag, so there are none; the loss is a warning.
        assert!(r.generator_notes.is_empty(), "{:?}", r.generator_notes);
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("agent b was lost during the step")));
    }

    #[test]
    fn seconds_align_by_wall_clock() {
        let t0 = 9_000_000_000u64;
        // Agent b began its window one second later (it was told to, or it was late).
        let parts = vec![
            part("a", 0, done(1_000, t0)),
            part("b", 0, done(1_000, t0 + 1_000_000_000)),
        ];
        let r = merged_result(&shape(200.0), &parts, t0, Environment::capture(vec![])).unwrap();
        let counts: Vec<u64> = r.per_second.iter().map(|s| s.completed).collect();
        assert_eq!(counts, vec![100, 200, 200, 200, 200, 100]);
        assert!(r.warnings.iter().any(|w| w.contains("began 1000 ms apart")));
    }

    #[test]
    fn the_result_says_the_interface_the_agents_used_not_the_coordinators() {
        let t0 = 9_000_000_000u64;
        let on = |name: &str, io: IoUsed| {
            let mut sh = shape(100.0);
            sh.io = io;
            part(
                name,
                0,
                Outcome::Done {
                    shape: sh,
                    measurement: Box::new(measurement(1_000, 100, 5, t0)),
                },
            )
        };
        // The coordinator's kernel would have taken epoll; both agents used io_uring.
        let coordinator = shape(200.0);
        assert_eq!(coordinator.io, IoUsed::Epoll);
        let env = || Environment::capture(vec![]);
        let both = [on("a", IoUsed::Uring), on("b", IoUsed::Uring)];
        let r = merged_result(&coordinator, &both, t0, env()).unwrap();
        assert_eq!(r.io, IoUsed::Uring);
        assert!(!r.warnings.iter().any(|w| w.contains("interface")));
        // One agent's kernel refused io_uring: the most used, and each agent's named.
        let mixed = [
            on("a", IoUsed::Uring),
            on("b", IoUsed::Epoll),
            on("c", IoUsed::Epoll),
        ];
        let r = merged_result(&shape(300.0), &mixed, t0, env()).unwrap();
        assert_eq!(r.io, IoUsed::Epoll);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("io_uring on a, epoll on b, c")),
            "{:?}",
            r.warnings
        );
        // A lost agent used nothing.
        let lost = [
            on("a", IoUsed::Uring),
            part("b", 0, Outcome::Lost("gone".into())),
        ];
        let r = merged_result(&shape(200.0), &lost, t0, env()).unwrap();
        assert_eq!(r.io, IoUsed::Uring);
    }
}
