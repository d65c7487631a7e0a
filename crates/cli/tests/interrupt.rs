//! Ctrl-C stops the load and still prints and writes the result measured so far.

mod util;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{finish, loadlab_bin, temp_path, Behavior, TestServer};

#[test]
fn sigint_keeps_the_partial_result() {
    let s = TestServer::start(Behavior::Ok);
    let json = temp_path("interrupted.json");
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
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "loadlab did not stop promptly"
    );
    let r = finish(out, &json);
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
