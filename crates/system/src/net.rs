//! A host name with several addresses, the way `localhost` resolves on a standard Debian
//! or Ubuntu (`::1` first, then `127.0.0.1`): a server that listens on one of them only is
//! reached on that one, as curl and wrk reach it, instead of being reported refused.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Connects to the first of `addrs` that accepts, in order, each given up to `timeout`.
/// Returns the stream and the address it reached, or the last address's error (a name
/// that resolved to nothing is `AddrNotAvailable`).
pub fn connect_first(
    addrs: impl IntoIterator<Item = SocketAddr>,
    timeout: Duration,
) -> io::Result<(TcpStream, SocketAddr)> {
    let mut last = io::Error::new(io::ErrorKind::AddrNotAvailable, "resolves to no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok((s, a)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Resolves `host:port` (a name or an address; an IPv6 address may keep its brackets) and
/// connects to the first of its addresses that accepts ([`connect_first`]).
pub fn connect_host(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()?
        .collect();
    connect_first(addrs, timeout).map(|(s, _)| s)
}

/// Puts the first of `addrs` that accepts a connection in front, so that a run's
/// connections go where the server listens. One probe connection, opened and closed,
/// only when there is a choice; if none accepts, the order is left as resolved (the run
/// then reports the refusals).
pub fn reachable_first(addrs: &mut [SocketAddr], timeout: Duration) {
    if addrs.len() < 2 {
        return;
    }
    if let Ok((_, a)) = connect_first(addrs.iter().copied(), timeout) {
        let i = addrs.iter().position(|x| *x == a).unwrap_or(0);
        addrs[..=i].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A port that refuses: bound, then closed.
    fn refusing(ip: &str) -> SocketAddr {
        let l = TcpListener::bind((ip, 0)).unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        a
    }

    #[test]
    fn the_address_that_listens_goes_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let live = l.local_addr().unwrap();
        let dead1 = refusing("127.0.0.1");
        let dead2 = refusing("127.0.0.1");
        let mut addrs = [dead1, dead2, live];
        reachable_first(&mut addrs, Duration::from_secs(2));
        assert_eq!(addrs, [live, dead1, dead2]);
    }

    #[test]
    fn nothing_listening_keeps_the_resolved_order() {
        let dead1 = refusing("127.0.0.1");
        let dead2 = refusing("127.0.0.1");
        let mut addrs = [dead1, dead2];
        reachable_first(&mut addrs, Duration::from_secs(2));
        assert_eq!(addrs, [dead1, dead2]);
        let e = connect_first(addrs, Duration::from_secs(2)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn a_name_reaches_the_address_it_listens_on() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        connect_host("localhost", port, Duration::from_secs(2)).unwrap();
        connect_host("[127.0.0.1]", port, Duration::from_secs(2)).unwrap();
        let e = connect_first([], Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable);
    }
}
