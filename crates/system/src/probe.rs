//! What loadlab watches while it loads a server: the server's processes (CPU, memory,
//! threads, file descriptors), the kernel's TCP counters of the server's network namespace
//! (listen-queue overflows, resets, retransmits, TIME_WAIT), and the server's cgroup (CPU
//! quota and throttling, memory and OOM kills, processes, pressure stalls).
//!
//! What is probed is a [`ProbeSource`]: a process tree given by its roots
//! ([`ProcessSource`]: the servers loadlab started, a pid, a pid file, the process
//! listening on a port), or a cgroup ([`CgroupSource`]: a cgroup path or a container).
//! A [`Prober`] samples its source on its own thread, once at start (the baseline), every
//! interval, and once at stop, so a [`ProbeDelta`] covers the whole step however short.

mod cgroup;
mod process;
mod threads;
mod waits;

pub use cgroup::CgroupSource;
pub use process::ProcessSource;

use std::collections::BTreeMap;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cgroup::{Cgroup, CgroupError, CgroupFs, CgroupLimits, CgroupSample, CpuQuota};
use crate::discover::{self, PidfileError};
use crate::os;
use crate::procfs::{self, all_processes, count_fds, read_stat, NetDir, Stat};

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
    /// Bytes storage read for it so far, cumulative (`/proc/PID/io` `read_bytes`: the block
    /// layer's, not the page cache's); 0 where not read.
    #[serde(default)]
    pub storage_read_bytes: u64,
    /// Bytes it had storage write so far, cumulative (`write_bytes`).
    #[serde(default)]
    pub storage_write_bytes: u64,
    /// Seconds its threads spent runnable but waiting for a CPU, cumulative (schedstat of
    /// the threads alive at the sample).
    #[serde(default)]
    pub run_delay_s: f64,
    /// CPUs its busiest thread used since the previous sample (1.0: one CPU all the time);
    /// absent at a source's first sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread_cpu: Option<f64>,
    /// CPUs that thread wanted and waited for, runnable, over the same interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread_wait: Option<f64>,
    /// That thread's name (`/proc/PID/task/TID/comm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread: Option<String>,
    /// The CPUs its processes may run on (the union of their affinity lists): clock ticks
    /// so far that they were not idle (whoever ran, a VM's host included), and ticks in
    /// all, from `/proc/stat` of the host they run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_ticks: Option<CpusTicks>,
    /// Connections it opened to others, by the address they go to (`127.0.0.1:8000`): a
    /// proxy's upstreams, a database (established sockets whose local port is none it
    /// listens on; its first processes' only, as for the affinity lists).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams: BTreeMap<String, u64>,
    /// Its listening sockets (its first processes' only, as for the affinity lists), from
    /// the kernel's socket diagnostics; absent where they cannot be read (older bundles,
    /// no listener, the interface refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenSample>,
    /// What its threads were doing at the sample (its first processes' threads, up to 512):
    /// running, or what they waited on; absent where their `syscall` files cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<ThreadWaits>,
}

/// A process tree's listening sockets, summed ([`ProcessSample::listen`]): its own accept
/// queues, where the kernel's overflow counters are the whole network namespace's.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ListenSample {
    /// The ports they listen on.
    pub ports: Vec<u16>,
    /// Connections waiting in their accept queues now.
    pub queued: u64,
    /// The largest backlog among them (what one queue holds).
    pub backlog: u64,
    /// Connections they dropped so far, cumulative (a full accept queue's refusals).
    pub drops: u64,
}

impl ListenSample {
    /// The listening sockets among `held` (socket inodes) of the network namespace of
    /// process `ns_of`; `None` when none is held or the kernel does not say.
    fn of(ns_of: u32, held: &std::collections::BTreeSet<u64>) -> Option<ListenSample> {
        let theirs: Vec<_> = crate::sockdiag::listening_sockets_of(ns_of)
            .ok()?
            .into_iter()
            .filter(|l| held.contains(&l.inode))
            .collect();
        if theirs.is_empty() {
            return None;
        }
        let mut ports: Vec<u16> = theirs.iter().map(|l| l.local.port()).collect();
        ports.sort_unstable();
        ports.dedup();
        Some(ListenSample {
            ports,
            queued: theirs.iter().map(|l| u64::from(l.queued)).sum(),
            backlog: theirs
                .iter()
                .map(|l| u64::from(l.backlog))
                .max()
                .unwrap_or(0),
            drops: theirs.iter().map(|l| u64::from(l.drops)).sum(),
        })
    }
}

/// Clock ticks of a set of CPUs so far ([`ProcessSample::cpus_ticks`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Default)]
pub struct CpusTicks {
    /// Not idle: user, nice, system, irq, softirq and steal (not idle, not iowait).
    pub busy: u64,
    /// In all.
    pub total: u64,
}

/// The processes whose affinity lists [`sum_processes`] reads each second, at most: a
/// server of more processes than this is read by its first ones.
const AFFINITY_READS: usize = 64;

impl ProcessSample {
    fn add(&mut self, o: &ProcessSample) {
        self.processes += o.processes;
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_system_s += o.cpu_system_s;
        self.rss_bytes += o.rss_bytes;
        self.threads += o.threads;
        self.fds += o.fds;
        self.storage_read_bytes += o.storage_read_bytes;
        self.storage_write_bytes += o.storage_write_bytes;
        self.run_delay_s += o.run_delay_s;
    }
}

pub use threads::ThreadCpu;
pub use waits::ThreadWaits;

/// The union of the trees under `roots` that still exist, summed (a process in two trees
/// is counted once). `None` when no root exists.
fn sample_trees(roots: &[u32], threads: &mut ThreadCpu) -> Option<ProcessSample> {
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
    sum_processes(&procfs::tree_members(roots, &stats), &stats, threads)
}

/// The processes `pids` (a cgroup's) that still exist, summed; `None` when none does.
fn sample_processes(pids: &[u32], threads: &mut ThreadCpu) -> Option<ProcessSample> {
    let stats: BTreeMap<u32, Stat> = pids
        .iter()
        .filter_map(|&p| Some((p, read_stat(p).ok()?)))
        .collect();
    let alive: Vec<u32> = stats.keys().copied().collect();
    sum_processes(&alive, &stats, threads)
}

