//! A private network for distributed-load tests: a "hub" namespace holding a bridge (where
//! the coordinator and the target run) and leaf namespaces joined to it by veth pairs (one
//! per agent), each with its own address on 10.77.0.0/24. Nothing is routed anywhere else:
//! no default route, no NAT. Everything is deleted on drop. Needs root and iproute2
//! (`.ci/run` installs it); the tests fail, rather than skip, without them.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The hub's address (on its bridge).
pub const HUB_IP: &str = "10.77.0.1";

/// Hub and leaves, deleted on drop.
pub struct Fabric {
    pub hub: String,
    pub leaves: Vec<String>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("`ip` is needed for the distributed tests (apt-get install iproute2): {e}")
    });
    assert!(
        out.status.success(),
        "`ip {}` failed (these tests need root): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Fabric {
    /// A hub and `leaves` leaf namespaces, leaf `i` at 10.77.0.(11 + i).
    pub fn new(leaves: usize) -> Fabric {
        static N: AtomicU32 = AtomicU32::new(0);
        // Short names: interface names are at most 15 bytes.
        let id = format!(
            "{}{}",
            std::process::id() % 100_000,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let hub = format!("llh{id}");
        let mut f = Fabric {
            hub: hub.clone(),
            leaves: Vec::new(),
        };
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&[
            "-n",
            &hub,
            "addr",
            "add",
            &format!("{HUB_IP}/24"),
            "dev",
            "br0",
        ]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for i in 0..leaves {
            let leaf = format!("lll{id}x{i}");
            ip(&["netns", "add", &leaf]);
            f.leaves.push(leaf.clone());
            ip(&["-n", &leaf, "link", "set", "lo", "up"]);
            let port = format!("p{i}");
            ip(&[
                "-n", &leaf, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
                &hub,
            ]);
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            ip(&[
                "-n",
                &leaf,
                "addr",
                "add",
                &format!("{}/24", Fabric::leaf_ip(i)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &leaf, "link", "set", "eth0", "up"]);
        }
        f
    }

    /// Leaf `i`'s address.
    pub fn leaf_ip(i: usize) -> String {
        format!("10.77.0.{}", 11 + i)
    }

    /// `program` run inside namespace `ns`.
    pub fn command(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for ns in self.leaves.iter().chain(std::iter::once(&self.hub)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
