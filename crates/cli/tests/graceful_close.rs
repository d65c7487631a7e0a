//! A server that closes connections gracefully is not failing: what it never processed is
//! sent again on another connection (HTTP/1.1 behind `Connection: close` or a clean close,
//! HTTP/2 and gRPC streams above `GOAWAY`), counted, and charged from its intended send
//! time; a close in the middle of a response, and streams the server processed and then
//! failed, stay errors.

mod util;

use std::sync::atomic::Ordering;
use std::time::Duration;

use util::goaway::{GoAwayServer, LastStream};
use util::{grpc, helloworld_proto, run, Behavior, TestServer};

/// `loadlab run --http2` against `s`: 2 connections, 32 streams, `n` requests.
fn h2_run(s: &GoAwayServer, n: &str) -> util::RunOutput {
    run(&[
        "--http2",
        &s.url(),
        "-c",
        "2",
        "--concurrency",
        "32",
        "-n",
        n,
    ])
}

/// At most 20,000 requests to a local server that closes gracefully: a request left
/// waiting would end in the 5 s default timeout, a connection left waiting for its close
/// in a hang. A generous bound for a loaded machine, not a performance threshold.
const MID_STEP_BOUND: Duration = Duration::from_secs(60);

/// The run ended on its own within [`MID_STEP_BOUND`] with exit status `code` (0: some
/// request succeeded).
fn assert_ended(r: &util::RunOutput, code: i32) {
    assert_eq!(r.code(), Some(code), "{}", r.stderr);
    assert!(r.took < MID_STEP_BOUND, "took {:?}", r.took);
}

fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {v}"))
}

#[test]
fn http1_requests_pipelined_behind_connection_close_are_resent_once() {
    // Every 100th response says Connection: close; 16 requests are in flight behind it.
    let s = TestServer::start(Behavior::CloseAfter(100));
    let r = run(&[&s.url("/"), "-c", "4", "--pipeline", "16", "-n", "20000"]);
    assert_ended(&r, 0);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert_eq!(u(j, "successful"), 20_000);
    // Each request answered exactly once.
    assert_eq!(s.counters.answered.load(Ordering::Relaxed), 20_000);
    assert!(u(j, "resent_unprocessed") > 0, "{j}");
    let closes = u(j, "server_closes");
    assert!((196..=200).contains(&closes), "{closes} closes");
    let per = j["requests_per_server_close"].as_f64().unwrap();
    assert!((per - 100.0).abs() < 1e-9, "{per}");
    assert!(r.stdout.contains("server closes"), "{}", r.stdout);
    assert!(r.stdout.contains("never processed re-sent"), "{}", r.stdout);
}

#[test]
fn http1_idle_connection_closed_after_a_complete_response_is_resent() {
    // The server closes after every 50th response without saying so.
    let s = TestServer::start(Behavior::SilentCloseAfter(50));
    let r = run(&[&s.url("/"), "-c", "2", "-n", "2000"]);
    assert_ended(&r, 0);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert_eq!(u(j, "successful"), 2000);
    assert_eq!(s.counters.answered.load(Ordering::Relaxed), 2000);
    assert!(u(j, "server_closes") >= 38, "{j}");
}

#[test]
fn a_request_the_server_held_then_closed_unanswered_is_not_loadlabs_wait() {
    // Each connection's second request is held 1.5 s, then its connection closed unanswered:
    // loadlab sends it again on a new connection, and its latency holds the server's 1.5 s,
    // but what loadlab waited before sending it (before_send_ms_max, which the verdicts
    // weigh as loadlab's own lateness) counts to its first send only.
    let hold = Duration::from_millis(1500);
    let s = TestServer::start(Behavior::HoldThenClose { after: 1, hold });
    let r = run(&[
        &s.url("/"),
        "--rate",
        "4",
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "-c",
        "1",
        "--timeout",
        "10s",
    ]);
    assert_ended(&r, 0);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert!(u(j, "resent_unprocessed") >= 2, "{j}");
    let max = j["latency_ms"]["max"].as_f64().unwrap();
    assert!(
        max >= 1500.0,
        "the server's hold is in the latency: {max} ms"
    );
    let waited = j["before_send_ms_max"].as_f64().unwrap();
    assert!(
        waited < max - 1000.0,
        "before_send_ms_max {waited} ms counts the server's hold (latency max {max} ms)"
    );
}

