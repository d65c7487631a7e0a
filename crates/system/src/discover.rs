//! Finding the process to probe when loadlab did not start it: by the port it listens on
//! (`/proc/net/tcp`, `/proc/net/tcp6` and the `socket:[INODE]` links of `/proc/*/fd`), or
//! by a pid file. The files are parsed here and nowhere else.
//!
//! Only sockets of this network namespace are listed in `/proc/net/tcp`: a server in a
//! container with a network namespace of its own (docker's default bridge network) is
//! not found by its port from the host, even when the port is published (docker-proxy
//! or the NAT rules listen, not the server). Find such a server by its container
//! ([`crate::cgroup::Cgroup::for_container`]) or its pid instead; its kernel counters are
//! then read from its own namespace ([`crate::probe::sample_kernel_of`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::procfs;

/// The kernel's TCP state number of LISTEN (`0A` in `/proc/net/tcp`).
const TCP_LISTEN: u8 = 0x0A;
/// The kernel's TCP state number of ESTABLISHED (`01`).
const TCP_ESTABLISHED: u8 = 0x01;

/// A process holding a listening socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The process.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`; empty when it could not be read).
    pub comm: String,
    /// The address the socket listens on (`0.0.0.0:8080`, `[::]:8080`).
    pub addr: SocketAddr,
    /// The socket's inode.
    pub inode: u64,
}

/// One socket line of `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TcpSocket {
    /// The local address.
    pub local: SocketAddr,
    /// The remote address (`0.0.0.0:0` for a listening socket).
    pub remote: SocketAddr,
    /// The kernel's TCP state number (`0x0A` = LISTEN).
    pub state: u8,
    /// The socket's inode (0 for sockets no file refers to, such as TIME_WAIT).
    pub inode: u64,
}

/// Parses `/proc/net/tcp` or `/proc/net/tcp6` (the header line is skipped). An address is
/// hex words of the kernel's memory (`0100007F:1F90` is 127.0.0.1:8080 on a little-endian
/// machine): each 32-bit word is printed as a number, so its bytes are read back in the
/// machine's byte order; the port is printed as a number.
pub(crate) fn parse_proc_net_tcp(text: &str) -> Vec<TcpSocket> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(TcpSocket {
                local: parse_hex_addr(f.get(1)?)?,
                remote: parse_hex_addr(f.get(2)?)?,
                state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// `0100007F:1F90` or `00000000000000000000000001000000:1F90`.
fn parse_hex_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for i in (0..ip.len()).step_by(8) {
        let word = u32::from_str_radix(ip.get(i..i + 8)?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The socket inode of an fd link (`socket:[12345]`).
pub(crate) fn parse_socket_link(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The socket inodes the processes `pids` hold open (their `socket:[INODE]` fd links; a
/// process whose files cannot be read adds none).
pub(crate) fn socket_inodes(pids: &[u32]) -> BTreeSet<u64> {
    let mut held = BTreeSet::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        held.extend(fds.flatten().filter_map(|fd| {
            parse_socket_link(&std::fs::read_link(fd.path()).ok()?.to_string_lossy())
        }));
    }
    held
}

/// The TCP sockets (IPv4 and IPv6) of the network namespace of process `ns_of`
/// (`/proc/PID/net/tcp{,6}`); empty where they cannot be read.
pub(crate) fn tcp_sockets(ns_of: u32) -> Vec<TcpSocket> {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/proc/{ns_of}/net/{f}")).ok())
        .flat_map(|t| parse_proc_net_tcp(&t))
        .collect()
}

/// Of `sockets`, those `held` ([`socket_inodes`]): a process tree's own.
pub(crate) fn held_sockets<'a>(
    sockets: &'a [TcpSocket],
    held: &BTreeSet<u64>,
) -> Vec<&'a TcpSocket> {
    sockets
        .iter()
        .filter(|s| s.inode != 0 && held.contains(&s.inode))
        .collect()
}

/// The ports a process tree's own sockets ([`held_sockets`]) listen on.
pub(crate) fn listening_ports(mine: &[&TcpSocket]) -> BTreeSet<u16> {
    mine.iter()
        .filter(|s| s.state == TCP_LISTEN)
        .map(|s| s.local.port())
        .collect()
}

/// The TCP connections a process tree opened to others (a proxy's upstreams, an
/// application's database): of its own sockets ([`held_sockets`]), the established ones
/// whose local port is none it listens on, counted by the address they connect to.
pub(crate) fn outgoing(mine: &[&TcpSocket]) -> BTreeMap<SocketAddr, u64> {
    let listening = listening_ports(mine);
    let mut out = BTreeMap::new();
    for s in mine
        .iter()
        .filter(|s| s.state == TCP_ESTABLISHED && !listening.contains(&s.local.port()))
    {
        *out.entry(s.remote).or_insert(0) += 1;
    }
    out
}

/// The listening sockets on `port` in this network namespace: inode → address.
fn listening_sockets(port: u16) -> BTreeMap<u64, SocketAddr> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| parse_proc_net_tcp(&t))
        .filter(|s| s.state == TCP_LISTEN && s.local.port() == port && s.inode != 0)
        .map(|s| (s.inode, s.local))
        .collect()
}

/// Every process holding a socket that listens on TCP `port` in this network namespace,
/// with the address it listens on: one entry per process and socket, by pid. A pre-fork
/// server's master and workers all hold the socket. Empty when nothing listens there (or
/// the listener is in another network namespace: see the module's documentation).
pub fn listening_pids(port: u16) -> Vec<Listener> {
    let sockets = listening_sockets(port);
    if sockets.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    let mut pids: Vec<u32> = procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let mut held = BTreeSet::new();
        for fd in fds.flatten() {
            let inode = std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| parse_socket_link(&l.to_string_lossy()));
            if let Some(inode) = inode.filter(|i| sockets.contains_key(i)) {
                held.insert(inode);
            }
        }
        if held.is_empty() {
            continue;
        }
        let comm = procfs::comm(pid).unwrap_or_default();
        for inode in held {
            out.push(Listener {
                pid,
                comm: comm.clone(),
                addr: sockets[&inode],
                inode,
            });
        }
    }
    out
}

