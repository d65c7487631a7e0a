//! The `loadlab-hello` binary: bad flags are refused by name; the ready line and SIGTERM.

use std::net::TcpStream;

use loadlab_target_common::testing::{self, Process};

const BIN: &str = env!("CARGO_BIN_EXE_loadlab-hello");

fn refused(args: &[&str]) -> String {
    testing::refused(BIN, args)
}

#[test]
fn unparsable_latency_model_names_the_flag() {
    let stderr = refused(&["--bind", ":0", "--latency", "gaussian:5ms"]);
    assert!(stderr.contains("--latency"), "{stderr}");
    assert!(stderr.contains("unknown latency model"), "{stderr}");
}

#[test]
fn zero_concurrent_streams_names_the_flag() {
    let stderr = refused(&["--bind", ":0", "--max-concurrent-streams", "0"]);
    assert!(stderr.contains("--max-concurrent-streams"), "{stderr}");
}

#[test]
fn address_in_use_names_the_flag() {
    testing::assert_bind_in_use_refused(BIN);
}

#[test]
fn prints_its_address_and_stops_on_sigterm() {
    let server = Process::spawn_ready(BIN, &["--bind", ":0", "--latency", "fixed:1ms"]);
    TcpStream::connect(server.addr()).expect("backend accepts connections");
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
}