#[test]
fn http1_close_in_the_middle_of_a_response_stays_an_error() {
    let s = TestServer::start(Behavior::CutAfter(10));
    let r = run(&[&s.url("/"), "-c", "1", "-n", "100"]);
    assert_ended(&r, 0);
    let j = r.json();
    assert!(u(j, "errors_total") >= 9, "{}", r.stdout);
    // Each cut response is a connection closed mid-response, not re-sent.
    assert_eq!(
        r.error_count("connection_closed"),
        u(j, "errors_total"),
        "{j}"
    );
    assert_eq!(u(j, "resent_unprocessed"), 0);
}

#[test]
fn http1_post_is_resent_only_when_allowed() {
    let s = TestServer::start(Behavior::CloseAfter(10));
    let args = [
        &s.url("/")[..],
        "-X",
        "POST",
        "-c",
        "1",
        "--pipeline",
        "4",
        "-n",
        "400",
    ];
    let r = run(&args);
    assert_ended(&r, 0);
    assert!(r.error_count("connection_closed") > 0, "{}", r.stdout);
    assert_eq!(u(r.json(), "resent_unprocessed"), 0);
    let mut allowed = args.to_vec();
    allowed.push("--retry-unprocessed");
    let r = run(&allowed);
    assert_ended(&r, 0);
    assert_eq!(u(r.json(), "errors_total"), 0, "{}", r.stdout);
    assert!(u(r.json(), "resent_unprocessed") > 0);
}

#[test]
fn http2_streams_above_goaway_are_resent_and_every_request_is_answered_once() {
    let s = GoAwayServer::start(100, LastStream::Answer, false);
    let r = h2_run(&s, "5000");
    assert_ended(&r, 0);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert_eq!(u(j, "successful"), 5000);
    assert_eq!(s.counters.answered.load(Ordering::Relaxed), 5000);
    assert!(u(j, "resent_unprocessed") > 0, "{j}");
    let closes = u(j, "server_closes");
    assert!((49..=50).contains(&closes), "{closes} closes: {j}");
    let per = j["requests_per_server_close"].as_f64().unwrap();
    assert!((per - 100.0).abs() < 1e-9, "{per}");
}

#[test]
fn http2_streams_the_server_processed_and_then_reset_are_errors() {
    // The last stream before each GOAWAY is reset: processed, then failed.
    let s = GoAwayServer::start(100, LastStream::Reset, false);
    let r = h2_run(&s, "3000");
    // Some requests failed, most succeeded: exit 0 (1 is for nothing succeeded).
    assert_ended(&r, 0);
    let j = r.json();
    let reset = s.counters.reset.load(Ordering::Relaxed);
    assert!(reset >= 29, "{reset}");
    assert_eq!(r.error_count("stream_reset"), reset, "{}", r.stdout);
    assert_eq!(u(j, "errors_total"), reset);
    assert_eq!(
        u(j, "successful"),
        s.counters.answered.load(Ordering::Relaxed)
    );
    assert!(u(j, "resent_unprocessed") > 0, "{j}");
}

#[test]
fn grpc_calls_above_goaway_are_resent() {
    let s = GoAwayServer::start(50, LastStream::Answer, true);
    let proto = helloworld_proto();
    let r = grpc(&[
        &s.addr.to_string(),
        "--proto",
        &proto,
        "--call",
        "helloworld.Greeter/SayHello",
        "-c",
        "2",
        "--concurrency",
        "16",
        "-n",
        "1000",
    ]);
    assert_ended(&r, 0);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert_eq!(j["grpc_status"]["OK"], 1000, "{j}");
    assert_eq!(s.counters.answered.load(Ordering::Relaxed), 1000);
    assert!(u(j, "resent_unprocessed") > 0, "{j}");
}