/// The root of the process tree listening on `port`: of the processes holding the socket,
/// the one whose parent does not (a pre-fork server's master, not its workers); the
/// lowest pid when there are several. `None` when nothing listens there.
pub fn listener_root(port: u16) -> Option<(u32, String)> {
    let holders: BTreeMap<u32, String> = listening_pids(port)
        .into_iter()
        .map(|l| (l.pid, l.comm))
        .collect();
    let parents: BTreeMap<u32, u32> = holders
        .keys()
        .filter_map(|&p| Some((p, procfs::read_stat(p).ok()?.ppid)))
        .collect();
    tree_root(&holders, &parents)
}

/// Of `holders`, the lowest pid whose parent (in `parents`) is not a holder.
fn tree_root(
    holders: &BTreeMap<u32, String>,
    parents: &BTreeMap<u32, u32>,
) -> Option<(u32, String)> {
    holders
        .iter()
        .find(|(pid, _)| parents.get(pid).is_none_or(|pp| !holders.contains_key(pp)))
        .or_else(|| holders.iter().next())
        .map(|(p, c)| (*p, c.clone()))
}

/// Why a pid file gave no pid.
#[derive(Debug, Error)]
pub enum PidfileError {
    /// The file could not be read.
    #[error("cannot read pid file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file does not hold a pid.
    #[error("pid file {path} holds {content:?}, not a process id")]
    NotAPid {
        /// The file.
        path: PathBuf,
        /// What it holds (at most 80 characters).
        content: String,
    },
}

/// The pid in a pid file: a decimal number, surrounding white space ignored.
pub fn read_pidfile(path: &Path) -> Result<u32, PidfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| PidfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_pidfile(&text).ok_or_else(|| PidfileError::NotAPid {
        path: path.to_path_buf(),
        content: text.chars().take(80).collect(),
    })
}

