//! The one model of what client connections cost the machine: a file descriptor each
//! (plus a reserve), and a local port each, held for [`TIME_WAIT_SECONDS`] after a close
//! when keep-alive is off. The run's pre-flight (`loadlab-engine`), the lab (which raises
//! `nofile` before its targets start) and the doctor all call it, so they agree.

use thiserror::Error;

use crate::{os, procfs};

/// File descriptors loadlab keeps free beyond one per connection (stdio, epoll, timers,
/// files).
pub const FD_RESERVE: u64 = 32;

/// How long a closed connection holds its port in TIME_WAIT on Linux (`TCP_TIMEWAIT_LEN`;
/// `tcp_fin_timeout` does not change it).
pub const TIME_WAIT_SECONDS: u64 = 60;

/// File descriptors `connections` client connections need: one each plus [`FD_RESERVE`].
pub fn fds_needed(connections: u64) -> u64 {
    connections + FD_RESERVE
}

/// The hard `nofile` limit is too low for the planned connections, so the soft limit could
/// not be raised to what they need.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("{connections} connections need {needed} file descriptors; nofile is {soft} (hard {hard})")]
pub struct NofileShortfall {
    /// The connections planned.
    pub connections: u64,
    /// The file descriptors they need ([`fds_needed`]).
    pub needed: u64,
    /// The soft limit in force.
    pub soft: u64,
    /// The hard limit, which the soft one cannot pass.
    pub hard: u64,
}

/// Raises this process's soft `nofile` limit to what `connections` need when the hard limit
/// allows (children started afterwards inherit it); the shortfall otherwise.
pub fn reserve_fds(connections: u64) -> Result<(), NofileShortfall> {
    let needed = fds_needed(connections);
    if os::raise_nofile(needed) >= needed {
        return Ok(());
    }
    let (soft, hard) = os::nofile_limits();
    Err(NofileShortfall {
        connections,
        needed,
        soft,
        hard,
    })
}

/// Ports held in TIME_WAIT at once, at most, at `new_per_s` new connections per second
/// (each closed one holds its port for [`TIME_WAIT_SECONDS`]).
pub fn ports_in_time_wait(new_per_s: f64) -> u64 {
    (new_per_s * TIME_WAIT_SECONDS as f64).ceil() as u64
}

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
    /// Reads this network namespace's settings for a target on loopback or not, with
    /// connections spread over `source_addrs` local addresses (0 counts as 1); `None` when
    /// the ephemeral range cannot be read.
    pub fn read(loopback: bool, source_addrs: usize) -> Option<PortBudget> {
        let (low, high) = procfs::ephemeral_port_range()?;
        let tw_reuse = procfs::sysctl("net.ipv4.tcp_tw_reuse").unwrap_or_default();
        Some(PortBudget {
            low,
            high,
            source_addrs: source_addrs.max(1) as u64,
            tw_reuse_effective: tw_reuse == "1" || (tw_reuse == "2" && loopback),
        })
    }

    /// Ports of the ephemeral range, for one source address.
    pub fn per_address(&self) -> u64 {
        u64::from(self.high) - u64::from(self.low) + 1
    }

    /// Ports available in all.
    pub fn ports(&self) -> u64 {
        self.per_address() * self.source_addrs
    }

    /// Ports still free when `held` are taken (e.g. sockets already in TIME_WAIT).
    pub fn free(&self, held: u64) -> u64 {
        self.ports().saturating_sub(held)
    }

    /// At `new_per_s` new connections per second, each closed one holding its port for
    /// [`TIME_WAIT_SECONDS`]: after how many seconds no port is free (`None`: never).
    pub fn seconds_until_exhausted(&self, new_per_s: f64) -> Option<f64> {
        self.seconds_until_exhausted_holding(new_per_s, 0)
    }

    /// [`PortBudget::seconds_until_exhausted`] when `held` ports are already taken at the
    /// start (sockets in TIME_WAIT now). They are assumed to stay held, which errs on the
    /// side of warning.
    pub fn seconds_until_exhausted_holding(&self, new_per_s: f64, held: u64) -> Option<f64> {
        if self.tw_reuse_effective || new_per_s <= 0.0 {
            return None;
        }
        let free = self.free(held) as f64;
        (new_per_s * TIME_WAIT_SECONDS as f64 > free).then(|| free / new_per_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Document 002's machine: 49152–65534, no tw_reuse.
    fn doc002() -> PortBudget {
        PortBudget {
            low: 49152,
            high: 65534,
            source_addrs: 1,
            tw_reuse_effective: false,
        }
    }

    #[test]
    fn port_budget_predicts_exhaustion() {
        // Document 002: 16,383 ports, ab without keep-alive at ~1,000 connections/s.
        let b = doc002();
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
        assert_eq!(b.seconds_until_exhausted(0.0), None);
    }

    #[test]
    fn held_ports_shorten_the_budget() {
        let b = doc002();
        assert_eq!(b.per_address(), 16_383);
        assert_eq!(b.free(383), 16_000);
        assert_eq!(b.free(20_000), 0);
        // Nothing held: the same as without.
        assert_eq!(
            b.seconds_until_exhausted_holding(1000.0, 0),
            b.seconds_until_exhausted(1000.0)
        );
        // 200/s needs 12,000 ports: fine with 16,383 free, not with 8,000 (gone in 40 s).
        assert_eq!(b.seconds_until_exhausted_holding(200.0, 0), None);
        let t = b.seconds_until_exhausted_holding(200.0, 8_383).unwrap();
        assert!((t - 40.0).abs() < 1e-9);
        // Everything held: exhausted at once.
        assert_eq!(b.seconds_until_exhausted_holding(1.0, 1 << 20), Some(0.0));
    }

    #[test]
    fn ports_and_fds_needed() {
        assert_eq!(ports_in_time_wait(1000.0), 60_000);
        assert_eq!(ports_in_time_wait(0.5), 30);
        assert_eq!(ports_in_time_wait(0.01), 1);
        assert_eq!(fds_needed(10_000), 10_032);
        assert_eq!(fds_needed(0), FD_RESERVE);
    }

    #[test]
    fn reserve_fds_within_and_beyond_the_hard_limit() {
        let (soft, hard) = os::nofile_limits();
        // What is already allowed needs no change.
        assert_eq!(reserve_fds(soft.saturating_sub(FD_RESERVE)), Ok(()));
        if hard < u64::MAX - FD_RESERVE {
            let e = reserve_fds(hard).unwrap_err();
            assert_eq!(e.needed, hard + FD_RESERVE);
            assert_eq!(e.connections, hard);
            assert_eq!(e.hard, hard);
            assert!(e.to_string().contains("file descriptors"));
        }
    }

    #[test]
    fn reads_this_namespace() {
        let b = PortBudget::read(true, 0).unwrap();
        assert_eq!(b.source_addrs, 1);
        assert_eq!(Some((b.low, b.high)), procfs::ephemeral_port_range());
        assert_eq!(
            PortBudget::read(true, 4).unwrap().ports(),
            4 * b.per_address()
        );
    }
}
