//! The `loadlab-target` binary: bad flags are refused by name; the ready line and SIGTERM.

use loadlab_target_common::testing::{self, http_get, Process};

const BIN: &str = env!("CARGO_BIN_EXE_loadlab-target");

fn refused(args: &[&str]) -> String {
    testing::refused(BIN, args)
}

#[test]
fn zero_workers_names_the_flag() {
    let stderr = refused(&["--bind", ":0", "--workers", "0"]);
    assert!(stderr.contains("--workers"), "{stderr}");
}

#[test]
fn bad_keep_alive_names_the_flag() {
    let stderr = refused(&["--bind", ":0", "--keep-alive", "forever"]);
    assert!(stderr.contains("--keep-alive"), "{stderr}");
}

#[test]
fn address_in_use_names_the_flag() {
    testing::assert_bind_in_use_refused(BIN);
}

#[test]
fn prints_its_address_serves_and_stops_on_sigterm() {
    let server = Process::spawn_ready(BIN, &["--bind", ":0", "--workers", "1"]);
    assert_eq!(http_get(server.addr(), "/health").body, "ok");
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
}
