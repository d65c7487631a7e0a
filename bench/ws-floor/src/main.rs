//! The WebSocket floor: what a WebSocket client cannot spend less than per message on this
//! machine.
//!
//! `bench/streams.sh` runs it beside loadlab, k6 and Artillery, under the same `taskset` and
//! GNU `time`, so loadlab's CPU per message can be read against the least any client spends
//! here. It does the least a client can: `--connections` connections opened and upgraded
//! (RFC 6455 handshake, blocking) before the clock starts, then one thread, open loop:
//!
//! - arrivals are uniform at `--rate`; the thread sleeps to each release's deadline as an
//!   absolute time (`clock_nanosleep`, at most one wake-up per `--gap-us`, as loadlab's paced
//!   dispatcher does), never woken by a reply;
//! - at each wake-up, one `epoll_wait` with no timeout collects the connections with replies,
//!   each read once (a read shorter than the buffer drained the socket), its frames walked by
//!   their headers only (a text or binary frame with FIN set is a reply; nothing is decoded,
//!   copied or checked);
//! - every arrival due is sent on a connection with no message in flight (one in flight per
//!   connection, as loadlab) by one `write` of a frame built and masked once, before the
//!   clock started (the same mask key every time: a real client draws one per frame);
//! - nothing is recorded but counts: no latency, no histogram.
//!
//! After `--duration`, it waits up to 2 s for the replies still in flight (so that
//! `replies` can be checked against `sent`) and prints one JSON object: sent, replies,
//! errors, unsent (arrivals that found every connection busy), wakes and elapsed_s (the
//! sending span).
//!
//! ```text
//! loadlab-ws-floor --addr 127.0.0.1:PORT [--path /] [--connections 64] [--duration 10]
//!                  [--rate 10000] [--body hello] [--gap-us 200] [--woken]
//! ```
//!
//! `--woken`: the thread blocks in `epoll_wait` on the connections and a timerfd armed to
//! the next release, so each reply is read when it arrives, as a client that times its
//! replies must (loadlab does): one wake-up per reply more than without it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    addr: SocketAddr,
    path: String,
    connections: usize,
    duration: Duration,
    rate: f64,
    body: Vec<u8>,
    gap: Duration,
    /// Woken by replies as they come (a timerfd in the same epoll set for the releases).
    woken: bool,
}

fn usage() -> String {
    "usage: loadlab-ws-floor --addr HOST:PORT [--path /] [--connections N] [--duration SECONDS] \
     [--rate MSG_PER_S] [--body TEXT] [--gap-us MICROSECONDS] [--woken]"
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        addr: "127.0.0.1:0".parse().unwrap(),
        path: "/".into(),
        connections: 64,
        duration: Duration::from_secs(10),
        rate: 10_000.0,
        body: b"hello".to_vec(),
        gap: Duration::from_micros(200),
        woken: false,
    };
    let mut have_addr = false;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "-h" || k == "--help" {
            return Err(usage());
        }
        if k == "--woken" {
            a.woken = true;
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| format!("{k} needs a value\n{}", usage()))?;
        let bad = |e: &dyn std::fmt::Display| format!("{k} {v}: {e}");
        match k.as_str() {
            "--addr" => {
                a.addr = v.parse().map_err(|e| bad(&e))?;
                have_addr = true;
            }
            "--path" => a.path = v,
            "--connections" => a.connections = v.parse().map_err(|e| bad(&e))?,
            "--duration" => a.duration = Duration::from_secs_f64(v.parse().map_err(|e| bad(&e))?),
            "--rate" => a.rate = v.parse().map_err(|e| bad(&e))?,
            "--body" => a.body = v.into_bytes(),
            "--gap-us" => a.gap = Duration::from_micros(v.parse().map_err(|e| bad(&e))?),
            _ => return Err(format!("unknown option {k}\n{}", usage())),
        }
    }
    if !have_addr {
        return Err(usage());
    }
    if a.connections == 0 || a.connections > 1_000_000 || a.rate.is_nan() || a.rate <= 0.0 {
        return Err("--connections and --rate must be positive".into());
    }
    Ok(a)
}

/// A client text frame of `body`, FIN set, masked with a fixed key.
fn frame(body: &[u8]) -> Vec<u8> {
    const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![0x81];
    match body.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n < 65_536 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&KEY);
    f.extend(body.iter().enumerate().map(|(i, b)| b ^ KEY[i % 4]));
    f
}

