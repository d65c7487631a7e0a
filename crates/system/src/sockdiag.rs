//! The kernel's socket-diagnostics interface (`NETLINK_SOCK_DIAG`, what `ss` reads): the
//! listening TCP sockets of a network namespace, each with its accept queue now, its
//! backlog and the connections it dropped. `/proc/net/tcp` shows the queue but neither the
//! backlog nor the drops, and the kernel's `ListenOverflows` counter is the whole
//! namespace's: a drop counted on a socket is that listener's own, whoever else listens
//! beside it (a proxy's upstream, another test, a service on the same host).
//!
//! The messages are read and written as bytes here and nowhere else (the layouts of
//! `linux/netlink.h`, `linux/inet_diag.h` and `linux/sock_diag.h`); the calls are
//! `rustix`'s.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{
    netlink, socket_with, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType,
};

/// A listening TCP socket as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListeningSocket {
    /// The address it listens on.
    pub local: SocketAddr,
    /// Its inode (what `/proc/PID/fd/N` links to as `socket:[INODE]`).
    pub inode: u64,
    /// Connections in its accept queue now, established and not yet accepted.
    pub queued: u32,
    /// The most its accept queue holds: the backlog passed to `listen`, capped by
    /// `net.core.somaxconn`.
    pub backlog: u32,
    /// Connections it dropped so far (the socket's `sk_drops`: a handshake its full accept
    /// queue refused counts here as in the namespace's `ListenOverflows`).
    pub drops: u32,
}

/// `SOCK_DIAG_BY_FAMILY`, the request type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLM_F_REQUEST | NLM_F_DUMP`.
const DUMP_REQUEST: u16 = 0x1 | 0x300;
/// `NLMSG_ERROR` and `NLMSG_DONE`.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `INET_DIAG_SKMEMINFO`, the attribute holding the socket's memory figures, whose
/// `SK_MEMINFO_DROPS`-th `u32` is its drops.
const INET_DIAG_SKMEMINFO: u16 = 7;
const SK_MEMINFO_DROPS: usize = 8;
/// The kernel's TCP state number of LISTEN.
const TCP_LISTEN: u32 = 10;
/// Sizes of `struct nlmsghdr`, `struct inet_diag_req_v2` and `struct inet_diag_msg`.
const NLMSG_HEADER: usize = 16;
const REQUEST: usize = 56;
const DIAG_MSG: usize = 72;

/// The listening TCP sockets (IPv4 and IPv6) of the network namespace of process `pid`:
/// opened in that namespace when it is not this process's (which takes `CAP_SYS_ADMIN`).
/// Errs when the interface cannot be opened or answers with an error.
pub fn listening_sockets_of(pid: u32) -> io::Result<Vec<ListeningSocket>> {
    let socket = diag_socket_in(pid)?;
    let mut out = dump(&socket, libc::AF_INET as u8)?;
    out.extend(dump(&socket, libc::AF_INET6 as u8)?);
    Ok(out)
}

/// A socket-diagnostics socket in `pid`'s network namespace: this thread's when it is the
/// same one, else made on a thread that moves into it (a socket keeps the namespace it
/// was made in).
fn diag_socket_in(pid: u32) -> io::Result<OwnedFd> {
    let open = || -> io::Result<OwnedFd> {
        Ok(socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )?)
    };
    let theirs = format!("/proc/{pid}/ns/net");
    if std::fs::read_link(&theirs)? == std::fs::read_link("/proc/self/ns/net")? {
        return open();
    }
    let ns = std::fs::File::open(&theirs)?;
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            open()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
    })
}

/// Asks for every listening socket of `family` and reads the answers to the end.
fn dump(socket: &OwnedFd, family: u8) -> io::Result<Vec<ListeningSocket>> {
    send_all(socket, &request(family))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, _) = rustix::net::recv(socket, &mut buf[..], RecvFlags::empty())?;
        if n == 0 {
            return Err(io::Error::other(
                "socket diagnostics: the answer ended early",
            ));
        }
        match parse_messages(&buf[..n], &mut out)? {
            Parsed::Done => return Ok(out),
            Parsed::More => {}
        }
    }
}

fn send_all(socket: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    let sent = rustix::net::send(socket, msg, SendFlags::empty())?;
    if sent != msg.len() {
        return Err(io::Error::other("socket diagnostics: the request was cut"));
    }
    Ok(())
}

/// A dump request for the listening TCP sockets of `family`, with their memory figures.
fn request(family: u8) -> Vec<u8> {
    let len = NLMSG_HEADER + REQUEST;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&DUMP_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
    m.push(family);
    m.push(libc::IPPROTO_TCP as u8);
    m.push(1 << (INET_DIAG_SKMEMINFO - 1)); // the extensions asked for
    m.push(0);
    m.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes()); // the states asked for
    m.resize(len, 0); // the socket id: any
    m
}

