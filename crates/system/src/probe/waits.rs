//! What a target's threads wait on: each thread asleep in a system call, read from
//! `/proc/PID/task/TID/stat` (its state) and `/proc/PID/task/TID/syscall` (the call and its
//! arguments, readable to whoever may trace the process: root, or its owner), the file a
//! read or a poll waits on followed to its socket and that socket's peer. A pool whose
//! threads all wait on a socket to one address is held by that downstream (a database, an
//! HTTP backend); one whose threads wait on a lock (a futex, most of them on one address)
//! is held by the lock; threads in uninterruptible sleep wait for the disk.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::discover::{parse_socket_link, TcpSocket};

/// The threads read at most per sample: a server of more threads is read by its first ones.
const THREAD_READS: usize = 512;
/// A poll on more descriptors than this is an event loop, not a wait on one file.
const POLL_FDS: u64 = 4;

/// The threads of a process tree at one sample, by what they were doing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ThreadWaits {
    /// Threads read.
    pub threads: u64,
    /// On a CPU or runnable.
    pub running: u64,
    /// Waiting on a lock or a condition (`futex`).
    pub lock: u64,
    /// The most of them waiting on one futex address of one process: one contended lock
    /// (or one condition an idle pool waits on).
    pub lock_shared: u64,
    /// Sleeping (`nanosleep`, `clock_nanosleep`).
    pub sleep: u64,
    /// In uninterruptible sleep (state `D`): block I/O, mostly.
    pub disk: u64,
    /// Of those, the ones in a call that waits for storage to have the data
    /// (`fsync`, `fdatasync`, `sync_file_range`, `sync`, `syncfs`, `msync`).
    #[serde(default)]
    pub disk_sync: u64,
    /// Waiting for a connection (`accept`, or a poll on a listening socket).
    pub accept: u64,
    /// Reading from (or polling) a client's connection to it: idle keep-alive, or a slow
    /// client.
    pub client: u64,
    /// Reading from (or polling) a TCP connection it opened, by the address it goes to:
    /// a downstream (a database, an HTTP backend).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub downstream: BTreeMap<String, u64>,
    /// Reading from another socket (a Unix socket, UDP).
    pub other_socket: u64,
    /// In an event loop's wait (`epoll_wait`, `select`, a poll on many descriptors).
    pub event_loop: u64,
    /// Anything else (a pipe, a child process, a call not classified).
    pub other: u64,
}

impl ThreadWaits {
    /// Threads waiting on a downstream, in all.
    pub fn downstream_total(&self) -> u64 {
        self.downstream.values().sum()
    }

    /// Threads that were busy: not idle at an accept, an event loop or a client's
    /// connection.
    pub fn busy(&self) -> u64 {
        self.downstream_total()
            + self.lock
            + self.disk
            + self.sleep
            + self.other_socket
            + self.other
            + self.running
    }

