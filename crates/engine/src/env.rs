//! The machine a run happens on: what every result records, and the kernel facts the
//! engine checks (file-descriptor limits, ephemeral ports, TIME_WAIT).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Sysctls that decide how a load test behaves (document 000's list).
pub const SYSCTLS: [&str; 11] = [
    "net.core.somaxconn",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_abort_on_overflow",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_timestamps",
    "fs.file-max",
];

/// Where and how a run happened.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Environment {
    /// Kernel release.
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Cores available to loadlab.
    pub cores: usize,
    /// loadlab version.
    pub loadlab_version: String,
    /// The command line that produced the result.
    pub command: Vec<String>,
    /// Host name.
    pub hostname: String,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// `nofile` soft limit at start.
    pub nofile_soft: u64,
    /// `nofile` hard limit at start.
    pub nofile_hard: u64,
    /// The relevant sysctls (name → value as the kernel prints it).
    pub sysctls: BTreeMap<String, String>,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Reads a sysctl by its dotted name.
pub fn sysctl(name: &str) -> Option<String> {
    read_trim(&format!("/proc/sys/{}", name.replace('.', "/")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl Environment {
    /// Captures the environment now.
    pub fn capture(command: Vec<String>) -> Environment {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let (nofile_soft, nofile_hard) = nofile_limits();
        Environment {
            kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            cpu_model,
            cores: crate::config::available_cores(),
            loadlab_version: env!("CARGO_PKG_VERSION").into(),
            command,
            hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            nofile_soft,
            nofile_hard,
            sysctls: SYSCTLS
                .iter()
                .filter_map(|n| sysctl(n).map(|v| (n.to_string(), v)))
                .collect(),
        }
    }
}

/// The `nofile` (RLIMIT_NOFILE) soft and hard limits.
pub fn nofile_limits() -> (u64, u64) {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    (rl.rlim_cur, rl.rlim_max)
}

/// Raises the soft `nofile` limit to `needed` if the hard limit allows; returns the soft
/// limit in force afterwards.
pub fn raise_nofile(needed: u64) -> u64 {
    let (soft, hard) = nofile_limits();
    if soft >= needed || hard < needed {
        return soft;
    }
    let rl = libc::rlimit {
        rlim_cur: needed,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } == 0 {
        needed
    } else {
        soft
    }
}

/// Sockets per TCP state, from `/proc/net/tcp` and `/proc/net/tcp6` of this network
/// namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStates {
    /// `ESTABLISHED`.
    pub established: u64,
    /// `TIME_WAIT`.
    pub time_wait: u64,
}

/// Counts sockets by state now.
pub fn tcp_states() -> TcpStates {
    let mut s = TcpStates::default();
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for line in text.lines().skip(1) {
            match line.split_whitespace().nth(3) {
                Some("01") => s.established += 1,
                Some("06") => s.time_wait += 1,
                _ => {}
            }
        }
    }
    s
}

/// The ephemeral port range `(low, high)`.
pub fn ephemeral_port_range() -> Option<(u16, u16)> {
    let v = sysctl("net.ipv4.ip_local_port_range")?;
    let mut it = v.split_whitespace().map(|p| p.parse::<u16>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) if a <= b => Some((a, b)),
        _ => None,
    }
}

/// How long a closed connection holds its port in TIME_WAIT on Linux (TCP_TIMEWAIT_LEN).
pub const TIME_WAIT_SECONDS: u64 = 60;

/// The local ports a client has for new connections to one destination.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortBudget {
    /// Ephemeral range start.
    pub low: u16,
    /// Ephemeral range end (inclusive).
    pub high: u16,
    /// Local source addresses connections are spread over (at least 1).
    pub source_addrs: u64,
    /// `tcp_tw_reuse` lets connect() reuse ports in TIME_WAIT (1, or 2 on loopback).
    pub tw_reuse_effective: bool,
}

impl PortBudget {
    /// Reads this network namespace's settings for a target on loopback or not.
    pub fn read(loopback: bool, source_addrs: usize) -> Option<PortBudget> {
        let (low, high) = ephemeral_port_range()?;
        let tw_reuse = sysctl("net.ipv4.tcp_tw_reuse").unwrap_or_default();
        Some(PortBudget {
            low,
            high,
            source_addrs: source_addrs.max(1) as u64,
            tw_reuse_effective: tw_reuse == "1" || (tw_reuse == "2" && loopback),
        })
    }

    /// Ports available in all.
    pub fn ports(&self) -> u64 {
        (u64::from(self.high) - u64::from(self.low) + 1) * self.source_addrs
    }

    /// At `new_per_s` new connections per second, each closed one holding its port for
    /// [`TIME_WAIT_SECONDS`]: after how many seconds no port is free (`None`: never).
    pub fn seconds_until_exhausted(&self, new_per_s: f64) -> Option<f64> {
        if self.tw_reuse_effective || new_per_s <= 0.0 {
            return None;
        }
        let ports = self.ports() as f64;
        (new_per_s * TIME_WAIT_SECONDS as f64 > ports).then(|| ports / new_per_s)
    }
}

/// Peak resident memory of this process, bytes.
pub fn peak_rss_bytes() -> u64 {
    let ru = rusage_self();
    ru.ru_maxrss as u64 * 1024
}

/// CPU seconds (user + system) used by this process so far.
pub fn process_cpu_seconds() -> f64 {
    let ru = rusage_self();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn rusage_self() -> libc::rusage {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_real_values() {
        let e = Environment::capture(vec!["loadlab".into()]);
        assert!(!e.kernel.is_empty() && e.kernel != "unknown");
        assert!(e.cores >= 1);
        assert!(e.nofile_soft > 0);
        assert!(e.sysctls.contains_key("net.ipv4.ip_local_port_range"));
        let (lo, hi) = ephemeral_port_range().unwrap();
        assert!(lo <= hi);
    }

    #[test]
    fn port_budget_predicts_exhaustion() {
        // Document 002: 16,383 ports, ab without keep-alive at ~1,000 connections/s.
        let b = PortBudget {
            low: 49152,
            high: 65534,
            source_addrs: 1,
            tw_reuse_effective: false,
        };
        assert_eq!(b.ports(), 16_383);
        let t = b.seconds_until_exhausted(1000.0).unwrap();
        assert!((t - 16.383).abs() < 1e-9);
        // 200 connections/s hold 12,000 ports at most: never runs out.
        assert_eq!(b.seconds_until_exhausted(200.0), None);
        let spread = PortBudget {
            source_addrs: 16,
            ..b
        };
        assert_eq!(spread.seconds_until_exhausted(1000.0), None);
        let reuse = PortBudget {
            tw_reuse_effective: true,
            ..b
        };
        assert_eq!(reuse.seconds_until_exhausted(1e6), None);
    }

    #[test]
    fn counts_established_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let before = tcp_states().established;
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        // Both ends of the new connection are ESTABLISHED (other tests may add more).
        assert!(tcp_states().established >= before + 2);
    }
}
