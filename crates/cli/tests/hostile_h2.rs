//! Hostile HTTP/2 servers, broken frame by frame: each run ends on time (its duration plus
//! its timeout, and slack for a loaded machine), counts the break under a named error
//! class, keeps its memory bounded, and exits 1 when nothing succeeded.

mod util;

use std::time::{Duration, Instant};

use util::hostile_h2::{RawH2, RawH2Server};
use util::RunOutput;

/// `loadlab run --http2` (or `loadlab grpc` with `grpc`) for 1 s, timeout 1 s.
fn run(behavior: RawH2, extra: &[&str], grpc: bool) -> RunOutput {
    let call = grpc.then(|| {
        (
            util::helloworld_proto(),
            "helloworld.Greeter/SayHello",
            r#"{"name":"x"}"#,
        )
    });
    run_call(behavior, extra, call)
}

/// [`run`] with `loadlab grpc` on `call` (its proto, method and message), or `loadlab run
/// --http2` with `None`.
fn run_call(behavior: RawH2, extra: &[&str], call: Option<(String, &str, &str)>) -> RunOutput {
    let server = RawH2Server::start(behavior);
    let url = server.url();
    let addr = server.addr.to_string();
    let grpc = call.is_some();
    let mut args: Vec<&str> = match &call {
        Some((proto, method, data)) => {
            vec![&addr, "--proto", proto, "--call", method, "-D", data]
        }
        None => vec!["--http2", &url],
    };
    args.extend_from_slice(&["-d", "1s", "--timeout", "1s", "-c", "2", "-q"]);
    args.extend_from_slice(extra);
    let started = Instant::now();
    let r = if grpc {
        util::grpc(&args)
    } else {
        util::run(&args)
    };
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "{behavior:?} {extra:?}: took {took:?}"
    );
    let rss = r.json()["generator_peak_rss_bytes"].as_u64().unwrap();
    assert!(rss < 200 << 20, "{behavior:?}: peak RSS {rss}");
    r
}

fn assert_failed_as(r: &RunOutput, class: &str, what: &str) {
    assert!(
        r.error_count(class) > 0,
        "{what}: {} {}",
        r.json()["errors"],
        &r.stderr[..r.stderr.len().min(600)]
    );
    assert_eq!(r.json()["successful"], 0, "{what}");
    assert_eq!(r.code(), Some(1), "{what}: {}", r.stderr);
}

#[test]
fn no_preface_times_out_and_a_wrong_one_is_malformed() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        // The client's handshake does not wait for the server's SETTINGS: the requests do.
        assert_failed_as(
            &run(RawH2::Silent, extra, false),
            "request_timeout",
            "silent",
        );
        assert_failed_as(
            &run(RawH2::WrongPreface, extra, false),
            "malformed_response",
            "DATA first",
        );
        assert_failed_as(
            &run(RawH2::Http1Text, extra, false),
            "malformed_response",
            "HTTP/1.1 text",
        );
    }
}

#[test]
fn no_stream_allowed_times_out() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_failed_as(
            &run(RawH2::MaxStreamsZero, extra, false),
            "request_timeout",
            "max streams 0",
        );
    }
}

#[test]
fn a_window_that_never_opens_holds_only_requests_with_a_body() {
    // The control: GET has no body, so the window does not matter. (`run` checks the time.)
    let r = run(RawH2::ZeroWindow, &[], false);
    assert!(r.json()["successful"].as_u64().unwrap() > 0, "{}", r.json());
    assert_eq!(r.json()["errors_total"], 0);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    // A gRPC call has a message to send: it waits for the window until its deadline, an
    // error of class grpc_status (DEADLINE_EXCEEDED each time); nothing succeeds: exit 1.
    let r = run(RawH2::ZeroWindow, &[], true);
    assert_failed_as(&r, "grpc_status", "gRPC over a closed window");
    assert_eq!(
        r.json()["grpc_status"]["DEADLINE_EXCEEDED"],
        r.error_count("grpc_status"),
        "{}",
        r.json()
    );
}

