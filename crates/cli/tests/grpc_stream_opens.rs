//! `loadlab grpc --stream-lifetime` on a server-streaming method: streams opened at the
//! rate, each one's first message its reply (timed from its intended open), the messages
//! after it its gaps, reset a lifetime after its first message; how each ended counted
//! (held to its lifetime, ended by the server, broken), and the knee in streams opened per
//! second.
//!
//! The server: Python's grpcio (Debian's python3-grpcio), which nobody here wrote, with a
//! generic handler for `ticker.Ticker/Subscribe` (proto/ticker.proto) whose own counters
//! (streams begun, ticks handed to grpcio) are the truth. Each stream holds one thread of
//! its pool while it lasts, so a pool of K threads serves K / lifetime streams a second.

mod util;

use std::path::PathBuf;

use serde_json::Value;
use util::server::Server;
use util::{grpc, RunOutput};

fn ticker_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto").into()
}

/// grpcio serving Subscribe on CPU 0 with `threads` in its pool: a tick every `gap_ms`
/// while the client holds the stream; a request whose topic is `OK`, a status code's name
/// (`UNAVAILABLE`) or `STALL` ends its stream that way after `after` ticks (`STALL`: open
/// and silent). On SIGTERM it writes `streams ticks` to its counts file (a tick counts as
/// it is handed to grpcio).
struct Feed {
    server: Server,
    counts: PathBuf,
}

impl Feed {
    fn start(gap_ms: u32, threads: u32, after: u32) -> Feed {
        let body = "gap = float(sys.argv[1]) / 1000; after = int(sys.argv[2])\n\
            def handle(request, context):\n\
            \x20   with lock: counts[0] += 1\n\
            \x20   end = fields(request).get(1, b'').decode()\n\
            \x20   seq = 0\n\
            \x20   while context.is_active():\n\
            \x20       if end and seq == after:\n\
            \x20           if end == 'OK': return\n\
            \x20           if end == 'STALL':\n\
            \x20               while context.is_active(): time.sleep(0.01)\n\
            \x20               return\n\
            \x20           context.abort(getattr(grpc.StatusCode, end), 'ended on purpose')\n\
            \x20       seq += 1\n\
            \x20       with lock: counts[1] += 1\n\
            \x20       yield b'\\x08' + enc(seq) + b'\\x10' + enc(time.time_ns() // 1000)\n\
            \x20       until = time.monotonic() + gap\n\
            \x20       while time.monotonic() < until and context.is_active():\n\
            \x20           time.sleep(min(0.01, max(0.0, until - time.monotonic())))";
        let (server, counts) = util::server::grpcio_counting(
            "Subscribe",
            "unary_stream_rpc_method_handler",
            threads,
            body,
            &[gap_ms.to_string(), after.to_string()],
        );
        Feed { server, counts }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.server.port)
    }

    /// Stops it: (streams begun, ticks handed to grpcio).
    fn stop(mut self) -> (u64, u64) {
        let c = util::server::stop_and_read_counts(&mut self.server, &self.counts);
        (c[0], c[1])
    }
}

/// Streams of `topic` opened at `rate` a second for `duration`, each held `lifetime`
/// after its first message, every stream measured (no warm-up).
fn open_streams(
    addr: &str,
    topic: &str,
    rate: &str,
    lifetime: &str,
    duration: &str,
    timeout: &str,
) -> RunOutput {
    let proto = ticker_proto();
    let message = format!("{{\"topic\":\"{topic}\"}}");
    grpc(&[
        addr,
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "-D",
        &message,
        "--rate",
        rate,
        "--stream-lifetime",
        lifetime,
        "--connections",
        "1",
        "-d",
        duration,
        "--warmup",
        "0s",
        "--timeout",
        timeout,
        "--threads",
        "1",
        "--cpus",
        "1",
    ])
}