/// Opens and upgrades one connection (blocking), then makes it non-blocking.
fn connect(a: &Args) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(a.addr).map_err(|e| format!("connect {}: {e}", a.addr))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        a.path, a.addr
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    // Read the response byte by byte up to its blank line: nothing of the frames after it
    // is taken (the server sends none before our first message anyway).
    let mut head = Vec::with_capacity(256);
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            Ok(_) => return Err("handshake: connection closed".into()),
            Err(e) => return Err(format!("handshake: {e}")),
        }
        if head.len() > 16 * 1024 {
            return Err("handshake: response head over 16 KiB".into());
        }
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        let line = String::from_utf8_lossy(&head);
        return Err(format!(
            "handshake refused: {}",
            line.lines().next().unwrap_or("")
        ));
    }
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// The outcome of walking a connection's received bytes.
enum Walk {
    /// Replies (complete data frames) seen, and the bytes taken (a partial frame's are not).
    Replies(u64, usize),
    /// A close frame: the connection is done.
    Closed,
}

/// Walks the server frames in `buf` by their headers: counts complete data frames with FIN
/// set, skips the rest, stops before a partial frame.
fn walk(buf: &[u8]) -> Walk {
    let mut at = 0;
    let mut replies = 0;
    loop {
        let rest = &buf[at..];
        if rest.len() < 2 {
            break;
        }
        let (b0, b1) = (rest[0], rest[1]);
        let (mut hdr, mut len) = (2usize, (b1 & 0x7f) as usize);
        if len == 126 {
            if rest.len() < 4 {
                break;
            }
            len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
            hdr = 4;
        } else if len == 127 {
            if rest.len() < 10 {
                break;
            }
            len = u64::from_be_bytes(rest[2..10].try_into().unwrap()) as usize;
            hdr = 10;
        }
        if b1 & 0x80 != 0 {
            hdr += 4; // a masked server frame: not allowed, but skip it whole
        }
        if rest.len() < hdr + len {
            break;
        }
        match b0 & 0x0f {
            8 => return Walk::Closed,
            // text, binary or the last continuation: one reply when FIN is set
            0..=2 if b0 & 0x80 != 0 => replies += 1,
            _ => {} // a fragment, a ping or a pong
        }
        at += hdr + len;
    }
    Walk::Replies(replies, at)
}

struct Conn {
    s: TcpStream,
    busy: bool,
    /// A partial frame's bytes, carried to the next read (rare: replies are small).
    rest: Vec<u8>,
}