/// The figures of `pids` (each in `stats`), summed; `None` for no process.
fn sum_processes(
    pids: &[u32],
    stats: &BTreeMap<u32, Stat>,
    threads: &mut ThreadCpu,
) -> Option<ProcessSample> {
    if pids.is_empty() {
        return None;
    }
    let t = threads.sample(pids);
    let ticks = os::clock_ticks_per_second() as f64;
    let page = os::page_size();
    let mut total = ProcessSample::default();
    for &pid in pids {
        let s = &stats[&pid];
        let storage = procfs::storage_bytes(pid);
        total.add(&ProcessSample {
            processes: 1,
            cpu_user_s: (s.utime + s.cutime) as f64 / ticks,
            cpu_system_s: (s.stime + s.cstime) as f64 / ticks,
            rss_bytes: s.rss_pages * page,
            threads: s.threads,
            fds: count_fds(pid),
            storage_read_bytes: storage.map_or(0, |b| b.0),
            storage_write_bytes: storage.map_or(0, |b| b.1),
            ..ProcessSample::default()
        });
    }
    total.run_delay_s = t.run_delay_s;
    let first: Vec<u32> = pids.iter().take(AFFINITY_READS).copied().collect();
    let held = discover::socket_inodes(&first);
    let tcp = discover::tcp_sockets(first[0]);
    let mine = discover::held_sockets(&tcp, &held);
    total.upstreams = discover::outgoing(&mine)
        .into_iter()
        .map(|(addr, n)| (addr.to_string(), n))
        .collect();
    total.listen = ListenSample::of(first[0], &held);
    let listening = discover::listening_ports(&mine);
    total.waits = waits::sample(&first, &waits::Sockets::new(&tcp, listening));
    let mut cpus: Vec<usize> = pids
        .iter()
        .take(AFFINITY_READS)
        .filter_map(|&p| procfs::cpu_list_allowed(p))
        .flatten()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    total.cpus_ticks = procfs::busy_ticks_on(&cpus).map(|(busy, total)| CpusTicks { busy, total });
    if let Some(b) = t.busiest {
        total.busiest_thread_cpu = Some(b.cpu);
        total.busiest_thread_wait = Some(b.wait);
        total.busiest_thread = Some(b.name);
    }
    Some(total)
}

/// Samples the process tree rooted at `root` now. Errs if `root` does not exist.
pub fn sample_tree(root: u32) -> io::Result<ProcessSample> {
    // Fail early and with the real error when the root is gone.
    read_stat(root)?;
    sample_trees(&[root], &mut ThreadCpu::default())
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("process {root} exited")))
}

/// Kernel TCP counters of a network namespace (cumulative, from /proc/net/netstat TcpExt: ListenOverflows, ListenDrops, SyncookiesSent, SyncookiesRecv, SyncookiesFailed; /proc/net/snmp Tcp: OutRsts, EstabResets, RetransSegs, AttemptFails) plus current TIME_WAIT and ESTABLISHED counts.
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
    /// This machine's CPU time so far (every CPU, clock ticks, `/proc/stat`) neither idle,
    /// nor waiting for I/O, nor stolen; 0 where not read.
    #[serde(default)]
    pub cpu_busy_ticks: u64,
    /// This machine's CPU time so far that a VM's hypervisor took while its CPUs were ready
    /// to run (steal; clock ticks); 0 on bare metal or where not read.
    #[serde(default)]
    pub cpu_steal_ticks: u64,
}

/// Samples the kernel's TCP counters of this network namespace now. Counters that cannot
/// be read are 0.
pub fn sample_kernel() -> KernelSample {
    kernel_sample(procfs::tcp_counters(), procfs::time_wait())
}

/// Samples the kernel's TCP counters of the network namespace of process `pid` now
/// (`/proc/PID/net/netstat`, `snmp` and `sockstat`): a container's own counters, which
/// this namespace's do not include. `None` when they cannot be read (the process is gone).
pub fn sample_kernel_of(pid: u32) -> Option<KernelSample> {
    let c = procfs::tcp_counters_in(NetDir::Of(pid))?;
    Some(kernel_sample(
        c,
        procfs::time_wait_in(NetDir::Of(pid)).unwrap_or(0),
    ))
}

/// The counters of the namespace of the first of `pids` that answers, else this one's.
fn sample_kernel_of_any(pids: &[u32]) -> KernelSample {
    pids.iter()
        .find_map(|&p| sample_kernel_of(p))
        .unwrap_or_else(sample_kernel)
}

