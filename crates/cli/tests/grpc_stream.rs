//! `loadlab grpc` on a server-streaming method: streams held, each message a reply timed
//! as the wait for it, a stream the server ends with OK opened again, one it ends with an
//! error status counted under that status, a stalled stream cut at the message timeout.
//! The servers: loadlab's own hello backend (tonic), and Python's grpcio (Debian's
//! python3-grpcio), which nobody here wrote: a generic
//! handler for `ticker.Ticker/Subscribe` (proto/ticker.proto) that sends a tick every GAP ms,
//! COUNT of them per stream (0: until the client goes), then ends the stream as told.

mod util;

use serde_json::Value;
use util::server::Server;
use util::{grpc, RunOutput};

fn ticker_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto").into()
}

/// Python's grpcio serving ticker.Ticker/Subscribe on CPU 0: a tick every `gap_ms`, `count`
/// per stream (0: endless), then `end`: `OK`, a status code's name (`UNAVAILABLE`), or
/// `STALL` (the stream stays open, silent).
fn ticker(gap_ms: u32, count: u32, end: &str) -> Server {
    ticker_with(gap_ms, count, end, 64)
}

/// [`ticker`] with `threads` in grpcio's pool: each stream holds one while it lasts, and a
/// stream beyond them waits, silent, for one to come free.
fn ticker_with(gap_ms: u32, count: u32, end: &str, threads: u32) -> Server {
    ticker_stale(gap_ms, count, end, threads, 0)
}

/// [`ticker_with`] whose ticks say they were sent `stale_ms` before they were
/// (`sent_at_us`, microseconds since the Unix epoch).
fn ticker_stale(gap_ms: u32, count: u32, end: &str, threads: u32, stale_ms: u32) -> Server {
    ticker_full(gap_ms, gap_ms, count, end, threads, stale_ms)
}

/// [`ticker_stale`] whose first tick on a stream comes `first_ms` after it opens (the later
/// ones `gap_ms` apart).
fn ticker_full(
    first_ms: u32,
    gap_ms: u32,
    count: u32,
    end: &str,
    threads: u32,
    stale_ms: u32,
) -> Server {
    let py = "import sys, time, grpc\n\
        from concurrent import futures\n\
        gap = float(sys.argv[1]) / 1000; count = int(sys.argv[2]); end = sys.argv[3]\n\
        stale = int(sys.argv[5]) * 1000\n\
        first = float(sys.argv[6]) / 1000\n\
        def tick(seq):\n\
        \x20   return b'\\x08' + enc(seq) + b'\\x10' + enc(time.time_ns() // 1000 - stale)\n\
        def wait(context, seconds):\n\
        \x20   until = time.monotonic() + seconds\n\
        \x20   while time.monotonic() < until:\n\
        \x20       if not context.is_active(): return False\n\
        \x20       time.sleep(min(0.01, max(0.0, until - time.monotonic())))\n\
        \x20   return True\n\
        def subscribe(request, context):\n\
        \x20   seq = 0\n\
        \x20   while count == 0 or seq < count:\n\
        \x20       if not wait(context, first if seq == 0 else gap): return\n\
        \x20       seq += 1\n\
        \x20       yield tick(seq)\n\
        \x20   if end == 'STALL':\n\
        \x20       wait(context, 60); return\n\
        \x20   if end != 'OK':\n\
        \x20       context.abort(getattr(grpc.StatusCode, end), 'ended on purpose')\n\
        handler = grpc.method_handlers_generic_handler('ticker.Ticker', {'Subscribe': grpc.unary_stream_rpc_method_handler(subscribe)})\n\
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=int(sys.argv[4])))\n\
        server.add_generic_rpc_handlers((handler,))\n\
        port = server.add_insecure_port('127.0.0.1:0')\n\
        server.start()\n\
        print('port', port, flush=True)\n\
        server.wait_for_termination()\n";
    let mut cmd = util::server::python_with_proto(py);
    cmd.arg(gap_ms.to_string())
        .arg(count.to_string())
        .arg(end)
        .arg(threads.to_string())
        .arg(stale_ms.to_string())
        .arg(first_ms.to_string());
    Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok())
}

