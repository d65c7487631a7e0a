//! The probe against real processes and the real kernel of this network namespace.
//! Kernel counters are shared with whatever else runs here, so the tests only rely on
//! what their own sockets must add.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use loadlab_system::probe::{sample_kernel, sample_tree, KernelSample, Prober};

/// Kills and reaps a child when dropped, so a failed assertion leaves nothing running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // Kill the whole group (`sh` and its `sleep`s), then reap `sh`.
        // SAFETY: kill with a negative pid signals the process group we created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_sh(script: &str) -> Reaped {
    use std::os::unix::process::CommandExt;
    Reaped(
        Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .expect("spawn sh"),
    )
}

/// Polls `cond` until it holds or `limit` passes; returns whether it held. A deadline for
/// waiting, never a measurement.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn child_tree_counts_every_process() {
    let child = spawn_sh("sleep 30 & sleep 30");
    let pid = child.0.id();
    let mut last = None;
    let seen = eventually(Duration::from_secs(10), || {
        let s = sample_tree(pid).unwrap();
        let ok = s.processes >= 3;
        last = Some(s);
        ok
    });
    let s = last.unwrap();
    assert!(seen, "sh and two sleeps expected: {s:?}");
    assert!(s.threads >= 3 && s.rss_bytes > 0);
}

#[test]
fn missing_pid_is_an_error() {
    // Above the kernel's PID_MAX_LIMIT (4,194,304), so it can never exist.
    assert!(sample_tree(4_194_305).is_err());
    assert!(sample_tree(u32::MAX).is_err());
}

#[test]
fn exited_child_is_an_error() {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    // Reaped: the pid is free (reuse within this instant is practically impossible).
    assert!(sample_tree(pid).is_err());
}

/// Opens `n` non-blocking connections to 127.0.0.1:`port` (closed when dropped).
fn connect_many(port: u16, n: usize) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    (0..n)
        .map(|_| {
            // SAFETY: plain socket calls on a socket we create and own from here on.
            unsafe {
                let fd = libc::socket(
                    libc::AF_INET,
                    libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    0,
                );
                assert!(fd >= 0);
                let r = libc::connect(
                    fd,
                    &addr as *const libc::sockaddr_in as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                );
                assert!(
                    r == 0
                        || std::io::Error::last_os_error().raw_os_error()
                            == Some(libc::EINPROGRESS)
                );
                std::os::fd::OwnedFd::from_raw_fd(fd)
            }
        })
        .collect()
}

#[test]
fn full_accept_queue_counts_as_listen_overflow() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Re-listening updates the backlog: an accept queue of 1 (the kernel admits backlog+1).
    // SAFETY: listen on a socket we own.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 1) }, 0);
    let port = listener.local_addr().unwrap().port();
    let before = sample_kernel();
    let _clients = connect_many(port, 10);
    let mut after = KernelSample::default();
    let grew = eventually(Duration::from_secs(5), || {
        after = sample_kernel();
        after.listen_overflows > before.listen_overflows || after.listen_drops > before.listen_drops
    });
    assert!(grew, "before {before:?}\nafter {after:?}");
}

/// A Python process listening on a port of its own with `backlog`, accepting nothing:
/// the process and its port.
fn python_listener(backlog: u32) -> (Reaped, u16) {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen({backlog})\n\
         print(s.getsockname()[1], flush=True)\n\
         time.sleep(60)\n"
    );
    let (child, port, _) = python_printing_a_port(&script);
    (child, port)
}

/// `/usr/bin/python3 -c SCRIPT` in a process group of its own, its standard input a pipe:
/// the process, the port its first line of output names, and its standard input (its end
/// closed when dropped).
fn python_printing_a_port(script: &str) -> (Reaped, u16, std::process::ChildStdin) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (Reaped(child), line.trim().parse().expect("its port"), stdin)
}

/// What a process's threads wait on, each read from its `syscall` file: a lock (three on
/// one futex), a sleep, a connection it opened (read without a timeout: `recvfrom`; with
/// one: a `poll` on it, read from the process's memory), a client's connection to it, and
/// its listening socket.
#[test]
fn each_thread_is_named_by_what_it_waits_on() {
    let downstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let down = downstream.local_addr().unwrap();
    let script = format!(
        "import socket, threading, time, sys\n\
         lock = threading.Lock(); lock.acquire()\n\
         def locked(): lock.acquire()\n\
         def down(timeout):\n\
         \x20   c = socket.create_connection(('127.0.0.1', {port})); c.settimeout(timeout); c.recv(1)\n\
         srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(8)\n\
         def serve():\n\
         \x20   a, _ = srv.accept(); a.recv(1)\n\
         ts = [threading.Thread(target=locked) for _ in range(3)]\n\
         ts += [threading.Thread(target=time.sleep, args=(60,))]\n\
         ts += [threading.Thread(target=down, args=(t,)) for t in (None, None, 60)]\n\
         ts += [threading.Thread(target=serve)]\n\
         [t.start() for t in ts]\n\
         print(srv.getsockname()[1], flush=True)\n\
         sys.stdin.read()\n",
        port = down.port()
    );
    let (child, port, stdin) = python_printing_a_port(&script);
    let _accepted: Vec<TcpStream> = (0..3).map(|_| downstream.accept().unwrap().0).collect();
    // One client of its own, which sends nothing: the serving thread waits on it; the
    // second connection waits in its listen queue, none accepting it: the main thread reads
    // its standard input.
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut w = None;
    let settled = eventually(Duration::from_secs(5), || {
        w = sample_tree(child.0.id()).unwrap().waits;
        w.as_ref().is_some_and(|w| {
            w.lock == 3 && w.downstream_total() == 3 && w.client == 1 && w.sleep == 1
        })
    });
    let w = w.expect("threads read");
    assert!(settled, "{w:?}");
    assert_eq!(w.lock_shared, 3, "one lock: {w:?}");
    assert_eq!(
        w.downstream.into_iter().collect::<Vec<_>>(),
        [(down.to_string(), 3)]
    );
    // Nine threads: the main one reads a pipe (not a socket).
    assert_eq!((w.threads, w.other, w.accept, w.disk), (9, 1, 0, 0));
    drop(stdin);
}