fn kernel_sample(c: BTreeMap<(String, String), u64>, time_wait: u64) -> KernelSample {
    let get = |prefix: &str, name: &str| {
        c.get(&(prefix.to_string(), name.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // `time_wait` is read at constant cost whatever the number of sockets (see
    // `procfs::time_wait`): the probe samples every second, beside the load generator.
    let (cpu_busy_ticks, cpu_steal_ticks) = procfs::cpu_busy_steal_ticks().unwrap_or((0, 0));
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
        cpu_busy_ticks,
        cpu_steal_ticks,
    }
}

/// One sample taken by a [`Prober`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeSecond {
    /// Seconds since [`Prober::start`].
    pub t_s: f64,
    /// The roots' trees, summed; `None` if all roots are gone.
    pub process: Option<ProcessSample>,
    /// The kernel's counters of the target's network namespace.
    pub kernel: KernelSample,
    /// The target's cgroup (absent in older bundles, and when it has none that is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupSample>,
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
    /// Of the time of the CPUs it may run on, the share they were not idle (whoever ran, a
    /// VM's host included), over the intervals between samples, each weighted by the time
    /// the target's threads waited for a CPU in it (by its length where they never waited):
    /// whether they waited behind full CPUs or behind each other while the CPUs idled, and
    /// not diluted by a step's quiet edges. `None` where not read (older bundles, an older
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_busy_share: Option<f64>,
    /// Largest resident memory seen, bytes.
    pub rss_max_bytes: u64,
    /// Most threads seen.
    pub threads_max: u64,
    /// Most file descriptors seen.
    pub fds_max: u64,
    /// Most connections seen open to each address the target connected to (its upstreams,
    /// [`ProcessSample::upstreams`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams_max: BTreeMap<String, u64>,
    /// CPUs the busiest thread used, averaged over the intervals between samples (1.0: one
    /// thread on a CPU all the time): a server held by one thread shows here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread_cpu: Option<f64>,
    /// CPUs the busiest thread waited for, runnable, averaged the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread_wait: Option<f64>,
    /// The name of the thread busiest in most intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread: Option<String>,
    /// Bytes per second storage read for the process trees (`/proc/PID/io`), over the same
    /// wall time as the CPU.
    #[serde(default)]
    pub storage_read_bps: f64,
    /// Bytes per second they had storage write.
    #[serde(default)]
    pub storage_write_bps: f64,
    /// The target's own listening sockets during the probe (absent where not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenDelta>,
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
    /// Of the time this machine's CPUs wanted to run over the step, the share a VM's
    /// hypervisor took (steal): a thread's CPU time leaves it out, so a thread that ran all
    /// the time it could shows `1 − steal_share` of a CPU. `None` where not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_share: Option<f64>,
    /// The target's cgroup during the probe (absent in older bundles and without a cgroup
    /// sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupDelta>,
}

/// [`ProbeDelta::cpus_busy_share`] of the process samples, in time order.
fn cpus_busy_share<'a>(samples: impl Iterator<Item = &'a ProcessSample>) -> Option<f64> {
    let mut prev: Option<(&ProcessSample, CpusTicks)> = None;
    let (mut waited, mut busy_waited, mut busy, mut total) = (0.0, 0.0, 0u64, 0u64);
    for p in samples {
        let Some(t) = p.cpus_ticks else { continue };
        if let Some((p0, t0)) = prev {
            let dt = t.total.saturating_sub(t0.total);
            let db = t.busy.saturating_sub(t0.busy).min(dt);
            if dt > 0 {
                let w = (p.run_delay_s - p0.run_delay_s).max(0.0);
                waited += w;
                busy_waited += w * db as f64 / dt as f64;
                busy += db;
                total += dt;
            }
        }
        prev = Some((p, t));
    }
    if waited > 0.0 {
        Some(busy_waited / waited)
    } else {
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

/// Of the time of the CPUs the target may run on between `from_s` and `to_s` (seconds since
/// the probe started), the share they were not idle (whoever ran, a VM's host included): the
/// intervals between samples that overlap that span, summed by their ticks, whatever the
/// target did in them. `None` where not read, or where no interval overlaps.
pub fn cpus_busy_share_within(samples: &[ProbeSecond], from_s: f64, to_s: f64) -> Option<f64> {
    let with: Vec<(f64, CpusTicks)> = samples
        .iter()
        .filter_map(|s| Some((s.t_s, s.process.as_ref()?.cpus_ticks?)))
        .collect();
    let (mut busy, mut total) = (0u64, 0u64);
    for w in with.windows(2) {
        let ((t0, a), (t1, b)) = (w[0], w[1]);
        if t1 > from_s && t0 < to_s {
            let dt = b.total.saturating_sub(a.total);
            busy += b.busy.saturating_sub(a.busy).min(dt);
            total += dt;
        }
    }
    (total > 0).then(|| busy as f64 / total as f64)
}

impl ProbeDelta {
    /// Computes the delta of a series of samples (in time order). CPU is taken between the
    /// first and last samples that saw a process, and never goes below zero (processes that
    /// exit without being waited for take their CPU with them). The cgroup delta has no
    /// limits (see [`ProbeDelta::from_samples_with_limits`]).
    pub fn from_samples(samples: &[ProbeSecond]) -> ProbeDelta {
        ProbeDelta::from_samples_with_limits(samples, None)
    }

    /// [`ProbeDelta::from_samples`], the cgroup's peaks set beside its `limits`.
    pub fn from_samples_with_limits(
        samples: &[ProbeSecond],
        limits: Option<&CgroupLimits>,
    ) -> ProbeDelta {
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
                let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / wall;
                d.storage_read_bps = rate(p0.storage_read_bytes, p1.storage_read_bytes);
                d.storage_write_bps = rate(p0.storage_write_bytes, p1.storage_write_bytes);
                d.cpu_percent = (d.cpu_user_s + d.cpu_system_s) / wall * 100.0;
                d.cpu_wait_percent = (p1.run_delay_s - p0.run_delay_s).max(0.0) / wall * 100.0;
            }
        }
        d.cpus_busy_share = cpus_busy_share(with_process().map(|(_, p)| p));
        for (_, p) in with_process() {
            d.rss_max_bytes = d.rss_max_bytes.max(p.rss_bytes);
            d.threads_max = d.threads_max.max(p.threads);
            d.fds_max = d.fds_max.max(p.fds);
            for (addr, n) in &p.upstreams {
                let m = d.upstreams_max.entry(addr.clone()).or_insert(0);
                *m = (*m).max(*n);
            }
        }
        let busiest: Vec<(f64, f64, &str)> = with_process()
            .filter_map(|(_, p)| {
                Some((
                    p.busiest_thread_cpu?,
                    p.busiest_thread_wait.unwrap_or(0.0),
                    p.busiest_thread.as_deref()?,
                ))
            })
            .collect();
        if !busiest.is_empty() {
            let n = busiest.len() as f64;
            d.busiest_thread_cpu = Some(busiest.iter().map(|b| b.0).sum::<f64>() / n);
            d.busiest_thread_wait = Some(busiest.iter().map(|b| b.1).sum::<f64>() / n);
            let mut names: BTreeMap<&str, usize> = BTreeMap::new();
            for (_, _, n) in &busiest {
                *names.entry(n).or_default() += 1;
            }
            d.busiest_thread = names
                .into_iter()
                .max_by_key(|(_, c)| *c)
                .map(|(n, _)| n.to_string());
        }
        if let (Some(k0), Some(k1)) = (samples.first(), samples.last()) {
            let (k0, k1) = (&k0.kernel, &k1.kernel);
            d.listen_overflows = k1.listen_overflows.saturating_sub(k0.listen_overflows);
            d.listen_drops = k1.listen_drops.saturating_sub(k0.listen_drops);
            d.syncookies_sent = k1.syncookies_sent.saturating_sub(k0.syncookies_sent);
            d.out_rsts = k1.out_rsts.saturating_sub(k0.out_rsts);
            d.estab_resets = k1.estab_resets.saturating_sub(k0.estab_resets);
            d.retrans_segs = k1.retrans_segs.saturating_sub(k0.retrans_segs);
            let busy = k1.cpu_busy_ticks.saturating_sub(k0.cpu_busy_ticks);
            let steal = k1.cpu_steal_ticks.saturating_sub(k0.cpu_steal_ticks);
            d.steal_share = (busy + steal > 0).then(|| steal as f64 / (busy + steal) as f64);
        }
        for s in samples {
            d.time_wait_max = d.time_wait_max.max(s.kernel.time_wait);
            d.established_max = d.established_max.max(s.kernel.established);
        }
        d.cgroup = CgroupDelta::from_samples(samples, limits);
        d.listen = ListenDelta::from_samples(samples);
        d
    }
}

