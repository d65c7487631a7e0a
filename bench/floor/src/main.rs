//! The floor client: what an HTTP/1.1 client cannot spend less than on this machine.
//!
//! `bench/peers.sh` runs it beside loadlab and its peers, under the same `taskset` and GNU
//! `time`, so each target's ratio can be read against the best any client could do here.
//! It does the least a client can: one pre-built request, an `io_uring` ring with deferred
//! task work (every send, receive, connect and close of a wake-up submitted in one system
//! call; a waiting thread woken only when all it waits for is done), a status line and a
//! `Content-Length` parsed, nothing recorded but counts and, in open loop, the schedule lag.
//! It measures no latency and keeps no histogram: a real tool costs more. Its figures are a
//! lower bound on cost per request, so a tool's ratio to a peer cannot exceed the floor's.
//!
//! ```text
//! loadlab-floor keepalive|close|open --addr 127.0.0.1:PORT [--connections 64]
//!               [--duration 10] [--rate 20000] [--gap-us 200] [--stamp] [--multishot]
//!               [--on-time]
//! loadlab-floor wakes [--duration 2] [--gap-us 200]
//! ```
//! Prints one JSON object: requests, errors, elapsed_s and, in open loop, schedule_lag_ms
//! (p99, max), unsent (arrivals that found every connection busy) and wakes (its sleeps:
//! at most one per `--gap-us`). `wakes` sends nothing:
//! it sleeps on a timer every `--gap-us` and prints the CPU each wake-up cost the thread
//! (`cpu_us_per_wake`), the price an open-loop client pays per release on this machine.
//!
//! `--stamp` reads each response with the kernel's receive timestamp (`SO_TIMESTAMPNS`,
//! `recvmsg`), as a client that reads its responses late (the open loop reads them only at
//! its next release) must to know when they came: what measuring latency costs at least.
//! The JSON then counts the responses read with a timestamp (`stamped`).
//!
//! `--multishot` (keep-alive only) reads each connection through one standing multishot
//! receive into a ring of provided buffers, armed once, instead of a receive queued with each
//! request: in open loop it costs less (docs/src/benchmarks.md), and it is how loadlab's
//! io_uring transport reads, so `bench/peers.sh` runs the open-loop floor with it.
//!
//! `--on-time` (open loop) sleeps to each wake-up's deadline as an absolute time
//! (`IORING_ENTER_ABS_TIMER`, Linux 6.12), as loadlab's paced dispatcher does. Without it the
//! sleep is a span the kernel starts after the wake-up's sends are submitted, so every
//! release comes that much later: fewer wake-ups and a larger schedule lag than loadlab's.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::IntoRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

/// What a completion is for, in its `user_data`'s top bits: a receive; a connect or send
/// (success skipped: only a failure comes back); a close (success skipped too). Below them,
/// the connection's request number (bits 16..48) and its index (bits 0..16), so that a
/// completion of a request already counted as failed is ignored.
const RECV: u64 = 0;
const LINKED: u64 = 1 << 62;
const CLOSED: u64 = 2 << 62;
/// `--multishot`: a connection's standing receive (no request number: it serves them all).
const MULTI: u64 = 3 << 62;
const KIND: u64 = 3 << 62;

fn tag(kind: u64, seq: u64, i: usize) -> u64 {
    kind | ((seq & 0xffff_ffff) << 16) | i as u64
}
const BUF: usize = 4096;
/// Open loop: schedule lag is counted per microsecond up to 100 ms (the last bucket holds
/// everything later).
const LAG_BUCKETS: usize = 100_001;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    KeepAlive,
    Close,
    Open,
    Wakes,
}

struct Args {
    mode: Mode,
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    rate: f64,
    gap: Duration,
    /// Read with the kernel's receive timestamps.
    stamp: bool,
    /// Keep-alive: one multishot receive per connection into a ring of provided buffers,
    /// armed once, instead of a receive queued with each request.
    multishot: bool,
    /// Open loop: sleep to each wake-up's deadline as an absolute time (as loadlab's paced
    /// dispatcher does), not for a span that starts after the wake-up's sends are submitted.
    on_time: bool,
}

