//! Network namespaces a test creates for itself: loopback up, a narrowed ephemeral port
//! range, no TIME_WAIT reuse. Needs root and iproute2 (`.ci/run` installs it); tests fail,
//! rather than skip, without them.

use std::os::fd::AsRawFd;
use std::process::Command;

/// A namespace, deleted on drop.
pub struct Netns(pub String);

/// The ephemeral ports of a namespace [`Netns::create`] makes: 40000 up.
pub const PORTS: u16 = 200;

impl Netns {
    /// Creates `name` with [`PORTS`] ephemeral ports (40000-40199) and tcp_tw_reuse=0.
    pub fn create(name: &str) -> Netns {
        let _ = Command::new("ip")
            .args(["netns", "del", name])
            .stderr(std::process::Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .unwrap_or_else(|e| {
                panic!("`ip` is needed for this test (apt-get install iproute2): {e}")
            });
        assert!(ok.success(), "`ip netns add` failed: this test needs root");
        let ns = Netns(name.into());
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        let range = format!("net.ipv4.ip_local_port_range=40000 {}", 40000 + PORTS - 1);
        ns.exec(&["sysctl", "-qw", &range]);
        ns.exec(&["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=0"]);
        ns
    }

    /// Runs a command inside the namespace; panics if it fails.
    pub fn exec(&self, argv: &[&str]) {
        let st = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(argv)
            .status()
            .unwrap();
        assert!(st.success(), "ip netns exec {} {argv:?} failed", self.0);
    }

    /// Binds a listener inside the namespace (from a thread that enters it).
    pub fn listener(&self) -> std::net::TcpListener {
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