/// What the target's own listening sockets did during a probe ([`ListenSample`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ListenDelta {
    /// The ports they listened on.
    pub ports: Vec<u16>,
    /// The largest backlog seen.
    pub backlog: u64,
    /// The most connections seen waiting in their accept queues at once.
    pub queued_max: u64,
    /// Connections they dropped between the first and the last sample that read them.
    pub drops: u64,
    /// When their drops first grew (probe seconds: the start of that interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops_from_s: Option<f64>,
}

impl ListenDelta {
    fn from_samples(samples: &[ProbeSecond]) -> Option<ListenDelta> {
        let read: Vec<(f64, &ListenSample)> = samples
            .iter()
            .filter_map(|s| Some((s.t_s, s.process.as_ref()?.listen.as_ref()?)))
            .collect();
        let (first, last) = (read.first()?.1, read.last()?.1);
        let mut ports: Vec<u16> = read.iter().flat_map(|(_, l)| l.ports.clone()).collect();
        ports.sort_unstable();
        ports.dedup();
        Some(ListenDelta {
            ports,
            backlog: read.iter().map(|(_, l)| l.backlog).max().unwrap_or(0),
            queued_max: read.iter().map(|(_, l)| l.queued).max().unwrap_or(0),
            drops: last.drops.saturating_sub(first.drops),
            drops_from_s: read
                .windows(2)
                .find(|w| w[1].1.drops > w[0].1.drops)
                .map(|w| w[0].0),
        })
    }
}

/// What the target's cgroup did between the first and the last sample that had each
/// figure. Counts never go below zero (a counter that went back, the cgroup recreated,
/// counts as zero). A figure is `None` when no sample had it; a percentage also when its
/// samples span no time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CgroupDelta {
    /// CPU seconds used by the cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// CPU used, in percent of one CPU over the window (25 = a quarter of a CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// The CPU quota, in CPUs, when one is set (from the limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota_cpus: Option<f64>,
    /// Quota enforcement periods that had runnable tasks in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periods: Option<u64>,
    /// Of those, periods in which the quota ran out and its tasks were stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
    /// Seconds its tasks were stopped by the quota in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_s: Option<f64>,
    /// Most memory charged to the cgroup in any sample, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
    /// The memory limit, bytes (from the limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// Processes killed by the OOM killer in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kills: Option<u64>,
    /// Times the kernel was about to OOM-kill in the window (v2 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_events: Option<u64>,
    /// Times usage hit the memory limit in the window (reclaim forced; v1 `failcnt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_events: Option<u64>,
    /// Most processes (tasks) in any sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_peak: Option<u64>,
    /// The process limit (from the limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<u64>,
    /// Forks refused at the process limit in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max_events: Option<u64>,
    /// Time at least one task waited for a CPU, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_cpu_some_percent: Option<f64>,
    /// Time all tasks waited for a CPU at once, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_cpu_full_percent: Option<f64>,
    /// Time at least one task stalled on memory, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_some_percent: Option<f64>,
    /// Time all tasks stalled on memory at once, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_full_percent: Option<f64>,
    /// Time at least one task waited for I/O, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io_some_percent: Option<f64>,
    /// Time all tasks waited for I/O at once, percent of the window's wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io_full_percent: Option<f64>,
}

/// The first and last `(t_s, value)` of the samples that have a figure.
fn span<T: Copy>(
    with: &[(f64, &CgroupSample)],
    f: impl Fn(&CgroupSample) -> Option<T>,
) -> Option<((f64, T), (f64, T))> {
    let mut it = with.iter().filter_map(|(t, s)| Some((*t, f(s)?)));
    let first = it.next()?;
    Some((first, it.last().unwrap_or(first)))
}

impl CgroupDelta {
    /// The delta of the samples' cgroup figures (in time order); `None` when no sample has
    /// one. `limits` gives the quota and limits beside the peaks.
    pub fn from_samples(
        samples: &[ProbeSecond],
        limits: Option<&CgroupLimits>,
    ) -> Option<CgroupDelta> {
        let with: Vec<(f64, &CgroupSample)> = samples
            .iter()
            .filter_map(|s| Some((s.t_s, s.cgroup.as_ref()?)))
            .collect();
        if with.is_empty() {
            return None;
        }
        let count = |f: fn(&CgroupSample) -> Option<u64>| {
            span(&with, f).map(|((_, a), (_, b))| b.saturating_sub(a))
        };
        let seconds = |f: fn(&CgroupSample) -> Option<f64>| {
            span(&with, f).map(|((_, a), (_, b))| (b - a).max(0.0))
        };
        // Microseconds stalled, in percent of the wall time between the samples.
        let stalled = |f: fn(&CgroupSample) -> Option<u64>| {
            let ((t0, a), (t1, b)) = span(&with, f)?;
            let wall = t1 - t0;
            (wall > 0.0).then(|| b.saturating_sub(a) as f64 / (wall * 1e6) * 100.0)
        };
        let peak =
            |f: fn(&CgroupSample) -> Option<u64>| with.iter().filter_map(|(_, s)| f(s)).max();
        let cpu = span(&with, |s| s.cpu_usage_s);
        let cpu_s = cpu.map(|((_, a), (_, b))| (b - a).max(0.0));
        let cpu_percent = cpu.and_then(|((t0, a), (t1, b))| {
            let wall = t1 - t0;
            (wall > 0.0).then(|| (b - a).max(0.0) / wall * 100.0)
        });
        Some(CgroupDelta {
            cpu_s,
            cpu_percent,
            cpu_quota_cpus: limits.and_then(|l| Some(l.cpu.as_ref()?.cpus)),
            periods: count(|s| s.nr_periods),
            throttled_periods: count(|s| s.nr_throttled),
            throttled_s: seconds(|s| s.throttled_s),
            memory_peak_bytes: peak(|s| s.memory_current_bytes),
            memory_limit_bytes: limits.and_then(|l| Some(l.memory.as_ref()?.value)),
            oom_kills: count(|s| s.oom_kill),
            oom_events: count(|s| s.oom),
            memory_max_events: count(|s| s.memory_max_events),
            pids_peak: peak(|s| s.pids_current),
            pids_limit: limits.and_then(|l| Some(l.pids.as_ref()?.value)),
            pids_max_events: count(|s| s.pids_max_events),
            psi_cpu_some_percent: stalled(|s| s.psi_cpu_some_us),
            psi_cpu_full_percent: stalled(|s| s.psi_cpu_full_us),
            psi_memory_some_percent: stalled(|s| s.psi_memory_some_us),
            psi_memory_full_percent: stalled(|s| s.psi_memory_full_us),
            psi_io_some_percent: stalled(|s| s.psi_io_some_us),
            psi_io_full_percent: stalled(|s| s.psi_io_full_us),
        })
    }
}

