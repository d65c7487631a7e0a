//! Listening sockets: one shared by a runtime's threads, or one per thread on the same port
//! with `SO_REUSEPORT`, so the kernel spreads connections over the threads' accept queues.
//!
//! All are bound before any runtime starts, non-blocking, and with the backlog of
//! [`loadlab_target_common::net::DEFAULT_BACKLOG`].

use std::net::{SocketAddr, TcpListener};
use std::num::NonZeroUsize;

use loadlab_target_common::net::{self, BindError};
use socket2::{Domain, Protocol, Socket, Type};

/// Binds one non-blocking listener on `addr` (`SO_REUSEADDR`, as the standard library).
pub fn bind_one(addr: SocketAddr) -> Result<TcpListener, BindError> {
    let listener = net::bind(addr, net::DEFAULT_BACKLOG)?;
    listener
        .set_nonblocking(true)
        .map_err(|source| BindError { addr, source })?;
    Ok(listener)
}

/// Binds `count` non-blocking listeners on `addr` with `SO_REUSEPORT`. With port 0 the
/// first gets a free port from the kernel and the others bind that port.
pub fn bind_reuseport(
    addr: SocketAddr,
    count: NonZeroUsize,
) -> Result<Vec<TcpListener>, BindError> {
    let first = reuseport_listener(addr)?;
    let shared = first
        .local_addr()
        .map_err(|source| BindError { addr, source })?;
    let mut listeners = Vec::with_capacity(count.get());
    listeners.push(first);
    for _ in 1..count.get() {
        listeners.push(reuseport_listener(shared)?);
    }
    Ok(listeners)
}

fn reuseport_listener(addr: SocketAddr) -> Result<TcpListener, BindError> {
    let listen = || -> std::io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(i32::try_from(net::DEFAULT_BACKLOG).unwrap_or(i32::MAX))?;
        Ok(socket.into())
    };
    listen().map_err(|source| BindError { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    fn loopback() -> SocketAddr {
        ([127, 0, 0, 1], 0).into()
    }

    #[test]
    fn reuseport_listeners_share_the_first_port() {
        let listeners = bind_reuseport(loopback(), NonZeroUsize::new(3).unwrap()).unwrap();
        assert_eq!(listeners.len(), 3);
        let port = listeners[0].local_addr().unwrap().port();
        assert_ne!(port, 0);
        for listener in &listeners {
            assert_eq!(listener.local_addr().unwrap().port(), port);
            // Non-blocking: no connection pending means WouldBlock, not a hang.
            assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
        }
    }

    #[test]
    fn a_port_in_plain_use_is_refused() {
        let plain = bind_one(loopback()).unwrap();
        let addr = plain.local_addr().unwrap();
        let err = bind_reuseport(addr, NonZeroUsize::MIN).unwrap_err();
        assert_eq!(err.source.kind(), ErrorKind::AddrInUse);
    }
}
