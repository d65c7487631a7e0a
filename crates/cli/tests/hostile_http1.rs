//! Hostile HTTP/1.1 servers: each breaks the protocol one way, and each run ends on time
//! with that break counted under a named error class, the well-formed answers still
//! counted as successes, and the exit status saying whether anything succeeded.

mod util;

use std::io::Read;
use std::time::{Duration, Instant};

use util::{Behavior, RunOutput, TestServer};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// `loadlab run` against `behavior` with `args` (and `-q`), checked to end within
/// `limit`: the run's duration and timeout plus slack for a loaded machine.
fn run(behavior: Behavior, args: &[&str], limit: Duration) -> (RunOutput, TestServer) {
    let server = TestServer::start(behavior);
    let url = server.url("/");
    let mut argv = vec![url.as_str()];
    argv.extend_from_slice(args);
    argv.push("-q");
    let started = Instant::now();
    let r = util::run(&argv);
    let took = started.elapsed();
    assert!(took < limit, "{args:?} took {took:?} (limit {limit:?})");
    (r, server)
}

fn closed_loop(behavior: Behavior) -> RunOutput {
    let args = ["-c", "2", "-d", "1s", "--timeout", "1s"];
    run(behavior, &args, Duration::from_secs(15)).0
}

fn open_loop(behavior: Behavior) -> RunOutput {
    let args = ["--rate", "200", "-c", "2", "-d", "1s", "--timeout", "1s"];
    run(behavior, &args, Duration::from_secs(15)).0
}

/// The same server in closed loop, then in open loop.
fn both_loops(behavior: Behavior) -> [RunOutput; 2] {
    [closed_loop(behavior.clone()), open_loop(behavior)]
}

fn answer(parts: &[&[u8]]) -> Behavior {
    Behavior::Answer(parts.concat())
}

fn count(r: &RunOutput, key: &str) -> u64 {
    r.json()[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key}: {}", r.json()))
}

#[test]
fn two_responses_for_one_request_are_malformed_not_the_next_answer() {
    for r in both_loops(answer(&[OK, OK])) {
        assert!(r.error_count("malformed_response") > 0, "{}", r.json());
        // Each connection's first answer is taken before the extra one shows...
        let ok = count(&r, "successful");
        assert!(ok > 0, "{}", r.json());
        // ...and the extra one is never taken as the next request's answer: no connection
        // is reused after it, so no connection yields two successes.
        assert!(ok <= count(&r, "connections_opened"), "{}", r.json());
        assert_eq!(r.code(), Some(0), "{}", r.stderr);
    }
}

#[test]
fn a_response_before_the_request_is_caught_on_the_idle_connection() {
    for r in both_loops(Behavior::Greet(OK.to_vec())) {
        assert!(r.error_count("malformed_response") > 0, "{}", r.json());
        assert_eq!(r.code(), Some(0), "{}", r.stderr);
    }
}