/// How the probed target was named.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// A process tree given by its pid (or a pid file, or started by loadlab).
    Pid,
    /// A cgroup given by its path.
    Cgroup,
    /// A container given by its name or ID.
    Container,
    /// The process tree listening on a port.
    Listener,
}

/// What is probed and how it was found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeInfo {
    /// How the target was named.
    pub kind: ProbeKind,
    /// The target's (first) process, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its command name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The cgroup sampled (its path; each hierarchy's when they differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The cgroup versions its figures come from: `v2`, `v1` or `v1+v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<String>,
    /// How it was found, one sentence (`pid 1234 (gunicorn), found listening on :8080`).
    pub found: String,
    /// Whether the cgroup also holds loadlab itself: its CPU, memory and pressure figures
    /// then include loadlab's own, which must not be blamed on the server.
    #[serde(default)]
    pub shares_cgroup_with_loadlab: bool,
}

impl ProbeInfo {
    /// The info of a target with process `pid` (its comm read now) and cgroup `cgroup`.
    fn new(kind: ProbeKind, pid: Option<u32>, cgroup: Option<&Cgroup>, found: String) -> ProbeInfo {
        ProbeInfo {
            kind,
            pid,
            comm: pid.and_then(procfs::comm),
            cgroup: cgroup.map(Cgroup::to_string),
            cgroup_version: cgroup.map(Cgroup::versions),
            found,
            shares_cgroup_with_loadlab: cgroup.is_some_and(|c| c.contains(std::process::id())),
        }
    }
}

