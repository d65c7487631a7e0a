//! Every operating-system call loadlab makes outside the standard library, in one place:
//! resource limits, CPU affinity and the scheduler slice, CPU and memory use, the
//! monotonic and real-time clocks and `timerfd`, process groups and signals, two socket
//! options and receive timestamps.
//!
//! Most go through `rustix`, which wraps each call in a safe function. The calls it does
//! not offer stay on `libc` here, each behind a safe function with its reason:
//! `getrusage` (thread and process CPU, peak memory), `sched_setattr` (the short time
//! slice), `IP_BIND_ADDRESS_NO_PORT`, and `SO_TIMESTAMPNS` with the `recvmsg` that reads
//! it (socket2 lacks them too). The only other `unsafe` left in loadlab's crates is a library contract, not a system call: `pre_exec` for the
//! targets and tokio's `AsyncFd::register_with_interest` for the timer. Linux only.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::process::{Pid, Resource, Rlimit, Signal, WaitOptions};
use rustix::time::{ClockId, Itimerspec, TimerfdClockId, TimerfdFlags, Timespec};

/// `rlim_t`'s "no limit" (`RLIM_INFINITY`), as `getrlimit` reports it.
const RLIM_INFINITY: u64 = u64::MAX;

/// The `nofile` (`RLIMIT_NOFILE`) soft and hard limits of this process; "unlimited" is
/// `u64::MAX`.
pub fn nofile_limits() -> (u64, u64) {
    let rl = rustix::process::getrlimit(Resource::Nofile);
    (
        rl.current.unwrap_or(RLIM_INFINITY),
        rl.maximum.unwrap_or(RLIM_INFINITY),
    )
}

/// Raises the soft `nofile` limit to `needed` if the hard limit allows; returns the soft
/// limit in force afterwards. Children started later inherit it.
pub fn raise_nofile(needed: u64) -> u64 {
    let rl = rustix::process::getrlimit(Resource::Nofile);
    let soft = rl.current.unwrap_or(RLIM_INFINITY);
    let hard = rl.maximum.unwrap_or(RLIM_INFINITY);
    if soft >= needed || hard < needed {
        return soft;
    }
    let raised = Rlimit {
        current: Some(needed),
        maximum: rl.maximum,
    };
    match rustix::process::setrlimit(Resource::Nofile, raised) {
        Ok(()) => needed,
        Err(_) => soft,
    }
}

/// Pins the calling thread (and what it spawns afterwards) to `cpus`; the OS error if the
/// kernel refuses (e.g. a CPU that does not exist). CPUs past the kernel's set size are
/// ignored. Allocates nothing, so it may run between `fork` and `exec`.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        if c < rustix::thread::CpuSet::MAX_CPU {
            set.set(c);
        }
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// The CPUs the calling thread may run on (its affinity); empty if the kernel does not
/// say.
pub fn current_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Asks the scheduler for a time slice of `slice_ns` for the calling thread
/// (`sched_setattr` with `SCHED_OTHER` and `sched_runtime`, EEVDF kernels 6.6+). Best
/// effort: older kernels ignore or refuse it, and nothing else changes.
pub fn request_short_slice(slice_ns: u64) {
    /// `struct sched_attr` (include/uapi/linux/sched/types.h), version 1.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: slice_ns,
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    // rustix has no sched_setattr.
    // SAFETY: sched_setattr(0 = this thread, attr, flags 0) reads `attr` only.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
}

/// `getrusage(who)`; rustix has no `getrusage`.
fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: rusage is plain data, and getrusage only fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `who` is one of the RUSAGE_* constants.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

fn cpu_seconds(ru: &libc::rusage) -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the calling thread (user + system), seconds.
pub fn thread_cpu_seconds() -> f64 {
    cpu_seconds(&rusage(libc::RUSAGE_THREAD))
}

/// CPU seconds (user + system) used by this process so far.
pub fn process_cpu_seconds() -> f64 {
    cpu_seconds(&rusage(libc::RUSAGE_SELF))
}

/// Peak resident memory of this process, bytes.
pub fn peak_rss_bytes() -> u64 {
    rusage(libc::RUSAGE_SELF).ru_maxrss as u64 * 1024
}