/// The namespace's overflow counters count any listener's; the probe's sample of a process
/// counts its own listening sockets' drops only: a full queue beside the target is not the
/// target's.
#[test]
fn a_process_is_sampled_with_its_own_listeners_drops_not_its_neighbours() {
    let (full, full_port) = python_listener(1);
    let (calm, calm_port) = python_listener(64);
    let before = sample_kernel();
    let _clients = connect_many(full_port, 10);
    let mut full_listen = None;
    let dropped = eventually(Duration::from_secs(5), || {
        full_listen = sample_tree(full.0.id()).unwrap().listen;
        full_listen.as_ref().is_some_and(|l| l.drops > 0)
    });
    assert!(dropped, "{full_listen:?}");
    let full_listen = full_listen.unwrap();
    assert_eq!(
        (full_listen.ports.clone(), full_listen.backlog),
        (vec![full_port], 1)
    );
    let after = sample_kernel();
    assert!(after.listen_drops >= before.listen_drops + full_listen.drops);
    let calm_listen = sample_tree(calm.0.id()).unwrap().listen.unwrap();
    assert_eq!(
        (calm_listen.ports, calm_listen.backlog, calm_listen.drops),
        (vec![calm_port], 64, 0)
    );
}

#[test]
fn client_first_close_leaves_time_wait() {
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    const N: u64 = 100;
    let before = sample_kernel();
    for _ in 0..N {
        let client = TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().unwrap();
        // The client closes first, so the client end goes to TIME_WAIT once the server
        // closes too.
        drop(client);
        drop(server);
    }
    let mut after = KernelSample::default();
    // Other sockets of this namespace may leave TIME_WAIT meanwhile; N/2 is a wide margin.
    let grew = eventually(Duration::from_secs(5), || {
        after = sample_kernel();
        after.time_wait >= before.time_wait + N / 2
    });
    assert!(
        grew,
        "TIME_WAIT {} before, {} after {N} closes",
        before.time_wait, after.time_wait
    );
}

#[test]
fn prober_sees_a_busy_child() {
    let child = spawn_sh("while :; do :; done");
    let pid = child.0.id();
    let prober = Prober::start(vec![pid], Duration::from_millis(500));
    std::thread::sleep(Duration::from_millis(1_200));
    let report = prober.stop();
    drop(child);

    assert!(report.samples.len() >= 2, "{:?}", report.samples);
    assert!(report.samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
    assert!(report.samples.iter().all(|s| s.process.is_some()));
    let d = &report.delta;
    // A busy loop runs or waits for a CPU all the time; how much of it runs depends on what
    // else the machine runs (28 % beside three busy test programs on two CPUs).
    assert!(d.cpu_percent > 10.0, "{d:?}");
    assert!(d.cpu_percent + d.cpu_wait_percent > 80.0, "{d:?}");
    assert!(d.cpu_user_s > 0.0 && d.threads_max >= 1 && d.rss_max_bytes > 0);
}

#[test]
fn two_spinners_on_one_cpu_each_wait_for_it() {
    // Two busy loops pinned to the same CPU: whatever else runs there, each is runnable all
    // the time and runs at most part of it, so together they wait about as long as they run.
    let child = spawn_sh("taskset -c 0 sh -c 'while :; do :; done' & taskset -c 0 sh -c 'while :; do :; done' & wait");
    let pid = child.0.id();
    assert!(
        eventually(Duration::from_secs(5), || {
            sample_tree(pid).is_ok_and(|s| s.processes >= 3)
        }),
        "the spinners started"
    );
    let prober = Prober::start(vec![pid], Duration::from_millis(500));
    std::thread::sleep(Duration::from_millis(1_500));
    let report = prober.stop();
    drop(child);
    let d = &report.delta;
    // One CPU between them: at most ~100 % used, and the rest of 200 % wanted is waiting.
    assert!(d.cpu_percent <= 110.0, "{d:?}");
    assert!(d.cpu_wait_percent > 50.0, "{d:?}");
}

#[test]
fn prober_of_a_missing_process_still_watches_the_kernel() {
    let prober = Prober::start(vec![u32::MAX], Duration::from_millis(50));
    std::thread::sleep(Duration::from_millis(120));
    let report = prober.stop();
    assert!(report.samples.len() >= 2);
    assert!(report.samples.iter().all(|s| s.process.is_none()));
    assert_eq!(report.delta.cpu_percent, 0.0);
    // The kernel counters are cumulative: never smaller in the last sample.
    let (first, last) = (
        &report.samples[0].kernel,
        &report.samples.last().unwrap().kernel,
    );
    assert!(last.out_rsts >= first.out_rsts && last.retrans_segs >= first.retrans_segs);
}

#[test]
fn prober_stopped_at_once_still_has_baseline_and_last() {
    let me = std::process::id();
    let report = Prober::start(vec![me], Duration::from_secs(3600)).stop();
    assert_eq!(report.samples.len(), 2);
    assert!(report.samples.iter().all(|s| s.process.is_some()));
}
