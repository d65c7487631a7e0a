//! The files of a cgroup v2 directory, read and parsed: `cpu.max`, `cpu.stat`,
//! `memory.current`, `memory.max`, `memory.events`, and the pressure stall files
//! `cpu.pressure`, `memory.pressure`, `io.pressure` (`pids.*` are the same in v1 and v2:
//! `read_pids` in the parent module).
//!
//! A file is only there when its controller is enabled for the cgroup (`cpu.max` needs
//! `cpu` in the parent's `cgroup.subtree_control`), except `cpu.stat`'s `usage_usec` and
//! the pressure files, which every cgroup has. A missing file is `None`, never an error.

use std::path::Path;

use super::{parse_keyed, parse_max, parse_u64, read, MemoryEvents, Pressure, Throttling};

/// The CPU quota of `cpu.max` as `(quota_us, period_us)`; `None` without the file or
/// without a quota (`max 100000`).
pub(crate) fn cpu_quota(dir: &Path) -> Option<(u64, u64)> {
    parse_cpu_max(&read(&dir.join("cpu.max"))?)
}

/// Parses `cpu.max` (`QUOTA PERIOD`, or `max PERIOD` for no quota); `None` for no quota
/// or an unreadable text.
pub(crate) fn parse_cpu_max(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace();
    let quota: u64 = it.next()?.parse().ok()?;
    let period: u64 = it.next()?.parse().ok()?;
    (period > 0).then_some((quota, period))
}

/// `memory.max` in bytes; `None` without the file or without a limit (`max`).
pub(crate) fn memory_max(dir: &Path) -> Option<u64> {
    parse_max(&read(&dir.join("memory.max"))?)
}

/// CPU seconds used by the cgroup and its descendants (`usage_usec` of `cpu.stat`).
pub(crate) fn cpu_usage_s(dir: &Path) -> Option<f64> {
    let stat = parse_keyed(&read(&dir.join("cpu.stat"))?);
    Some(*stat.get("usage_usec")? as f64 / 1e6)
}

/// The throttling counters of `cpu.stat` (`nr_periods`, `nr_throttled`, `throttled_usec`);
/// `None` unless the cpu controller is enabled (the keys are absent then).
pub(crate) fn throttling(dir: &Path) -> Option<Throttling> {
    parse_throttling(&read(&dir.join("cpu.stat"))?)
}

/// The throttling counters of a v2 `cpu.stat` text.
pub(crate) fn parse_throttling(text: &str) -> Option<Throttling> {
    let stat = parse_keyed(text);
    Some(Throttling {
        periods: *stat.get("nr_periods")?,
        throttled: *stat.get("nr_throttled")?,
        throttled_s: *stat.get("throttled_usec")? as f64 / 1e6,
    })
}

/// Memory charged to the cgroup now, bytes (`memory.current`).
pub(crate) fn memory_current(dir: &Path) -> Option<u64> {
    parse_u64(&read(&dir.join("memory.current"))?)
}

/// `oom`, `oom_kill` and `max` of `memory.events` (hierarchical: descendants included).
pub(crate) fn memory_events(dir: &Path) -> Option<MemoryEvents> {
    let ev = parse_keyed(&read(&dir.join("memory.events"))?);
    Some(MemoryEvents {
        oom: ev.get("oom").copied(),
        oom_kill: ev.get("oom_kill").copied(),
        max: ev.get("max").copied(),
    })
}

/// The pressure totals of `RESOURCE.pressure` (`cpu`, `memory` or `io`).
pub(crate) fn pressure(dir: &Path, resource: &str) -> Option<Pressure> {
    parse_pressure(&read(&dir.join(format!("{resource}.pressure")))?)
}

/// Parses a pressure file:
///
/// ```text
/// some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
/// full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
/// ```
///
/// `total` is in microseconds. Kernels before 5.13 have no `full` line in `cpu.pressure`.
pub(crate) fn parse_pressure(text: &str) -> Option<Pressure> {
    let total = |kind: &str| {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(kind))?;
        line.split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some(Pressure {
        some_us: total("some")?,
        full_us: total("full"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_quota_and_none() {
        assert_eq!(parse_cpu_max("50000 100000\n"), Some((50000, 100000)));
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 0\n"), None);
        assert_eq!(parse_cpu_max("garbage\n"), None);
        assert_eq!(parse_cpu_max(""), None);
    }

    #[test]
    fn cpu_stat_with_and_without_the_cpu_controller() {
        // With the cpu controller (a kernel 6.x cgroup).
        let with = "usage_usec 8123456\nuser_usec 6000000\nsystem_usec 2123456\n\
                    core_sched.force_idle_usec 0\nnr_periods 420\nnr_throttled 311\n\
                    throttled_usec 2500000\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(
            parse_throttling(with),
            Some(Throttling {
                periods: 420,
                throttled: 311,
                throttled_s: 2.5
            })
        );
        assert_eq!(parse_keyed(with).get("usage_usec"), Some(&8_123_456));
        // Without it (a hybrid machine's unified tree): usage only.
        let without =
            "usage_usec 629565793\nuser_usec 467704393\nsystem_usec 161861399\nnice_usec 0\n";
        assert_eq!(parse_throttling(without), None);
        assert_eq!(parse_keyed(without).get("usage_usec"), Some(&629_565_793));
    }

    #[test]
    fn pressure_some_and_full() {
        let text = "some avg10=1.21 avg60=3.57 avg300=10.66 total=75322299\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            parse_pressure(text),
            Some(Pressure {
                some_us: 75_322_299,
                full_us: Some(0)
            })
        );
        // cpu.pressure before 5.13: no full line.
        let old = "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n";
        assert_eq!(
            parse_pressure(old),
            Some(Pressure {
                some_us: 42,
                full_us: None
            })
        );
        assert_eq!(parse_pressure("full avg10=0.00 total=3\n"), None);
        assert_eq!(parse_pressure(""), None);
    }
}
