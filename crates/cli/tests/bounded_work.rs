//! Bounded work for every input: an absurd number is refused with its allowed range before
//! anything is sent, and a schedule the machine cannot keep ends on time, with the arrivals
//! it never sent counted once (not one by one) and the run marked generator-limited.

mod util;

use std::process::Command;
use std::time::{Duration, Instant};

use util::{loadlab_bin, output_within, Behavior, TestServer};

/// A loopback port where nothing listens (bound, then closed).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn absurd_numbers_are_refused_with_the_allowed_range() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "1e9"], "--rate = 1000000000 is not allowed: a number of requests per second above 0 and at most 10000000"),
        (&["--rate", "inf"], "--rate = inf"),
        (&["-c", "2000000"], "--connections = 2000000 is not allowed: 1 to 1000000"),
        (&["--rate", "10", "--max-connections", "5000000"], "--max-connections = 5000000 is not allowed: at most 1000000"),
        (&["--http2", "--concurrency", "10000000"], "--concurrency = 10000000 is not allowed: at most 1000000"),
        (&["-d", "9h"], "--duration = 9h is not allowed: at most 8h"),
        (&["--warmup", "2h"], "--warmup = 2h is not allowed: at most 1h"),
        (&["--timeout", "1day"], "--timeout = 1day is not allowed: at most 1h"),
        (&["--threads", "5000"], "--threads = 5000 is not allowed: 1 to 1024"),
        (&["--pipeline", "5000"], "--pipeline = 5000 is not allowed: 1 to 1024"),
    ];
    for (args, needle) in cases {
        let (out, took) = output_within(
            Command::new(loadlab_bin()).arg("run").arg(&url).args(*args),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected `{needle}` in: {stderr}"
        );
        // Refused before anything is sent: no measurement, no waiting.
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(took < Duration::from_secs(10), "{args:?}: took {took:?}");
    }
}

/// The run of the issue, at the highest rate allowed: a typo of a few zeros against a port
/// where nothing listens ran for more than ten minutes. It now ends one timeout after its
/// window, with the arrivals it could not release counted as never sent.
#[test]
fn a_rate_the_machine_cannot_generate_ends_on_time() {
    for arrival in ["constant", "poisson"] {
        let url = format!("http://127.0.0.1:{}/", closed_port());
        let started = Instant::now();
        let r = util::run(&[
            &url,
            "--rate",
            "10000000",
            "--arrival",
            arrival,
            "-d",
            "1s",
            "--timeout",
            "500ms",
            "-q",
        ]);
        let took = started.elapsed();
        // 1 s of window + 0.5 s of timeout; the rest is slack for a loaded machine.
        assert!(took < Duration::from_secs(20), "{arrival}: took {took:?}");
        assert_eq!(
            r.code(),
            Some(1),
            "{arrival}: every request failed\n{}",
            r.stderr
        );
        let j = r.json();
        let unsent = j["unsent"].as_u64().unwrap();
        let sent = j["errors_total"].as_u64().unwrap();
        assert!(unsent > 0, "{arrival}: {j}");
        assert!(r.error_count("connect_refused") > 0, "{arrival}");
        // Every measured arrival is either attempted or counted as never sent, once.
        let offered = 10_000_000u64;
        assert!(
            unsent + sent <= offered + offered / 100 && unsent + sent >= offered / 2,
            "{arrival}: {unsent} unsent + {sent} attempted, of about {offered}"
        );
        assert_eq!(j["generator_limited"], true);
        let notes = j["generator_notes"].to_string();
        assert!(
            notes.contains("arrivals were never sent: loadlab fell more than the timeout behind"),
            "{arrival}: {notes}"
        );
        // Bounded memory: the queue of released arrivals is capped.
        let rss = j["generator_peak_rss_bytes"].as_u64().unwrap();
        assert!(rss < 300 << 20, "{arrival}: peak RSS {rss}");
    }
}

/// A server that takes connections and never answers, one connection allowed, a rate far
/// above what it can absorb: the arrivals waiting for the connection fill the queue, which
/// stays within its cap; the ones that find it full are counted as never sent.
#[test]
fn the_queue_of_waiting_arrivals_is_capped() {
    let server = TestServer::start(Behavior::Silent);
    let url = server.url("/");
    let started = Instant::now();
    let r = util::run(&[
        &url,
        "--rate",
        "4000000",
        "-d",
        "2s",
        // Long enough that the queue fills before its oldest arrival expires, even from a
        // debug build's dispatcher on a busy machine (it needs 420,000 releases a second;
        // with 3 s it needed 1.4 million and once fell short).
        "--timeout",
        "10s",
        "-c",
        "1",
        "--max-connections",
        "1",
        "--threads",
        "1",
        "-q",
    ]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let j = r.json();
    assert!(r.error_count("request_timeout") > 0, "{j}");
    // Nothing was ever answered: exit 1.
    assert_eq!(j["successful"], 0, "{j}");
    assert_eq!(r.code(), Some(1), "{}", r.stderr);
    assert!(j["unsent"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["generator_limited"], true);
    let rss = j["generator_peak_rss_bytes"].as_u64().unwrap();
    assert!(rss < 300 << 20, "peak RSS {rss}");
}

/// The harness's own bound: a command still running past it is killed, and the test fails
/// with `loadlab hung`, the command and what it wrote, instead of hanging (and CI with it).
#[test]
fn a_command_past_its_bound_is_killed_and_fails_the_test() {
    let started = Instant::now();
    let failed = std::panic::catch_unwind(|| {
        output_within(
            Command::new("sh").args(["-c", "echo pid $$; exec sleep 60"]),
            Duration::from_secs(1),
        )
    })
    .expect_err("a command past its bound fails the test");
    assert!(started.elapsed() < Duration::from_secs(10));
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.starts_with("loadlab hung: ") && message.contains("still running after 1s"),
        "{message}"
    );
    assert!(message.contains("sleep 60"), "{message}");
    let pid: u32 = message
        .split_once("stdout:\npid ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {message}"));
    // Killed and reaped: no such process any more.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} still there"
    );
}
