//! `loadlab grpc` on a bidirectional method: streams held, the request message sent on
//! them at the rate whatever is still unanswered (open loop), each message the server sends
//! the reply to the oldest one waiting, timed from that one's intended send; a stream the
//! server ends counts what was left waiting on it, a silent one's messages time out.
//!
//! The servers: Python's grpcio (Debian's python3-grpcio), which nobody here wrote, with a
//! generic handler for `ticker.Ticker/Chat` (proto/ticker.proto) whose own counters (calls,
//! notes received, answers sent) are the truth; and loadlab's hello backend, whose Chat
//! has a known capacity (a pool of workers, each held for a fixed delay per note).

mod util;

use std::path::PathBuf;

use serde_json::Value;
use util::server::Server;
use util::{grpc, RunOutput};

fn ticker_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto").into()
}

/// Python's grpcio serving ticker.Ticker/Chat on CPU 0 with `threads` in its pool (each
/// stream holds one while it lasts). Each note is answered after `delay_ms`; with `end`
/// other than `-`, a stream's note number `after` is not answered and the stream ends:
/// `OK`, a status code's name (`UNAVAILABLE`), `CANCEL` (the handler cancels the call), or
/// `SILENT` (no answer from then on, the stream left open). On SIGTERM it writes
/// `calls notes_in answers_out` to its counts file; an answer counts as it is handed to
/// grpcio (after the yield it would count only once grpcio asks for the next one, which a
/// stream cancelled at the run's end never does).
struct Chat {
    server: Server,
    counts: PathBuf,
}

impl Chat {
    fn start(delay_ms: u32, threads: u32, after: u32, end: &str) -> Chat {
        let body =
            "delay = float(sys.argv[1]) / 1000; after = int(sys.argv[2]); end = sys.argv[3]\n\
            def handle(notes, context):\n\
            \x20   with lock: counts[0] += 1\n\
            \x20   seen = 0\n\
            \x20   for note in notes:\n\
            \x20       with lock: counts[1] += 1\n\
            \x20       seen += 1\n\
            \x20       if end != '-' and seen >= after:\n\
            \x20           if end == 'SILENT': continue\n\
            \x20           if end == 'OK': return\n\
            \x20           if end == 'CANCEL': context.cancel(); return\n\
            \x20           context.abort(getattr(grpc.StatusCode, end), 'ended on purpose')\n\
            \x20       if delay: time.sleep(delay)\n\
            \x20       with lock: counts[2] += 1\n\
            \x20       yield note";
        let (server, counts) = util::server::grpcio_counting(
            "Chat",
            "stream_stream_rpc_method_handler",
            threads,
            body,
            &[delay_ms.to_string(), after.to_string(), end.to_string()],
        );
        Chat { server, counts }
    }

    /// Stops the server (SIGTERM) and reads its counters: calls, notes received, answers
    /// sent.
    fn counts(mut self) -> (u64, u64, u64) {
        let n = util::server::stop_and_read_counts(&mut self.server, &self.counts);
        (n[0], n[1], n[2])
    }
}

/// `loadlab grpc` on ticker.Ticker/Chat: `streams` streams over one connection, `rest`
/// after (the load: `--rate`, or nothing for closed loop), no warm-up (the server's
/// counters then count exactly what was measured).
fn chat(port: u16, streams: &str, rest: &[&str]) -> RunOutput {
    let addr = format!("127.0.0.1:{port}");
    let proto = ticker_proto();
    let mut args = vec![
        addr.as_str(),
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Chat",
        "-D",
        "{\"seq\":7,\"text\":\"hi\"}",
        "-c",
        "1",
        "--concurrency",
        streams,
        "--warmup",
        "0s",
        "--threads",
        "1",
        "--cpus",
        "1",
    ];
    args.extend_from_slice(rest);
    grpc(&args)
}