fn u(j: &Value, key: &str) -> u64 {
    j[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {j}"))
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn streams_opened_at_a_rate_are_held_their_lifetime_as_the_servers_counters_say() {
    // 32 threads: every stream is served at once; a tick every 100 ms.
    let feed = Feed::start(100, 32, 0);
    let r = open_streams(&feed.addr(), "", "10", "500ms", "3s", "2s");
    let (streams, ticks) = feed.stop();
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_stream_opens", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    // Every stream the server began is one arrival, answered by its first message.
    assert!((25..=31).contains(&streams), "{streams} streams begun");
    assert_eq!(u(j, "requests"), streams, "{}", r.stdout);
    assert_eq!(u(j, "successful"), streams, "{}", r.stdout);
    let t = &j["stream_timing"];
    let first = u(&t["first_message_ms"], "count");
    let gaps = u(&t["gap_ms"], "count");
    assert_eq!(first, streams, "{t}");
    // Each held to its lifetime and reset: none ended or broke.
    let o = &t["opened"];
    assert_eq!(o["lifetime_ms"].as_f64(), Some(500.0), "{o}");
    assert_eq!(
        (u(o, "lived"), u(o, "ended"), u(o, "broken")),
        (streams, 0, 0)
    );
    // Half a second of a tick every 100 ms is about five ticks a stream: at least three
    // came, and the server handed over no more than loadlab took but the one or two in
    // flight when a stream was reset.
    let received = first + gaps;
    assert!(
        received >= 3 * streams,
        "{received} ticks in {streams} streams"
    );
    assert!(
        received <= ticks && ticks <= received + 2 * streams,
        "loadlab took {received} ticks, the server handed over {ticks}"
    );
    // Only first messages are replies: the latency is theirs.
    assert_eq!(u(&j["latency_ms"], "count"), streams, "{j}");
    assert!(u(t, "stream_seconds") >= streams, "{t}");
    assert_eq!(u(t, "failed_stream_seconds"), 0, "{t}");
    assert!(r.stdout.contains("streams/s"), "{}", r.stdout);
    assert!(
        r.stdout.contains("500ms after its first message"),
        "{}",
        r.stdout
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_ended_or_broken_before_its_lifetime_is_counted_so_and_fails_its_seconds() {
    // Two ticks 50 ms apart, then the end the topic names, well before the 2 s lifetime.
    let feed = Feed::start(50, 32, 2);
    let addr = feed.addr();
    let ended = open_streams(&addr, "OK", "5", "2s", "2s", "500ms");
    let refused = open_streams(&addr, "UNAVAILABLE", "5", "2s", "2s", "500ms");
    let stalled = open_streams(&addr, "STALL", "5", "2s", "2s", "500ms");
    let (streams, _) = feed.stop();
    let ends = |r: &RunOutput| {
        let j = r.json();
        let t = j["stream_timing"].clone();
        let o = &t["opened"];
        (
            u(j, "requests"),
            (u(o, "lived"), u(o, "ended"), u(o, "broken")),
            u(&t, "failed_stream_seconds"),
            u(&t, "stream_seconds"),
        )
    };
    // Ended with OK: counted as ended, no second failed.
    let (n, e, failed, _) = ends(&ended);
    assert_eq!(e, (0, n, 0), "{}", ended.stdout);
    assert_eq!(failed, 0, "{}", ended.stdout);
    // Broken by a status, or silent past the timeout: broken, and the seconds from the
    // last tick on failed (the first ticks came: the streams' replies succeeded).
    for r in [&refused, &stalled] {
        let (n, e, failed, held) = ends(r);
        assert_eq!(e, (0, 0, n), "{}", r.stdout);
        assert!(
            failed >= 1 && failed <= held,
            "{failed} of {held}: {}",
            r.stdout
        );
        assert_eq!(u(r.json(), "successful"), n, "{}", r.stdout);
        assert!(r.stdout.contains("broken"), "{}", r.stdout);
    }
    // Each run's streams were all begun at the server.
    assert_eq!(
        streams,
        ends(&ended).0 + ends(&refused).0 + ends(&stalled).0,
        "streams begun"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn the_knee_of_streams_opened_at_a_rate_is_the_pool_over_the_lifetime_and_named() {
    // 4 threads, each stream held 500 ms after its first tick (and about 10 ms more until
    // grpcio sees the reset): about 7.8 streams a second.
    let feed = Feed::start(100, 4, 0);
    let proto = ticker_proto();
    let (stdout, out) = util::lab::knee_search(&[
        &feed.addr(),
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "--stream-lifetime",
        "500ms",
        "--start",
        "5",
        "--max",
        "40",
        "--precision",
        "0.1",
        "--step",
        "3s",
        "--connections",
        "1",
        "--threads",
        "1",
        "--cpus",
        "1",
    ]);
    drop(feed);
    let (k, low, high) = util::lab::first_knee(&out);
    assert!(
        low >= 6.7 && high <= 9.0,
        "knee {low} to {high} streams/s, not about 7.8: {k}\n{stdout}"
    );
    assert!(stdout.contains("streams/s"), "{stdout}");
    // Little's law over the floor plus the lifetime counts the pool.
    assert!(
        util::lab::has_finding(&k, "concurrency_bound"),
        "{}\n{stdout}",
        k["diagnosis"]
    );
    let f = k["diagnosis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["bottleneck"] == "concurrency_bound")
        .unwrap();
    let evidence = f["evidence"].as_str().unwrap();
    assert!(evidence.contains("lifetime 500 ms"), "{evidence}");
    let n: f64 = evidence
        .strip_prefix('≈')
        .and_then(|e| e.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {evidence}"));
    assert!((3.0..=5.0).contains(&n), "≈{n} in service: {evidence}");
}

#[test]
fn a_stream_lifetime_needs_a_rate_and_a_server_streaming_method() {
    // No server: these are refused before any load.
    let proto = ticker_proto();
    let run = |call: &str, rest: &[&str]| {
        let mut args = vec![
            "127.0.0.1:9",
            "--proto",
            &proto,
            "--call",
            call,
            "--stream-lifetime",
            "500ms",
            "-d",
            "1s",
        ];
        args.extend_from_slice(rest);
        grpc(&args)
    };
    let r = run("ticker.Ticker/Chat", &["--rate", "10"]);
    assert_eq!(r.output.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--stream-lifetime") && r.stderr.contains("not a server-streaming"),
        "{}",
        r.stderr
    );
    let r = run("ticker.Ticker/Subscribe", &[]);
    assert_eq!(r.output.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--stream-lifetime") && r.stderr.contains("with --rate"),
        "{}",
        r.stderr
    );
    let r = run(
        "ticker.Ticker/Subscribe",
        &["--rate", "100", "--concurrency", "20"],
    );
    assert_eq!(r.output.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--concurrency") && r.stderr.contains("at least 50"),
        "{}",
        r.stderr
    );
}