    /// The typical sample of a series: each count the median of its samples' (lower
    /// median; a downstream absent from a sample counts 0 there). `None` for no sample.
    pub fn typical<'a>(samples: impl IntoIterator<Item = &'a ThreadWaits>) -> Option<ThreadWaits> {
        let samples: Vec<&ThreadWaits> = samples.into_iter().collect();
        if samples.is_empty() {
            return None;
        }
        let median = |f: &dyn Fn(&ThreadWaits) -> u64| {
            let mut v: Vec<u64> = samples.iter().map(|w| f(w)).collect();
            v.sort_unstable();
            v[(v.len() - 1) / 2]
        };
        let addresses: BTreeSet<&String> =
            samples.iter().flat_map(|w| w.downstream.keys()).collect();
        Some(ThreadWaits {
            threads: median(&|w| w.threads),
            running: median(&|w| w.running),
            lock: median(&|w| w.lock),
            lock_shared: median(&|w| w.lock_shared),
            sleep: median(&|w| w.sleep),
            disk: median(&|w| w.disk),
            disk_sync: median(&|w| w.disk_sync),
            accept: median(&|w| w.accept),
            client: median(&|w| w.client),
            downstream: addresses
                .into_iter()
                .map(|a| {
                    (
                        a.clone(),
                        median(&|w| w.downstream.get(a).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
            other_socket: median(&|w| w.other_socket),
            event_loop: median(&|w| w.event_loop),
            other: median(&|w| w.other),
        })
    }
}

/// What one thread was doing.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wait {
    Running,
    Lock(u64),
    Sleep,
    /// Uninterruptible sleep; true in a sync call.
    Disk(bool),
    Accept,
    Client,
    Downstream(SocketAddr),
    OtherSocket,
    EventLoop,
    Other,
}

/// A system call number, as the kernel's `syscall` file prints it.
type Nr = i64;

/// The calls that wait on one file descriptor, their first argument.
fn reads_fd(nr: Nr) -> bool {
    [
        libc::SYS_read,
        libc::SYS_readv,
        libc::SYS_recvfrom,
        libc::SYS_recvmsg,
        libc::SYS_pread64,
    ]
    .contains(&nr)
}

/// The calls that wait for storage to hold what was written.
fn syncs(nr: Nr) -> bool {
    [
        libc::SYS_fsync,
        libc::SYS_fdatasync,
        libc::SYS_sync_file_range,
        libc::SYS_sync,
        libc::SYS_syncfs,
        libc::SYS_msync,
    ]
    .contains(&nr)
}

fn polls(nr: Nr) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_poll {
        return true;
    }
    nr == libc::SYS_ppoll
}

fn event_loop(nr: Nr) -> bool {
    #[cfg(target_arch = "x86_64")]
    if [libc::SYS_epoll_wait, libc::SYS_select].contains(&nr) {
        return true;
    }
    [
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_pselect6,
        libc::SYS_io_uring_enter,
    ]
    .contains(&nr)
}

/// The TCP sockets of the target's network namespace by inode (`/proc/PID/net/tcp{,6}`,
/// read once per sample: a socket it misses is read from the thread's own descriptor), and
/// the ports the target listens on.
pub(crate) struct Sockets {
    by_inode: HashMap<u64, TcpSocket>,
    listening: BTreeSet<u16>,
}

impl Sockets {
    /// `sockets`, read now, and the target's `listening` ports.
    pub(crate) fn new(sockets: &[TcpSocket], listening: BTreeSet<u16>) -> Sockets {
        Sockets {
            by_inode: sockets.iter().map(|s| (s.inode, *s)).collect(),
            listening,
        }
    }

    fn get(&self, inode: u64) -> Option<TcpSocket> {
        self.by_inode.get(&inode).copied()
    }
}

/// Reads the threads of `pids` (the first [`THREAD_READS`] of them); `None` when none
/// could be read (the process is gone, or its `syscall` files are not readable to this
/// process).
pub(crate) fn sample(pids: &[u32], sockets: &Sockets) -> Option<ThreadWaits> {
    let mut w = ThreadWaits::default();
    let mut futexes: HashMap<(u32, u64), u64> = HashMap::new();
    let mut read_any = false;
    'processes: for &pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        let mut fds = FdCache::new(pid);
        for t in tasks.flatten() {
            if w.threads as usize >= THREAD_READS {
                break 'processes;
            }
            let Some(wait) = thread_wait(&t.path(), &mut fds, sockets) else {
                continue;
            };
            read_any = true;
            w.threads += 1;
            match wait {
                Wait::Running => w.running += 1,
                Wait::Lock(addr) => {
                    w.lock += 1;
                    *futexes.entry((pid, addr)).or_default() += 1;
                }
                Wait::Sleep => w.sleep += 1,
                Wait::Disk(sync) => {
                    w.disk += 1;
                    w.disk_sync += u64::from(sync);
                }
                Wait::Accept => w.accept += 1,
                Wait::Client => w.client += 1,
                Wait::Downstream(a) => *w.downstream.entry(a.to_string()).or_default() += 1,
                Wait::OtherSocket => w.other_socket += 1,
                Wait::EventLoop => w.event_loop += 1,
                Wait::Other => w.other += 1,
            }
        }
    }
    w.lock_shared = futexes.values().copied().max().unwrap_or(0);
    read_any.then_some(w)
}

