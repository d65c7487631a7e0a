//! Each error class is produced by a server built to produce it, and counted by name.

mod util;

use std::time::Duration;

use util::{run, Behavior, RunOutput, TestServer};

/// At most 20 requests, 2 at a time, each ending at once or at its timeout (5 s at most
/// here, and none of these servers makes a request wait that long): a bound that catches a
/// hang, not a performance threshold.
fn assert_on_time(r: &RunOutput) {
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);
}

fn assert_all(class: &str, behavior: Behavior, extra: &[&str]) -> util::RunOutput {
    let s = TestServer::start(behavior);
    let mut args = vec![
        s.url("/"),
        "-n".into(),
        "20".into(),
        "-c".into(),
        "2".into(),
        "-q".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let r = run(&args);
    assert_eq!(r.error_count(class), 20, "class {class}\n{}", r.stdout);
    assert_eq!(r.json()["errors_total"], 20);
    assert_eq!(
        r.code(),
        Some(1),
        "every request failed, so exit 1\n{}",
        r.stdout
    );
    assert_on_time(&r);
    r
}

#[test]
fn http_4xx_and_5xx() {
    let r = assert_all("http_4xx", Behavior::Status(404), &[]);
    assert_eq!(r.json()["status_codes"]["404"], 20);
    assert_eq!(r.json()["requests"], 20);
    let r = assert_all("http_5xx", Behavior::Status(503), &[]);
    assert_eq!(r.json()["status_codes"]["503"], 20);
}

#[test]
fn connection_reset() {
    assert_all("connection_reset", Behavior::Reset, &[]);
}

#[test]
fn connection_closed_without_response() {
    assert_all("connection_closed", Behavior::Close, &[]);
}

#[test]
fn malformed_response() {
    assert_all("malformed_response", Behavior::Malformed, &[]);
}

#[test]
fn request_timeout() {
    let r = assert_all("request_timeout", Behavior::Silent, &["--timeout", "300ms"]);
    assert_eq!(r.json()["requests"], 0);
}

#[test]
fn connect_refused() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = run(&[
        &format!("http://127.0.0.1:{port}/"),
        "-n",
        "20",
        "-c",
        "2",
        "-q",
    ]);
    assert_eq!(r.error_count("connect_refused"), 20);
    assert_eq!(r.code(), Some(1));
    assert_on_time(&r);
    assert!(r.stdout.contains("EVERY REQUEST FAILED"), "{}", r.stdout);
    assert!(
        !r.stdout.contains("p99"),
        "no latency figures when nothing succeeded:\n{}",
        r.stdout
    );
}

/// A name with several addresses, `::1` first, as `localhost` is on a standard Debian, and a
/// server listening on `127.0.0.1` only: loadlab reaches it on the address it listens on,
/// as curl and wrk do, instead of counting every request refused. The name is given in a
/// mount namespace of its own, with its own /etc/hosts; a name whose every address refuses
/// is still counted refused.
#[test]
#[ignore = "needs root, for a mount namespace with its own /etc/hosts (./test.sh)"]
fn a_name_is_reached_on_the_address_that_listens() {
    let hosts = util::temp_path("hosts");
    std::fs::write(&hosts, "::1 dual\n127.0.0.1 dual\n127.0.0.1 localhost\n").unwrap();
    let hosts = hosts.display().to_string();
    let in_namespace = |args: &[&str]| {
        let prefix = [
            "unshare",
            "--mount",
            "--",
            "sh",
            "-c",
            "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
            &hosts,
        ];
        util::run_with(&prefix, args)
    };
    let s = TestServer::start(Behavior::Ok);
    let port = s.addr.port();
    let r = in_namespace(&[&format!("http://dual:{port}/"), "-n", "20", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["successful"], 20, "{}", r.stdout);
    assert_eq!(s.requests(), 20);
    assert_on_time(&r);

    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = in_namespace(&[&format!("http://dual:{dead}/"), "-n", "20", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.error_count("connect_refused"), 20, "{}", r.stdout);
    assert_on_time(&r);
}

/// A listener whose accept queue is full drops new SYNs: connects hang until the deadline.
#[test]
fn connect_timeout() {
    let (l, _fillers) = util::full_listener();
    let addr = l.local_addr().unwrap();
    let r = run(&[
        &format!("http://{addr}/"),
        "-n",
        "6",
        "-c",
        "2",
        "--timeout",
        "300ms",
        "-q",
    ]);
    let timeouts = r.error_count("connect_timeout");
    assert!(
        timeouts >= 4,
        "expected connect timeouts, got {:?}",
        r.json()["errors"]
    );
    assert_eq!(r.json()["successful"], 0, "{}", r.json());
    assert_eq!(r.code(), Some(1), "{}", r.stderr);
    assert_on_time(&r);
    drop(l);
}