/// Kernel clock ticks per second, the unit of `/proc/PID/stat`'s CPU times.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// The memory page size in bytes, the unit of `/proc/PID/stat`'s resident set.
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the clock `Instant` uses on Linux; read through the
/// vDSO, no system call).
#[inline]
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How late this thread wakes from sleeps to absolute `CLOCK_MONOTONIC` deadlines `gap_ns`
/// apart, as loadlab's workers sleep to their send times: `samples` lateness figures, ns,
/// in the order taken. A deadline already past when the previous wake-up came is moved to
/// one gap after that wake-up, so one long delay is counted once, not for every deadline
/// it covered. Takes about `samples × gap_ns`.
pub fn wakeup_lateness_ns(samples: usize, gap_ns: u64) -> Vec<u64> {
    let mut late = Vec::with_capacity(samples);
    let mut deadline = monotonic_ns() + gap_ns;
    for _ in 0..samples {
        let at = Timespec {
            tv_sec: (deadline / 1_000_000_000) as i64,
            tv_nsec: (deadline % 1_000_000_000) as i64,
        };
        // Interrupted by a signal: sleep on to the same deadline.
        while rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &at)
            == Err(rustix::io::Errno::INTR)
        {}
        let now = monotonic_ns();
        late.push(now.saturating_sub(deadline));
        deadline = (deadline + gap_ns).max(now + gap_ns);
    }
    late
}

/// `CLOCK_REALTIME` now, nanoseconds since the epoch (vDSO): the clock of the kernel's
/// receive timestamps.
#[inline]
pub fn realtime_ns() -> u64 {
    let ts = rustix::time::clock_gettime(ClockId::Realtime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Asks the kernel to stamp every segment `socket` receives with the time it arrived
/// (`SO_TIMESTAMPNS`, software, `CLOCK_REALTIME`), read back by [`recv_timestamped`].
/// Neither rustix nor socket2 offers the option.
pub fn enable_rx_timestamps(socket: BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket fd and an option buffer of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Receive timestamping held on for as long as it lives: a loopback TCP pair whose receiver
/// asks for timestamps. Linux turns timestamping on system-wide in deferred work after the
/// first socket asks, and a TCP segment that arrived before carries none; a test that needs
/// every receive stamped from its first holds one of these (see [`hold_rx_timestamps`]).
pub struct RxTimestampsHeld {
    _pair: (std::net::TcpStream, std::net::TcpStream),
}

/// Turns receive timestamping on and returns once a segment received on loopback came
/// stamped (at most 2 s), so that every socket asking from now on has its segments stamped
/// while the returned value lives.
pub fn hold_rx_timestamps() -> io::Result<RxTimestampsHeld> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let mut tx = std::net::TcpStream::connect(l.local_addr()?)?;
    let (rx, _) = l.accept()?;
    enable_rx_timestamps(rx.as_fd())?;
    for _ in 0..200 {
        tx.write_all(b"x")?;
        let mut byte = [0u8; 1];
        // A blocking peek waits for the byte; the receive then takes it without waiting.
        rx.peek(&mut byte)?;
        if recv_timestamped(rx.as_fd(), &mut byte)?.1.is_some() {
            return Ok(RxTimestampsHeld { _pair: (tx, rx) });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(io::Error::other(
        "no TCP receive timestamp 2 s after SO_TIMESTAMPNS",
    ))
}

/// One non-blocking `recvmsg` into `buf`: the bytes read and, on a socket with
/// [`enable_rx_timestamps`], when the last of them arrived (`CLOCK_REALTIME` ns; for TCP the
/// kernel reports the newest segment the read consumed). rustix's ancillary messages do not
/// include timestamps.
pub fn recv_timestamped(
    socket: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Option<u64>)> {
    use std::os::fd::AsRawFd;
    // Room for one `struct timespec` control message, 8-byte aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr is a valid empty header; every pointer set below outlives the
    // call, and the lengths are those of the buffers they point to.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: as above.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `msg_controllen` bytes of `control`, which `msg` points to.
    Ok((n as usize, unsafe { receive_timestamp(&msg) }))
}

/// The kernel's receive timestamp (`SCM_TIMESTAMPNS`, `CLOCK_REALTIME` ns) among the control
/// messages of a `recvmsg` that returned `msg`, if it carries one.
///
/// # Safety
/// `msg.msg_control` points to `msg.msg_controllen` readable bytes the kernel filled (or is
/// null with a length of 0).
pub unsafe fn receive_timestamp(msg: &libc::msghdr) -> Option<u64> {
    let mut stamp = None;
    // SAFETY: the caller's promise; the CMSG macros walk the control bytes within their
    // length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if ts.tv_sec > 0 {
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    stamp
}

/// A new non-blocking, close-on-exec `timerfd` on `CLOCK_MONOTONIC`, disarmed.
pub fn timerfd_monotonic() -> io::Result<OwnedFd> {
    Ok(rustix::time::timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?)
}

/// Arms `timer` to fire once when `CLOCK_MONOTONIC` reads `abs_ns` (at once if that has
/// passed). One system call, no allocation: the open-loop schedule calls it per arrival.
#[inline]
pub fn timerfd_fire_at(timer: BorrowedFd<'_>, abs_ns: u64) -> io::Result<()> {
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: (abs_ns / 1_000_000_000) as i64,
            tv_nsec: (abs_ns % 1_000_000_000) as _,
        },
    };
    rustix::time::timerfd_settime(timer, rustix::time::TimerfdTimerFlags::ABSTIME, &spec)?;
    Ok(())
}

/// Lets `connect()` pick the local port of a socket bound to an address with port 0
/// (`IP_BIND_ADDRESS_NO_PORT`), so that many source addresses do not each reserve a port
/// at `bind()`. Best effort: failure only loses the optimisation. Neither rustix nor
/// socket2 offers this option.
pub fn set_bind_address_no_port(socket: BorrowedFd<'_>) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket fd and an option buffer of the size given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`):
/// processes a target forks and abandons are reparented here, not to init.
pub fn become_child_subreaper() -> io::Result<()> {
    // The argument is only a flag: any process id (nonzero) sets it.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// Asks the kernel to SIGKILL the calling process when its parent thread dies
/// (`PR_SET_PDEATHSIG`). Async-signal-safe: for `pre_exec`.
pub fn kill_me_with_parent() -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    Ok(())
}

/// A signal loadlab sends to a target's process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupSignal {
    /// SIGTERM: stop gracefully.
    Term,
    /// SIGKILL: stop now.
    Kill,
}

fn group(pgid: i32) -> io::Result<Pid> {
    Pid::from_raw(pgid).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pgid} is not a process group id"),
        )
    })
}