/// What the thread at `task` (`/proc/PID/task/TID`) was doing; `None` when its files could
/// not be read (it exited, or tracing it is not allowed).
fn thread_wait(task: &std::path::Path, fds: &mut FdCache, sockets: &Sockets) -> Option<Wait> {
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    let state = crate::procfs::parse_state(&stat)?;
    if state == 'R' {
        return Some(Wait::Running);
    }
    let call = std::fs::read_to_string(task.join("syscall")).ok();
    if state == 'D' {
        let nr = call.as_deref().and_then(parse_syscall).map(|c| c.0);
        return Some(Wait::Disk(nr.is_some_and(syncs)));
    }
    let call = call?;
    if call.starts_with("running") {
        return Some(Wait::Running);
    }
    let (nr, args) = parse_syscall(&call)?;
    let arg = |i: usize| args.get(i).copied().unwrap_or(0);
    Some(if nr < 0 {
        // Blocked outside a system call (a page fault).
        Wait::Other
    } else if nr == libc::SYS_futex || nr == libc::SYS_futex_waitv {
        Wait::Lock(arg(0))
    } else if nr == libc::SYS_nanosleep || nr == libc::SYS_clock_nanosleep {
        Wait::Sleep
    } else if nr == libc::SYS_accept || nr == libc::SYS_accept4 {
        Wait::Accept
    } else if reads_fd(nr) {
        fds.classify(arg(0), sockets)
    } else if polls(nr) {
        if arg(1) == 0 || arg(1) > POLL_FDS {
            Wait::EventLoop
        } else {
            fds.polled(arg(0), arg(1))
                .into_iter()
                .map(|fd| fds.classify(fd, sockets))
                .next()
                .unwrap_or(Wait::Other)
        }
    } else if event_loop(nr) {
        Wait::EventLoop
    } else {
        Wait::Other
    })
}

/// `/proc/PID/task/TID/syscall` of a blocked thread: `NR ARG1 … ARG6 SP PC` (hex
/// arguments), or `-1 SP PC` outside a call (`running` is read before this).
fn parse_syscall(text: &str) -> Option<(Nr, Vec<u64>)> {
    let mut f = text.split_whitespace();
    let nr: Nr = f.next()?.parse().ok()?;
    let args = f
        .take(6)
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect::<Option<Vec<u64>>>()?;
    Some((nr, args))
}

/// A process as a descriptor, opened when first needed.
enum Pidfd {
    NotYet,
    Open(std::os::fd::OwnedFd),
    Refused,
}

/// A process's descriptors, each followed once per sample.
struct FdCache {
    pid: u32,
    seen: HashMap<u64, Wait>,
    /// The process as a descriptor (`pidfd_open`), opened at the first socket the TCP
    /// tables did not list.
    pidfd: Pidfd,
}

impl FdCache {
    fn new(pid: u32) -> FdCache {
        FdCache {
            pid,
            seen: HashMap::new(),
            pidfd: Pidfd::NotYet,
        }
    }

    /// The local and peer addresses of the socket at descriptor `fd` of the process, from
    /// a duplicate of it (`pidfd_getfd`, allowed to whoever may trace the process): exact
    /// where `/proc/net/tcp`, read in chunks while thousands of connections open and close,
    /// can miss one. The peer is `None` for a socket not connected (a listener). `None`
    /// for a socket that is not TCP or UDP over IP, or when the duplicate is refused.
    fn addresses(&mut self, fd: u64) -> Option<(SocketAddr, Option<SocketAddr>)> {
        use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
        if let Pidfd::NotYet = self.pidfd {
            let opened = i32::try_from(self.pid)
                .ok()
                .and_then(Pid::from_raw)
                .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
            self.pidfd = opened.map_or(Pidfd::Refused, Pidfd::Open);
        }
        let Pidfd::Open(pidfd) = &self.pidfd else {
            return None;
        };
        let dup = pidfd_getfd(pidfd, i32::try_from(fd).ok()?, PidfdGetfdFlags::empty()).ok()?;
        let local = SocketAddr::try_from(rustix::net::getsockname(&dup).ok()?).ok()?;
        let peer = rustix::net::getpeername(&dup)
            .ok()
            .flatten()
            .and_then(|a| SocketAddr::try_from(a).ok());
        Some((local, peer))
    }

