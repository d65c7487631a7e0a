//! Server-sent events (`loadlab run URL --sse`): streams held at a count, each event a
//! reply whose latency is the wait for it; a stream the server ends opened again with
//! `Last-Event-ID`; every misbehaviour of a server ends bounded and named. Against Node's
//! HTTP stack (nobody here wrote it) and a server of our own.

mod util;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::server::Server;
use util::sse::{SseBehavior, SseServer};

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `loadlab run URL --sse -d SECS` plus `extra`: its JSON result; it exits 0, or 1 when no
/// event came.
fn run_sse(url: &str, secs: &str, extra: &[&str]) -> Value {
    let mut args = vec![url, "--sse", "-d", secs];
    args.extend_from_slice(extra);
    let out = util::run(&args);
    let j = out.json.expect("a JSON result");
    let code = if u(&j["successful"]) == 0 { 1 } else { 0 };
    assert_eq!(
        out.output.status.code(),
        Some(code),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(j["protocol"], "sse", "{j}");
    j
}

#[test]
fn events_of_held_streams_are_counted_with_the_gaps_between_them() {
    let server = SseServer::start(SseBehavior::Events {
        every_ms: 50,
        end_after: None,
    });
    let j = run_sse(&server.url(), "2s", &["-c", "10", "--warmup", "500ms"]);
    // 10 streams × 20 events a second × 2 s.
    let events = u(&j["requests"]);
    assert!((360..=410).contains(&events), "{j}");
    assert_eq!(u(&j["successful"]), events, "{j}");
    assert_eq!(u(&j["errors_total"]), 0, "{j}");
    assert_eq!(u(&j["status_codes"]["200"]), events, "{j}");
    assert_eq!(u(&j["connections_opened"]), 10, "{j}");
    // Every stream was open, with its events coming, when the run ended.
    assert_eq!(u(&j["connections_held"]), 10, "{j}");
    // Each event's latency is the gap since the one before: about 50 ms, the server's
    // sleep plus its writes.
    let p50 = f(&j["latency_ms"]["p50"]);
    assert!((40.0..=70.0).contains(&p50), "{j}");
    assert!(server.sent.load(std::sync::atomic::Ordering::Relaxed) >= events);
}

#[test]
fn a_stream_the_server_ends_is_opened_again_with_the_last_event_id() {
    let server = SseServer::start(SseBehavior::Events {
        every_ms: 20,
        end_after: Some(5),
    });
    let j = run_sse(&server.url(), "2s", &["-c", "2"]);
    assert_eq!(u(&j["errors_total"]), 0, "{j}");
    assert!(u(&j["server_closes"]) >= 2, "{j}");
    assert!(u(&j["connections_opened"]) >= 4, "{j}");
    // Each stream's first event apart from the gaps after it: one first event per stream
    // opened (every one sent some), four gaps after it (but the two streams the run's end
    // cut short), and every event one or the other.
    let (first, gaps) = (
        u(&j["stream_timing"]["first_message_ms"]["count"]),
        u(&j["stream_timing"]["gap_ms"]["count"]),
    );
    assert_eq!(first + gaps, u(&j["successful"]), "{j}");
    assert_eq!(first, u(&j["connections_opened"]), "{j}");
    assert!(
        gaps <= 4 * first && gaps + 8 >= 4 * first,
        "{first} first events, {gaps} gaps: {j}"
    );
    let ids = server.last_ids.lock().unwrap().clone();
    assert!(
        !ids.is_empty(),
        "no stream was opened again with Last-Event-ID"
    );
    // Every reopened stream said the last id of the one before: 5 events per stream.
    assert!(
        ids.iter()
            .all(|id| id.parse::<u64>().is_ok_and(|n| n % 5 == 0)),
        "{ids:?}"
    );
}

#[test]
fn each_misbehaviour_ends_bounded_and_named() {
    let cases = [
        (SseBehavior::Stall, "request_timeout"),
        (SseBehavior::Status(503), "http_5xx"),
        (SseBehavior::NotAStream, "malformed_response"),
        (SseBehavior::BadChunk, "malformed_response"),
    ];
    for (behavior, class) in cases {
        let server = SseServer::start(behavior);
        let t0 = Instant::now();
        let j = run_sse(&server.url(), "2s", &["-c", "3", "--timeout", "300ms"]);
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{behavior:?} took {:?}",
            t0.elapsed()
        );
        assert!(u(&j["errors"][class]) > 0, "{behavior:?} → {class}: {j}");
        let other: u64 = j["errors"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.as_str() != class)
            .map(|(_, v)| u(v))
            .sum();
        assert_eq!(other, 0, "{behavior:?}: only {class}: {j}");
    }
}

#[test]
fn streams_are_refused_with_a_rate_or_a_body() {
    for args in [
        &["--rate", "10"][..],
        &["--body", "x"][..],
        &["--http2"][..],
        &["--max-connections", "9"][..],
    ] {
        let mut all = vec!["http://127.0.0.1:9/", "--sse", "-d", "1s"];
        all.extend_from_slice(args);
        let out = util::run(&all);
        assert_eq!(
            out.output.status.code(),
            Some(2),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("sse") || out.stderr.contains("stream"),
            "{}",
            out.stderr
        );
    }
}

