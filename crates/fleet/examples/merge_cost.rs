//! What the coordinator pays to merge a step's results: N agents' measurements of a step of
//! D seconds (full latency, service, connect and lag histograms, one latency histogram per
//! second), decoded from the JSON the agents send, merged exactly and summarized.
//!
//! ```text
//! cargo run --release -p loadlab-fleet --example merge_cost -- [AGENTS] [SECONDS]
//! ```
//! Prints one JSON line: agents, seconds, the median merge time over 5 rounds (ms), the
//! time to decode the agents' messages (ms), and the bytes per agent message.

use std::time::Instant;

use loadlab_engine::env::Environment;
use loadlab_engine::records::encode_histogram;
use loadlab_engine::records::{new_histogram, INTERVAL_SIGFIG};
use loadlab_engine::result::{Merged, SecondStats, StopReason};
use loadlab_engine::{Arrival, LoadModel, Measurement, RunShape};
use loadlab_fleet::merge::{merged_result, AgentInfo, Outcome, Part};
use loadlab_fleet::split::Share;

/// xorshift: latencies spread over 0.1-100 ms, so histograms have many buckets.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn measurement(seed: u64, seconds: u64, per_second: u64) -> Measurement {
    let mut rng = seed | 1;
    let mut totals = Merged::empty();
    let mut stats = Vec::new();
    let mut hists = Vec::new();
    for s in 0..seconds {
        let mut h = new_histogram(INTERVAL_SIGFIG);
        for _ in 0..per_second {
            let us = 100 + next(&mut rng) % 100_000;
            h.record(us).unwrap();
            totals.latency.record(us).unwrap();
            totals.service.record(us / 2 + 1).unwrap();
            totals.lag.record(next(&mut rng) % 300 + 1).unwrap();
            totals
                .success_done
                .record(s * 1_000_000 + next(&mut rng) % 1_000_000 + 1)
                .unwrap();
        }
        stats.push(SecondStats {
            completed: per_second,
            successful: per_second,
            ..SecondStats::empty(s)
        });
        hists.push(encode_histogram(&h));
    }
    for _ in 0..64 {
        totals.connect.record(100 + next(&mut rng) % 1000).unwrap();
    }
    totals.responses = seconds * per_second;
    totals.successful = totals.responses;
    totals.status[200] = totals.responses;
    totals.worker_cpu = vec![0.5];
    Measurement {
        totals,
        per_second: stats,
        per_second_latency: hists,
        stop_reason: StopReason::Duration,
        window_ns: seconds * 1_000_000_000,
        measure_start_unix_ns: 1_000_000_000_000,
        start_late_ns: 0,
        cpu_seconds: 1.0,
        peak_rss_bytes: 1 << 24,
        steal: None,
        warnings: Vec::new(),
        resume: None,
        replay: None,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let agents: usize = args.next().map_or(100, |a| a.parse().expect("AGENTS"));
    let seconds: u64 = args.next().map_or(60, |a| a.parse().expect("SECONDS"));
    let per_second = 2_000;
    let shape = RunShape {
        url: "http://10.0.0.1/".into(),
        method: "GET".into(),
        protocol: loadlab_engine::config::Protocol::Http1,
        load: LoadModel::Open {
            rate: (agents as u64 * per_second) as f64,
            arrival: Arrival::Poisson,
        },
        connections: agents as u64 * 64,
        max_connections: agents as u64 * 1024,
        concurrency: 0,
        threads: agents,
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
    };
    // What travels: each agent's measurement as JSON.
    let messages: Vec<String> = (0..agents)
        .map(|i| serde_json::to_string(&measurement(i as u64 + 7, seconds, per_second)).unwrap())
        .collect();
    let bytes = messages.iter().map(String::len).sum::<usize>() / agents;
    let environment = Environment::capture(Vec::new());
    let mut decode_ms = Vec::new();
    let mut merge_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let parts: Vec<Part> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| Part {
                agent: AgentInfo {
                    name: format!("agent-{i}"),
                    address: format!("10.1.{}.{}:40000", i / 250, i % 250),
                    threads: 1,
                    offset_ns: 0,
                    rtt_ns: 100_000,
                },
                share: Share {
                    rate: Some(per_second as f64),
                    connections: 64,
                    max_connections: 1024,
                    concurrency: 0,
                    requests: None,
                    seed: i as u64,
                    threads: 1,
                    part: i,
                    parts: agents,
                },
                outcome: Outcome::Done {
                    shape: RunShape {
                        threads: 1,
                        ..shape.clone()
                    },
                    measurement: Box::new(serde_json::from_str(m).unwrap()),
                },
            })
            .collect();
        decode_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let r = merged_result(&shape, &parts, 1_000_000_000_000, environment.clone()).unwrap();
        merge_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.requests, agents as u64 * seconds * per_second);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{{\"agents\": {agents}, \"seconds\": {seconds}, \"requests_per_agent_second\": {per_second}, \
         \"decode_ms\": {:.1}, \"merge_ms\": {:.1}, \"bytes_per_agent\": {bytes}}}",
        median(&mut decode_ms),
        median(&mut merge_ms)
    );
}