/// `loadlab grpc` on the ticker's Subscribe, closed loop: `streams` streams held over one
/// connection for `duration`, each message's wait bounded by `timeout`.
fn subscribe(port: u16, streams: &str, duration: &str, timeout: &str) -> RunOutput {
    let addr = format!("127.0.0.1:{port}");
    let proto = ticker_proto();
    grpc(&[
        &addr,
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "-D",
        "{\"topic\":\"t\"}",
        "-c",
        "1",
        "--concurrency",
        streams,
        "-d",
        duration,
        "--warmup",
        "500ms",
        "--timeout",
        timeout,
        "--threads",
        "1",
        "--cpus",
        "1",
    ])
}

/// The result of a run of a server stream that ended well and counted no error.
fn served(r: &RunOutput) -> &Value {
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_server_stream", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    j
}

fn u(j: &Value, key: &str) -> u64 {
    j[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {j}"))
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn held_streams_count_each_message_as_a_reply_timed_as_the_wait_for_it() {
    let server = ticker(50, 0, "OK");
    let r = subscribe(server.port, "4", "2s", "2s");
    let j = served(&r);
    // 4 streams × a tick every 50 ms × 2 s: 160 at the server's pace, fewer on a slow host
    // (its sleeps wake late), never more than it can have sent.
    let ok = u(j, "successful");
    assert!((60..=180).contains(&ok), "{ok} messages: {}", r.stdout);
    assert_eq!(j["grpc_status"]["OK"].as_u64(), Some(ok), "{j}");
    // Each message's latency is the gap since the one before (the server's 50 ms), not the
    // time since the stream opened.
    let p50 = j["latency_ms"]["p50"].as_f64().unwrap();
    assert!((40.0..200.0).contains(&p50), "p50 {p50} ms: {}", r.stdout);
    let max = j["latency_ms"]["max"].as_f64().unwrap();
    assert!(
        max < 1500.0,
        "max {max} ms: a wait ran from the stream's start"
    );
    assert!(
        r.stdout.contains("msg/s") && r.stdout.contains("gRPC server streaming"),
        "{}",
        r.stdout
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_the_server_ends_with_ok_is_opened_again_and_counted_as_a_close() {
    // 3 ticks 20 ms apart per stream, then OK: each slot opens a new stream every ~60 ms.
    let server = ticker(20, 3, "OK");
    let r = subscribe(server.port, "2", "2s", "2s");
    let j = served(&r);
    let ok = u(j, "successful");
    let closes = u(j, "server_closes");
    assert!(closes >= 6, "{closes} streams ended: {}", r.stdout);
    // Three messages a stream (the count may cut the window's first and last ones short).
    let per = j["requests_per_server_close"].as_f64().unwrap();
    assert!((2.0..=3.5).contains(&per), "{per} messages per stream: {j}");
    assert!(ok >= closes * 2, "{ok} messages, {closes} streams");
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn time_to_first_message_and_the_gaps_after_it_are_reported_apart() {
    // Each stream's first tick 150 ms after it opens, then 4 more 20 ms apart, then OK: the
    // first message's wait is the stream's 150 ms, every later one a 20 ms gap.
    let server = ticker_full(150, 20, 5, "OK", 64, 0);
    let r = subscribe(server.port, "2", "2s", "2s");
    let j = served(&r);
    let t = &j["stream_timing"];
    let (first, gaps) = (&t["first_message_ms"], &t["gap_ms"]);
    let (n_first, n_gaps) = (
        first["count"].as_u64().unwrap(),
        gaps["count"].as_u64().unwrap(),
    );
    // Every measured message is one or the other.
    assert_eq!(n_first + n_gaps, u(j, "successful"), "{j}");
    // 2 slots × 2 s ÷ (150 + 4 × 20 ms) ≈ 17 streams at the server's pace, fewer on a slow
    // host; four gaps a stream (the window cuts the first and last streams short).
    assert!(n_first >= 6, "{n_first} first messages: {}", r.stdout);
    assert!(
        n_gaps.abs_diff(4 * n_first) <= 8,
        "{n_gaps} gaps, {n_first} first messages: {}",
        r.stdout
    );
    // Each measured from its own start: 150 ms (its sleep woken late on a busy host) and 20.
    let p50_first = first["p50"].as_f64().unwrap();
    let p50_gap = gaps["p50"].as_f64().unwrap();
    assert!(
        (145.0..400.0).contains(&p50_first),
        "first p50 {p50_first} ms: {}",
        r.stdout
    );
    assert!(
        (15.0..100.0).contains(&p50_gap),
        "gap p50 {p50_gap} ms: {}",
        r.stdout
    );
    assert!(
        r.stdout.contains("first message") && r.stdout.contains("gaps between messages"),
        "{}",
        r.stdout
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_ended_with_an_error_status_is_counted_under_that_status() {
    let server = ticker(20, 2, "UNAVAILABLE");
    let r = subscribe(server.port, "2", "2s", "2s");
    let j = r.json();
    let unavailable = j["grpc_status"]["UNAVAILABLE"].as_u64().unwrap_or(0);
    assert!(unavailable >= 5, "{unavailable} UNAVAILABLE: {}", r.stdout);
    assert_eq!(u(j, "errors_total"), unavailable, "{j}");
    // The messages before each end are replies.
    let ok = j["grpc_status"]["OK"].as_u64().unwrap_or(0);
    assert!(
        ok >= unavailable,
        "{ok} OK against {unavailable} ended: {j}"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stalled_stream_is_cut_at_the_message_timeout_and_opened_again() {
    // One tick, then silence: each wait after the first is cut at 300 ms, its stream reset,
    // and the next wait opens a new stream (whose first tick comes 20 ms in).
    let server = ticker(20, 1, "STALL");
    let r = subscribe(server.port, "2", "2s", "300ms");
    let j = r.json();
    let timeouts = r.error_count("request_timeout");
    let ok = u(j, "successful");
    assert!(timeouts >= 4, "{timeouts} timeouts: {}", r.stdout);
    assert!(ok >= 4, "{ok} messages: {}", r.stdout);
    // A wait ends at its timeout, not at the stream's.
    let max = j["latency_ms"]["max"].as_f64().unwrap();
    assert!(max < 1000.0, "max {max} ms");
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn the_knee_of_a_server_streaming_method_is_in_streams_held_and_names_the_timeouts() {
    // 8 threads: 8 streams are fed, a ninth waits silent for a thread, its waits time out.
    let server = ticker_with(50, 0, "OK", 8);
    let addr = format!("127.0.0.1:{}", server.port);
    let proto = ticker_proto();
    let (stdout, out) = util::lab::knee_search(&[
        &addr,
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "--model",
        "closed",
        "--max",
        "32",
        "--timeout",
        "1s",
        "--slo",
        "p99<500ms",
        "--step",
        "4s",
    ]);
    let (k, low, high) = util::lab::first_knee(&out);
    // Every stream the pool holds is fed; a ninth is starved, and though its one timeout
    // a second is too few against the fed streams' 20 messages each to fail the count of
    // messages, it misses every second it is held: 1 stream-second in 9 fails, which a 4 s
    // step resolves against the 1 % allowed (4 of 36; a 2 s step's 2 of 18 would not).
    assert!(
        low >= 8.0 && high <= 9.0,
        "knee {low} to {high}: {k}\n{stdout}"
    );
    let steps = util::lab::steps(&out);
    let starved = steps
        .iter()
        .find(|s| s["load"].as_f64() == Some(9.0))
        .map(|s| s["result"]["stream_timing"].clone())
        .unwrap_or_else(|| panic!("no step at 9 streams: {stdout}"));
    let (failed, held) = (
        u(&starved, "failed_stream_seconds"),
        u(&starved, "stream_seconds"),
    );
    assert!(
        held >= 9 * 4 && failed * 9 >= held * 8 / 10 && failed * 9 <= held * 12 / 10,
        "a ninth of the stream-seconds starved: {failed} of {held}"
    );
    assert_eq!(k["outcome"]["limited_by"], "errors", "{k}");
    let f = util::lab::server_finding(&k["diagnosis"]);
    assert_eq!(f["bottleneck"], "timeouts", "{k}");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("messages timed out"),
        "{f}"
    );
    assert!(stdout.contains("streams"), "{stdout}");
}

/// `loadlab serve hello` (the source experiments' backend, tonic) with its ticker a tick
/// every `every`, on CPU 0.
fn hello_ticker(every: &str) -> Server {
    util::server::hello_on_cpu0(&["--tick-every", every])
}

#[test]
fn the_hello_backends_ticker_streams_at_its_pace_to_every_stream_held() {
    let server = hello_ticker("20ms");
    let r = subscribe(server.port, "8", "2s", "2s");
    let j = served(&r);
    // 8 streams × 50 ticks a second × 2 s: 800 on schedule, never more (tonic's timers
    // keep the schedule; a slow host delivers fewer, late).
    let ok = u(j, "successful");
    assert!((400..=840).contains(&ok), "{ok} messages: {}", r.stdout);
    let p50 = j["latency_ms"]["p50"].as_f64().unwrap();
    assert!((15.0..60.0).contains(&p50), "p50 {p50} ms: {}", r.stdout);
    // Held from before the window: no stream ended, none opened again.
    assert_eq!(u(j, "server_closes"), 0, "{j}");
}

#[test]
fn a_server_stream_is_held_not_offered_at_a_rate() {
    // Refused before any connection (nothing listens on the port).
    let proto = ticker_proto();
    let r = grpc(&[
        "127.0.0.1:9",
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "--rate",
        "100",
        "-d",
        "1s",
    ]);
    assert_eq!(
        r.output.status.code(),
        Some(2),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains("not with a server-streaming method"),
        "{}",
        r.stderr
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn sent_at_reads_when_each_message_says_it_was_sent_and_is_refused_where_it_cannot_apply() {
    // Ticks every 50 ms whose sent_at_us says 200 ms earlier than they were sent: the delay
    // from it to their arrival is 200 ms and the few the network and wake-ups add.
    let server = ticker_stale(50, 0, "OK", 64, 200);
    let addr = format!("127.0.0.1:{}", server.port);
    let proto = ticker_proto();
    let r = grpc(&[
        &addr,
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Subscribe",
        "--sent-at",
        "/sent_at_us",
        "-c",
        "1",
        "--concurrency",
        "4",
        "-d",
        "2s",
        "--timeout",
        "2s",
    ]);
    let j = served(&r);
    let d = &j["server_delay"];
    assert_eq!(d["pointer"], "/sent_at_us", "{d}");
    assert_eq!(u(d, "missing"), 0, "{d}");
    assert_eq!(u(d, "ahead"), 0, "{d}");
    assert_eq!(u(&d["delay_ms"], "count"), u(j, "successful"), "{d}");
    let p50 = d["delay_ms"]["p50"].as_f64().unwrap();
    assert!((200.0..300.0).contains(&p50), "{d}");
    assert!(r.stdout.contains("server delay"), "{}", r.stdout);
    // A field that is not there, or not a number, is named with the fields there are; a
    // method whose replies are not a server's stream (client streaming's one receipt)
    // refuses it.
    for (call, field, says) in [
        (
            "ticker.Ticker/Subscribe",
            "/sent",
            "`ticker.Tick` has no field `sent`; its fields: seq, sent_at_us",
        ),
        (
            "ticker.Ticker/Upload",
            "/sent_at_us",
            "only the messages of a server-streaming or bidirectional method",
        ),
    ] {
        let r = grpc(&[
            &addr,
            "--proto",
            &proto,
            "--call",
            call,
            "--sent-at",
            field,
            "-d",
            "1s",
        ]);
        assert_eq!(r.code(), Some(2), "{}", r.stderr);
        assert!(r.stderr.contains(says), "{}", r.stderr);
    }
}