fn u(j: &Value, key: &str) -> u64 {
    j[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {j}"))
}

fn f(j: &Value, a: &str, b: &str) -> f64 {
    j[a][b]
        .as_f64()
        .unwrap_or_else(|| panic!("{a}.{b} missing: {j}"))
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn every_message_sent_is_answered_on_the_streams_held_as_the_server_counts() {
    let chat_server = Chat::start(10, 16, 0, "-");
    let r = chat(chat_server.server.port, "8", &["--rate", "200", "-d", "2s"]);
    let (calls, notes_in, answers) = chat_server.counts();
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_bidi_stream", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    // 200 a second for 2 s, every one sent, answered and counted once, on 8 streams held
    // from first message to the run's end (none opened again).
    let ok = u(j, "successful");
    assert_eq!(ok, 400, "{}", r.stdout);
    assert_eq!((notes_in, answers), (ok, ok), "the server's counts");
    assert_eq!(calls, 8, "streams opened");
    assert_eq!(j["connections_held"], 8, "{j}");
    // grpcio's windows had room for every note: none waited for flow control.
    assert_eq!(j["window_stalls"], 0, "{j}");
    // Each reply timed from its own message's send: the server's 10 ms, not a stream's age.
    let p50 = f(j, "latency_ms", "p50");
    assert!((9.0..60.0).contains(&p50), "p50 {p50} ms: {}", r.stdout);
    assert!(
        r.stdout.contains("gRPC bidirectional streaming")
            && r.stdout.contains("msg/s")
            && r.stdout.contains("of 8 streams"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("status codes"), "{}", r.stdout);
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn sent_at_reads_when_each_reply_says_it_was_sent() {
    // grpcio's Chat answers each note 10 ms after it came, stamped (sent_at_us, field 3)
    // 200 ms earlier than it was sent: each reply's delay is those 200 ms and the few the
    // network and wake-ups add, whatever its wait from its note's send (the 10 ms).
    let body = "def stamp():\n\
        \x20   return b'\\x18' + enc(time.time_ns() // 1000 - 200000)\n\
        def handle(notes, context):\n\
        \x20   for note in notes:\n\
        \x20       time.sleep(0.01)\n\
        \x20       yield note + stamp()";
    let (mut server, counts) =
        util::server::grpcio_counting("Chat", "stream_stream_rpc_method_handler", 16, body, &[]);
    let r = chat(
        server.port,
        "4",
        &["--rate", "100", "-d", "2s", "--sent-at", "/sent_at_us"],
    );
    util::server::stop_and_read_counts(&mut server, &counts);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    let d = &j["server_delay"];
    assert_eq!(d["pointer"], "/sent_at_us", "{d}");
    assert_eq!((u(d, "missing"), u(d, "ahead")), (0, 0), "{d}");
    assert_eq!(u(&d["delay_ms"], "count"), u(j, "successful"), "{d}");
    let delay = d["delay_ms"]["p50"].as_f64().unwrap();
    assert!((200.0..300.0).contains(&delay), "{d}");
    let p50 = f(j, "latency_ms", "p50");
    assert!(
        p50 < 150.0,
        "p50 {p50} ms: the wait, not the stamp: {}",
        r.stdout
    );
    assert!(r.stdout.contains("server delay"), "{}", r.stdout);
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn match_field_times_each_reply_against_its_own_message_when_the_server_drops_and_reorders() {
    // grpcio's Chat never answers a stream's every fifth note, and answers the others in
    // pairs, the second first: note 1 waits for note 2 (40 ms later at 25 a second a
    // stream), then both go back, 2 before 1. It counts the notes it dropped.
    let body = "def handle(notes, context):\n\
        \x20   held = None; n = 0\n\
        \x20   for note in notes:\n\
        \x20       n += 1\n\
        \x20       with lock: counts[1] += 1\n\
        \x20       if n % 5 == 0:\n\
        \x20           with lock: counts[0] += 1\n\
        \x20           continue\n\
        \x20       if held is None:\n\
        \x20           held = note; continue\n\
        \x20       with lock: counts[2] += 2\n\
        \x20       yield note\n\
        \x20       yield held\n\
        \x20       held = None";
    let run = |matched: bool| {
        let (mut server, counts) = util::server::grpcio_counting(
            "Chat",
            "stream_stream_rpc_method_handler",
            16,
            body,
            &[],
        );
        let port = server.port.to_string();
        let addr = format!("127.0.0.1:{port}");
        let proto = ticker_proto();
        let mut args = vec![
            addr.as_str(),
            "--proto",
            &proto,
            "--call",
            "ticker.Ticker/Chat",
            "-D",
            r#"{"seq":"${seq}","text":"x"}"#,
            "-c",
            "1",
            "--concurrency",
            "4",
            "--warmup",
            "0s",
            "--threads",
            "1",
            "--cpus",
            "1",
            "--rate",
            "100",
            "-d",
            "2s",
            "--timeout",
            "1s",
        ];
        if matched {
            args.extend(["--match-field", "/seq"]);
        }
        let r = grpc(&args);
        let n = util::server::stop_and_read_counts(&mut server, &counts);
        (r, n[0], n[1], n[2])
    };
    let (r, dropped, notes, answered) = run(true);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(notes, 200, "{}", r.stdout);
    assert!(dropped >= 36, "{dropped} dropped");
    // Every answer went to its own note; every dropped note timed out, with at most the
    // one each stream held when the run ended.
    assert_eq!(u(j, "successful"), answered, "{}", r.stdout);
    let timeouts = r.error_count("request_timeout");
    assert!(
        (dropped..=dropped + 4).contains(&timeouts),
        "{timeouts} timeouts, {dropped} dropped: {}",
        r.stdout
    );
    assert_eq!(j["matched_by"]["field"], "/seq", "{j}");
    assert_eq!(j["matched_by"]["unmatched"], 0, "{j}");
    assert!(r.stdout.contains("matched by      /seq"), "{}", r.stdout);
    // Half the answers at once, half after their pair's second note (40 ms): a mean near
    // 20 ms (the median sits between the two halves, so it is not asserted; CI of f0e05dd
    // saw 40.7 ms with a mean of 26.5).
    let mean = f(j, "latency_ms", "mean");
    let p99 = f(j, "latency_ms", "p99");
    assert!(
        mean < 40.0 && p99 < 200.0,
        "mean {mean} ms, p99 {p99} ms: {}",
        r.stdout
    );
    // By order instead, each dropped note shifts every later answer on its stream by one:
    // the waits grow by a note's gap (40 ms) per drop, and the timings are the server's
    // drops, not its pace.
    let (r, ..) = run(false);
    let j = r.json();
    assert!(j.get("matched_by").is_none(), "{j}");
    let by_order = f(j, "latency_ms", "mean");
    assert!(by_order > 80.0, "by order mean {by_order} ms: {}", r.stdout);
    // A field the messages do not have names those they have; a method whose replies are
    // not a bidirectional stream's refuses the flag. Both before any load.
    let proto = ticker_proto();
    for (call, field, says) in [
        (
            "ticker.Ticker/Chat",
            "/id",
            "`ticker.Note` has no field `id`; its fields: seq, text, sent_at_us",
        ),
        (
            "ticker.Ticker/Upload",
            "/seq",
            "only a bidirectional method's replies are matched",
        ),
    ] {
        let r = grpc(&[
            "127.0.0.1:1",
            "--proto",
            &proto,
            "--call",
            call,
            "--match-field",
            field,
            "-d",
            "1s",
        ]);
        assert_eq!(r.code(), Some(2), "{}", r.stderr);
        assert!(
            r.stderr.contains("--match-field") && r.stderr.contains(says),
            "{}",
            r.stderr
        );
    }
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn messages_go_at_the_rate_offered_even_while_their_stream_lags_behind() {
    // One stream, a message every 10 ms, each taking the server 25 ms: it answers 40 a
    // second of the 100 sent. A client that waited for each reply would send 40 a second
    // and measure 25 ms; loadlab sends all 100 and measures the queue that builds.
    let chat_server = Chat::start(25, 4, 0, "-");
    let r = chat(
        chat_server.server.port,
        "1",
        &["--rate", "100", "-d", "2s", "--timeout", "10s"],
    );
    let (calls, notes_in, answers) = chat_server.counts();
    let j = r.json();
    assert_eq!(calls, 1);
    // Every message reached the server on time (it read 200, whatever it had answered).
    assert_eq!(notes_in, 200, "notes the server read: {}", r.stdout);
    assert_eq!(u(j, "successful"), answers, "{}", r.stdout);
    // The last one waited for the 199 before it: about 200 × 25 ms - 2 s = 3 s.
    let max = f(j, "latency_ms", "max");
    assert!(
        max > 1500.0,
        "max {max} ms: the messages waited for their replies"
    );
    assert!(r.stdout.contains("fell behind"), "{}", r.stdout);
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_ended_with_an_error_status_counts_its_waiting_messages_under_it() {
    // Each stream answers 2 notes, then ends with UNAVAILABLE at its third: the third is
    // counted under that status, and the next message opens a new stream.
    let chat_server = Chat::start(0, 16, 3, "UNAVAILABLE");
    let r = chat(chat_server.server.port, "2", &["--rate", "50", "-d", "2s"]);
    let (calls, _, answers) = chat_server.counts();
    let j = r.json();
    let unavailable = j["grpc_status"]["UNAVAILABLE"].as_u64().unwrap_or(0);
    let ok = j["grpc_status"]["OK"].as_u64().unwrap_or(0);
    // 100 messages, three a stream: about 33 streams, each with 2 answers and 1 error.
    assert!(unavailable >= 25, "{unavailable} UNAVAILABLE: {}", r.stdout);
    assert_eq!(ok, answers, "{}", r.stdout);
    assert_eq!(ok + unavailable, 100, "{}", r.stdout);
    assert_eq!(u(j, "errors_total"), unavailable, "{j}");
    // Each stream the server opened answered two notes at most, and each one it ended cost
    // its third and any note loadlab sent on it before the end came back (CI of f0e05dd,
    // a slow host: 40 UNAVAILABLE from 30 streams): at least one each, but for the two
    // streams still open when the run ended.
    assert!(
        answers <= 2 * calls,
        "{answers} answers from {calls} streams"
    );
    assert!(
        unavailable + 2 >= calls,
        "{calls} streams for {unavailable} ends"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_ended_with_ok_cuts_its_waiting_message_and_counts_a_server_close() {
    let chat_server = Chat::start(0, 16, 4, "OK");
    let r = chat(chat_server.server.port, "2", &["--rate", "50", "-d", "2s"]);
    let (_, _, answers) = chat_server.counts();
    let j = r.json();
    let closed = r.error_count("connection_closed");
    // Three answers, then an OK end with the fourth unanswered: a server close each time,
    // which cuts the fourth and any message loadlab sent on that stream before the end came
    // (two, when a late wake-up released them together: CI on 30323e2 saw 25 cut by 24
    // closes with loadlab 120 ms late once).
    let closes = u(j, "server_closes");
    assert!(closes >= 20, "{closes} closes: {}", r.stdout);
    assert!(closes <= closed, "{closes} closes cut {closed}: {j}");
    assert_eq!(u(j, "successful"), answers, "{}", r.stdout);
    assert_eq!(u(j, "successful") + closed, 100, "{}", r.stdout);
    // Each stream answered three, the two still open at the end up to three each.
    assert!(
        (3 * closes..=3 * (closes + 2)).contains(&answers),
        "{answers} answers on {closes} closed streams: {j}"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_stream_the_server_cancels_counts_its_waiting_message_as_cancelled_and_opens_another() {
    // grpcio ends a call its handler cancels with CANCELLED in the trailers (a reset, as
    // RST_STREAM, is tests/hostile_h2.rs's).
    let chat_server = Chat::start(0, 16, 3, "CANCEL");
    let r = chat(chat_server.server.port, "2", &["--rate", "50", "-d", "2s"]);
    let (calls, _, answers) = chat_server.counts();
    let j = r.json();
    let ok = u(j, "successful");
    let failed = u(j, "errors_total");
    // Two answers a stream, then its third message cut by the server's cancel.
    assert_eq!(ok, answers, "{}", r.stdout);
    assert_eq!(ok + failed, 100, "{}", r.stdout);
    assert!(failed >= 25, "{failed} cut: {}", r.stdout);
    // At least one message cut a stream, more when loadlab sent another on it before the
    // cancel came back (as for the error-ended streams above), but for the two streams
    // still open when the run ended.
    assert!(
        answers <= 2 * calls,
        "{answers} answers from {calls} streams"
    );
    assert!(failed + 2 >= calls, "{calls} streams for {failed} cancels");
    assert_eq!(j["grpc_status"]["CANCELLED"].as_u64(), Some(failed), "{j}");
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_silent_streams_messages_time_out_where_they_stand_and_later_ones_still_match() {
    // Every stream answers 4 notes, then reads on in silence: from the fifth on, each
    // message times out at 300 ms, one by one (the stream is kept: no reply is taken
    // for another message's).
    let chat_server = Chat::start(0, 16, 5, "SILENT");
    let r = chat(
        chat_server.server.port,
        "2",
        &["--rate", "40", "-d", "2s", "--timeout", "300ms"],
    );
    let (calls, notes_in, answers) = chat_server.counts();
    let j = r.json();
    assert_eq!(calls, 2, "a silent stream is not opened again");
    assert_eq!(notes_in, 80, "{}", r.stdout);
    assert_eq!(u(j, "successful"), 8, "{}", r.stdout);
    assert_eq!(answers, 8);
    assert_eq!(r.error_count("request_timeout"), 72, "{}", r.stdout);
    // Each timed out at its own deadline, not at the run's end.
    let max = f(j, "latency_ms", "max");
    assert!(max < 300.0, "max {max} ms");
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn closed_loop_sends_each_streams_next_message_when_its_reply_came() {
    let chat_server = Chat::start(5, 16, 0, "-");
    let r = chat(chat_server.server.port, "4", &["-d", "1s"]);
    let (calls, notes_in, answers) = chat_server.counts();
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    let ok = u(j, "successful");
    // 4 streams, one message at a time, ~5 ms each: some 800 in a second at most.
    assert!((100..=800).contains(&ok), "{ok}: {}", r.stdout);
    assert_eq!(calls, 4);
    assert_eq!(answers, notes_in, "every message answered");
    assert!(notes_in >= ok, "{notes_in} read, {ok} measured");
}

/// `loadlab serve hello` on CPU 0, its Chat answering each note after `delay` with one of
/// `pool` workers held.
fn hello_chat(delay: &str, pool: &str) -> Server {
    util::server::hello_on_cpu0(&["--chat-delay", delay, "--chat-pool", pool])
}

#[test]
fn the_message_rate_knee_of_a_known_capacity_is_found_within_ten_percent_and_named() {
    // 20 workers, 50 ms a note: 400 notes a second (tokio's timer adds up to a millisecond
    // to each delay: 392 at worst).
    let server = hello_chat("50ms", "20");
    let addr = format!("127.0.0.1:{}", server.port);
    let proto = ticker_proto();
    let (stdout, out) = util::lab::knee_search(&[
        &addr,
        "--proto",
        &proto,
        "--call",
        "ticker.Ticker/Chat",
        "-D",
        "{\"seq\":1}",
        "--start",
        "100",
        "--max",
        "800",
        "--timeout",
        "2s",
        "--step",
        "2s",
    ]);
    let (k, low, high) = util::lab::first_knee(&out);
    assert!(
        low >= 360.0 && high <= 440.0,
        "knee {low} to {high} msg/s against a capacity of 400: {k}"
    );
    let f = util::lab::server_finding(&k["diagnosis"]);
    assert_eq!(f["bottleneck"], "concurrency_bound", "{k}");
    assert!(stdout.contains("msg/s"), "{stdout}");
}