fn usage() -> String {
    "usage: loadlab-floor keepalive|close|open --addr 127.0.0.1:PORT [--connections N] \
     [--duration SECONDS] [--rate REQ_PER_S] [--gap-us MICROSECONDS] [--stamp] [--multishot] [--on-time]\n       \
     loadlab-floor wakes [--duration SECONDS] [--gap-us MICROSECONDS]"
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mode = match it.next().as_deref() {
        Some("keepalive") => Mode::KeepAlive,
        Some("close") => Mode::Close,
        Some("open") => Mode::Open,
        Some("wakes") => Mode::Wakes,
        _ => return Err(usage()),
    };
    let mut a = Args {
        mode,
        addr: "127.0.0.1:80".parse().expect("literal"),
        connections: 64,
        duration: Duration::from_secs(10),
        rate: 20_000.0,
        gap: Duration::from_micros(200),
        stamp: false,
        multishot: false,
        on_time: false,
    };
    let mut have_addr = false;
    while let Some(flag) = it.next() {
        if flag == "--stamp" {
            a.stamp = true;
            continue;
        }
        if flag == "--multishot" {
            a.multishot = true;
            continue;
        }
        if flag == "--on-time" {
            a.on_time = true;
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {v}: {e}");
        match flag.as_str() {
            "--addr" => {
                a.addr = v.parse().map_err(|e| bad(&e))?;
                have_addr = true;
            }
            "--connections" => a.connections = v.parse().map_err(|e| bad(&e))?,
            "--duration" => a.duration = Duration::from_secs_f64(v.parse().map_err(|e| bad(&e))?),
            "--rate" => a.rate = v.parse().map_err(|e| bad(&e))?,
            "--gap-us" => a.gap = Duration::from_micros(v.parse().map_err(|e| bad(&e))?),
            _ => return Err(format!("unknown flag {flag}\n{}", usage())),
        }
    }
    if !have_addr && mode != Mode::Wakes {
        return Err(format!("--addr is required\n{}", usage()));
    }
    if !a.addr.ip().is_loopback() {
        return Err(format!(
            "--addr {}: loopback only (this is a bench tool)",
            a.addr
        ));
    }
    if a.multishot && a.mode == Mode::Close {
        return Err("--multishot needs keep-alive (keepalive or open)".to_string());
    }
    if a.connections == 0 || a.connections > 4096 || !a.rate.is_finite() || a.rate <= 0.0 {
        return Err("--connections must be 1..=4096 and --rate positive".to_string());
    }
    Ok(a)
}

/// How far a response has been read: `Some(Ok(len))` when complete (its status was 2xx),
/// `Some(Err(()))` when it is not a response this client understands, `None` for more.
fn complete(buf: &[u8]) -> Option<Result<usize, ()>> {
    let end = match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(p) => p + 4,
        None if buf.len() >= BUF => return Some(Err(())),
        None => return None,
    };
    let Ok(head) = std::str::from_utf8(&buf[..end]) else {
        return Some(Err(()));
    };
    if !head.starts_with("HTTP/1.1 2") {
        return Some(Err(()));
    }
    let length = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    match length {
        Some(n) if end + n > BUF => Some(Err(())),
        Some(n) if buf.len() >= end + n => Some(Ok(end + n)),
        Some(_) => None,
        None => Some(Err(())),
    }
}

/// `recvmsg`'s header, its one `iovec` and room for the timestamp's control message.
struct Msg {
    hdr: libc::msghdr,
    iov: libc::iovec,
    control: [u64; 8],
}

/// `--multishot`: the buffers the kernel picks from for each receive (a provided-buffer
/// ring, group 0): `entries` buffers of [`MS_BUF`] bytes, each handed back once its bytes
/// are copied out.
struct BufRing {
    ring: *mut types::BufRingEntry,
    entries: u16,
    tail: u16,
    bufs: Vec<u8>,
}

/// `--multishot`: one provided buffer's size (a response's bytes, and with `--stamp` the
/// header and control message before them).
const MS_BUF: usize = 2048;
/// `--multishot --stamp`: the control bytes each receive reserves (one `timespec` message).
const MS_CONTROL: usize = 32;

