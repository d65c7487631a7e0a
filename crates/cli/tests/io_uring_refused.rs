//! Where the kernel refuses io_uring (here with the real switch, `kernel.io_uring_disabled
//! = 2`, as a hardened host or a container policy would), `--io uring` runs on epoll, says
//! so once with the reason, and measures the same; a distributed run says what its agents
//! used. A test binary of its own: the switch is machine-wide, and cargo runs test binaries
//! one at a time (and its tests one at a time here).

mod util;

use std::sync::Mutex;

use util::{Behavior, TestServer};

static SERIAL: Mutex<()> = Mutex::new(());

const SWITCH: &str = "/proc/sys/kernel/io_uring_disabled";

/// Sets the switch, and puts its old value back when dropped.
struct Disabled(String);

impl Disabled {
    /// io_uring refused to every process.
    fn set() -> Disabled {
        Disabled::set_to("2")
    }

    /// The switch at `value`: 2 refuses io_uring to every process, 1 to those without
    /// `CAP_SYS_ADMIN` (or the group `kernel.io_uring_group` names).
    fn set_to(value: &str) -> Disabled {
        let old = std::fs::read_to_string(SWITCH).unwrap_or_else(|e| {
            panic!("{SWITCH}: {e} (Linux 6.6 or later has it; this test runs as root)")
        });
        std::fs::write(SWITCH, value).unwrap_or_else(|e| panic!("writing {SWITCH}: {e}"));
        Disabled(old.trim().to_string())
    }
}

impl Drop for Disabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SWITCH, &self.0);
    }
}

#[test]
#[ignore = "needs root, for the machine-wide io_uring switch (./test.sh)"]
fn a_refused_io_uring_falls_back_to_epoll_and_says_so_once() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    let args = [url.as_str(), "--io", "uring", "-c", "2", "-n", "100", "-q"];
    let refused = {
        let _off = Disabled::set();
        util::run(&args)
    };
    let allowed = util::run(&args);
    let (r, a) = (refused.json(), allowed.json());
    assert_eq!(a["io"], "uring", "{a}");
    assert_eq!(r["io"], "epoll", "{r}");
    assert_eq!(refused.code(), Some(0), "{}", refused.stderr);
    assert_eq!(r["successful"], 100, "{r}");
    assert_eq!(r["successful"], a["successful"], "{r}\n{a}");
    let notes = util::warnings_with(r, "io_uring");
    assert_eq!(notes.len(), 1, "{r}");
    assert!(
        notes[0].contains("refused") && notes[0].contains("epoll"),
        "{r}"
    );
}

/// A distributed run reports the interface its agents used, not the coordinator's: with the
/// switch at 1, io_uring is left to processes with `CAP_SYS_ADMIN`, so the coordinator
/// (root) would take it, and an agent started without that capability cannot.
#[test]
#[ignore = "needs root, for the machine-wide io_uring switch (./test.sh)"]
fn a_distributed_run_says_the_interface_its_agent_used() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    let token = util::temp_path("refused-token");
    std::fs::write(&token, "dGVzdC10b2tlbi1mb3ItbG9hZGxhYg==\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let coordinator = format!("127.0.0.1:{port}");
    let _only_admins = Disabled::set_to("1");
    let mut agent = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-sys_admin", util::loadlab_bin()])
        .args(["agent", "--coordinator", &coordinator, "--token-file"])
        .arg(&token)
        .args(["--name", "unprivileged", "--wait", "30s"])
        .stderr(std::fs::File::create(util::temp_path("unprivileged.log")).unwrap())
        .spawn()
        .unwrap();
    let token_arg = token.to_str().unwrap();
    let args = [
        url.as_str(),
        "--io",
        "uring",
        "-c",
        "2",
        "-n",
        "100",
        "-q",
        "--agents",
        "1",
        "--listen",
        &coordinator,
        "--token-file",
        token_arg,
    ];
    let r = util::run(&args);
    let _ = agent.kill();
    let _ = agent.wait();
    let j = r.json();
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(j["successful"], 100, "{j}");
    assert_eq!(j["io"], "epoll", "{j}");
    let notes = util::warnings_with(j, "agent unprivileged:");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("io_uring") && n.contains("epoll")),
        "{j}"
    );
}
