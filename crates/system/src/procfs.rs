//! The `/proc` files of processes and of the kernel, read and parsed here and nowhere
//! else: sysctls, the machine's description, processes (`/proc/PID/stat`, `/proc/PID/fd`,
//! `/proc/PID/comm`), the kernel's TCP counters and the TIME_WAIT count. The parsers are
//! kept apart from the I/O so they can be tested on fixed text. (Cgroup files, mountinfo
//! and `/proc/PID/cgroup` included, are parsed in [`crate::cgroup`]; `/proc/net/tcp` and
//! the fd links to sockets in [`crate::discover`].)
//!
//! Processes are those of the current PID namespace. The kernel's counters are of this
//! network namespace, or of a process's own ([`NetDir::Of`]: `/proc/PID/net`).

use std::collections::BTreeMap;
use std::io;

/// Sysctls that decide how a load test behaves (the actix-web backlog/workers tuning's list), recorded with every
/// result and checked by the doctor.
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

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Reads a sysctl by its dotted name (`net.core.somaxconn`), its fields joined by single
/// spaces (`1024 65535`); `None` when this namespace does not show it.
pub fn sysctl(name: &str) -> Option<String> {
    read_trim(&format!("/proc/sys/{}", name.replace('.', "/")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The [`SYSCTLS`] this namespace shows, name → value as [`sysctl`] reads it.
pub fn sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|n| sysctl(n).map(|v| (n.to_string(), v)))
        .collect()
}

/// The kernel release (`/proc/sys/kernel/osrelease`, e.g. `6.8.0-45-generic`).
pub fn kernel_release() -> Option<String> {
    read_trim("/proc/sys/kernel/osrelease")
}

/// The host name (`/proc/sys/kernel/hostname`) of this UTS namespace.
pub fn hostname() -> Option<String> {
    read_trim("/proc/sys/kernel/hostname")
}

/// The CPU model name of `/proc/cpuinfo` (the first CPU's).
pub fn cpu_model() -> Option<String> {
    parse_cpu_model(&std::fs::read_to_string("/proc/cpuinfo").ok()?)
}

/// The first `model name` of `/proc/cpuinfo`.
pub(crate) fn parse_cpu_model(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The machine's CPU time since boot as `/proc/stat` counts it (clock ticks, every CPU):
/// `(steal, total)`. Steal is the time a virtual machine's CPUs were ready to run but the
/// hypervisor ran something else; 0 on bare metal.
pub fn steal_ticks() -> Option<(u64, u64)> {
    parse_steal(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The machine's CPU time since boot, every CPU, clock ticks: `(busy, steal)`, busy being
/// neither idle, nor waiting for I/O, nor stolen by a VM's hypervisor.
pub fn cpu_busy_steal_ticks() -> Option<(u64, u64)> {
    let f = parse_cpu(&std::fs::read_to_string("/proc/stat").ok()?)?;
    // Neither idle (3) nor waiting for I/O (4) nor stolen (7).
    let busy = f.iter().sum::<u64>() - f[3] - f[4] - f[7];
    Some((busy, f[7]))
}

/// `(steal, total)` of `/proc/stat`'s `cpu` line: total is user, nice, system, idle,
/// iowait, irq, softirq and steal (guest time is inside user already).
pub(crate) fn parse_steal(text: &str) -> Option<(u64, u64)> {
    parse_cpu(text).map(|f| (f[7], f.iter().sum()))
}

/// [`steal_ticks`] of the CPUs `cpus` alone (`/proc/stat`'s `cpuN` lines), summed: what the
/// hypervisor took from the CPUs a process may run on, which the machine's figure dilutes
/// with the time of CPUs it leaves idle. `None` if a CPU named has no line (offline, or no
/// such CPU), or without the steal field; the machine's figure for an empty list.
pub fn steal_ticks_on(cpus: &[usize]) -> Option<(u64, u64)> {
    parse_steal_on(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// `(steal, total)` summed over the `cpuN` lines of `cpus`; see [`steal_ticks_on`].
pub(crate) fn parse_steal_on(text: &str, cpus: &[usize]) -> Option<(u64, u64)> {
    if cpus.is_empty() {
        return parse_steal(text);
    }
    let (mut steal, mut total) = (0, 0);
    for &c in cpus {
        let f = fields(text, &format!("cpu{c} "))?;
        steal += f[7];
        total += f.iter().sum::<u64>();
    }
    Some((steal, total))
}

/// The first eight fields of `/proc/stat`'s `cpu` line (user, nice, system, idle, iowait,
/// irq, softirq, steal); `None` on a kernel without the steal field.
fn parse_cpu(text: &str) -> Option<[u64; 8]> {
    fields(text, "cpu ")
}

/// The first eight fields of the `/proc/stat` line starting with `prefix`.
fn fields(text: &str, prefix: &str) -> Option<[u64; 8]> {
    let line = text.lines().find(|l| l.starts_with(prefix))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    f.try_into().ok()
}

/// The ephemeral port range `(low, high)` of `net.ipv4.ip_local_port_range`.
pub fn ephemeral_port_range() -> Option<(u16, u16)> {
    parse_port_range(&sysctl("net.ipv4.ip_local_port_range")?)
}

/// Parses `low high` (`32768 60999`); `None` unless `low <= high`.
pub(crate) fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let mut it = text.split_whitespace().map(|p| p.parse::<u16>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) if a <= b => Some((a, b)),
        _ => None,
    }
}

/// Sockets in TIME_WAIT in this network namespace now: the `tw` counter of
/// `/proc/net/sockstat` (what `ss -s` shows as `timewait`), 0 when it cannot be read.
///
/// Constant cost whatever the number of sockets, unlike a walk of `/proc/net/tcp` (tens of
/// ms with thousands of sockets). The counter covers IPv4 and IPv6 sockets alike (both
/// families share the kernel's TIME_WAIT table; `/proc/net/sockstat6` has no `tw`). It
/// counts every time-wait socket, so it also includes the few closed connections held in
/// the FIN_WAIT2 sub-state, which a walk of `/proc/net/tcp` listed as FIN_WAIT2: each of
/// them holds a local port too.
pub fn time_wait() -> u64 {
    time_wait_in(NetDir::Own).unwrap_or(0)
}

/// The network namespace whose `/proc/.../net` files are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetDir {
    /// This process's: `/proc/net`.
    Own,
    /// Process PID's: `/proc/PID/net` (a container's own namespace, say).
    Of(u32),
}

impl NetDir {
    fn file(self, name: &str) -> String {
        match self {
            NetDir::Own => format!("/proc/net/{name}"),
            NetDir::Of(pid) => format!("/proc/{pid}/net/{name}"),
        }
    }
}

/// [`time_wait`] of the namespace `net`; `None` when its `sockstat` cannot be read.
pub fn time_wait_in(net: NetDir) -> Option<u64> {
    std::fs::read_to_string(net.file("sockstat"))
        .ok()
        .and_then(|t| parse_sockstat_tw(&t))
}

/// The kernel's TCP counters of this network namespace, `/proc/net/netstat` and
/// `/proc/net/snmp` together: `(prefix, name) → value`, e.g. `("TcpExt",
/// "ListenOverflows")`. Files that cannot be read contribute nothing.
pub fn tcp_counters() -> BTreeMap<(String, String), u64> {
    tcp_counters_in(NetDir::Own).unwrap_or_default()
}

/// [`tcp_counters`] of the namespace `net`; `None` when neither file can be read (the
/// process is gone, or its namespace is not readable).
pub fn tcp_counters_in(net: NetDir) -> Option<BTreeMap<(String, String), u64>> {
    let mut c = BTreeMap::new();
    let mut read = false;
    for name in ["netstat", "snmp"] {
        if let Ok(text) = std::fs::read_to_string(net.file(name)) {
            c.extend(parse_counters(&text));
            read = true;
        }
    }
    read.then_some(c)
}

/// The command name of process `pid` (`/proc/PID/comm`, at most 15 bytes).
pub fn comm(pid: u32) -> Option<String> {
    read_trim(&format!("/proc/{pid}/comm"))
}

/// Reads `/proc/PID/stat`.
pub(crate) fn read_stat(pid: u32) -> io::Result<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unparseable /proc/{pid}/stat"),
        )
    })
}