fn run(a: &Args) -> Result<String, String> {
    let msg = frame(&a.body);
    let mut conns = Vec::with_capacity(a.connections);
    for _ in 0..a.connections {
        conns.push(Conn {
            s: connect(a)?,
            busy: false,
            rest: Vec::new(),
        });
    }
    // SAFETY: plain system calls on descriptors this function owns.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(format!(
            "epoll_create1: {}",
            std::io::Error::last_os_error()
        ));
    }
    for (i, c) in conns.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: `ev` is a valid event; the descriptor is open.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c.s.as_raw_fd(), &mut ev) } < 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
    }
    const TIMER: u64 = u64::MAX;
    let mut tfd = -1;
    if a.woken {
        // SAFETY: plain system calls; `ev` is a valid event.
        tfd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: TIMER,
        };
        if tfd < 0 || unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, tfd, &mut ev) } < 0 {
            return Err(format!("timerfd: {}", std::io::Error::last_os_error()));
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; a.connections.min(4096) + 1];
    let mut free: Vec<usize> = (0..conns.len()).rev().collect();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut sent, mut replies, mut errors, mut unsent, mut wakes) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut released = 0u64;
    let period_ns = 1e9 / a.rate;
    let gap_ns = a.gap.as_nanos() as f64;
    let end_ns = a.duration.as_nanos() as f64;
    let t0 = Instant::now();
    let mono0 = monotonic_ns();
    let mut draining_until: Option<f64> = None;
    let mut armed = 0u64;
    wait_until(tfd, &mut armed, mono0); // --woken: the first release is due now
    loop {
        // Replies that came in since the last wake-up (--woken: block until a reply or the
        // timer).
        let timeout = if a.woken { -1 } else { 0 };
        // SAFETY: `events` has room for its length.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, timeout) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("epoll_wait: {e}"));
            }
        }
        for ev in &events[..n.max(0) as usize] {
            if ev.u64 == TIMER {
                let mut x = [0u8; 8];
                // SAFETY: reads the timerfd's 8-byte expiry count into `x`.
                unsafe { libc::read(tfd, x.as_mut_ptr().cast(), 8) };
                continue;
            }
            let i = ev.u64 as usize;
            let c = &mut conns[i];
            let got = match c.s.read(&mut buf) {
                Ok(0) => {
                    errors += 1;
                    // SAFETY: the descriptor is open; removing it stops its readiness.
                    unsafe {
                        libc::epoll_ctl(
                            ep,
                            libc::EPOLL_CTL_DEL,
                            c.s.as_raw_fd(),
                            std::ptr::null_mut(),
                        )
                    };
                    c.busy = true; // never used again
                    continue;
                }
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => {
                    errors += 1;
                    unsafe {
                        libc::epoll_ctl(
                            ep,
                            libc::EPOLL_CTL_DEL,
                            c.s.as_raw_fd(),
                            std::ptr::null_mut(),
                        )
                    };
                    c.busy = true;
                    continue;
                }
            };
            let w = if c.rest.is_empty() {
                // The usual case: walk the bytes where they were read.
                let w = walk(&buf[..got]);
                if let Walk::Replies(_, took) = w {
                    c.rest.extend_from_slice(&buf[took..got]);
                }
                w
            } else {
                c.rest.extend_from_slice(&buf[..got]);
                let w = walk(&c.rest);
                if let Walk::Replies(_, took) = w {
                    c.rest.drain(..took);
                }
                w
            };
            match w {
                Walk::Replies(k, _) if k > 0 => {
                    replies += k;
                    if c.busy {
                        c.busy = false;
                        free.push(i);
                    }
                }
                Walk::Replies(..) => {}
                Walk::Closed => {
                    errors += 1;
                    unsafe {
                        libc::epoll_ctl(
                            ep,
                            libc::EPOLL_CTL_DEL,
                            c.s.as_raw_fd(),
                            std::ptr::null_mut(),
                        )
                    };
                    c.busy = true;
                }
            }
        }
        // The time after the wait (--woken blocks in it).
        let now = t0.elapsed().as_nanos() as f64;
        if draining_until.is_none() && now >= end_ns {
            draining_until = Some(now + 2e9);
        }
        if let Some(until) = draining_until {
            if replies + errors >= sent || now >= until {
                break;
            }
            wait_until(tfd, &mut armed, mono0 + (now + gap_ns) as u64);
            continue;
        }
        // Every arrival due, on a connection with nothing in flight.
        while (released as f64) * period_ns <= now {
            released += 1;
            match free.pop() {
                Some(i) => {
                    let c = &mut conns[i];
                    match c.s.write(&msg) {
                        Ok(k) if k == msg.len() => {
                            c.busy = true;
                            sent += 1;
                        }
                        _ => {
                            // A short or failed write: the frame cannot be finished cheaply;
                            // count it and retire the connection.
                            errors += 1;
                            c.busy = true;
                        }
                    }
                }
                None => unsent += 1,
            }
        }
        let next = (released as f64 * period_ns).max(now + gap_ns).min(end_ns);
        wakes += 1;
        wait_until(tfd, &mut armed, mono0 + next as u64);
    }
    let elapsed = a.duration.as_secs_f64().min(t0.elapsed().as_secs_f64());
    // SAFETY: `ep` is ours.
    unsafe { libc::close(ep) };
    Ok(format!(
        "{{\"sent\":{sent},\"replies\":{replies},\"errors\":{errors},\"unsent\":{unsent},\
         \"wakes\":{wakes},\"elapsed_s\":{elapsed:.6},\"connections\":{}}}",
        conns.len()
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

/// Without a timerfd (`tfd` < 0), sleeps to the absolute `CLOCK_MONOTONIC` time `ns`; with
/// one, arms it to `ns` unless it is armed there already (`armed`): the next `epoll_wait`
/// returns by then, or sooner on a reply.
fn wait_until(tfd: i32, armed: &mut u64, ns: u64) {
    if tfd < 0 {
        return sleep_until(ns);
    }
    if *armed == ns {
        return;
    }
    *armed = ns;
    let t = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000).max(1) as libc::c_long,
        },
    };
    // SAFETY: `t` is a valid itimerspec; no old value is asked for.
    unsafe { libc::timerfd_settime(tfd, libc::TFD_TIMER_ABSTIME, &t, std::ptr::null_mut()) };
}

/// Sleeps to the absolute `CLOCK_MONOTONIC` time `ns` (at once if it has passed).
fn sleep_until(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is valid; no remainder is asked for with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| run(&a)) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loadlab-ws-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_masked_and_walked_by_their_headers() {
        let f = frame(b"hello");
        assert_eq!(&f[..2], &[0x81, 0x85]);
        let unmasked: Vec<u8> = f[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ f[2 + i % 4])
            .collect();
        assert_eq!(unmasked, b"hello");
        // Two server text frames, a ping, and half of a third frame.
        let v = [0x81, 2, b'o', b'k', 0x89, 0, 0x82, 1, b'x', 0x81, 5, b'a'];
        match walk(&v) {
            Walk::Replies(n, took) => assert_eq!((n, took), (2, 9)),
            Walk::Closed => panic!("no close frame"),
        }
        assert!(matches!(walk(&[0x88, 0]), Walk::Closed));
    }
}