    /// What a wait on descriptor `fd` waits on.
    fn classify(&mut self, fd: u64, sockets: &Sockets) -> Wait {
        if let Some(w) = self.seen.get(&fd) {
            return w.clone();
        }
        let w = std::fs::read_link(format!("/proc/{}/fd/{fd}", self.pid))
            .ok()
            .map_or(Wait::Other, |link| {
                match parse_socket_link(&link.to_string_lossy()) {
                    None => Wait::Other,
                    Some(inode) => {
                        let addresses = match sockets.get(inode) {
                            Some(s) => Some((s.local, (s.remote.port() != 0).then_some(s.remote))),
                            None => self.addresses(fd),
                        };
                        match addresses {
                            None => Wait::OtherSocket,
                            Some((_, None)) => Wait::Accept,
                            Some((local, Some(_))) if sockets.listening.contains(&local.port()) => {
                                Wait::Client
                            }
                            Some((_, Some(peer))) => Wait::Downstream(peer),
                        }
                    }
                }
            });
        self.seen.insert(fd, w.clone());
        w
    }

    /// The descriptors of the `n` `struct pollfd` at `addr` in the process's memory
    /// (`/proc/PID/mem`, readable where `syscall` is); negative ones (ignored by `poll`) left
    /// out; empty when the memory cannot be read.
    fn polled(&self, addr: u64, n: u64) -> Vec<u64> {
        let mut buf = vec![0u8; 8 * n as usize];
        let read = std::fs::File::open(format!("/proc/{}/mem", self.pid)).and_then(|mut m| {
            m.seek(SeekFrom::Start(addr))?;
            m.read_exact(&mut buf)
        });
        if read.is_err() {
            return Vec::new();
        }
        buf.chunks_exact(8)
            .filter_map(|p| {
                let fd = i32::from_ne_bytes(p[..4].try_into().ok()?);
                u64::try_from(fd).ok()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typical_sample_is_each_counts_median() {
        let at = |lock: u64, down: Option<u64>| ThreadWaits {
            threads: 10,
            lock,
            downstream: down
                .map(|n| [("127.0.0.1:5432".to_string(), n)].into())
                .unwrap_or_default(),
            ..ThreadWaits::default()
        };
        let t = ThreadWaits::typical(&[at(1, Some(8)), at(9, None), at(2, Some(7))]).unwrap();
        assert_eq!((t.threads, t.lock), (10, 2));
        assert_eq!(t.downstream["127.0.0.1:5432"], 7);
        let t = ThreadWaits::typical(&[at(1, None), at(9, None), at(2, Some(7))]).unwrap();
        assert!(t.downstream.is_empty(), "{t:?}");
        assert_eq!(ThreadWaits::typical(&[]), None);
    }

    #[test]
    fn a_socket_the_tables_missed_is_read_from_its_descriptor() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let mut fds = FdCache::new(std::process::id());
        let none = Sockets::new(&[], [listener.local_addr().unwrap().port()].into());
        let fd = |s: &dyn AsRawFd| s.as_raw_fd() as u64;
        assert_eq!(
            fds.classify(fd(&client), &none),
            Wait::Downstream(listener.local_addr().unwrap())
        );
        assert_eq!(fds.classify(fd(&accepted), &none), Wait::Client);
        assert_eq!(fds.classify(fd(&listener), &none), Wait::Accept);
        let (unix, _) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(fds.classify(fd(&unix), &none), Wait::OtherSocket);
    }

    #[test]
    fn syscall_lines() {
        assert_eq!(
            parse_syscall("230 0x0 0x0 0x7ffc47edac10 0x7ffc47edac50 0x0 0x0 0x7ffc 0x7f07\n"),
            Some((230, vec![0, 0, 0x7ffc47edac10, 0x7ffc47edac50, 0, 0]))
        );
        assert_eq!(parse_syscall("-1 0x7ffc 0x7f07\n").map(|c| c.0), Some(-1));
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(parse_syscall(""), None);
    }
}
