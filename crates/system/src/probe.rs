//! What loadlab watches while it loads a server: the server's process tree (CPU, memory,
//! threads, file descriptors) and the kernel's TCP counters of this network namespace
//! (listen-queue overflows, resets, retransmits, TIME_WAIT).
//!
//! A [`Prober`] samples both on its own thread, once at start (the baseline), every
//! interval, and once at stop, so a [`ProbeDelta`] covers the whole step however short.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::os;
use crate::procfs::{self, all_processes, count_fds, read_stat, run_delay_s};

/// Cumulative figures of a process tree (root + all descendants, found via /proc/*/stat ppid).
///
/// CPU includes the CPU of descendants that have exited and been waited for
/// (`cutime`/`cstime`), so a pre-forking server that recycles its workers is not
/// under-counted. `rss_bytes` is the sum of each process's resident set, so pages shared
/// between processes are counted once per process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ProcessSample {
    /// Processes in the tree (zombies included).
    pub processes: u64,
    /// User CPU seconds, cumulative.
    pub cpu_user_s: f64,
    /// System CPU seconds, cumulative.
    pub cpu_system_s: f64,
    /// Resident memory, bytes (summed over processes).
    pub rss_bytes: u64,
    /// Threads.
    pub threads: u64,
    /// Open file descriptors (entries of `/proc/PID/fd` that could be listed).
    pub fds: u64,
    /// Seconds its threads spent runnable but waiting for a CPU, cumulative (schedstat of
    /// the threads alive at the sample).
    #[serde(default)]
    pub run_delay_s: f64,
}

impl ProcessSample {
    fn add(&mut self, o: &ProcessSample) {
        self.processes += o.processes;
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_system_s += o.cpu_system_s;
        self.rss_bytes += o.rss_bytes;
        self.threads += o.threads;
        self.fds += o.fds;
        self.run_delay_s += o.run_delay_s;
    }
}

/// The union of the trees under `roots` that still exist, summed (a process in two trees
/// is counted once). `None` when no root exists.
fn sample_trees(roots: &[u32]) -> Option<ProcessSample> {
    let mut stats = all_processes().unwrap_or_default();
    // A root may be missing from the listing (a thread id, or it started after the
    // scan); read it directly.
    for &r in roots {
        if let std::collections::btree_map::Entry::Vacant(v) = stats.entry(r) {
            if let Ok(s) = read_stat(r) {
                v.insert(s);
            }
        }
    }
    let seen = procfs::tree_members(roots, &stats);
    if seen.is_empty() {
        return None;
    }
    let ticks = os::clock_ticks_per_second() as f64;
    let page = os::page_size();
    let mut total = ProcessSample::default();
    for pid in seen {
        let s = &stats[&pid];
        total.add(&ProcessSample {
            processes: 1,
            cpu_user_s: (s.utime + s.cutime) as f64 / ticks,
            cpu_system_s: (s.stime + s.cstime) as f64 / ticks,
            rss_bytes: s.rss_pages * page,
            threads: s.threads,
            fds: count_fds(pid),
            run_delay_s: run_delay_s(pid),
        });
    }
    Some(total)
}

/// Samples the process tree rooted at `root` now. Errs if `root` does not exist.
pub fn sample_tree(root: u32) -> io::Result<ProcessSample> {
    // Fail early and with the real error when the root is gone.
    read_stat(root)?;
    sample_trees(&[root])
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("process {root} exited")))
}

/// Kernel TCP counters of this network namespace (cumulative, from /proc/net/netstat TcpExt: ListenOverflows, ListenDrops, SyncookiesSent, SyncookiesRecv, SyncookiesFailed; /proc/net/snmp Tcp: OutRsts, EstabResets, RetransSegs, AttemptFails) plus current TIME_WAIT and ESTABLISHED counts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Default)]
pub struct KernelSample {
    /// SYNs or final ACKs dropped because a listener's accept queue was full
    /// (`TcpExt: ListenOverflows`).
    pub listen_overflows: u64,
    /// Connections dropped at a listener for any reason, overflows included
    /// (`TcpExt: ListenDrops`).
    pub listen_drops: u64,
    /// SYN cookies sent because a SYN queue was full (`TcpExt: SyncookiesSent`).
    pub syncookies_sent: u64,
    /// Valid SYN cookies received (`TcpExt: SyncookiesRecv`).
    pub syncookies_recv: u64,
    /// Invalid SYN cookies received (`TcpExt: SyncookiesFailed`).
    pub syncookies_failed: u64,
    /// Segments sent with RST (`Tcp: OutRsts`).
    pub out_rsts: u64,
    /// Resets of established or CLOSE_WAIT connections (`Tcp: EstabResets`).
    pub estab_resets: u64,
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retrans_segs: u64,
    /// Failed connection attempts (`Tcp: AttemptFails`).
    pub attempt_fails: u64,
    /// Sockets in TIME_WAIT now (`tw` of /proc/net/sockstat, IPv4 and IPv6).
    pub time_wait: u64,
    /// Connections established now (the kernel's `CurrEstab`: ESTABLISHED and CLOSE_WAIT).
    pub established: u64,
}

