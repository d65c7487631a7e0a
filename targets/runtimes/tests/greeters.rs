//! Every greeter binary (and `greeter-minimal` in each `--io` mode) answers `SayHello` like
//! `greeter::reply`: one call and 50 at once over one HTTP/2 connection, then 64 at once on
//! each of 16 connections, then 8 calls of 1 MiB each way at once; it survives clients that go away mid-call, answers a call in
//! flight when `SIGTERM` arrives, and exits promptly. An io_uring runtime that reports
//! io_uring unavailable fails its test, unless `LOADLAB_SKIPPED` names a file where the
//! skip is listed with its reason (`.ci/run` does, and prints the list in its tally).

mod harness;

use std::time::{Duration, Instant};

use harness::{check_large, check_many, check_say_hello, hello_frame, serving_or_skipped, RawCall};

/// What `SIGTERM` may take: the binaries' grace period is 3 s.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

const MINIMAL: &str = env!("CARGO_BIN_EXE_greeter-minimal");

/// A greeter to test: its binary, the flags that select it, whether it needs io_uring.
type Greeter = (&'static str, &'static [&'static str], bool);

/// Every greeter: the six runtimes, then the minimal one in each I/O mode.
const GREETERS: [Greeter; 10] = [
    (env!("CARGO_BIN_EXE_greeter-tokio"), &[], false),
    (env!("CARGO_BIN_EXE_greeter-tokio-pc"), &[], false),
    (env!("CARGO_BIN_EXE_greeter-smol"), &[], false),
    (env!("CARGO_BIN_EXE_greeter-async-std"), &[], false),
    (env!("CARGO_BIN_EXE_greeter-glommio"), &[], true),
    (env!("CARGO_BIN_EXE_greeter-monoio"), &[], true),
    (MINIMAL, &["--io", "epoll"], false),
    (MINIMAL, &["--io", "uring-poll"], true),
    (MINIMAL, &["--io", "uring"], true),
    (MINIMAL, &["--io", "hybrid"], true),
];

fn args<'a>(extra: &[&'a str], threads: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--bind", "127.0.0.1:0", "--threads", threads];
    args.extend_from_slice(extra);
    args
}

fn greeter_serves_and_stops((program, extra, uses_io_uring): Greeter) {
    let Some(server) = serving_or_skipped(program, &args(extra, "2"), uses_io_uring) else {
        return;
    };
    let connections = check_say_hello(server.addr(), 50);
    assert_eq!(
        connections, 1,
        "{program} {extra:?}: calls spread over several connections"
    );
    // A second client, so that with one listener per thread another thread may answer.
    assert_eq!(check_say_hello(server.addr(), 50), 1);
    // Many connections and streams at once: every call answered, and correctly.
    assert_eq!(
        check_many(server.addr(), 16, 64),
        16 * 64,
        "{program} {extra:?}"
    );
    // Large messages (1 MiB each way, 8 at once on one connection): many reads, flow
    // control, writes larger than a socket buffer.
    check_large(server.addr(), 1 << 20, 8);
    let (status, took) = server.terminate();
    assert!(
        status.success(),
        "{program} {extra:?}: exit after SIGTERM: {status}"
    );
    assert!(
        took < EXIT_LIMIT,
        "{program} {extra:?}: took {took:?} to exit after SIGTERM"
    );
}

#[test]
fn tokio() {
    greeter_serves_and_stops(GREETERS[0]);
}

#[test]
fn tokio_per_core() {
    greeter_serves_and_stops(GREETERS[1]);
}

#[test]
fn smol() {
    greeter_serves_and_stops(GREETERS[2]);
}

#[test]
fn async_std() {
    greeter_serves_and_stops(GREETERS[3]);
}

#[test]
fn glommio() {
    greeter_serves_and_stops(GREETERS[4]);
}

#[test]
fn monoio() {
    greeter_serves_and_stops(GREETERS[5]);
}

#[test]
fn minimal_epoll() {
    greeter_serves_and_stops(GREETERS[6]);
}

#[test]
fn minimal_uring_poll() {
    greeter_serves_and_stops(GREETERS[7]);
}

#[test]
fn minimal_uring() {
    greeter_serves_and_stops(GREETERS[8]);
}

#[test]
fn minimal_hybrid() {
    greeter_serves_and_stops(GREETERS[9]);
}

#[test]
fn sigterm_with_clients_still_connected() {
    // The graceful path: an HTTP/2 client and a bare TCP connection (no HTTP/2 preface yet)
    // are still open when SIGTERM arrives.
    for (program, extra, uses_io_uring) in GREETERS {
        let Some(server) = serving_or_skipped(program, &args(extra, "1"), uses_io_uring) else {
            continue;
        };
        // One thread accepts in order: once the client's call is answered, the bare
        // connection made before it has been accepted too.
        let bare = std::net::TcpStream::connect(server.addr()).expect("connect");
        let client = harness::Client::connect(server.addr());
        client.say_hello("before SIGTERM");
        let (status, took) = server.terminate();
        drop((bare, client));
        assert!(status.success(), "{program} {extra:?}: {status}");
        eprintln!("{program} {extra:?}: exited {took:?} after SIGTERM");
        assert!(
            took < EXIT_LIMIT,
            "{program} {extra:?}: took {took:?} to exit after SIGTERM"
        );
    }
}

#[test]
fn a_call_in_flight_at_sigterm_is_answered() {
    // The request's headers and three bytes of its message are in; SIGTERM; then the rest
    // of the message: the server has sent GOAWAY but still answers the call in full.
    for (program, extra, uses_io_uring) in GREETERS {
        let Some(server) = serving_or_skipped(program, &args(extra, "1"), uses_io_uring) else {
            continue;
        };
        let call = RawCall::start(server.addr(), "in flight at SIGTERM", 3);
        let started = Instant::now();
        server.sigterm();
        std::thread::sleep(Duration::from_millis(200));
        call.finish(3);
        let (status, took) = server.wait_since(started);
        assert!(status.success(), "{program} {extra:?}: {status}");
        assert!(
            took < EXIT_LIMIT,
            "{program} {extra:?}: took {took:?} to exit after SIGTERM"
        );
    }
}

#[test]
fn clients_leaving_mid_call_do_not_hurt_the_server() {
    for (program, extra, uses_io_uring) in GREETERS {
        let Some(server) = serving_or_skipped(program, &args(extra, "1"), uses_io_uring) else {
            continue;
        };
        // Gone while the server waits for the rest of the request.
        RawCall::start(server.addr(), "gone mid-request", 3).disconnect();
        // Gone with the request complete, before the reply is read.
        let full = hello_frame("gone before the reply").len();
        RawCall::start(server.addr(), "gone before the reply", full).disconnect();
        // The server goes on serving.
        assert_eq!(check_say_hello(server.addr(), 20), 1, "{program} {extra:?}");
        let (status, took) = server.terminate();
        assert!(status.success(), "{program} {extra:?}: {status}");
        assert!(
            took < EXIT_LIMIT,
            "{program} {extra:?}: took {took:?} to exit after SIGTERM"
        );
    }
}