/// A pid file's content: a positive decimal number.
pub(crate) fn parse_pidfile(text: &str) -> Option<u32> {
    text.trim().parse().ok().filter(|&p| p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp4_lines() {
        // This machine's /proc/net/tcp: a listener on 0.0.0.0:2024, a client socket, and a
        // listener on 127.0.0.1:8080.
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 114 1 00000000899a3018 100 0 0 10 0
   1: 020200C0:D598 507100CB:0050 06 00000000:00000000 03:00001562 00000000     0        0 0 3 00000000e9e7e570
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 98765 1 0000000000000000 100 0 0 10 0
";
        let s = parse_proc_net_tcp(text);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[0],
            TcpSocket {
                local: "0.0.0.0:2024".parse().unwrap(),
                remote: "0.0.0.0:0".parse().unwrap(),
                state: TCP_LISTEN,
                inode: 114
            }
        );
        assert_eq!(s[1].local, "192.0.2.2:54680".parse().unwrap());
        assert_eq!(s[1].remote, "203.0.113.80:80".parse().unwrap());
        assert_eq!((s[1].state, s[1].inode), (6, 0));
        assert_eq!(s[2].local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(s[2].inode, 98765);
    }

    #[test]
    fn tcp6_lines() {
        let text = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 20 4 30 10 -1
   3: B80D0120000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 100 0 0 10 0
";
        let s = parse_proc_net_tcp(text);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].local, "[::]:8080".parse().unwrap());
        assert_eq!(s[1].local, "[::1]:80".parse().unwrap());
        assert_eq!(s[2].local, "[::ffff:127.0.0.1]:8080".parse().unwrap());
        assert_eq!((s[2].state, s[2].inode), (1, 4444));
        assert_eq!(s[2].remote, "[::ffff:127.0.0.1]:50000".parse().unwrap());
        assert_eq!(s[3].local, "[2001:db8::1]:443".parse().unwrap());
    }

    #[test]
    fn outgoing_connections_are_those_to_others_not_those_accepted() {
        // This process listens, accepts one connection and opens one to its own listener:
        // of its three sockets, only the one it opened goes out.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let _accepted = listener.accept().unwrap();
        let me = std::process::id();
        let tcp = tcp_sockets(me);
        let out = outgoing(&held_sockets(&tcp, &socket_inodes(&[me])));
        assert_eq!(out.get(&addr), Some(&1), "{out:?}");
        // The accepted socket's peer is the client's port: not an upstream.
        let peer = client.local_addr().unwrap();
        assert!(!out.contains_key(&peer), "{out:?}");
        assert!(outgoing(&held_sockets(&tcp, &BTreeSet::new())).is_empty());
    }

    #[test]
    fn bad_addresses() {
        assert_eq!(parse_hex_addr("0100007F"), None);
        assert_eq!(parse_hex_addr("0100007:1F90"), None);
        assert_eq!(parse_hex_addr("0100007G:1F90"), None);
        assert_eq!(parse_hex_addr("0100007F0100007F:1F90"), None);
        assert!(parse_proc_net_tcp("garbage\n\n").is_empty());
    }

    #[test]
    fn socket_links() {
        assert_eq!(parse_socket_link("socket:[98765]"), Some(98765));
        assert_eq!(parse_socket_link("pipe:[98765]"), None);
        assert_eq!(parse_socket_link("/dev/null"), None);
        assert_eq!(parse_socket_link("socket:[x]"), None);
    }

    #[test]
    fn root_of_a_pre_fork_tree() {
        let holders: BTreeMap<u32, String> = [(100, "master"), (101, "worker"), (102, "worker")]
            .into_iter()
            .map(|(p, c)| (p, c.to_string()))
            .collect();
        let parents = BTreeMap::from([(100, 1), (101, 100), (102, 100)]);
        assert_eq!(tree_root(&holders, &parents), Some((100, "master".into())));
        // The master closed its copy: the workers are roots; the lowest pid wins.
        let workers: BTreeMap<u32, String> =
            holders.into_iter().filter(|(p, _)| *p != 100).collect();
        assert_eq!(tree_root(&workers, &parents), Some((101, "worker".into())));
        assert_eq!(tree_root(&BTreeMap::new(), &parents), None);
    }

    #[test]
    fn pidfile_contents() {
        assert_eq!(parse_pidfile("1234\n"), Some(1234));
        assert_eq!(parse_pidfile("  77 "), Some(77));
        assert_eq!(parse_pidfile("0\n"), None);
        assert_eq!(parse_pidfile("-5"), None);
        assert_eq!(parse_pidfile("12 34"), None);
        assert_eq!(parse_pidfile(""), None);
        let e = read_pidfile(Path::new("/nonexistent/x.pid")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.pid"), "{e}");
    }

    #[test]
    fn finds_its_own_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id();
        let found = listening_pids(port);
        assert!(
            found
                .iter()
                .any(|x| x.pid == me && x.addr == l.local_addr().unwrap()),
            "{found:?}"
        );
        assert_eq!(listener_root(port).map(|r| r.0), Some(me));
    }
}