/// Open file descriptors of a process (entries of `/proc/PID/fd` that could be listed; 0
/// when the directory cannot be read).
pub(crate) fn count_fds(pid: u32) -> u64 {
    match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(dir) => dir.filter(|e| e.is_ok()).count() as u64,
        Err(_) => 0,
    }
}

/// Bytes a process had storage read and write for it so far (`read_bytes`, `write_bytes`
/// of `/proc/PID/io`: the block layer's, not the page cache's); `None` where not readable.
pub(crate) fn storage_bytes(pid: u32) -> Option<(u64, u64)> {
    parse_storage_bytes(&std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?)
}

pub(crate) fn parse_storage_bytes(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some((field("read_bytes:")?, field("write_bytes:")?))
}

/// One thread's `/proc/PID/task/TID/schedstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreadStat {
    /// Thread id.
    pub tid: u32,
    /// Nanoseconds it ran on a CPU (first field).
    pub on_cpu_ns: u64,
    /// Nanoseconds it waited, runnable, for a CPU (second field).
    pub wait_ns: u64,
}

/// The scheduler figures of each current thread of process `pid` (none when they cannot be
/// read).
pub(crate) fn thread_schedstats(pid: u32) -> Vec<ThreadStat> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let mut f = text.split_whitespace();
            Some(ThreadStat {
                tid,
                on_cpu_ns: f.next()?.parse().ok()?,
                wait_ns: f.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// The name of thread `tid` of process `pid` (`/proc/PID/task/TID/comm`).
pub(crate) fn thread_comm(pid: u32, tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The processes of the trees rooted at `roots` (roots included), by parent links in
/// `stats`, whatever their process group or session.
pub(crate) fn tree_members(roots: &[u32], stats: &BTreeMap<u32, Stat>) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, s) in stats {
        if pid != s.ppid {
            children.entry(s.ppid).or_default().push(pid);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<u32> = roots
        .iter()
        .copied()
        .filter(|r| stats.contains_key(r))
        .collect();
    while let Some(pid) = stack.pop() {
        if seen.insert(pid) {
            if let Some(kids) = children.get(&pid) {
                stack.extend(kids.iter().copied());
            }
        }
    }
    seen.into_iter().collect()
}

/// Every live process descending from `root` (itself included), with its start time:
/// what a stop must kill, including descendants that left the root's process group or
/// session. Empty when `root` is gone.
pub fn descendants(root: u32) -> Vec<(u32, u64)> {
    let Ok(mut stats) = all_processes() else {
        return Vec::new();
    };
    if let Ok(s) = read_stat(root) {
        stats.insert(root, s);
    }
    tree_members(&[root], &stats)
        .into_iter()
        .map(|pid| (pid, stats[&pid].starttime))
        .collect()
}

/// Every live process descending from a child of `parent` other than those in `known`,
/// with its start time: what a subreaper (loadlab, the keeper's parent) adopted when a
/// target's process died under a descendant that had left its group (a double fork).
/// Empty when `parent` has no other children.
pub fn adopted(parent: u32, known: &[u32]) -> Vec<(u32, u64)> {
    let Ok(stats) = all_processes() else {
        return Vec::new();
    };
    let roots: Vec<u32> = stats
        .iter()
        .filter(|(pid, s)| s.ppid == parent && **pid != parent && !known.contains(pid))
        .map(|(pid, _)| *pid)
        .collect();
    tree_members(&roots, &stats)
        .into_iter()
        .map(|pid| (pid, stats[&pid].starttime))
        .collect()
}

/// The start time of process `pid` (clock ticks after boot), `None` once it is gone or a
/// zombie.
pub fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    if matches!(parse_state(&text), Some('Z' | 'X')) {
        return None;
    }
    parse_stat(&text).map(|s| s.starttime)
}

/// Every process of this PID namespace: pid → parsed stat. Processes that vanish while
/// the directory is read are skipped.
pub(crate) fn all_processes() -> io::Result<BTreeMap<u32, Stat>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = read_stat(pid) {
            out.insert(pid, stat);
        }
    }
    Ok(out)
}

