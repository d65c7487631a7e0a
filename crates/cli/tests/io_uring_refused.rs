//! Where the kernel refuses io_uring (here with the real switch, `kernel.io_uring_disabled
//! = 2`, as a hardened host or a container policy would), `--io uring` runs on epoll, says
//! so once with the reason, and measures the same. A test binary of its own: the switch is
//! machine-wide, and cargo runs test binaries one at a time.

mod util;

use util::{Behavior, TestServer};

const SWITCH: &str = "/proc/sys/kernel/io_uring_disabled";

/// Sets the switch, and puts its old value back when dropped.
struct Disabled(String);

impl Disabled {
    fn set() -> Disabled {
        let old = std::fs::read_to_string(SWITCH).unwrap_or_else(|e| {
            panic!("{SWITCH}: {e} (Linux 6.6 or later has it; this test runs as root)")
        });
        std::fs::write(SWITCH, "2").unwrap_or_else(|e| panic!("writing {SWITCH}: {e}"));
        Disabled(old.trim().to_string())
    }
}

impl Drop for Disabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SWITCH, &self.0);
    }
}

#[test]
fn a_refused_io_uring_falls_back_to_epoll_and_says_so_once() {
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