/// Samples the kernel's TCP counters of this network namespace now. Counters that cannot
/// be read are 0.
pub fn sample_kernel() -> KernelSample {
    let c = procfs::tcp_counters();
    let get = |prefix: &str, name: &str| {
        c.get(&(prefix.to_string(), name.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // Constant cost whatever the number of sockets (see `procfs::time_wait`): the probe
    // samples every second, beside the load generator.
    let time_wait = procfs::time_wait();
    KernelSample {
        listen_overflows: get("TcpExt", "ListenOverflows"),
        listen_drops: get("TcpExt", "ListenDrops"),
        syncookies_sent: get("TcpExt", "SyncookiesSent"),
        syncookies_recv: get("TcpExt", "SyncookiesRecv"),
        syncookies_failed: get("TcpExt", "SyncookiesFailed"),
        out_rsts: get("Tcp", "OutRsts"),
        estab_resets: get("Tcp", "EstabResets"),
        retrans_segs: get("Tcp", "RetransSegs"),
        attempt_fails: get("Tcp", "AttemptFails"),
        time_wait,
        established: get("Tcp", "CurrEstab"),
    }
}

/// One sample taken by a [`Prober`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeSecond {
    /// Seconds since [`Prober::start`].
    pub t_s: f64,
    /// The roots' trees, summed; `None` if all roots are gone.
    pub process: Option<ProcessSample>,
    /// The kernel's counters.
    pub kernel: KernelSample,
}

/// What changed between the first and the last sample of a probe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ProbeDelta {
    /// User CPU seconds used by the process trees.
    pub cpu_user_s: f64,
    /// System CPU seconds used by the process trees.
    pub cpu_system_s: f64,
    /// CPU used, in percent of one core, over the wall time between the first and last
    /// samples that saw a process (200 = two cores busy).
    pub cpu_percent: f64,
    /// Time its threads were runnable but waited for a CPU, in percent of one core over the
    /// same wall time: CPU it wanted and did not get (other processes on its CPUs, or more
    /// runnable threads than CPUs).
    #[serde(default)]
    pub cpu_wait_percent: f64,
    /// Largest resident memory seen, bytes.
    pub rss_max_bytes: u64,
    /// Most threads seen.
    pub threads_max: u64,
    /// Most file descriptors seen.
    pub fds_max: u64,
    /// Accept-queue overflows during the probe.
    pub listen_overflows: u64,
    /// Listener drops during the probe.
    pub listen_drops: u64,
    /// SYN cookies sent during the probe (the SYN queue was full).
    pub syncookies_sent: u64,
    /// RST segments sent during the probe.
    pub out_rsts: u64,
    /// Established connections reset during the probe.
    pub estab_resets: u64,
    /// Segments retransmitted during the probe.
    pub retrans_segs: u64,
    /// Most sockets in TIME_WAIT seen.
    pub time_wait_max: u64,
    /// Most sockets in ESTABLISHED seen.
    pub established_max: u64,
}

impl ProbeDelta {
    /// Computes the delta of a series of samples (in time order). CPU is taken between the
    /// first and last samples that saw a process, and never goes below zero (processes that
    /// exit without being waited for take their CPU with them).
    pub fn from_samples(samples: &[ProbeSecond]) -> ProbeDelta {
        let mut d = ProbeDelta::default();
        let with_process = || {
            samples
                .iter()
                .filter_map(|s| Some((s.t_s, s.process.as_ref()?)))
        };
        if let (Some((t0, p0)), Some((t1, p1))) =
            (with_process().next(), with_process().next_back())
        {
            d.cpu_user_s = (p1.cpu_user_s - p0.cpu_user_s).max(0.0);
            d.cpu_system_s = (p1.cpu_system_s - p0.cpu_system_s).max(0.0);
            let wall = t1 - t0;
            if wall > 0.0 {
                d.cpu_percent = (d.cpu_user_s + d.cpu_system_s) / wall * 100.0;
                d.cpu_wait_percent = (p1.run_delay_s - p0.run_delay_s).max(0.0) / wall * 100.0;
            }
        }
        for (_, p) in with_process() {
            d.rss_max_bytes = d.rss_max_bytes.max(p.rss_bytes);
            d.threads_max = d.threads_max.max(p.threads);
            d.fds_max = d.fds_max.max(p.fds);
        }
        if let (Some(k0), Some(k1)) = (samples.first(), samples.last()) {
            let (k0, k1) = (&k0.kernel, &k1.kernel);
            d.listen_overflows = k1.listen_overflows.saturating_sub(k0.listen_overflows);
            d.listen_drops = k1.listen_drops.saturating_sub(k0.listen_drops);
            d.syncookies_sent = k1.syncookies_sent.saturating_sub(k0.syncookies_sent);
            d.out_rsts = k1.out_rsts.saturating_sub(k0.out_rsts);
            d.estab_resets = k1.estab_resets.saturating_sub(k0.estab_resets);
            d.retrans_segs = k1.retrans_segs.saturating_sub(k0.retrans_segs);
        }
        for s in samples {
            d.time_wait_max = d.time_wait_max.max(s.kernel.time_wait);
            d.established_max = d.established_max.max(s.kernel.established);
        }
        d
    }
}

/// Everything a [`Prober`] saw.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeReport {
    /// Samples in time order: the baseline, one per interval, and the last one at stop.
    pub samples: Vec<ProbeSecond>,
    /// First-to-last changes and peaks.
    pub delta: ProbeDelta,
    /// What the targets may use, read when the probe started (absent in older bundles).
    #[serde(default)]
    pub limits: Option<TargetLimits>,
}