/// Sends `signal` to every process of group `pgid` (`kill(-pgid, sig)`).
pub fn signal_group(pgid: i32, signal: GroupSignal) -> io::Result<()> {
    let sig = match signal {
        GroupSignal::Term => Signal::TERM,
        GroupSignal::Kill => Signal::KILL,
    };
    rustix::process::kill_process_group(group(pgid)?, sig)?;
    Ok(())
}

/// Whether any process of group `pgid` exists (`kill(-pgid, 0)`; zombies count until
/// reaped).
pub fn group_exists(pgid: i32) -> bool {
    group(pgid).is_ok_and(|g| rustix::process::test_kill_process_group(g).is_ok())
}

/// Reaps, without blocking, the exited children of this process that belong to group
/// `pgid`; returns how many were reaped.
pub fn reap_group(pgid: i32) -> usize {
    let Ok(g) = group(pgid) else { return 0 };
    let mut reaped = 0;
    while let Ok(Some(_)) = rustix::process::waitpgid(g, WaitOptions::NOHANG) {
        reaped += 1;
    }
    reaped
}

/// SIGKILLs process `pid` if it is still the process that started at `starttime` (a pid
/// may have been reused), then reaps it if it is this process's child (the subreaper's
/// orphans are).
pub fn kill_process(pid: u32, starttime: u64) {
    let Some(p) = Pid::from_raw(pid as i32) else {
        return;
    };
    if crate::procfs::start_time(pid) == Some(starttime) {
        let _ = rustix::process::kill_process(p, Signal::KILL);
    }
    let _ = rustix::process::waitpid(Some(p), WaitOptions::NOHANG);
}

