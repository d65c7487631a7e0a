//! The files of a cgroup v1 directory, read and parsed. Each controller is a hierarchy of
//! its own (`cpu` and `cpuacct` are often mounted together as `cpu,cpuacct`):
//! - `cpu`: `cpu.cfs_quota_us` (`-1` for none), `cpu.cfs_period_us`, `cpu.stat`
//!   (`nr_periods`, `nr_throttled`, `throttled_time` in ns);
//! - `cpuacct`: `cpuacct.usage` (CPU ns of the cgroup and its descendants);
//! - `memory`: `memory.limit_in_bytes` (no limit is a huge number near `i64::MAX`,
//!   rounded down to the page), `memory.usage_in_bytes`, `memory.oom_control`
//!   (`oom_kill N` on kernels >= 4.13), `memory.failcnt` (times the limit was hit);
//! - `pids`: the same `pids.max`, `pids.current`, `pids.events` as v2 (see
//!   `read_pids` in the parent module).
//!
//! v1 has no pressure files. A missing file is `None`, never an error.

use std::path::Path;

use super::{parse_keyed, parse_u64, read, MemoryEvents, Throttling};

/// At or above this, `memory.limit_in_bytes` means "no limit": the kernel writes
/// `PAGE_COUNTER_MAX` pages in bytes (9223372036854771712 with 4 KiB pages; other page
/// sizes round differently), which nobody sets as a real limit.
pub(crate) const NO_MEMORY_LIMIT: u64 = 1 << 62;

/// The CFS quota as `(quota_us, period_us)`; `None` without the files or without a quota
/// (`-1`).
pub(crate) fn cpu_quota(dir: &Path) -> Option<(u64, u64)> {
    parse_cfs(
        &read(&dir.join("cpu.cfs_quota_us"))?,
        &read(&dir.join("cpu.cfs_period_us"))?,
    )
}

/// Parses `cpu.cfs_quota_us` (`-1` for no quota) and `cpu.cfs_period_us`.
pub(crate) fn parse_cfs(quota: &str, period: &str) -> Option<(u64, u64)> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period = parse_u64(period)?;
    (quota > 0 && period > 0).then_some((quota as u64, period))
}

/// `memory.limit_in_bytes`; `None` without the file or without a limit.
pub(crate) fn memory_limit(dir: &Path) -> Option<u64> {
    parse_memory_limit(&read(&dir.join("memory.limit_in_bytes"))?)
}

/// Parses `memory.limit_in_bytes`: `None` for "no limit" (>= [`NO_MEMORY_LIMIT`]).
pub(crate) fn parse_memory_limit(text: &str) -> Option<u64> {
    parse_u64(text).filter(|&v| v < NO_MEMORY_LIMIT)
}

/// CPU seconds used by the cgroup and its descendants (`cpuacct.usage`, ns).
pub(crate) fn cpu_usage_s(dir: &Path) -> Option<f64> {
    Some(parse_u64(&read(&dir.join("cpuacct.usage"))?)? as f64 / 1e9)
}

/// The throttling counters of the cpu controller's `cpu.stat`.
pub(crate) fn throttling(dir: &Path) -> Option<Throttling> {
    parse_throttling(&read(&dir.join("cpu.stat"))?)
}

/// The throttling counters of a v1 `cpu.stat` text (`throttled_time` in ns).
pub(crate) fn parse_throttling(text: &str) -> Option<Throttling> {
    let stat = parse_keyed(text);
    Some(Throttling {
        periods: *stat.get("nr_periods")?,
        throttled: *stat.get("nr_throttled")?,
        throttled_s: *stat.get("throttled_time")? as f64 / 1e9,
    })
}

/// Memory charged to the cgroup now, bytes (`memory.usage_in_bytes`).
pub(crate) fn memory_current(dir: &Path) -> Option<u64> {
    parse_u64(&read(&dir.join("memory.usage_in_bytes"))?)
}

/// The memory events v1 keeps: `oom_kill` of `memory.oom_control` and `memory.failcnt`
/// (times usage hit the limit: the nearest to v2's `max` event). v1 does not count OOM
/// situations (`under_oom` is a state), so `oom` is `None`.
pub(crate) fn memory_events(dir: &Path) -> Option<MemoryEvents> {
    let oom_kill = read(&dir.join("memory.oom_control"))
        .and_then(|t| parse_keyed(&t).get("oom_kill").copied());
    let max = read(&dir.join("memory.failcnt")).and_then(|t| parse_u64(&t));
    (oom_kill.is_some() || max.is_some()).then_some(MemoryEvents {
        oom: None,
        oom_kill,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfs_quota_and_none() {
        assert_eq!(parse_cfs("25000\n", "100000\n"), Some((25000, 100000)));
        assert_eq!(parse_cfs("-1\n", "100000\n"), None);
        assert_eq!(parse_cfs("50000\n", "0\n"), None);
        assert_eq!(parse_cfs("x\n", "100000\n"), None);
    }

    #[test]
    fn memory_limit_none_is_near_i64_max() {
        // 4 KiB pages, as this machine's root writes it.
        assert_eq!(parse_memory_limit("9223372036854771712\n"), None);
        // 64 KiB pages (arm64, ppc64le).
        assert_eq!(parse_memory_limit("9223372036854710272\n"), None);
        assert_eq!(parse_memory_limit("536870912\n"), Some(536_870_912));
        assert_eq!(parse_memory_limit(""), None);
    }

    #[test]
    fn cpu_stat_of_the_cpu_controller() {
        let text = "nr_periods 104\nnr_throttled 97\nthrottled_time 7312412345\n\
                    nr_bursts 0\nburst_time 0\n";
        assert_eq!(
            parse_throttling(text),
            Some(Throttling {
                periods: 104,
                throttled: 97,
                throttled_s: 7.312412345
            })
        );
        assert_eq!(parse_throttling("nr_periods 1\n"), None);
    }

    #[test]
    fn oom_control_keys() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(parse_keyed(text).get("oom_kill"), Some(&3));
        // Before 4.13 there is no oom_kill line.
        assert_eq!(
            parse_keyed("oom_kill_disable 0\nunder_oom 1\n").get("oom_kill"),
            None
        );
    }
}