#[test]
fn a_bidirectional_streams_closed_window_resets_and_silence_are_named_and_bounded() {
    // ticker.Ticker/Chat: streams held, a message sent on them again and again. A window
    // that never opens holds every message back until its deadline; a server that resets
    // every stream cuts each message waiting on it; a silent one answers nothing.
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto");
    for (behavior, class) in [
        (RawH2::ZeroWindow, "request_timeout"),
        (RawH2::RstEveryStream, "stream_reset"),
        (RawH2::Silent, "request_timeout"),
    ] {
        for extra in [&[][..], &["--rate", "50"][..]] {
            let call = Some((proto.to_string(), "ticker.Ticker/Chat", r#"{"seq":1}"#));
            let r = run_call(behavior, extra, call);
            let j = r.json();
            assert_eq!(j["protocol"], "grpc_bidi_stream");
            assert_failed_as(&r, class, &format!("Chat on {behavior:?} {extra:?}"));
            // Every message held back by the closed window is counted as a stall, and
            // named: all but the first on each connection, sent before the server's
            // SETTINGS closed the window (none answered either). The silent server's
            // window was open (64 messages in flight at most fill none of it); the one
            // that resets every stream never grants the connection's window back either,
            // so its messages stall once the first 64 KiB went (not asserted).
            let stalls = j["window_stalls"].as_u64().expect("window_stalls");
            if behavior == RawH2::RstEveryStream {
                continue;
            }
            if behavior == RawH2::ZeroWindow {
                let timed_out = j["errors"]["request_timeout"].as_u64().unwrap();
                let connections = j["connections_opened"].as_u64().unwrap();
                assert!(
                    stalls > 0 && stalls <= timed_out && timed_out - stalls <= connections,
                    "{stalls} stalls, {timed_out} timeouts, {connections} connections: {}",
                    r.stdout
                );
                assert!(
                    r.stdout.contains(&format!(
                        "flow control    {stalls} messages waited for the server's flow-control window"
                    )),
                    "{}",
                    r.stdout
                );
            } else {
                assert_eq!(stalls, 0, "{behavior:?}: {}", r.stdout);
                assert!(!r.stdout.contains("flow control"), "{}", r.stdout);
            }
        }
    }
}

#[test]
fn every_stream_reset_is_stream_reset() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_failed_as(
            &run(RawH2::RstEveryStream, extra, false),
            "stream_reset",
            "RST_STREAM",
        );
    }
}

#[test]
fn a_header_block_too_large_and_a_continuation_flood_are_malformed_in_bounded_memory() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_failed_as(
            &run(RawH2::HugeHeaders, extra, false),
            "malformed_response",
            "20 kB HEADERS",
        );
        assert_failed_as(
            &run(RawH2::ContinuationFlood, extra, false),
            "malformed_response",
            "CONTINUATION flood",
        );
    }
}

/// A header list past the 256 KiB limit in frames that are each within size: refused as
/// malformed, in bounded memory, closed and open loop.
#[test]
fn a_header_list_over_the_limit_is_malformed() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_failed_as(
            &run(RawH2::HugeHeaderList, extra, false),
            "malformed_response",
            "320 KiB header list",
        );
    }
}

#[test]
fn a_ping_flood_does_not_stop_the_answers() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        let r = run(RawH2::PingFlood, extra, false);
        assert!(
            r.json()["successful"].as_u64().unwrap() > 10,
            "{}",
            r.json()
        );
        assert_eq!(r.json()["errors_total"], 0, "{}", r.json());
        assert_eq!(r.code(), Some(0));
    }
}

#[test]
fn a_goaway_that_covers_no_stream_is_resent_a_bounded_number_of_times() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        let r = run(RawH2::GoAwayNone, extra, false);
        // Never processed, so sent again on a new connection (counted), and given up as a
        // reset after a bounded number of tries.
        assert_failed_as(&r, "stream_reset", "GOAWAY last_stream_id 0");
        let resent = r.json()["resent_unprocessed"].as_u64().unwrap();
        assert!(resent > 0, "{}", r.json());
    }
}

#[test]
fn a_goaway_covering_a_stream_then_a_dropped_connection_is_connection_reset() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        let r = run(RawH2::GoAwayCoveredThenClose, extra, false);
        // The server said it processed the stream, then dropped the connection unread (an
        // RST): that stream is lost and counted so (the ones above it are sent again).
        assert_failed_as(&r, "connection_reset", "GOAWAY covering, then a drop");
    }
}

#[test]
fn grpc_calls_on_broken_http2_fail_with_a_named_error_on_time() {
    let cases = [
        (RawH2::Silent, "grpc_status"),
        (RawH2::WrongPreface, "malformed_response"),
        (RawH2::Http1Text, "malformed_response"),
        (RawH2::MaxStreamsZero, "grpc_status"),
        (RawH2::RstEveryStream, "stream_reset"),
        (RawH2::HugeHeaders, "malformed_response"),
        (RawH2::ContinuationFlood, "malformed_response"),
        (RawH2::GoAwayNone, "stream_reset"),
        (RawH2::GoAwayCoveredThenClose, "connection_reset"),
    ];
    for (behavior, class) in cases {
        for extra in [&[][..], &["--rate", "50"][..]] {
            let r = run(behavior, extra, true);
            assert_failed_as(&r, class, &format!("gRPC {behavior:?} {extra:?}"));
            assert_eq!(r.json()["grpc_status"].get("OK"), None, "{behavior:?}");
            if class == "grpc_status" {
                // The call's deadline passed.
                let late = &r.json()["grpc_status"]["DEADLINE_EXCEEDED"];
                assert!(late.as_u64().unwrap_or(0) > 0, "{behavior:?}: {}", r.json());
            }
        }
    }
}