/// Whether process `pid` exists and has not exited (a zombie, state `Z` or `X`, has).
pub fn process_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_state(&t))
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// The state letter of `/proc/PID/stat` (field 3: `R`, `S`, `Z`, ...).
pub(crate) fn parse_state(text: &str) -> Option<char> {
    text.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|s| s.chars().next())
}

/// The fields of `/proc/PID/stat` that the probe uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Parent process id.
    pub ppid: u32,
    /// User CPU, clock ticks.
    pub utime: u64,
    /// System CPU, clock ticks.
    pub stime: u64,
    /// User CPU of reaped children, clock ticks.
    pub cutime: u64,
    /// System CPU of reaped children, clock ticks.
    pub cstime: u64,
    /// Threads.
    pub threads: u64,
    /// Resident set, pages.
    pub rss_pages: u64,
    /// Start time after boot, clock ticks (with the pid, names one process for good).
    pub starttime: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may contain spaces and parentheses,
/// so fields are counted from the *last* `)`.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: field 3 (state) is index 0, so field n is index n - 3.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |field: usize| -> Option<u64> {
        let s = f.get(field - 3)?;
        // cutime/cstime are signed in the kernel's format; they are never negative in practice.
        s.parse::<u64>()
            .ok()
            .or_else(|| s.parse::<i64>().ok().map(|v| v.max(0) as u64))
    };
    Some(Stat {
        ppid: u32::try_from(num(4)?).ok()?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
        threads: num(20)?,
        rss_pages: num(24)?,
        starttime: num(22)?,
    })
}