/// `pid 1234 (gunicorn)`, or `pid 1234` when its name cannot be read.
fn describe_pid(pid: u32) -> String {
    match procfs::comm(pid) {
        Some(c) => format!("pid {pid} ({c})"),
        None => format!("pid {pid}"),
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
    /// What was probed and how it was found (absent in older bundles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ProbeInfo>,
    /// The target's cgroup limits, read when the probe started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_limits: Option<CgroupLimits>,
    /// Why the source stopped answering before the probe was stopped (a remote source
    /// lost); the samples end there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

/// The limits of the probed processes, against which their use is judged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TargetLimits {
    /// CPUs the targets may use: the union of their affinity lists, capped by their cgroup's
    /// CPU quota (v1 or v2).
    pub cpus: f64,
    /// Where `cpus` comes from (`affinity: 2 CPUs`, or `cgroup v1 quota of 0.25 CPUs at
    /// /path`).
    pub cpus_from: String,
    /// The first target's soft `nofile` limit.
    pub nofile_soft: Option<u64>,
}

impl TargetLimits {
    /// Reads the limits of the processes `roots` (`None` without any): their affinity,
    /// capped by the smallest CPU quota of their cgroups (v1 or v2).
    pub fn read(roots: &[u32]) -> Option<TargetLimits> {
        let fs = CgroupFs::discover().ok();
        let quota = fs.and_then(|fs| {
            roots
                .iter()
                .filter_map(|&p| Cgroup::of_pid_in(&fs, p).ok()?.limits().cpu)
                .reduce(|a, b| if b.cpus < a.cpus { b } else { a })
        });
        TargetLimits::with_quota(roots, quota)
    }

    /// The limits of the processes `roots` (`None` without any): their affinity, capped by
    /// `quota`.
    pub fn with_quota(roots: &[u32], quota: Option<CpuQuota>) -> Option<TargetLimits> {
        let first = *roots.first()?;
        let affinity = roots
            .iter()
            .filter_map(|&p| procfs::cpus_allowed(p))
            .max()?;
        let (cpus, cpus_from) = match quota {
            Some(q) if q.cpus < affinity as f64 => (
                q.cpus,
                format!(
                    "cgroup {} quota of {:.2} CPUs at {}",
                    q.version, q.cpus, q.path
                ),
            ),
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

/// One sample of a [`ProbeSource`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SourceSample {
    /// The target's processes, summed; `None` when it has none.
    pub process: Option<ProcessSample>,
    /// The kernel's counters of the target's network namespace.
    pub kernel: KernelSample,
    /// The target's cgroup; `None` without one.
    pub cgroup: Option<CgroupSample>,
    /// How long ago the sample was taken: zero for a local source, which samples when
    /// asked; a remote source's newest sample was taken on its own host up to a second or
    /// so before. [`Prober`] times the sample by when it was taken, so CPU percentages over
    /// a window are computed over the sampled host's own sample times.
    pub age: Duration,
}

/// What a [`Prober`] samples: a target's processes, its network namespace's kernel
/// counters and its cgroup. Its description and limits are read once, when the probe
/// starts; then it is sampled on the probe's thread.
pub trait ProbeSource: Send {
    /// What is probed and how it was found.
    fn info(&self) -> Option<ProbeInfo>;
    /// What the target may use (CPUs, `nofile`).
    fn limits(&self) -> Option<TargetLimits>;
    /// The target's cgroup limits.
    fn cgroup_limits(&self) -> Option<CgroupLimits>;
    /// Samples the target now.
    fn sample(&mut self) -> SourceSample;
    /// Why the source stopped answering, if it did; the probe then stops sampling it. A
    /// local source never does.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// Why a target could not be found.
#[derive(Debug, Error)]
pub enum SourceError {
    /// No such process.
    #[error("no process {0}")]
    NoProcess(u32),
    /// Nothing listens on the port in this network namespace.
    #[error(
        "nothing listens on TCP port {0} in this network namespace (a server in a container \
         with a network of its own is not seen here: give its container or pid)"
    )]
    NoListener(u16),
    /// A pid file gave no pid.
    #[error(transparent)]
    Pidfile(#[from] PidfileError),
    /// A cgroup or container could not be found.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

/// Samples a [`ProbeSource`] every `interval` on its own thread until stopped.
///
/// Dropping a `Prober` without calling [`Prober::stop`] ends its thread too.
pub struct Prober {
    /// Dropping or sending on it wakes the thread and makes it take its last sample.
    stop: mpsc::Sender<()>,
    /// The targets' limits, read at start.
    limits: Option<TargetLimits>,
    /// What is probed, read at start.
    info: Option<ProbeInfo>,
    /// The target's cgroup limits, read at start.
    cgroup_limits: Option<CgroupLimits>,
    /// The sampling thread; returns the samples and why the source was lost, if it was.
    thread: Option<JoinHandle<(Vec<ProbeSecond>, Option<String>)>>,
}

/// Samples `source`, timed by when the sample was taken: now, less the sample's age (so a
/// remote sample may be timed before `start`, with a negative `t_s`).
fn sample(source: &mut dyn ProbeSource, start: Instant) -> ProbeSecond {
    let s = source.sample();
    ProbeSecond {
        t_s: start.elapsed().as_secs_f64() - s.age.as_secs_f64(),
        process: s.process,
        kernel: s.kernel,
        cgroup: s.cgroup,
    }
}

impl Prober {
    /// Starts probing the process trees under `roots`, their cgroup and the kernel
    /// counters of their network namespace, taking the baseline sample before returning
    /// (a [`ProcessSource`]).
    pub fn start(roots: Vec<u32>, interval: Duration) -> Prober {
        Prober::start_source(Box::new(ProcessSource::new(roots)), interval)
    }

    /// Starts probing `source`, reading its description and limits and taking the
    /// baseline sample before returning.
    pub fn start_source(mut source: Box<dyn ProbeSource>, interval: Duration) -> Prober {
        let start = Instant::now();
        let info = source.info();
        let limits = source.limits();
        let cgroup_limits = source.cgroup_limits();
        let first = sample(source.as_mut(), start);
        let interval = interval.max(Duration::from_millis(1));
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loadlab-probe".into())
            .spawn(move || {
                let mut samples = vec![first];
                let mut next = start + interval;
                loop {
                    if let Some(why) = source.lost() {
                        return (samples, Some(why));
                    }
                    let wait = next.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            samples.push(sample(source.as_mut(), start));
                            // Keep to the grid; skip ticks missed while sampling was slow.
                            let now = Instant::now();
                            while next <= now {
                                next += interval;
                            }
                        }
                        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                if let Some(why) = source.lost() {
                    return (samples, Some(why));
                }
                samples.push(sample(source.as_mut(), start));
                (samples, None)
            })
            .expect("spawn the probe thread");
        Prober {
            stop: tx,
            limits,
            info,
            cgroup_limits,
            thread: Some(thread),
        }
    }

    /// Takes the last sample and returns everything seen.
    pub fn stop(mut self) -> ProbeReport {
        let _ = self.stop.send(());
        let (samples, lost) = self
            .thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let delta = ProbeDelta::from_samples_with_limits(&samples, self.cgroup_limits.as_ref());
        ProbeReport {
            samples,
            delta,
            limits: self.limits.take(),
            source: self.info.take(),
            cgroup_limits: self.cgroup_limits.take(),
            lost,
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
            cgroup: None,
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
            // The busiest thread ran a third of the CPU time since the previous sample.
            busiest_thread_cpu: (user > 1.0).then_some(user / 3.0),
            busiest_thread_wait: (user > 1.0).then_some(0.1),
            busiest_thread: (user > 1.0).then(|| "main".to_string()),
            // Its CPUs busy 70 % of the time from the second sample on.
            cpus_ticks: (user > 0.0).then_some(CpusTicks {
                busy: (user * 70.0) as u64,
                total: (user * 100.0) as u64,
            }),
            // Connections to an upstream: as many as the threads, and a second one once.
            upstreams: [("127.0.0.1:8000".to_string(), threads)]
                .into_iter()
                .chain((threads == 5).then(|| ("[::1]:5432".to_string(), 2)))
                .collect(),
            listen: Some(ListenSample {
                ports: vec![8080],
                queued: threads,
                backlog: 511,
                drops: fds,
            }),
            waits: None,
            storage_read_bytes: 0,
            storage_write_bytes: 1000 * fds,
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
        // Its CPUs' busy ticks against their ticks, between the same samples: 42 of 60 in
        // each interval, where it waited 0.4 s each.
        assert!((d.cpus_busy_share.unwrap() - 0.7).abs() < 1e-9);
        assert_eq!((d.rss_max_bytes, d.threads_max, d.fds_max), (900, 9, 50));
        // Each upstream's most connections at once.
        assert_eq!(
            d.upstreams_max.into_iter().collect::<Vec<_>>(),
            [
                ("127.0.0.1:8000".to_string(), 9),
                ("[::1]:5432".to_string(), 2)
            ]
        );
        assert_eq!(
            (d.listen_overflows, d.listen_drops, d.out_rsts),
            (21, 21, 4)
        );
        assert_eq!((d.time_wait_max, d.established_max), (40, 80));
        // Storage written between the first and last samples with a process: 1000 × (20 − 10)
        // bytes over 2 s.
        assert!(
            (d.storage_write_bps - 5000.0).abs() < 1e-9,
            "{}",
            d.storage_write_bps
        );
        assert_eq!(d.storage_read_bps, 0.0);
        // The target's own listeners: drops between the first and the last sample that read
        // them, growing from the first interval; the most queued at once.
        assert_eq!(
            d.listen,
            Some(ListenDelta {
                ports: vec![8080],
                backlog: 511,
                queued_max: 9,
                drops: 10,
                drops_from_s: Some(0.0),
            })
        );
        // The busiest thread over the intervals after the first sample: (1.6 + 2.2) / 3 / 2.
        assert!((d.busiest_thread_cpu.unwrap() - 3.8 / 6.0).abs() < 1e-9);
        assert_eq!(d.busiest_thread.as_deref(), Some("main"));
        assert!((d.busiest_thread_wait.unwrap() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn the_cpus_busy_share_is_weighted_by_the_waits() {
        let at = |wait: f64, busy: u64, total: u64| ProcessSample {
            run_delay_s: wait,
            cpus_ticks: Some(CpusTicks { busy, total }),
            ..ProcessSample::default()
        };
        // Full while the threads waited 0.8 s, then a quiet end (idle, no wait): full.
        let s = [
            at(0.0, 0, 0),
            at(0.4, 100, 100),
            at(0.8, 200, 200),
            at(0.8, 210, 300),
        ];
        assert!((cpus_busy_share(s.iter()).unwrap() - 1.0).abs() < 1e-9);
        // Half idle in every interval they waited in: half.
        let s = [at(0.0, 0, 0), at(0.4, 50, 100), at(0.9, 100, 200)];
        assert!((cpus_busy_share(s.iter()).unwrap() - 0.5).abs() < 1e-9);
        // No wait at all: the plain share; no ticks: nothing.
        let s = [at(0.0, 0, 0), at(0.0, 30, 100), at(0.0, 90, 200)];
        assert!((cpus_busy_share(s.iter()).unwrap() - 0.45).abs() < 1e-9);
        assert_eq!(cpus_busy_share([ProcessSample::default()].iter()), None);
    }

    #[test]
    fn the_cpus_busy_share_within_a_span_counts_the_intervals_that_overlap_it() {
        let at = |t_s: f64, busy: u64, total: u64| {
            second(
                t_s,
                Some(ProcessSample {
                    cpus_ticks: Some(CpusTicks { busy, total }),
                    ..ProcessSample::default()
                }),
                KernelSample::default(),
            )
        };
        // Full for two seconds, then a quarter busy for two.
        let s = [
            at(0.0, 0, 0),
            at(1.0, 100, 100),
            at(2.0, 200, 200),
            at(3.0, 225, 300),
            at(4.0, 250, 400),
        ];
        let share = |a, b| cpus_busy_share_within(&s, a, b).unwrap();
        assert!((share(0.0, 4.0) - 0.625).abs() < 1e-9);
        assert!((share(2.5, 9.0) - 0.25).abs() < 1e-9);
        // A span inside one interval takes that whole interval.
        assert!((share(0.2, 0.3) - 1.0).abs() < 1e-9);
        assert!((share(-3.0, 1.5) - 1.0).abs() < 1e-9);
        // Outside every interval, or no ticks read: nothing.
        assert_eq!(cpus_busy_share_within(&s, 5.0, 6.0), None);
        let unread = [second(
            0.0,
            Some(ProcessSample::default()),
            KernelSample::default(),
        )];
        assert_eq!(cpus_busy_share_within(&unread, 0.0, 1.0), None);
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
        let one = sample_trees(&[me], &mut ThreadCpu::default()).unwrap();
        let twice = sample_trees(&[me, me], &mut ThreadCpu::default()).unwrap();
        assert_eq!(one.processes, twice.processes);
    }

    fn cg(t_s: f64, c: CgroupSample) -> ProbeSecond {
        ProbeSecond {
            cgroup: Some(c),
            ..second(t_s, None, KernelSample::default())
        }
    }

    #[test]
    fn cgroup_delta_of_synthetic_samples() {
        let s = |cpu: f64,
                 periods: u64,
                 thr: u64,
                 thr_s: f64,
                 mem: u64,
                 kills: u64,
                 pids: u64,
                 psi: u64| {
            CgroupSample {
                cpu_usage_s: Some(cpu),
                nr_periods: Some(periods),
                nr_throttled: Some(thr),
                throttled_s: Some(thr_s),
                memory_current_bytes: Some(mem),
                oom: Some(kills),
                oom_kill: Some(kills),
                memory_max_events: Some(kills * 10),
                pids_current: Some(pids),
                pids_max_events: Some(kills * 2),
                psi_cpu_some_us: Some(psi),
                psi_cpu_full_us: Some(psi / 2),
                psi_memory_some_us: Some(psi / 4),
                psi_memory_full_us: Some(0),
                psi_io_some_us: Some(psi / 10),
                psi_io_full_us: None,
            }
        };
        let samples = vec![
            cg(0.0, s(10.0, 100, 10, 1.0, 1000, 1, 5, 1_000_000)),
            cg(1.0, s(10.3, 110, 19, 1.7, 9000, 2, 12, 1_600_000)),
            // A sample without the cgroup (it could not be read) is skipped.
            second(1.5, None, KernelSample::default()),
            cg(2.0, s(10.5, 120, 28, 2.5, 3000, 4, 7, 2_000_000)),
        ];
        let limits = CgroupLimits {
            cpu: Some(crate::cgroup::CpuQuota {
                cpus: 0.25,
                quota_us: 25_000,
                period_us: 100_000,
                version: crate::cgroup::CgroupVersion::V1,
                path: "/x".into(),
            }),
            memory: Some(crate::cgroup::CgroupLimit {
                value: 1 << 20,
                version: crate::cgroup::CgroupVersion::V2,
                path: "/".into(),
            }),
            pids: None,
        };
        let d = ProbeDelta::from_samples_with_limits(&samples, Some(&limits))
            .cgroup
            .unwrap();
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(close(d.cpu_s, 0.5), "{d:?}");
        // 0.5 CPU seconds over 2 s: a quarter of one CPU.
        assert!(close(d.cpu_percent, 25.0), "{d:?}");
        assert_eq!(d.cpu_quota_cpus, Some(0.25));
        assert_eq!((d.periods, d.throttled_periods), (Some(20), Some(18)));
        assert!(close(d.throttled_s, 1.5), "{d:?}");
        assert_eq!(
            (d.memory_peak_bytes, d.memory_limit_bytes),
            (Some(9000), Some(1 << 20))
        );
        assert_eq!(
            (d.oom_kills, d.oom_events, d.memory_max_events),
            (Some(3), Some(3), Some(30))
        );
        assert_eq!(
            (d.pids_peak, d.pids_limit, d.pids_max_events),
            (Some(12), None, Some(6))
        );
        // 1 s of some-CPU stall in 2 s; half of it full.
        assert!(close(d.psi_cpu_some_percent, 50.0), "{d:?}");
        assert!(close(d.psi_cpu_full_percent, 25.0), "{d:?}");
        assert!(close(d.psi_memory_some_percent, 12.5), "{d:?}");
        assert!(close(d.psi_memory_full_percent, 0.0), "{d:?}");
        assert!(close(d.psi_io_some_percent, 5.0), "{d:?}");
        assert_eq!(d.psi_io_full_percent, None);
    }

    #[test]
    fn cgroup_delta_never_negative_and_absent_without_samples() {
        let a = CgroupSample {
            cpu_usage_s: Some(50.0),
            nr_periods: Some(500),
            oom_kill: Some(3),
            psi_io_some_us: Some(9_000_000),
            ..CgroupSample::default()
        };
        // The cgroup was recreated: its counters started again.
        let b = CgroupSample {
            cpu_usage_s: Some(1.0),
            nr_periods: Some(5),
            oom_kill: Some(0),
            psi_io_some_us: Some(10),
            ..CgroupSample::default()
        };
        let d = CgroupDelta::from_samples(&[cg(0.0, a.clone()), cg(1.0, b)], None).unwrap();
        assert_eq!((d.cpu_s, d.cpu_percent), (Some(0.0), Some(0.0)));
        assert_eq!((d.periods, d.oom_kills), (Some(0), Some(0)));
        assert_eq!(d.psi_io_some_percent, Some(0.0));
        assert_eq!(
            (
                d.throttled_periods,
                d.memory_peak_bytes,
                d.memory_limit_bytes
            ),
            (None, None, None)
        );
        // One sample: counts of zero, no percentages (no time passed).
        let one = CgroupDelta::from_samples(&[cg(0.0, a)], None).unwrap();
        assert_eq!(
            (one.cpu_s, one.cpu_percent, one.periods),
            (Some(0.0), None, Some(0))
        );
        assert_eq!(one.psi_io_some_percent, None);
        assert_eq!(
            CgroupDelta::from_samples(&[second(0.0, None, KernelSample::default())], None),
            None
        );
        assert_eq!(ProbeDelta::from_samples(&[]).cgroup, None);
    }

    #[test]
    fn older_bundles_still_read_and_absent_figures_are_not_written() {
        // A probe report as bundles before the cgroup figures held it.
        let old = r#"{"samples":[{"t_s":0.0,"process":null,"kernel":{"listen_overflows":0,"listen_drops":0,"syncookies_sent":0,"syncookies_recv":0,"syncookies_failed":0,"out_rsts":1,"estab_resets":0,"retrans_segs":0,"attempt_fails":0,"time_wait":0,"established":0}}],"delta":{"cpu_user_s":0.0,"cpu_system_s":0.0,"cpu_percent":0.0,"rss_max_bytes":0,"threads_max":0,"fds_max":0,"listen_overflows":0,"listen_drops":0,"syncookies_sent":0,"out_rsts":0,"estab_resets":0,"retrans_segs":0,"time_wait_max":0,"established_max":0}}"#;
        let r: ProbeReport = serde_json::from_str(old).unwrap();
        assert_eq!(r.samples[0].cgroup, None);
        assert_eq!(
            (r.source, r.cgroup_limits, r.lost, r.delta.cgroup),
            (None, None, None, None)
        );
        let again = serde_json::to_string(&ProbeReport {
            samples: vec![second(0.0, None, KernelSample::default())],
            delta: ProbeDelta::default(),
            limits: None,
            source: None,
            cgroup_limits: None,
            lost: None,
        })
        .unwrap();
        for key in ["cgroup", "source", "lost"] {
            assert!(!again.contains(&format!("\"{key}")), "{key} in {again}");
        }
        // A cgroup sample writes only the figures it has.
        let c = serde_json::to_string(&CgroupSample {
            cpu_usage_s: Some(1.5),
            ..CgroupSample::default()
        })
        .unwrap();
        assert_eq!(c, r#"{"cpu_usage_s":1.5}"#);
        let info = ProbeInfo {
            kind: ProbeKind::Listener,
            pid: Some(1234),
            comm: Some("gunicorn".into()),
            cgroup: Some("/system.slice/app.service".into()),
            cgroup_version: Some("v2".into()),
            found: "pid 1234 (gunicorn), found listening on :8080".into(),
            shares_cgroup_with_loadlab: false,
        };
        let text = serde_json::to_string(&info).unwrap();
        assert!(text.contains(r#""kind":"listener""#), "{text}");
        assert_eq!(serde_json::from_str::<ProbeInfo>(&text).unwrap(), info);
    }

    /// A source that answers twice, then is lost.
    struct Flaky(u32);

    impl ProbeSource for Flaky {
        fn info(&self) -> Option<ProbeInfo> {
            None
        }
        fn limits(&self) -> Option<TargetLimits> {
            None
        }
        fn cgroup_limits(&self) -> Option<CgroupLimits> {
            None
        }
        fn sample(&mut self) -> SourceSample {
            self.0 += 1;
            SourceSample {
                cgroup: Some(CgroupSample {
                    cpu_usage_s: Some(f64::from(self.0)),
                    ..CgroupSample::default()
                }),
                ..SourceSample::default()
            }
        }
        fn lost(&self) -> Option<String> {
            (self.0 >= 2).then(|| "agent stopped answering".to_string())
        }
    }

    /// A remote source: its samples were taken some time before they are read.
    struct Aged(Duration);

    impl ProbeSource for Aged {
        fn info(&self) -> Option<ProbeInfo> {
            None
        }
        fn limits(&self) -> Option<TargetLimits> {
            None
        }
        fn cgroup_limits(&self) -> Option<CgroupLimits> {
            None
        }
        fn sample(&mut self) -> SourceSample {
            SourceSample {
                age: self.0,
                ..SourceSample::default()
            }
        }
    }

    #[test]
    fn a_sample_is_timed_by_when_it_was_taken() {
        let start = Instant::now();
        let fresh = sample(&mut Aged(Duration::ZERO), start);
        let old = sample(&mut Aged(Duration::from_millis(700)), start);
        assert!(fresh.t_s >= 0.0 && fresh.t_s < 0.5, "{}", fresh.t_s);
        // Taken 0.7 s before it was read: before the probe started.
        assert!(old.t_s < -0.2 && old.t_s > -0.71, "{}", old.t_s);
    }

    #[test]
    fn a_lost_source_ends_the_samples_and_says_why() {
        let p = Prober::start_source(Box::new(Flaky(0)), Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(60));
        let r = p.stop();
        assert_eq!(r.samples.len(), 2, "{:?}", r.samples);
        assert_eq!(r.lost.as_deref(), Some("agent stopped answering"));
        assert_eq!(r.delta.cgroup.and_then(|c| c.cpu_s), Some(1.0));
    }
}