impl BufRing {
    fn new(ring: &IoUring, entries: u16) -> Result<BufRing, String> {
        let bytes = entries as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping (page-aligned, as the kernel requires).
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `mem` holds `entries` entries and lives until `self` is dropped (never:
        // the process ends with the ring).
        unsafe { ring.submitter().register_buf_ring(mem as u64, entries, 0) }
            .map_err(|e| format!("io_uring provided buffers (Linux 5.19+): {e}"))?;
        let mut b = BufRing {
            ring: mem.cast(),
            entries,
            tail: 0,
            bufs: vec![0; entries as usize * MS_BUF],
        };
        for bid in 0..entries {
            b.give(bid);
        }
        Ok(b)
    }

    /// Hands buffer `bid` (back) to the kernel.
    fn give(&mut self, bid: u16) {
        let at = (self.tail & (self.entries - 1)) as usize;
        // SAFETY: `at` is inside the ring; the entry is ours until the tail passes it.
        unsafe {
            let e = &mut *self.ring.add(at);
            e.set_addr(self.bufs.as_ptr() as u64 + bid as u64 * MS_BUF as u64);
            e.set_len(MS_BUF as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the ring's tail field; the kernel reads it with acquire ordering.
        unsafe {
            let tail = types::BufRingEntry::tail(self.ring).cast_mut();
            (*(tail as *const std::sync::atomic::AtomicU16))
                .store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        &self.bufs[bid as usize * MS_BUF..][..len]
    }
}

struct Conn {
    fd: i32,
    buf: Box<[u8; BUF]>,
    /// With `--stamp`: where each receive's header lives while it is in flight.
    msg: Box<Msg>,
    fill: usize,
    busy: bool,
    /// Requests started on this slot (tags its completions).
    seq: u64,
}

struct Client {
    ring: IoUring,
    request: Vec<u8>,
    addr: libc::sockaddr_in,
    conns: Vec<Conn>,
    requests: u64,
    errors: u64,
    /// `--stamp`: responses read with a timestamp, and the latest timestamp (ns).
    stamp: bool,
    stamped: u64,
    latest_stamp: u64,
    /// The completions of one wake-up, copied out of the ring (reused: no allocation per
    /// wake-up): user data, result, flags.
    done: Vec<(u64, i32, u32)>,
    /// `--multishot`: the provided buffers, and the `msghdr` every stamped receive uses
    /// (its lengths say how much room the name and control messages take in a buffer).
    bufs: Option<BufRing>,
    ms_msg: Box<libc::msghdr>,
}

impl Client {
    fn new(a: &Args) -> Result<Client, String> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(4 * a.connections.next_power_of_two() as u32)
            .map_err(|e| format!("io_uring refused (needs Linux 6.1+, not disabled): {e}"))?;
        let SocketAddr::V4(v4) = a.addr else {
            return Err("--addr: IPv4 only".to_string());
        };
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let close = if a.mode == Mode::Close {
            "Connection: close\r\n"
        } else {
            ""
        };
        let request = format!("GET / HTTP/1.1\r\nHost: {}\r\n{close}\r\n", a.addr).into_bytes();
        let mut conns = Vec::with_capacity(a.connections);
        for _ in 0..a.connections {
            let fd = if a.mode == Mode::Close {
                -1
            } else {
                let s =
                    TcpStream::connect(a.addr).map_err(|e| format!("connect {}: {e}", a.addr))?;
                s.set_nodelay(true).map_err(|e| e.to_string())?;
                let fd = s.into_raw_fd();
                if a.stamp {
                    stamp_socket(fd)?;
                }
                fd
            };
            conns.push(Conn {
                fd,
                buf: Box::new([0; BUF]),
                // SAFETY: msghdr and iovec are plain C structs; all zeroes is a valid value
                // (null pointers, zero lengths), filled in before each receive.
                msg: Box::new(unsafe { std::mem::zeroed() }),
                fill: 0,
                busy: false,
                seq: 0,
            });
        }
        Ok(Client {
            ring,
            request,
            addr,
            conns,
            requests: 0,
            errors: 0,
            stamp: a.stamp,
            stamped: 0,
            latest_stamp: 0,
            done: Vec::with_capacity(4 * a.connections),
            bufs: None,
            ms_msg: Box::new({
                // SAFETY: all zeroes is a valid msghdr (no name, no iovec).
                let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
                m.msg_controllen = MS_CONTROL;
                m
            }),
        })
        .and_then(|mut c| {
            if a.multishot {
                let n = (4 * a.connections).next_power_of_two().clamp(64, 32768);
                c.bufs = Some(BufRing::new(&c.ring, n as u16)?);
                for i in 0..c.conns.len() {
                    c.arm(i)?;
                }
            }
            Ok(c)
        })
    }

    /// `--multishot`: arms connection `i`'s receive (again, after the kernel ended it).
    fn arm(&mut self, i: usize) -> Result<(), String> {
        let fd = types::Fd(self.conns[i].fd);
        let recv = if self.stamp {
            opcode::RecvMsgMulti::new(fd, &*self.ms_msg, 0).build()
        } else {
            opcode::RecvMulti::new(fd, 0).build()
        };
        self.push(&recv.user_data(tag(MULTI, 0, i)))
    }

    fn push(&mut self, e: &squeue::Entry) -> Result<(), String> {
        // SAFETY: every buffer an entry points at (the request, the sockaddr, a
        // connection's boxed buffer) lives as long as `self`, and a connection's buffer is
        // not touched while its receive is in flight.
        unsafe {
            if self.ring.submission().push(e).is_err() {
                self.ring
                    .submit()
                    .map_err(|e| format!("io_uring submit: {e}"))?;
                self.ring
                    .submission()
                    .push(e)
                    .map_err(|_| "io_uring submission queue full".to_string())?;
            }
        }
        Ok(())
    }

    /// Queues connection `i`'s next request: with keep-alive a send linked to a receive;
    /// without, a new socket's connect linked to both.
    fn start(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        c.busy = true;
        c.fill = 0;
        c.seq += 1;
        let seq = c.seq;
        if c.fd < 0 {
            // SAFETY: plain socket(2).
            let fd =
                unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                return Err(format!("socket: {}", std::io::Error::last_os_error()));
            }
            if self.stamp {
                stamp_socket(fd)?;
            }
            c.fd = fd;
            let connect = opcode::Connect::new(
                types::Fd(fd),
                std::ptr::addr_of!(self.addr).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
            .build()
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
            .user_data(tag(LINKED, seq, i));
            self.push(&connect)?;
        }
        let fd = self.conns[i].fd;
        let send = opcode::Send::new(
            types::Fd(fd),
            self.request.as_ptr(),
            self.request.len() as u32,
        )
        .build();
        if self.bufs.is_some() {
            // The connection's receive is armed already.
            return self.push(
                &send
                    .flags(squeue::Flags::SKIP_SUCCESS)
                    .user_data(tag(LINKED, seq, i)),
            );
        }
        let send = send
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
            .user_data(tag(LINKED, seq, i));
        let recv = self.recv(i).user_data(tag(RECV, seq, i));
        self.push(&send)?;
        self.push(&recv)
    }

    /// Handles every completion; returns the connections whose response ended.
    fn reap(&mut self, mode: Mode, ended: &mut Vec<usize>) -> Result<(), String> {
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        done.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(ud, res, flags) in &done {
            let i = (ud & 0xffff) as usize;
            if ud & KIND == MULTI {
                self.multishot(i, res, flags, mode, ended)?;
                continue;
            }
            let c = &self.conns[i];
            // A close, or a completion of a request already ended (a failed connect or
            // send ends its request; the receive linked to it may still report ECANCELED).
            if ud & KIND == CLOSED || !c.busy || (ud >> 16) & 0xffff_ffff != c.seq & 0xffff_ffff {
                continue;
            }
            let outcome = if res <= 0 {
                Some(Err(()))
            } else {
                if self.stamp {
                    let m = &self.conns[i].msg;
                    // SAFETY: the receive is complete: the kernel filled `msg_controllen`
                    // bytes of the connection's control buffer.
                    let control = unsafe {
                        std::slice::from_raw_parts(
                            m.hdr.msg_control.cast::<u8>(),
                            m.hdr.msg_controllen,
                        )
                    };
                    self.count_stamp(receive_stamp(control));
                }
                let c = &mut self.conns[i];
                c.fill += res as usize;
                complete(&c.buf[..c.fill])
            };
            match outcome {
                None => {
                    let recv = self.recv(i).user_data(tag(RECV, self.conns[i].seq, i));
                    self.push(&recv)?;
                }
                Some(r) => self.ended(i, r, res, mode, ended)?,
            }
        }
        self.done = done;
        Ok(())
    }

    /// `--multishot`: a completion of connection `i`'s standing receive.
    fn multishot(
        &mut self,
        i: usize,
        res: i32,
        flags: u32,
        mode: Mode,
        ended: &mut Vec<usize>,
    ) -> Result<(), String> {
        if res == -libc::ENOBUFS {
            // Every buffer was in use: armed again (the bytes wait in the socket).
            return if io_uring::cqueue::more(flags) {
                Ok(())
            } else {
                self.arm(i)
            };
        }
        if res <= 0 {
            return self.ended(i, Err(()), res, mode, ended);
        }
        let bufs = self.bufs.as_mut().expect("multishot has buffers");
        let bid = io_uring::cqueue::buffer_select(flags).expect("a receive into a provided buffer");
        let raw = bufs.buf(bid, res as usize);
        let c = &mut self.conns[i];
        let mut take = |payload: &[u8]| {
            let fit = payload.len().min(BUF - c.fill);
            c.buf[c.fill..c.fill + fit].copy_from_slice(&payload[..fit]);
            c.fill += fit;
            payload.len()
        };
        let (stamp, got) = if self.stamp {
            let out = types::RecvMsgOut::parse(raw, &self.ms_msg)
                .map_err(|()| "a multishot recvmsg result too short".to_string())?;
            (receive_stamp(out.control_data()), take(out.payload_data()))
        } else {
            (None, take(raw))
        };
        bufs.give(bid);
        self.count_stamp(stamp);
        if got == 0 {
            // A stamped receive's end at the server's close: a header and no payload.
            return self.ended(i, Err(()), 0, mode, ended);
        }
        if !io_uring::cqueue::more(flags) {
            self.arm(i)?;
        }
        let c = &self.conns[i];
        if !c.busy {
            return Ok(());
        }
        match complete(&c.buf[..c.fill]) {
            None => Ok(()),
            Some(r) => self.ended(i, r, res, mode, ended),
        }
    }

    /// Connection `i`'s request ended with `r`.
    fn ended(
        &mut self,
        i: usize,
        r: Result<usize, ()>,
        res: i32,
        mode: Mode,
        ended: &mut Vec<usize>,
    ) -> Result<(), String> {
        if r.is_ok() {
            self.requests += 1;
        } else {
            self.errors += 1;
        }
        if mode == Mode::Close || r.is_err() {
            let close = opcode::Close::new(types::Fd(self.conns[i].fd))
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(tag(CLOSED, 0, i));
            self.push(&close)?;
            self.conns[i].fd = -1;
            if mode != Mode::Close {
                return Err(format!(
                    "connection {i}: bad or failed response (result {res}); \
                     the floor client does not reconnect"
                ));
            }
        }
        self.conns[i].busy = false;
        ended.push(i);
        Ok(())
    }

    /// Connection `i`'s next receive, into the rest of its buffer: a `recv`, or with
    /// `--stamp` a `recvmsg` with room for the timestamp.
    fn recv(&mut self, i: usize) -> squeue::Entry {
        let c = &mut self.conns[i];
        let (fd, at, room) = (c.fd, c.buf[c.fill..].as_mut_ptr(), BUF - c.fill);
        if !self.stamp {
            return opcode::Recv::new(types::Fd(fd), at, room as u32).build();
        }
        let m = &mut *c.msg;
        m.iov = libc::iovec {
            iov_base: at.cast(),
            iov_len: room,
        };
        m.hdr.msg_iov = &mut m.iov;
        m.hdr.msg_iovlen = 1;
        m.hdr.msg_control = m.control.as_mut_ptr().cast();
        m.hdr.msg_controllen = std::mem::size_of_val(&m.control);
        m.hdr.msg_flags = 0;
        opcode::RecvMsg::new(types::Fd(fd), &mut m.hdr).build()
    }

    /// Counts a response read with a receive timestamp (`stamp`), as a latency-measuring
    /// client uses it.
    fn count_stamp(&mut self, stamp: Option<u64>) {
        if let Some(ns) = stamp {
            self.stamped += 1;
            self.latest_stamp = self.latest_stamp.max(ns);
        }
    }

    /// Submits what is queued and sleeps until `want` completions or until `deadline_ns`
    /// (`CLOCK_MONOTONIC`), a time that the submission's own work does not push later
    /// (`IORING_ENTER_ABS_TIMER`, Linux 6.12).
    fn wait_until(&mut self, want: usize, deadline_ns: u64) -> Result<(), String> {
        /// `io_uring_enter`'s flags: run deferred completions and wait, an extended
        /// argument follows, its timeout is absolute.
        const GETEVENTS: u32 = 1;
        const EXT_ARG: u32 = 1 << 3;
        const ABS_TIMER: u32 = 1 << 5;
        let ts = [
            (deadline_ns / 1_000_000_000) as i64,
            (deadline_ns % 1_000_000_000) as i64,
        ];
        // The kernel's `io_uring_getevents_arg`: sigmask, sigmask_sz, min_wait_usec, ts.
        #[repr(C)]
        struct Arg(u64, u32, u32, u64);
        let arg = Arg(0, 0, 0, ts.as_ptr() as u64);
        let to_submit = self.ring.submission().len() as u32;
        // SAFETY: `arg` and the timespec it points to outlive the call.
        let r = unsafe {
            self.ring.submitter().enter(
                to_submit,
                want as u32,
                GETEVENTS | EXT_ARG | ABS_TIMER,
                Some(&arg),
            )
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
            Err(e) => Err(format!(
                "io_uring_enter (absolute timeout, Linux 6.12): {e}"
            )),
        }
    }

    /// Submits what is queued and sleeps until `want` completions or `timeout`.
    fn wait(&mut self, want: usize, timeout: Option<Duration>) -> Result<(), String> {
        let r = match timeout {
            None => self.ring.submit_and_wait(want),
            Some(t) => {
                let ts = types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
            Err(e) => Err(format!("io_uring_enter: {e}")),
        }
    }
}

fn closed_loop(a: &Args) -> Result<String, String> {
    let mut c = Client::new(a)?;
    for i in 0..c.conns.len() {
        c.start(i)?;
    }
    let t0 = Instant::now();
    let end = t0 + a.duration;
    let mut ended = Vec::new();
    while Instant::now() < end {
        c.wait(1, Some(end.saturating_duration_since(Instant::now())))?;
        ended.clear();
        c.reap(a.mode, &mut ended)?;
        for &i in &ended {
            c.start(i)?;
        }
    }
    Ok(format!(
        "{{\"requests\":{},\"errors\":{},\"elapsed_s\":{:.6},\"stamped\":{}}}",
        c.requests,
        c.errors,
        t0.elapsed().as_secs_f64(),
        c.stamped
    ))
}

/// Open loop: wakes at most every `gap`, sends every arrival due (uniform arrivals at
/// `rate`) on a free connection, and reads the responses that came in meanwhile at the
/// next wake: one wake-up per gap, none per response (deferred task work).
fn open_loop(a: &Args) -> Result<String, String> {
    let mut c = Client::new(a)?;
    let period_ns = 1e9 / a.rate;
    let mut free: Vec<usize> = (0..c.conns.len()).rev().collect();
    let mut lag = vec![0u64; LAG_BUCKETS];
    let (mut released, mut unsent, mut in_flight, mut wakes) = (0u64, 0u64, 0usize, 0u64);
    let mut ended = Vec::new();
    let t0 = Instant::now();
    let mono0 = monotonic_ns();
    let end_ns = a.duration.as_nanos() as f64;
    loop {
        let now = t0.elapsed().as_nanos() as f64;
        if now >= end_ns {
            break;
        }
        while (released as f64) * period_ns <= now {
            let late_us = ((now - released as f64 * period_ns) / 1e3) as usize;
            lag[late_us.min(LAG_BUCKETS - 1)] += 1;
            released += 1;
            match free.pop() {
                Some(i) => {
                    c.start(i)?;
                    in_flight += 1;
                }
                None => unsent += 1,
            }
        }
        let next = (released as f64 * period_ns).max(now + a.gap.as_nanos() as f64);
        // Never woken by a response: only by the deadline (or when every request in
        // flight has ended).
        wakes += 1;
        if a.on_time {
            c.wait_until(in_flight + 1, mono0 + next as u64)?;
        } else {
            let sleep =
                Duration::from_nanos((next - t0.elapsed().as_nanos() as f64).max(0.0) as u64);
            c.wait(in_flight + 1, Some(sleep))?;
        }
        ended.clear();
        c.reap(a.mode, &mut ended)?;
        in_flight -= ended.len();
        free.extend_from_slice(&ended);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let total: u64 = lag.iter().sum();
    let p99 = {
        let want = (total as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        lag.iter()
            .position(|&n| {
                seen += n;
                seen >= want
            })
            .unwrap_or(0)
    };
    let max = lag.iter().rposition(|&n| n > 0).unwrap_or(0);
    Ok(format!(
        "{{\"requests\":{},\"errors\":{},\"elapsed_s\":{elapsed:.6},\"unsent\":{unsent},\
         \"wakes\":{wakes},\"stamped\":{},\"schedule_lag_ms\":{{\"p99\":{:.3},\"max\":{:.3}}}}}",
        c.requests,
        c.errors,
        c.stamped,
        p99 as f64 / 1e3,
        max as f64 / 1e3
    ))
}

/// `CLOCK_MONOTONIC` now, in ns (what `Instant` reads).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The receive timestamp (ns) among a `recvmsg`'s control messages `control`, if any.
fn receive_stamp(control: &[u8]) -> Option<u64> {
    // SAFETY: a header over the control bytes only (all else zero); CMSG_FIRSTHDR and
    // CMSG_NXTHDR stay inside them, and a timespec is read unaligned.
    unsafe {
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_control = control.as_ptr().cast_mut().cast();
        m.msg_controllen = control.len();
        let mut cm = libc::CMSG_FIRSTHDR(&m);
        while !cm.is_null() {
            if (*cm).cmsg_level == libc::SOL_SOCKET && (*cm).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cm).cast::<libc::timespec>());
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cm = libc::CMSG_NXTHDR(&m, cm);
        }
    }
    None
}

/// Asks the kernel to stamp what socket `fd` receives (`SO_TIMESTAMPNS`).
fn stamp_socket(fd: i32) -> Result<(), String> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt(2) with an int option value that lives across the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            std::ptr::addr_of!(on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(format!(
            "SO_TIMESTAMPNS: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Sleeps on the ring's timer every `gap` for `duration`, as the open loop does with no
/// load, and reports the thread CPU each wake-up cost.
fn wakes(a: &Args) -> Result<String, String> {
    let ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .map_err(|e| format!("io_uring refused (needs Linux 6.1+, not disabled): {e}"))?;
    let gap = types::Timespec::new()
        .sec(a.gap.as_secs())
        .nsec(a.gap.subsec_nanos());
    let args = types::SubmitArgs::new().timespec(&gap);
    let (t0, c0) = (Instant::now(), thread_cpu());
    let mut n = 0u64;
    while t0.elapsed() < a.duration {
        match ring.submitter().submit_with_args(1, &args) {
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => n += 1,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            r => return Err(format!("io_uring_enter: expected a timeout, got {r:?}")),
        }
    }
    let cpu = thread_cpu() - c0;
    Ok(format!(
        "{{\"wakes\":{n},\"gap_us\":{},\"elapsed_s\":{:.6},\"cpu_us_per_wake\":{:.2}}}",
        a.gap.as_micros(),
        t0.elapsed().as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / n.max(1) as f64
    ))
}

fn main() -> ExitCode {
    let run = parse_args().and_then(|a| match a.mode {
        Mode::Wakes => wakes(&a),
        Mode::Open => open_loop(&a),
        _ => closed_loop(&a),
    });
    match run {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loadlab-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A loopback server answering every request with `answer`; closes after each one if
    /// `close`. Stops when the client does (each connection is one thread).
    fn server(answer: &'static [u8], close: bool) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut have = Vec::new();
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => have.extend_from_slice(&buf[..n]),
                        }
                        while let Some(p) = have.windows(4).position(|w| w == b"\r\n\r\n") {
                            have.drain(..p + 4);
                            if s.write_all(answer).is_err() || close {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn args(mode: Mode, addr: SocketAddr) -> Args {
        Args {
            mode,
            addr,
            connections: 2,
            duration: Duration::from_millis(300),
            rate: 2_000.0,
            gap: Duration::from_micros(200),
            stamp: false,
            multishot: false,
            on_time: false,
        }
    }

    /// Runs `a` in its mode (open or closed loop) and returns its JSON.
    fn run(a: &Args) -> String {
        match a.mode {
            Mode::Open => open_loop(a),
            _ => closed_loop(a),
        }
        .unwrap()
    }

    fn field(json: &str, name: &str) -> f64 {
        let at = json.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
        let end = json[at..].find([',', '}']).unwrap() + at;
        json[at..end].parse().unwrap()
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    #[test]
    fn responses_are_complete_only_with_their_whole_body() {
        assert_eq!(complete(OK), Some(Ok(OK.len())));
        assert_eq!(complete(&OK[..OK.len() - 1]), None);
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\nContent-"), None);
        assert_eq!(
            complete(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"),
            Some(Err(()))
        );
        assert_eq!(
            complete(b"HTTP/1.1 200 OK\r\n\r\n"),
            Some(Err(())),
            "no length"
        );
    }

    #[test]
    fn keep_alive_counts_every_answer_on_its_connections() {
        let out = closed_loop(&args(Mode::KeepAlive, server(OK, false))).unwrap();
        assert!(field(&out, "requests") > 10.0, "{out}");
        assert_eq!(field(&out, "errors"), 0.0, "{out}");
    }

    #[test]
    fn without_keep_alive_every_request_has_its_own_connection() {
        let out = closed_loop(&args(Mode::Close, server(OK, true))).unwrap();
        assert!(field(&out, "requests") > 10.0, "{out}");
        assert_eq!(field(&out, "errors"), 0.0, "{out}");
    }

    #[test]
    fn a_failing_server_is_an_error_not_a_request() {
        let bad = server(b"HTTP/1.1 503 No\r\nContent-Length: 0\r\n\r\n", false);
        let e = closed_loop(&args(Mode::KeepAlive, bad)).unwrap_err();
        assert!(e.contains("bad or failed response"), "{e}");
        // Refused connections: counted as errors, none as requests.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = l.local_addr().unwrap();
        drop(l);
        let out = closed_loop(&args(Mode::Close, gone)).unwrap();
        assert_eq!(field(&out, "requests"), 0.0, "{out}");
        assert!(field(&out, "errors") > 0.0, "{out}");
    }

    #[test]
    fn open_loop_sends_at_its_rate_and_reports_its_lag() {
        // 2,000 per second for 0.3 s: 600 arrivals, the last ones' answers maybe unread.
        let out = open_loop(&args(Mode::Open, server(OK, false))).unwrap();
        let (requests, unsent) = (field(&out, "requests"), field(&out, "unsent"));
        assert!((550.0..=601.0).contains(&(requests + unsent)), "{out}");
        assert!(
            field(&out, "p99") >= 0.0 && field(&out, "max") >= field(&out, "p99"),
            "{out}"
        );
        assert_eq!(field(&out, "stamped"), 0.0, "{out}");
    }

    #[test]
    fn on_time_the_open_loop_sleeps_to_absolute_deadlines_and_still_ends() {
        // The same 600 arrivals with `--on-time`: a deadline read on the wrong clock would
        // sleep past the run's end, or never sleep.
        let a = Args {
            on_time: true,
            ..args(Mode::Open, server(OK, false))
        };
        let out = open_loop(&a).unwrap();
        let (requests, unsent) = (field(&out, "requests"), field(&out, "unsent"));
        assert!((550.0..=601.0).contains(&(requests + unsent)), "{out}");
        // At most one wake-up per 200 µs gap in 0.3 s: a deadline already past would spin.
        assert!((1.0..=1_501.0).contains(&field(&out, "wakes")), "{out}");
    }

    /// A loopback TCP pair whose receiver asks for timestamps, returned once a byte it
    /// received came with one. Linux turns receive timestamping on in deferred work after the
    /// first socket asks (`net_enable_timestamp`), and TCP gives no timestamp for a packet that
    /// arrived before: held open, this pair keeps it on, so a test's own sockets see every
    /// packet stamped from their first.
    fn timestamps_on() -> (std::net::TcpStream, std::net::TcpStream) {
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        stamp_socket(rx.as_raw_fd()).unwrap();
        for _ in 0..200 {
            tx.write_all(b"x").unwrap();
            let mut byte = [0u8; 1];
            let mut control = [0u64; 8];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            // SAFETY: a zeroed msghdr pointing at `iov` and `control`, which outlive the call.
            let stamped = unsafe {
                let mut hdr: libc::msghdr = std::mem::zeroed();
                hdr.msg_iov = &mut iov;
                hdr.msg_iovlen = 1;
                hdr.msg_control = control.as_mut_ptr().cast();
                hdr.msg_controllen = std::mem::size_of_val(&control);
                assert_eq!(libc::recvmsg(rx.as_raw_fd(), &mut hdr, 0), 1);
                !libc::CMSG_FIRSTHDR(&hdr).is_null()
            };
            if stamped {
                return (tx, rx);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no TCP receive timestamp in 2 s after SO_TIMESTAMPNS");
    }

    #[test]
    fn with_stamp_every_response_is_read_with_its_receive_timestamp() {
        let _on = timestamps_on();
        for mode in [Mode::Open, Mode::KeepAlive, Mode::Close] {
            let a = Args {
                stamp: true,
                ..args(mode, server(OK, mode == Mode::Close))
            };
            let out = run(&a);
            let requests = field(&out, "requests");
            assert!(requests > 0.0, "{out}");
            // One receive per response here (a small answer): each came with a timestamp.
            assert!(field(&out, "stamped") >= requests, "{out}");
        }
    }

    #[test]
    fn multishot_receives_read_every_response_with_or_without_stamps() {
        let _on = timestamps_on();
        for stamp in [false, true] {
            for mode in [Mode::Open, Mode::KeepAlive] {
                let a = Args {
                    stamp,
                    multishot: true,
                    ..args(mode, server(OK, false))
                };
                let out = run(&a);
                let requests = field(&out, "requests");
                assert!(requests > 10.0, "{out}");
                assert_eq!(field(&out, "errors"), 0.0, "{out}");
                let stamped = field(&out, "stamped");
                assert!(
                    if stamp {
                        stamped >= requests
                    } else {
                        stamped == 0.0
                    },
                    "{out}"
                );
            }
        }
        // A bad answer ends the run with an error, as without the option.
        let a = Args {
            multishot: true,
            ..args(
                Mode::KeepAlive,
                server(b"HTTP/1.1 503 No\r\nContent-Length: 0\r\n\r\n", false),
            )
        };
        assert!(closed_loop(&a)
            .unwrap_err()
            .contains("bad or failed response"));
    }

    #[test]
    fn a_timer_wake_up_is_counted() {
        let mut a = args(Mode::Wakes, "127.0.0.1:1".parse().unwrap());
        a.duration = Duration::from_millis(100);
        let out = wakes(&a).unwrap();
        // At most one wake-up per 200 µs gap in 100 ms.
        assert!((1.0..=500.0).contains(&field(&out, "wakes")), "{out}");
        assert!(field(&out, "cpu_us_per_wake") > 0.0, "{out}");
    }
}