/// The limits of the probed processes, against which their use is judged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TargetLimits {
    /// CPUs the targets may use: the union of their affinity lists, capped by their cgroup's
    /// CPU quota.
    pub cpus: f64,
    /// Where `cpus` comes from (`affinity`, or `cgroup quota`).
    pub cpus_from: String,
    /// The first target's soft `nofile` limit.
    pub nofile_soft: Option<u64>,
}

impl TargetLimits {
    /// Reads the limits of the processes `roots` (`None` without any).
    pub fn read(roots: &[u32]) -> Option<TargetLimits> {
        let first = *roots.first()?;
        let affinity = roots
            .iter()
            .filter_map(|&p| procfs::cpus_allowed(p))
            .max()?;
        let quota = roots
            .iter()
            .filter_map(|&p| procfs::cgroup_cpu_quota(p))
            .reduce(f64::min);
        let (cpus, cpus_from) = match quota {
            Some(q) if q < affinity as f64 => (q, format!("cgroup quota of {q:.2} CPUs")),
            _ => (
                affinity as f64,
                format!(
                    "affinity: {affinity} CPU{}",
                    if affinity == 1 { "" } else { "s" }
                ),
            ),
        };
        Some(TargetLimits {
            cpus,
            cpus_from,
            nofile_soft: procfs::nofile_soft(first),
        })
    }
}

/// Samples every `interval` on its own thread until stopped.
///
/// Dropping a `Prober` without calling [`Prober::stop`] ends its thread too.
pub struct Prober {
    /// Dropping or sending on it wakes the thread and makes it take its last sample.
    stop: mpsc::Sender<()>,
    /// The targets' limits, read at start.
    limits: Option<TargetLimits>,
    /// The sampling thread; returns the samples.
    thread: Option<JoinHandle<Vec<ProbeSecond>>>,
}

fn sample(roots: &[u32], start: Instant) -> ProbeSecond {
    let process = sample_trees(roots);
    let kernel = sample_kernel();
    ProbeSecond {
        t_s: start.elapsed().as_secs_f64(),
        process,
        kernel,
    }
}

