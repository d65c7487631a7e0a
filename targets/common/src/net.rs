//! Listeners: the `--bind` syntax, binding with an explicit backlog, and the ready line.
//!
//! A server's `run` takes an already bound [`TcpListener`], so the backlog (the kernel's
//! accept queue, capped by `net.core.somaxconn`) is fixed here, at bind time.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Backlog used when a binary has no `--backlog` knob (the actix-web default).
pub const DEFAULT_BACKLOG: u32 = 1024;

/// The address could not be bound or listened on.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The operating system's reason (for example `AddrInUse`).
    #[source]
    pub source: io::Error,
}

/// A `--bind` value that is not a socket address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid address `{0}`: expected IP:PORT, [IPv6]:PORT or :PORT")]
pub struct BindAddrError(pub String);

/// Parses a `--bind` value: `IP:PORT`, `[IPv6]:PORT`, or `:PORT` for `127.0.0.1:PORT`.
/// Port 0 asks the kernel for a free port.
pub fn parse_bind_addr(text: &str) -> Result<SocketAddr, BindAddrError> {
    let parsed = match text.strip_prefix(':') {
        Some(port) => port
            .parse()
            .ok()
            .map(|port| SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)),
        None => text.parse().ok(),
    };
    parsed.ok_or_else(|| BindAddrError(text.to_owned()))
}

/// Binds `addr` and starts listening with the given accept backlog.
///
/// `SO_REUSEADDR` is set (as the standard library does on Unix), so a restart does not
/// wait for `TIME_WAIT`, but an address another socket listens on is still refused.
pub fn bind(addr: SocketAddr, backlog: u32) -> Result<TcpListener, BindError> {
    let listen = || -> io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        Ok(socket.into())
    };
    listen().map_err(|source| BindError { addr, source })
}

/// The one line a server prints once it listens, for example `listening on 127.0.0.1:43125`.
/// Tools that bind port 0 read it to find the server.
pub fn ready_line(listener: &TcpListener) -> io::Result<String> {
    Ok(format!("listening on {}", listener.local_addr()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_port_means_loopback() {
        assert_eq!(
            parse_bind_addr(":0").unwrap(),
            "127.0.0.1:0".parse().unwrap()
        );
        assert_eq!(
            parse_bind_addr("0.0.0.0:8080").unwrap(),
            "0.0.0.0:8080".parse().unwrap()
        );
        assert_eq!(
            parse_bind_addr("[::1]:9").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        assert!(parse_bind_addr("localhost:80").is_err());
        assert!(parse_bind_addr(":http").is_err());
    }

    #[test]
    fn binds_port_zero_and_reports_it() {
        let listener = bind(parse_bind_addr(":0").unwrap(), 16).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert_eq!(
            ready_line(&listener).unwrap(),
            format!("listening on 127.0.0.1:{port}")
        );
    }

    #[test]
    fn address_in_use_is_refused() {
        let first = bind(parse_bind_addr(":0").unwrap(), 16).unwrap();
        let addr = first.local_addr().unwrap();
        let err = bind(addr, 16).unwrap_err();
        assert_eq!(err.source.kind(), io::ErrorKind::AddrInUse);
        assert!(err.to_string().contains(&addr.to_string()));
    }
}
