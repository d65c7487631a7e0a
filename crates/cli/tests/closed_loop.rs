//! Closed-loop runs count exactly what the server saw.

mod util;

use util::{num, run, Behavior, TestServer};

#[test]
fn request_count_matches_the_server_exactly() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "-n", "2000", "-c", "8", "-t", "2", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["requests"], 2000);
    assert_eq!(j["successful"], 2000);
    assert_eq!(s.requests(), 2000);
    assert_eq!(j["stop_reason"], "requests");
    // Keep-alive: one connection per configured connection, no more.
    assert_eq!(s.accepts(), 8);
    assert_eq!(j["connections_opened"], 8);
    assert_eq!(j["status_codes"]["200"], 2000);
    assert_eq!(j["offered_rps"], serde_json::Value::Null);
    // No arrivals, so none can slip past the window.
    assert_eq!(j["sent_after_window"], serde_json::Value::Null);
    let per_second: u64 = j["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 2000);
}

#[test]
fn duration_run_drains_in_flight_requests_and_matches_the_server() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "-d", "2s", "-c", "4", "-t", "2", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert!(j["requests"].as_u64().unwrap() > 100);
    assert_eq!(j["requests"].as_u64().unwrap(), s.requests());
    assert_eq!(j["stop_reason"], "duration");
    assert!((num(j, &["duration_s"]) - 2.0).abs() < 1e-9);
    let secs = j["per_second"].as_array().unwrap();
    assert!(secs.len() >= 2, "{secs:?}");
}

#[test]
fn keep_alive_off_opens_one_connection_per_request() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "-n",
        "300",
        "-c",
        "4",
        "--keep-alive",
        "off",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.json()["requests"], 300);
    assert_eq!(s.requests(), 300);
    assert_eq!(s.accepts(), 300);
    assert_eq!(r.json()["connections_opened"], 300);
    assert!(r.json()["connect_time_ms"]["count"].as_u64().unwrap() >= 300);
}

#[test]
fn pipelining_sends_batches_on_few_connections() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "-n",
        "1600",
        "-c",
        "4",
        "-t",
        "1",
        "--pipeline",
        "16",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.json()["requests"], 1600);
    assert_eq!(s.requests(), 1600);
    assert_eq!(s.accepts(), 4);
    assert_eq!(r.json()["pipeline"], 16);
}

#[test]
fn warmup_load_is_applied_but_not_recorded() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "-d", "1s", "--warmup", "1s", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let recorded = r.json()["requests"].as_u64().unwrap();
    assert!(recorded > 0);
    // The server also answered the warm-up requests.
    assert!(
        s.requests() > recorded + 10,
        "server {} recorded {recorded}",
        s.requests()
    );
    assert_eq!(num(r.json(), &["warmup_s"]), 1.0);
}

#[test]
fn method_headers_and_body_reach_the_server() {
    // The server counts a request only once its Content-Length body has arrived.
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/echo?x=1"),
        "-n",
        "10",
        "-c",
        "1",
        "-X",
        "POST",
        "-H",
        "X-Test: 1",
        "--body",
        "hello",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(s.requests(), 10);
    assert_eq!(r.json()["method"], "POST");
}

/// `--cpus 0` pins the worker threads: read their affinity from /proc while the run goes.
#[test]
fn cpus_pin_the_worker_threads() {
    let s = TestServer::start(Behavior::Ok);
    let mut child = std::process::Command::new(util::loadlab_bin())
        .args([
            "run",
            &s.url("/"),
            "-d",
            "3s",
            "-c",
            "2",
            "-t",
            "2",
            "--cpus",
            "0",
            "-q",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while seen.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        seen.clear();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", child.id())) else {
            continue;
        };
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.starts_with("loadlab-worker") {
                let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
                let cpus = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                seen.push(cpus);
            }
        }
    }
    child.wait().unwrap();
    assert_eq!(
        seen,
        vec!["0".to_string(), "0".to_string()],
        "worker affinities"
    );
}