impl Prober {
    /// Starts probing the process trees under `roots` and the kernel, taking the baseline
    /// sample before returning.
    pub fn start(roots: Vec<u32>, interval: Duration) -> Prober {
        let start = Instant::now();
        let limits = TargetLimits::read(&roots);
        let first = sample(&roots, start);
        let interval = interval.max(Duration::from_millis(1));
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loadlab-probe".into())
            .spawn(move || {
                let mut samples = vec![first];
                let mut next = start + interval;
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            samples.push(sample(&roots, start));
                            // Keep to the grid; skip ticks missed while sampling was slow.
                            let now = Instant::now();
                            while next <= now {
                                next += interval;
                            }
                        }
                        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                samples.push(sample(&roots, start));
                samples
            })
            .expect("spawn the probe thread");
        Prober {
            stop: tx,
            limits,
            thread: Some(thread),
        }
    }

    /// Takes the last sample and returns everything seen.
    pub fn stop(mut self) -> ProbeReport {
        let _ = self.stop.send(());
        let samples = self
            .thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let delta = ProbeDelta::from_samples(&samples);
        ProbeReport {
            samples,
            delta,
            limits: self.limits.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(t_s: f64, process: Option<ProcessSample>, kernel: KernelSample) -> ProbeSecond {
        ProbeSecond {
            t_s,
            process,
            kernel,
        }
    }

    #[test]
    fn delta_of_synthetic_samples() {
        let p = |user: f64, sys: f64, rss: u64, threads: u64, fds: u64| ProcessSample {
            processes: 1,
            cpu_user_s: user,
            cpu_system_s: sys,
            rss_bytes: rss,
            threads,
            fds,
            // Waited half as long as it ran.
            run_delay_s: (user + sys) / 2.0,
        };
        let k = |overflows: u64, rsts: u64, tw: u64, est: u64| KernelSample {
            listen_overflows: overflows,
            listen_drops: overflows + 1,
            out_rsts: rsts,
            time_wait: tw,
            established: est,
            ..KernelSample::default()
        };
        let samples = vec![
            second(0.0, Some(p(1.0, 0.5, 100, 4, 10)), k(10, 5, 3, 1)),
            second(1.0, Some(p(1.6, 0.7, 900, 9, 50)), k(12, 9, 40, 80)),
            second(2.0, Some(p(2.2, 0.9, 300, 5, 20)), k(30, 9, 20, 2)),
            // The tree exited; its CPU must not count as negative.
            second(2.5, None, k(31, 9, 25, 0)),
        ];
        let d = ProbeDelta::from_samples(&samples);
        assert!((d.cpu_user_s - 1.2).abs() < 1e-9);
        assert!((d.cpu_system_s - 0.4).abs() < 1e-9);
        // 1.6 CPU seconds over the 2 s between the first and last samples with a process.
        assert!((d.cpu_percent - 80.0).abs() < 1e-9);
        // (3.1 - 1.5) / 2 s of waiting over 2 s.
        assert!((d.cpu_wait_percent - 40.0).abs() < 1e-9);
        assert_eq!((d.rss_max_bytes, d.threads_max, d.fds_max), (900, 9, 50));
        assert_eq!(
            (d.listen_overflows, d.listen_drops, d.out_rsts),
            (21, 21, 4)
        );
        assert_eq!((d.time_wait_max, d.established_max), (40, 80));
    }

    #[test]
    fn delta_of_nothing_is_zero() {
        assert_eq!(ProbeDelta::from_samples(&[]), ProbeDelta::default());
        let only_kernel = [second(0.0, None, KernelSample::default())];
        assert_eq!(
            ProbeDelta::from_samples(&only_kernel),
            ProbeDelta::default()
        );
    }

    #[test]
    fn cpu_never_negative_when_a_child_vanishes() {
        let a = ProcessSample {
            processes: 2,
            cpu_user_s: 5.0,
            ..ProcessSample::default()
        };
        let b = ProcessSample {
            processes: 1,
            cpu_user_s: 1.0,
            ..ProcessSample::default()
        };
        let d = ProbeDelta::from_samples(&[
            second(0.0, Some(a), KernelSample::default()),
            second(1.0, Some(b), KernelSample::default()),
        ]);
        assert_eq!(d.cpu_user_s, 0.0);
        assert_eq!(d.cpu_percent, 0.0);
    }

    #[test]
    fn overlapping_roots_count_once() {
        let me = std::process::id();
        let one = sample_trees(&[me]).unwrap();
        let twice = sample_trees(&[me, me]).unwrap();
        assert_eq!(one.processes, twice.processes);
    }
}