/// The name of a signal number as a process's exit status reports it (`SIGKILL`), or
/// `signal` for one loadlab has no name for.
pub fn signal_name(sig: i32) -> &'static str {
    [
        (Signal::KILL, "SIGKILL"),
        (Signal::TERM, "SIGTERM"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::INT, "SIGINT"),
        (Signal::BUS, "SIGBUS"),
    ]
    .into_iter()
    .find(|(s, _)| s.as_raw() == sig)
    .map_or("signal", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn nofile_raise_is_bounded_by_the_hard_limit() {
        let (soft, hard) = nofile_limits();
        assert!(soft > 0 && soft <= hard);
        // Asking for what is already there changes nothing.
        assert_eq!(raise_nofile(soft), soft);
        // More than the hard limit is refused: the soft limit stays.
        if hard < u64::MAX {
            assert_eq!(raise_nofile(hard + 1), soft);
        }
        assert_eq!(nofile_limits(), (soft, hard));
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_an_error() {
        // CPU 4095 exists on no test machine; the kernel answers EINVAL.
        let e = std::thread::spawn(|| pin_current_thread(&[4095]))
            .join()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        std::thread::spawn(|| pin_current_thread(&[0]))
            .join()
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_pinned_thread_reads_its_own_cpus() {
        let all = current_cpus();
        assert!(!all.is_empty());
        let pinned = std::thread::spawn(|| {
            pin_current_thread(&[0]).unwrap();
            current_cpus()
        })
        .join()
        .unwrap();
        assert_eq!(pinned, vec![0]);
        // The pin stays with that thread.
        assert_eq!(current_cpus(), all);
    }

    #[test]
    fn cpu_and_memory_use_grow() {
        let t0 = thread_cpu_seconds();
        let p0 = process_cpu_seconds();
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_seconds() > t0);
        assert!(process_cpu_seconds() > p0);
        assert!(peak_rss_bytes() > 1 << 20);
        assert!(clock_ticks_per_second() > 0 && page_size() >= 4096);
    }

    #[test]
    fn monotonic_matches_instant() {
        // Instant is CLOCK_MONOTONIC: two readings around a sleep bracket it.
        let a = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b - a >= 2_000_000, "{a} {b}");
    }

    #[test]
    fn timerfd_fires_at_its_deadline_and_rearming_zeroes_its_count() {
        let fd = timerfd_monotonic().unwrap();
        let deadline = monotonic_ns() + 1_000_000;
        timerfd_fire_at(fd.as_fd(), deadline).unwrap();
        let mut count = [0u8; 8];
        // Non-blocking: not yet.
        assert!(rustix::io::read(&fd, &mut count).is_err());
        std::thread::sleep(Duration::from_millis(3));
        assert!(monotonic_ns() >= deadline);
        // Fired, and left unread: arming it again zeroes the count, so it does not read as
        // ready before the new deadline (the engine's timer relies on this, never reading).
        timerfd_fire_at(fd.as_fd(), monotonic_ns() + 1_000_000_000).unwrap();
        assert!(rustix::io::read(&fd, &mut count).is_err());
        // Without the re-arm, the expiration is there to read.
        timerfd_fire_at(fd.as_fd(), monotonic_ns() + 1_000_000).unwrap();
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(rustix::io::read(&fd, &mut count).unwrap(), 8);
        assert_eq!(u64::from_ne_bytes(count), 1);
    }

    #[test]
    fn process_groups_are_signalled_and_reaped() {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        assert!(group_exists(pgid));
        signal_group(pgid, GroupSignal::Kill).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut reaped = 0;
        while group_exists(pgid) && Instant::now() < deadline {
            reaped += reap_group(pgid);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reaped, 1);
        assert!(!group_exists(pgid));
        // reap_group took the exit status: nothing is left to wait for.
        assert!(child.wait().is_err());
        assert!(signal_group(0, GroupSignal::Term).is_err());
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(10), "signal");
    }

    #[test]
    fn receive_timestamps_tell_when_bytes_arrived_not_when_they_were_read() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let _on = hold_rx_timestamps().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stamped = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let plain = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut to_stamped, _) = listener.accept().unwrap();
        let (mut to_plain, _) = listener.accept().unwrap();
        enable_rx_timestamps(stamped.as_fd()).unwrap();
        let mut buf = [0u8; 16];
        // Nothing to read: the call does not block.
        let e = recv_timestamped(stamped.as_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let before = realtime_ns();
        to_stamped.write_all(b"hello").unwrap();
        let sent = realtime_ns();
        std::thread::sleep(Duration::from_millis(50));
        let (n, at) = recv_timestamped(stamped.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        let at = at.expect("no timestamp on a socket that asked for them");
        assert!(
            at >= before && at <= sent + 1_000_000,
            "arrived {} µs after the send began, read 50 ms later",
            (at as i64 - before as i64) / 1000
        );
        to_plain.write_all(b"hello").unwrap();
        // A socket that did not ask gets the bytes and no timestamp.
        let (n, at) = recv_timestamped(plain.as_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..n], at), (&b"hello"[..], None));
    }
}
