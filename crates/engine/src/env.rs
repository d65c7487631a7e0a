//! The machine a run happens on, as every result records it. The facts themselves are read
//! by `loadlab_system` (`procfs`, `os`).

use std::collections::BTreeMap;

use loadlab_system::{os, procfs};
use serde::{Deserialize, Serialize};

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

impl Environment {
    /// Captures the environment now.
    pub fn capture(command: Vec<String>) -> Environment {
        let (nofile_soft, nofile_hard) = os::nofile_limits();
        Environment {
            kernel: procfs::kernel_release().unwrap_or_else(|| "unknown".into()),
            cpu_model: procfs::cpu_model().unwrap_or_else(|| "unknown".into()),
            cores: crate::config::available_cores(),
            loadlab_version: env!("CARGO_PKG_VERSION").into(),
            command,
            hostname: procfs::hostname().unwrap_or_default(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            nofile_soft,
            nofile_hard,
            sysctls: procfs::sysctls(),
        }
    }
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
        let (lo, hi) = procfs::ephemeral_port_range().unwrap();
        assert!(lo <= hi);
    }

    #[test]
    fn serializes_the_recorded_fields() {
        let e = Environment::capture(vec!["loadlab".into(), "run".into()]);
        let v = serde_json::to_value(&e).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "command",
                "cores",
                "cpu_model",
                "hostname",
                "kernel",
                "loadlab_version",
                "nofile_hard",
                "nofile_soft",
                "started_at",
                "sysctls"
            ]
        );
        let back: Environment = serde_json::from_value(v).unwrap();
        assert_eq!(back.command, ["loadlab", "run"]);
    }
}