/// Node's HTTP stack (nobody here wrote it) broadcasting an event to every stream each
/// 100 ms: 10 events a second on every stream held.
#[test]
#[ignore = "needs Node.js (./test.sh installs it)"]
fn a_node_event_stream_is_read_at_its_own_pace() {
    let js = "const http = require('http');\
        const streams = new Set(); let id = 0;\
        const s = http.createServer((q, r) => {\
          r.writeHead(200, {'content-type': 'text/event-stream'});\
          r.write(': hello\\n\\n'); streams.add(r); q.on('close', () => streams.delete(r));\
        });\
        setInterval(() => { id++; for (const r of streams) r.write('id: ' + id + '\\ndata: ' + Date.now() + '\\n\\n'); }, 100);\
        s.listen(0, '127.0.0.1', () => console.log('port ' + s.address().port));";
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "node", "-e", js]);
    let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    let url = format!("http://127.0.0.1:{}/", server.port);
    let j = run_sse(
        &url,
        "3s",
        &["-c", "50", "--warmup", "500ms", "--cpus", "1"],
    );
    let events = u(&j["requests"]);
    assert!((1_400..=1_550).contains(&events), "{j}");
    assert_eq!(u(&j["errors_total"]), 0, "{j}");
    let p50 = f(&j["latency_ms"]["p50"]);
    assert!((90.0..=115.0).contains(&p50), "{j}");
}

/// The open-stream knee (`knee --sse`) of a server of known capacity: one broadcaster
/// that writes each stream's event in turn, 1 ms each, a round every 100 ms. Past 100
/// streams a round outlasts its interval, and the gaps between events grow with the
/// streams (N ms at N streams): under a p99 gap of 150 ms it holds about 150 streams.
#[test]
fn the_open_stream_knee_of_a_broadcaster_is_where_its_round_outlasts_the_slo() {
    let server = SseServer::start(SseBehavior::Broadcast {
        every_ms: 100,
        per_stream_ms: 1,
    });
    let search = || {
        let out = util::temp_path("sse-knee");
        let (o, _) = util::output_within(
            Command::new(util::loadlab_bin())
                .args(["knee", "-q", &server.url(), "--sse", "--cpus", "1"])
                .args(["--threads", "1", "--step", "2s", "--warmup", "1s"])
                .args(["--pause", "300ms", "--slo", "p99<150ms"])
                .args(["--start", "20", "--max", "640", "--confirm", "0"])
                .arg("--out")
                .arg(&out),
            Duration::from_secs(300),
        );
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        util::lab::lines(&out.join("configs.jsonl"))[0]["knees"][0].clone()
    };
    // A search whose narrowing loadlab's own lateness stopped is run once more; so is one
    // whose knee is outside the broadcaster's and whose failing step no rule could explain
    // (CI of 36c051d: the host took 13 % of the CPUs, one gap past 150 ms at 40 streams
    // whose mean gap was the server's 100 ms: nothing of the server's, and the product said
    // so).
    // A range with an open end (no knee below the start, or none up to the maximum) is
    // outside too.
    let in_band = |k: &Value| {
        let range = &k["outcome"]["range"];
        range[0].as_f64().is_some_and(|lo| lo >= 110.0)
            && range[1].as_f64().is_some_and(|hi| hi <= 190.0)
    };
    let mut k = search();
    if !k["outcome"]["stopped"].is_null()
        || k["outcome"]["limited_by"] == "generator_limited"
        || (!in_band(&k) && k["diagnosis"]["findings"][0]["bottleneck"] == "unknown")
    {
        k = search();
    }
    assert!(in_band(&k), "{}: {k}", k["outcome"]["summary"]);
}

/// Events that say when the server made them (`--sent-at`): Node's HTTP stack stamping each
/// event (`Date.now()`) and keeping its event loop busy 20 ms before writing it. The delay
/// loadlab reports is those 20 ms, never less; an event of bare data (the whole document, an
/// empty pointer) reads as well.
#[test]
#[ignore = "needs Node (./test.sh installs nodejs)"]
fn the_delay_an_event_carries_is_its_hold_in_the_server() {
    let js = "const http = require('http');\
        const streams = new Set();\
        const s = http.createServer((q, r) => {\
          r.writeHead(200, {'content-type': 'text/event-stream'});\
          r.write(': hello\\n\\n'); streams.add(r); q.on('close', () => streams.delete(r));\
        });\
        setInterval(() => {\
          const ts = Date.now(); const end = ts + 20; while (Date.now() < end) {}\
          for (const r of streams) r.write('data: {\"n\": 1,\\ndata:  \"ts\": ' + ts + '}\\n\\n');\
        }, 100);\
        s.listen(0, '127.0.0.1', () => console.log('port ' + s.address().port));";
    let server = Server::spawn(
        {
            let mut cmd = Command::new("node");
            cmd.args(["-e", js]);
            cmd
        },
        |l| l.strip_prefix("port ")?.parse().ok(),
    );
    let url = format!("http://127.0.0.1:{}/", server.port);
    let j = run_sse(&url, "2s", &["-c", "3", "--sent-at", "/ts"]);
    let d = &j["server_delay"];
    assert_eq!(d["pointer"], "/ts", "{j}");
    assert_eq!(u(&d["missing"]), 0, "{j}");
    assert_eq!(u(&d["ahead"]), 0, "{j}");
    assert_eq!(u(&d["delay_ms"]["count"]), u(&j["requests"]), "{j}");
    // Date.now()'s millisecond is truncated: a 20 ms hold shows 19 ms and up.
    assert!(f(&d["delay_ms"]["min"]) >= 19.0, "{j}");
    let p50 = f(&d["delay_ms"]["p50"]);
    assert!((19.0..=35.0).contains(&p50), "{j}");
    // The data's lines are joined with newlines: a JSON object over two `data:` lines is
    // read whole. Not a pointer: refused before any load.
    let out = util::run(&[&url, "--sse", "-c", "1", "-d", "1s", "--sent-at", "ts"]);
    assert_eq!(out.output.status.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("JSON pointer"), "{}", out.stderr);
}