/// Parses the header/value line pairs of `/proc/net/netstat` or `/proc/net/snmp`
/// (`TcpExt: A B C` followed by `TcpExt: 1 2 3`) into `(prefix, name) → value`. Negative
/// values (`MaxConn -1`) are left out.
pub(crate) fn parse_counters(text: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            break;
        };
        if p1 != p2 {
            // Out of step (should not happen); stop rather than mislabel counters.
            break;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert((p1.to_string(), n.to_string()), v);
            }
        }
    }
    out
}

/// The TIME_WAIT count of `/proc/net/sockstat` (`TCP: inuse 5 orphan 0 tw 7 alloc 9 mem 1`).
pub(crate) fn parse_sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let mut it = line.split_whitespace();
    while let Some(word) = it.next() {
        if word == "tw" {
            return it.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_awkward_command_name() {
        // A real line from a process named "a) b (c", with made-up counters.
        let line = "4242 (a) b (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 12 3 20 0 7 0 123456 987654321 2048 18446744073709551615 \
                    1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            Stat {
                ppid: 17,
                utime: 250,
                stime: 75,
                cutime: 12,
                cstime: 3,
                threads: 7,
                rss_pages: 2048,
                starttime: 123456,
            }
        );
    }

    #[test]
    fn steal_is_the_eighth_field_of_the_cpu_line() {
        let text =
            "cpu  969574 49 181039 997097 45786 0 59200 73285 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            parse_steal(text),
            Some((73285, 969574 + 49 + 181039 + 997097 + 45786 + 59200 + 73285))
        );
        // An old kernel without the steal field, or no cpu line: nothing.
        assert_eq!(parse_steal("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_steal("intr 1 2\n"), None);
        // This machine's own.
        let (steal, total) = steal_ticks().expect("/proc/stat has the steal field");
        assert!(steal <= total && total > 0);
        let (busy, steal2) = cpu_busy_steal_ticks().expect("busy and steal");
        assert!(busy > 0 && steal2 >= steal, "{busy} {steal2} {steal}");
    }

    #[test]
    fn steal_of_some_cpus_sums_their_own_lines() {
        let text = "cpu  30 0 0 60 0 0 0 13 0 0\n\
                    cpu0 10 0 0 50 0 0 0 1 0 0\n\
                    cpu1 20 0 0 10 0 0 0 12 0 0\n\
                    cpu12 5 0 0 5 0 0 0 100 0 0\n";
        // cpu1 is not mistaken for cpu12, nor for the machine's line.
        assert_eq!(parse_steal_on(text, &[1]), Some((12, 42)));
        assert_eq!(parse_steal_on(text, &[12]), Some((100, 110)));
        assert_eq!(parse_steal_on(text, &[0, 1]), Some((13, 103)));
        // No list: the machine's; a CPU without a line: nothing.
        assert_eq!(parse_steal_on(text, &[]), Some((13, 103)));
        assert_eq!(parse_steal_on(text, &[3]), None);
        // This machine's first CPU.
        let (steal, total) = steal_ticks_on(&[0]).expect("/proc/stat has cpu0");
        assert!(steal <= total && total > 0);
    }

    #[test]
    fn busy_time_of_some_cpus_leaves_idle_and_iowait_out() {
        // user nice system idle iowait irq softirq steal
        let text = "cpu  30 0 0 60 0 0 0 13 0 0\n\
                    cpu0 10 1 2 50 3 4 5 1 0 0\n\
                    cpu1 20 0 0 10 0 0 0 12 0 0\n\
                    cpu12 5 0 0 5 0 0 0 100 0 0\n";
        assert_eq!(parse_busy_on(text, &[0]), Some((23, 76)));
        assert_eq!(parse_busy_on(text, &[1]), Some((32, 42)));
        assert_eq!(parse_busy_on(text, &[0, 1]), Some((55, 118)));
        assert_eq!(parse_busy_on(text, &[]), None);
        assert_eq!(parse_busy_on(text, &[3]), None);
        let (busy, total) = busy_ticks_on(&[0]).expect("/proc/stat has cpu0");
        assert!(busy <= total && total > 0);
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("1-x"), None);
        let me = cpu_list_allowed(std::process::id()).expect("this process's affinity");
        assert_eq!(Some(me.len()), cpus_allowed(std::process::id()));
    }

    #[test]
    fn stat_state_letter() {
        let line = "4242 (a) Z (c) Z 17 4242";
        assert_eq!(parse_state(line), Some('Z'));
        assert_eq!(parse_state("4242 (sleep) S 1 2 3"), Some('S'));
        assert_eq!(parse_state("garbage"), None);
        assert!(process_running(std::process::id()));
        assert!(!process_running(u32::MAX));
    }

    #[test]
    fn cpu_model_and_port_range() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        assert_eq!(parse_cpu_model("processor\t: 0\n"), None);
        assert_eq!(parse_port_range("32768 60999"), Some((32768, 60999)));
        assert_eq!(parse_port_range("1024\t65535"), Some((1024, 65535)));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("1024"), None);
        assert_eq!(parse_port_range("a b"), None);
    }

    #[test]
    fn reads_this_machine() {
        assert!(kernel_release().is_some_and(|k| !k.is_empty()));
        let (lo, hi) = ephemeral_port_range().unwrap();
        assert!(lo <= hi);
        assert_eq!(
            sysctls().get("net.ipv4.ip_local_port_range"),
            Some(&format!("{lo} {hi}"))
        );
        assert!(tcp_counters().contains_key(&("Tcp".to_string(), "CurrEstab".to_string())));
        assert!(all_processes().unwrap().contains_key(&std::process::id()));
        assert!(count_fds(std::process::id()) >= 3);
        assert_eq!(
            parse_storage_bytes(
                "rchar: 48611\nwchar: 4450\nsyscr: 45\nsyscw: 45\nread_bytes: 4096\nwrite_bytes: 184320\ncancelled_write_bytes: 0\n"
            ),
            Some((4096, 184320))
        );
        assert_eq!(parse_storage_bytes("rchar: 1\n"), None);
    }

    #[test]
    fn time_wait_counts_closed_connections() {
        use std::io::Read;
        // The side that closes first holds TIME_WAIT for 60 s. Other programs' sockets
        // come and go meanwhile, so a clear rise is enough, in one of a few tries.
        let l = std::net::TcpListener::bind("[::1]:0")
            .or_else(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let rose = (0..5).any(|_| {
            let before = time_wait();
            for _ in 0..100 {
                let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (mut s, _) = l.accept().unwrap();
                drop(c);
                let _ = s.read(&mut [0u8; 1]);
            }
            time_wait() >= before + 50
        });
        assert!(rose, "TIME_WAIT now {}", time_wait());
    }

    #[test]
    fn stat_truncated_is_none() {
        assert_eq!(parse_stat("1 (init) S 0 1 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn sockstat_time_wait() {
        let text =
            "sockets: used 300\nTCP: inuse 5 orphan 0 tw 7093 alloc 9 mem 1\nUDP: inuse 2 mem 0\n";
        assert_eq!(parse_sockstat_tw(text), Some(7093));
        assert_eq!(parse_sockstat_tw("UDP: inuse 2\n"), None);
    }

    #[test]
    fn counters_pairs() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                    TcpExt: 5 117 118\n\
                    IpExt: InNoRoutes\n\
                    IpExt: 3\n";
        let c = parse_counters(text);
        let get = |p: &str, n: &str| c.get(&(p.to_string(), n.to_string())).copied();
        assert_eq!(get("TcpExt", "ListenOverflows"), Some(117));
        assert_eq!(get("TcpExt", "ListenDrops"), Some(118));
        assert_eq!(get("TcpExt", "SyncookiesSent"), Some(5));
        assert_eq!(get("IpExt", "InNoRoutes"), Some(3));
        let snmp = "Tcp: RtoAlgorithm MaxConn OutRsts\nTcp: 1 -1 876139\n";
        let c = parse_counters(snmp);
        assert_eq!(
            c.get(&("Tcp".into(), "OutRsts".into())).copied(),
            Some(876_139)
        );
        assert!(!c.contains_key(&("Tcp".into(), "MaxConn".into())));
    }
}

/// CPUs process `pid` may run on: the count of its affinity list (`Cpus_allowed_list` in
/// `/proc/PID/status`).
pub fn cpus_allowed(pid: u32) -> Option<usize> {
    cpu_list_allowed(pid).map(|cpus| cpus.len())
}

/// The CPUs process `pid` may run on (its `Cpus_allowed_list`), in order.
pub fn cpu_list_allowed(pid: u32) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    parse_cpu_list(list)
}

