//! Local port exhaustion, reproduced inside a network namespace this test creates (loopback
//! only, a narrowed ephemeral range, no TIME_WAIT reuse): a keep-alive-off run reports
//! EADDRNOTAVAIL by name instead of hanging, and --source-addrs avoids it.
//!
//! Needs root and iproute2 (`.ci/run` installs it). It fails, rather than skips, without
//! them: a skipped check must not pass as a passing one.

mod util;

use std::time::{Duration, Instant};

use util::netns::Netns;
use util::{run_with, Behavior, TestServer};

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn keep_alive_off_exhausts_ports_and_source_addrs_avoid_it() {
    let ns = Netns::create(&format!("loadlab-ports-{}", std::process::id()));
    let server = TestServer::serve(ns.listener(), Behavior::Ok);
    let url = server.url("/");
    let prefix = ["ip", "netns", "exec", ns.0.as_str()];

    // 200 ports, 600 connection-per-request requests four at a time: the range runs dry.
    let started = Instant::now();
    let mut args = vec![
        url.as_str(),
        "--keep-alive",
        "off",
        "-n",
        "600",
        "-c",
        "4",
        "-t",
        "1",
        "--timeout",
        "2s",
        "-q",
    ];
    let r = run_with(&prefix, &args);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the run must not hang"
    );
    let exhausted = r.error_count("local_port_exhaustion");
    assert!(
        exhausted > 0,
        "expected EADDRNOTAVAIL errors: {:?}\n{}",
        r.json()["errors"],
        r.stdout
    );
    let ok = r.json()["successful"].as_u64().unwrap();
    assert!(
        (150..=200).contains(&ok),
        "about the 200 ports' worth should succeed, got {ok}"
    );
    assert!(
        r.stdout.contains("EADDRNOTAVAIL") && r.stdout.contains("TIME_WAIT"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("--source-addrs"),
        "the summary should name the fix:\n{}",
        r.stdout
    );

    // Let that run's TIME_WAIT sockets expire on the first address only; spreading over
    // eight other addresses gives 1600 ports.
    args.extend(["--source-addrs", "127.0.0.2-127.0.0.9"]);
    let r = run_with(&prefix, &args);
    assert_eq!(r.error_count("local_port_exhaustion"), 0, "{}", r.stdout);
    assert_eq!(r.json()["successful"], 600, "{}", r.stdout);
}