/// In open loop a kept-alive connection waits between requests, and a response the server
/// sends unasked meanwhile is caught before the next request is written (the idle
/// connection is checked; a read is spent only if the event loop saw it become readable).
/// Missed, each connection would take every answer for the request after its own until a
/// periodic check.
#[test]
fn an_unasked_response_on_an_idle_connection_is_caught_before_the_next_request() {
    let args = ["--rate", "100", "-c", "1", "-d", "2s", "--timeout", "1s"];
    let (r, server) = run(Behavior::ExtraAfter(3), &args, Duration::from_secs(15));
    let j = r.json();
    assert!(r.error_count("malformed_response") > 0, "{j}");
    // Three answers per connection, then the fourth request finds the extra response
    // and the connection is dropped: no connection yields more than three successes, but
    // one whose fourth request crossed the extra on the wire (sent within its 2 ms, by a
    // loadlab late and catching up) takes the extra for that request's answer, and finds
    // the real one unasked before the fifth. Without the check, a connection takes every
    // answer for the request after its own until a periodic check.
    let ok = count(&r, "successful");
    let opened = count(&r, "connections_opened");
    let crossed = server
        .counters
        .crossed
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(ok >= 3, "{j}");
    assert!(
        ok <= 3 * opened + crossed,
        "{ok} successes on {opened} connections ({crossed} crossed the extra response): {j}"
    );
    assert!(
        server
            .counters
            .accepts
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
}

#[test]
fn no_content_and_not_modified_with_a_body_are_malformed() {
    for status in ["204 No Content", "304 Not Modified"] {
        let head = format!("HTTP/1.1 {status}\r\nContent-Length: 5\r\n\r\nhello");
        for r in both_loops(Behavior::Answer(head.into_bytes())) {
            let j = r.json();
            assert!(r.error_count("malformed_response") > 0, "{status}: {j}");
            // The status line was valid: the first answer on each connection counts, and
            // the body is never taken as the next answer.
            let answered = j["status_codes"][&status[..3]].as_u64().unwrap();
            assert!(answered > 0, "{status}: {j}");
            assert!(answered <= count(&r, "connections_opened"), "{status}: {j}");
            assert_eq!(r.code(), Some(0), "{status}: {}", r.stderr);
        }
    }
}

#[test]
fn continue_then_a_final_response_is_one_success() {
    for r in both_loops(answer(&[b"HTTP/1.1 100 Continue\r\n\r\n", OK])) {
        let j = r.json();
        assert_eq!(j["errors_total"], 0, "{j}");
        assert!(count(&r, "successful") > 10, "{j}");
        // One response per request: no 100 counted, every request one success.
        assert_eq!(j["status_codes"].as_object().unwrap().len(), 1, "{j}");
        assert_eq!(j["successful"], j["status_codes"]["200"], "{j}");
        assert_eq!(r.code(), Some(0));
    }
}

#[test]
fn an_endless_header_block_is_malformed_and_memory_stays_bounded() {
    // 1 MiB of headers with no end: the reader gives up at its 64 KiB limit.
    let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
    while head.len() < 1 << 20 {
        head.extend_from_slice(b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    // And one header line of 1 MiB.
    let mut line = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
    line.resize(1 << 20, b'a');
    for r in [
        closed_loop(Behavior::Answer(head.clone())),
        open_loop(Behavior::Answer(head)),
        closed_loop(Behavior::Answer(line)),
    ] {
        assert!(r.error_count("malformed_response") > 0, "{}", r.json());
        assert_eq!(r.json()["successful"], 0);
        assert_eq!(r.code(), Some(1), "nothing succeeded");
        let rss = count(&r, "generator_peak_rss_bytes");
        assert!(rss < 200 << 20, "peak RSS {rss}");
    }
}

#[test]
fn obsolete_line_folding_is_refused() {
    for r in both_loops(answer(&[
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\nok",
    ])) {
        assert!(r.error_count("malformed_response") > 0, "{}", r.json());
        assert_eq!(r.json()["successful"], 0);
        assert_eq!(r.code(), Some(1));
    }
}

#[test]
fn transfer_encoding_wins_over_content_length_and_the_connection_is_not_reused() {
    for r in both_loops(answer(&[
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n",
        b"2\r\nok\r\n0\r\n\r\n",
    ])) {
        let j = r.json();
        assert_eq!(j["errors_total"], 0, "{j}");
        let ok = count(&r, "successful");
        assert!(ok > 10, "{j}");
        // One connection per response: none was reused after such a framing.
        let opened = count(&r, "connections_opened");
        assert!(opened >= ok, "{opened} connections for {ok} responses");
        assert_eq!(r.code(), Some(0));
    }
}

#[test]
fn differing_or_signed_content_lengths_are_malformed() {
    for head in [
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    ] {
        for r in both_loops(Behavior::Answer(head.into())) {
            assert!(
                r.error_count("malformed_response") > 0,
                "{head}: {}",
                r.json()
            );
            assert_eq!(r.json()["successful"], 0);
            assert_eq!(r.code(), Some(1));
        }
    }
}

#[test]
fn a_server_that_never_reads_times_out_on_time() {
    // A large body fills the socket buffers, so the write itself blocks.
    let body = util::temp_path("body");
    std::fs::write(&body, vec![b'x'; 8 << 20]).unwrap();
    let body = body.to_str().unwrap();
    for args in [
        vec!["-c", "2", "-d", "1s", "--timeout", "1s"],
        vec![
            "-c",
            "2",
            "-d",
            "1s",
            "--timeout",
            "1s",
            "-X",
            "POST",
            "--body-file",
            body,
        ],
        vec![
            "--rate",
            "50",
            "-d",
            "1s",
            "--timeout",
            "1s",
            "-X",
            "POST",
            "--body-file",
            body,
        ],
    ] {
        let (r, _server) = run(Behavior::NeverRead, &args, Duration::from_secs(20));
        assert!(r.error_count("request_timeout") > 0, "{}", r.json());
        assert_eq!(r.json()["successful"], 0);
        assert_eq!(r.code(), Some(1));
    }
}

/// A server that answers for `serve_for`, then closes its listening socket (its accepted
/// connections close with it).
fn closing_listener(serve_for: Duration) -> (String, std::thread::JoinHandle<u64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let until = Instant::now() + serve_for;
        let mut answered = 0;
        while Instant::now() < until {
            match listener.accept() {
                Ok((mut sock, _)) => {
                    // keep-alive off: one request per connection.
                    sock.set_nonblocking(false).unwrap();
                    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                    let mut buf = [0u8; 4096];
                    if matches!(sock.read(&mut buf), Ok(n) if n > 0) {
                        use std::io::Write;
                        let _ = sock.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                        answered += 1;
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        answered
    });
    (url, handle)
}

#[test]
fn a_listener_closed_mid_run_refuses_what_follows_and_keeps_what_came_before() {
    for load in [["--rate", "100"], ["-c", "2"]] {
        let (url, server) = closing_listener(Duration::from_millis(1500));
        let started = Instant::now();
        let mut args = vec![url.as_str()];
        args.extend_from_slice(&load);
        args.extend_from_slice(&["--keep-alive", "off", "-d", "3s", "--timeout", "1s", "-q"]);
        let r = util::run(&args);
        // 3 s of load and a 1 s timeout, with slack for a loaded machine.
        let took = started.elapsed();
        assert!(took < Duration::from_secs(20), "{load:?} took {took:?}");
        let answered = server.join().unwrap();
        let j = r.json();
        assert!(answered > 0, "{load:?}");
        assert!(j["successful"].as_u64().unwrap() > 0, "{load:?}: {j}");
        assert!(r.error_count("connect_refused") > 0, "{load:?}: {j}");
        assert_eq!(r.code(), Some(0), "{load:?}");
    }
}
