//! Every greeter binary answers `SayHello` like `greeter::reply`, one call and 50 at once
//! over one HTTP/2 connection, and exits promptly on `SIGTERM`. An io_uring runtime that
//! reports io_uring unavailable fails its test, unless `LOADLAB_SKIPPED` names a file where
//! the skip is listed with its reason (`.ci/run` does, and prints the list in its tally).

mod harness;

use std::time::Duration;

use harness::{check_say_hello, serving_or_skipped};

/// What `SIGTERM` may take: the binaries' grace period is 3 s.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

fn greeter_serves_and_stops(program: &str, uses_io_uring: bool) {
    let args = ["--bind", "127.0.0.1:0", "--threads", "2"];
    let Some(server) = serving_or_skipped(program, &args, uses_io_uring) else {
        return;
    };
    let connections = check_say_hello(server.addr(), 50);
    assert_eq!(
        connections, 1,
        "{program}: calls spread over several connections"
    );
    // A second client, so that with one listener per thread another thread may answer.
    assert_eq!(check_say_hello(server.addr(), 50), 1);
    let (status, took) = server.terminate();
    assert!(status.success(), "{program}: exit after SIGTERM: {status}");
    assert!(
        took < EXIT_LIMIT,
        "{program}: took {took:?} to exit after SIGTERM"
    );
}

#[test]
fn tokio() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-tokio"), false);
}

#[test]
fn tokio_per_core() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-tokio-pc"), false);
}

#[test]
fn smol() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-smol"), false);
}

#[test]
fn async_std() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-async-std"), false);
}

#[test]
fn glommio() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-glommio"), true);
}

#[test]
fn monoio() {
    greeter_serves_and_stops(env!("CARGO_BIN_EXE_greeter-monoio"), true);
}

#[test]
fn sigterm_with_clients_still_connected() {
    // The graceful path: an HTTP/2 client and a bare TCP connection (no HTTP/2 preface yet)
    // are still open when SIGTERM arrives.
    for (program, uses_io_uring) in [
        (env!("CARGO_BIN_EXE_greeter-tokio"), false),
        (env!("CARGO_BIN_EXE_greeter-tokio-pc"), false),
        (env!("CARGO_BIN_EXE_greeter-smol"), false),
        (env!("CARGO_BIN_EXE_greeter-async-std"), false),
        (env!("CARGO_BIN_EXE_greeter-glommio"), true),
        (env!("CARGO_BIN_EXE_greeter-monoio"), true),
    ] {
        let args = ["--bind", "127.0.0.1:0", "--threads", "1"];
        let Some(server) = serving_or_skipped(program, &args, uses_io_uring) else {
            continue;
        };
        // One thread accepts in order: once the client's call is answered, the bare
        // connection made before it has been accepted too.
        let bare = std::net::TcpStream::connect(server.addr()).expect("connect");
        let client = harness::Client::connect(server.addr());
        client.say_hello("before SIGTERM");
        let (status, took) = server.terminate();
        drop((bare, client));
        assert!(status.success(), "{program}: {status}");
        eprintln!("{program}: exited {took:?} after SIGTERM");
        assert!(
            took < EXIT_LIMIT,
            "{program}: took {took:?} to exit after SIGTERM"
        );
    }
}