enum Parsed {
    Done,
    More,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Netlink aligns each message and attribute to 4 bytes.
fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// Reads the netlink messages of one datagram into `out`: `Done` at `NLMSG_DONE`, an
/// error at `NLMSG_ERROR` (the kernel's errno) or at a message too short for its header.
fn parse_messages(mut b: &[u8], out: &mut Vec<ListeningSocket>) -> io::Result<Parsed> {
    let short = || io::Error::other("socket diagnostics: a message shorter than its header");
    while b.len() >= NLMSG_HEADER {
        let len = u32_at(b, 0).ok_or_else(short)? as usize;
        let kind = u16_at(b, 4).ok_or_else(short)?;
        if len < NLMSG_HEADER || len > b.len() {
            return Err(short());
        }
        let body = &b[NLMSG_HEADER..len];
        match kind {
            NLMSG_DONE => return Ok(Parsed::Done),
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).ok_or_else(short)? as i32;
                return Err(io::Error::from_raw_os_error(-errno));
            }
            SOCK_DIAG_BY_FAMILY => out.extend(parse_diag_msg(body)),
            _ => {}
        }
        b = &b[align(len).min(b.len())..];
    }
    Ok(Parsed::More)
}

/// One `struct inet_diag_msg` and its attributes.
fn parse_diag_msg(b: &[u8]) -> Option<ListeningSocket> {
    if b.len() < DIAG_MSG {
        return None;
    }
    let port = u16::from_be_bytes([b[4], b[5]]);
    let ip = match b[0] as i32 {
        libc::AF_INET => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&b[8..12]).ok()?)),
        libc::AF_INET6 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&b[8..24]).ok()?)),
        _ => return None,
    };
    let mut drops = 0;
    let mut attrs = &b[DIAG_MSG..];
    while attrs.len() >= 4 {
        let len = u16_at(attrs, 0)? as usize;
        let kind = u16_at(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            break;
        }
        if kind == INET_DIAG_SKMEMINFO {
            drops = u32_at(&attrs[4..len], 4 * SK_MEMINFO_DROPS).unwrap_or(0);
        }
        attrs = &attrs[align(len).min(attrs.len())..];
    }
    Some(ListeningSocket {
        local: SocketAddr::new(ip, port),
        queued: u32_at(b, 56)?,
        backlog: u32_at(b, 60)?,
        inode: u64::from(u32_at(b, 68)?),
        drops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    fn mine(port: u16) -> ListeningSocket {
        listening_sockets_of(std::process::id())
            .unwrap()
            .into_iter()
            .find(|s| s.local.port() == port)
            .expect("its own listener listed")
    }

    #[test]
    fn a_full_accept_queue_counts_its_drops_on_its_own_listener_and_no_other() {
        // A listener with a backlog of 1 that accepts nothing, and one beside it that
        // overflows nothing: connecting eight times to the first fills its queue (the
        // kernel holds backlog + 1) and the handshakes it refuses count as its drops.
        let full = TcpListener::bind("127.0.0.1:0").unwrap();
        rustix::net::listen(&full, 1).unwrap(); // listen again: the backlog is now 1
        let port = full.local_addr().unwrap().port();
        let calm = TcpListener::bind("127.0.0.1:0").unwrap();
        let calm_port = calm.local_addr().unwrap().port();
        let before = mine(port);
        assert_eq!((before.backlog, before.queued, before.drops), (1, 0, 0));
        let mut clients = Vec::new();
        for _ in 0..8 {
            let c = socket_with(
                AddressFamily::INET,
                SocketType::STREAM,
                SocketFlags::NONBLOCK,
                None,
            )
            .unwrap();
            let _ = rustix::net::connect(&c, &SocketAddr::from(([127, 0, 0, 1], port)));
            clients.push(c);
        }
        // Each refused final ACK counts once; the client retries it after its timeout.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut now = mine(port);
        while now.drops == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            now = mine(port);
        }
        assert!(now.drops > 0, "no drops counted: {now:?}");
        assert_eq!(now.queued, 2, "{now:?}");
        let link = std::fs::read_link(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            full.as_raw_fd()
        }))
        .unwrap();
        let inode = crate::discover::parse_socket_link(&link.to_string_lossy());
        assert_eq!(Some(now.inode), inode);
        let other = mine(calm_port);
        assert_eq!((other.queued, other.drops), (0, 0), "{other:?}");
        assert!(other.backlog > 1, "{other:?}");
    }

    #[test]
    fn a_message_cut_short_is_an_error_not_a_listener() {
        let mut out = Vec::new();
        let mut m = request(libc::AF_INET as u8);
        m[0..4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(parse_messages(&m, &mut out).is_err());
        assert!(out.is_empty());
    }
}
