//! Ctrl-C (or SIGTERM) stops the load and still prints and writes the result measured so
//! far, and the exit status says the run was interrupted (128 + the signal), whatever the
//! partial result's gates say.

mod util;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{finish, loadlab_bin, temp_path, Behavior, TestServer};

/// Runs 200 req/s for up to 60 s with `extra` flags, sends `signal` after 2.5 s, and
/// returns what loadlab printed and wrote.
fn interrupted(
    signal: i32,
    json: &std::path::Path,
    extra: &[&str],
) -> (TestServer, util::RunOutput) {
    let s = TestServer::start(Behavior::Ok);
    let child = Command::new(loadlab_bin())
        .args([
            "run",
            &s.url("/"),
            "--rate",
            "200",
            "-d",
            "60s",
            "-q",
            "--json",
        ])
        .arg(json)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "loadlab did not stop promptly"
    );
    let r = finish(out, json);
    (s, r)
}

#[test]
fn sigint_keeps_the_partial_result() {
    let json = temp_path("interrupted.json");
    let (s, r) = interrupted(libc::SIGINT, &json, &[]);
    assert_eq!(r.output.status.code(), Some(130), "{}", r.stderr);
    assert!(r.stderr.contains("interrupted by SIGINT"), "{}", r.stderr);
    assert!(r.stdout.contains("INTERRUPTED"), "{}", r.stdout);
    let j = r.json();
    assert_eq!(j["stop_reason"], "interrupted");
    let n = j["requests"].as_u64().unwrap();
    assert!(
        n >= 200 && n <= s.requests(),
        "recorded {n}, server saw {}",
        s.requests()
    );
    let d = j["duration_s"].as_f64().unwrap();
    assert!(d > 1.0 && d < 10.0, "measured window {d}");
}

#[test]
fn sigterm_exits_143_even_when_the_partial_result_passes_its_gates() {
    // A CI job's timeout sends SIGTERM: the few seconds measured pass the gate, and the job
    // must still not pass.
    let json = temp_path("terminated.json");
    let (_s, r) = interrupted(libc::SIGTERM, &json, &["--slo", "errors<1%"]);
    assert_eq!(r.output.status.code(), Some(143), "{}", r.stderr);
    assert!(
        r.stdout.contains("PASS"),
        "the gate passed on what was measured: {}",
        r.stdout
    );
    assert!(r.stderr.contains("interrupted by SIGTERM"), "{}", r.stderr);
    assert_eq!(r.json()["stop_reason"], "interrupted");
}
