//! Local port exhaustion, reproduced inside a network namespace this test creates (loopback
//! only, a narrowed ephemeral range, no TIME_WAIT reuse): a keep-alive-off run reports
//! EADDRNOTAVAIL by name instead of hanging, and --source-addrs avoids it.
//!
//! Needs root and iproute2 (`.ci/run` installs it). It fails, rather than skips, without
//! them: a skipped check must not pass as a passing one.

mod util;

use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use util::{run_with, Behavior, TestServer};

struct Netns(String);

impl Netns {
    fn create(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).status();
        let ok = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .unwrap_or_else(|e| {
                panic!("`ip` is needed for this test (apt-get install iproute2): {e}")
            });
        assert!(ok.success(), "`ip netns add` failed: this test needs root");
        let ns = Netns(name.into());
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns.exec(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40199"]);
        ns.exec(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=0"]);
        ns
    }

    fn exec(&self, argv: &[&str]) {
        let st = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(argv)
            .status()
            .unwrap();
        assert!(st.success(), "ip netns exec {} {argv:?} failed", self.0);
    }

    /// Binds a listener inside the namespace (from a thread that enters it).
    fn listener(&self) -> std::net::TcpListener {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let f = std::fs::File::open(&path).unwrap();
            // SAFETY: switching this short-lived thread's network namespace.
            assert_eq!(
                unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
                0,
                "setns"
            );
            std::net::TcpListener::bind("127.0.0.1:0").unwrap()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn keep_alive_off_exhausts_ports_and_source_addrs_avoid_it() {
    let ns = Netns::create(&format!("loadlab-ports-{}", std::process::id()));
    let server = TestServer::serve(ns.listener(), Behavior::Ok);
    let url = server.url("/");
    let prefix = ["ip", "netns", "exec", ns.0.as_str()];

    // 200 ports, 600 connection-per-request requests: the range runs dry.
    let started = Instant::now();
    let r = run_with(
        &prefix,
        &[
            &url,
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
        ],
    );
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
    let r = run_with(
        &prefix,
        &[
            &url,
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
            "--source-addrs",
            "127.0.0.2-127.0.0.9",
            "-q",
        ],
    );
    assert_eq!(r.error_count("local_port_exhaustion"), 0, "{}", r.stdout);
    assert_eq!(r.json()["successful"], 600, "{}", r.stdout);
}