/// The CPUs of a kernel CPU list such as `0-3,8,10-11`, in order.
pub(crate) fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// `(busy, total)` clock ticks of the CPUs `cpus` so far (`/proc/stat`'s `cpuN` lines,
/// summed): busy is every tick but idle and iowait (user, nice, system, irq, softirq, and
/// steal: time a VM's host took is time nothing here could run), total all of them. `None`
/// if a CPU named has no line, or for an empty list.
pub fn busy_ticks_on(cpus: &[usize]) -> Option<(u64, u64)> {
    parse_busy_on(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// [`busy_ticks_on`] of `/proc/stat`'s text.
pub(crate) fn parse_busy_on(text: &str, cpus: &[usize]) -> Option<(u64, u64)> {
    if cpus.is_empty() {
        return None;
    }
    let (mut busy, mut total) = (0, 0);
    for &c in cpus {
        let f = fields(text, &format!("cpu{c} "))?;
        busy += f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
        total += f.iter().sum::<u64>();
    }
    Some((busy, total))
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
#[cfg(test)]
fn count_cpu_list(list: &str) -> Option<usize> {
    parse_cpu_list(list).map(|cpus| cpus.len())
}

/// The soft `nofile` limit of process `pid` (`Max open files` in `/proc/PID/limits`).
pub fn nofile_soft(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn cpu_lists_and_limits() {
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("1"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        let me = std::process::id();
        assert!(cpus_allowed(me).is_some_and(|n| n >= 1));
        assert!(nofile_soft(me).is_some_and(|n| n > 0));
    }
}
