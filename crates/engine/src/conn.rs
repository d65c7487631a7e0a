//! Opening connections: plain TCP or TLS (rustls), optionally from one of several local
//! source addresses so that connection-per-request load is not capped by one address's
//! ephemeral ports.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::config::{RunConfig, Scheme};
use crate::error::ErrorClass;

/// An established connection.
pub enum Conn {
    /// Plain TCP.
    Plain(TcpStream),
    /// Plain TCP whose reads carry the kernel's receive timestamp ([`Conn::received_at`]).
    Stamped(TcpStream, u64),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
    /// Plain TCP through the worker's io_uring (`--io uring`).
    Uring(crate::transport::uring::UringConn),
}

impl Conn {
    /// When the newest bytes read so far arrived (`CLOCK_REALTIME` ns, from the kernel):
    /// `None` unless the connection was opened with receive timestamps.
    pub fn received_at(&self) -> Option<u64> {
        match self {
            Conn::Stamped(_, at) if *at > 0 => Some(*at),
            Conn::Uring(c) => c.received_at(),
            _ => None,
        }
    }

    /// Whether looking for bytes the server sent unasked on an idle connection costs no
    /// system call: over io_uring a receive is always armed on an idle connection and its
    /// completion is read from memory, so every reuse is checked.
    pub(crate) fn peek_is_free(&self) -> bool {
        matches!(self, Conn::Uring(_))
    }

    /// Whether the connection is not up yet: one opened by [`Connector::open`] connects
    /// with its first request.
    pub(crate) fn connecting(&self) -> bool {
        matches!(self, Conn::Uring(c) if c.connecting())
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Stamped(s, at) => loop {
                std::task::ready!(s.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let room = unfilled.len();
                // A read that did not fill the buffer emptied the socket: its readiness is
                // cleared (as tokio does for its own reads, by answering "would block" to
                // `try_io` and keeping the bytes), or the next read after a request would
                // be a system call that finds nothing (and so would the check of an idle
                // connection for unasked bytes: one `recvmsg` in two, in open loop).
                let mut drained = None;
                let read = s.try_io(tokio::io::Interest::READABLE, || {
                    let got = loadlab_system::os::recv_timestamped(s.as_fd(), unfilled)?;
                    if got.0 > 0 && got.0 < room {
                        drained = Some(got);
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    Ok(got)
                });
                let read = match (read, drained) {
                    (_, Some(got)) => Ok(got),
                    (read, None) => read,
                };
                match read {
                    Ok((n, stamp)) => {
                        // An unstamped read (timestamping not yet on system-wide) leaves
                        // no older read's time behind.
                        *at = stamp.unwrap_or(0);
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    // Readiness was stale: try_io cleared it, wait again.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            },
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Conn::Uring(c) => Pin::new(c).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) | Conn::Stamped(s, _) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Conn::Uring(c) => Pin::new(c).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) | Conn::Stamped(s, _) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Conn::Uring(c) => Pin::new(c).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) | Conn::Stamped(s, _) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Conn::Uring(c) => Pin::new(c).poll_shutdown(cx),
        }
    }
}

/// Opens connections to the target for one worker.
pub struct Connector {
    addr: SocketAddr,
    sources: Vec<IpAddr>,
    /// Index of the next source address; advances by `stride` so workers interleave.
    next_source: std::cell::Cell<usize>,
    stride: usize,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Plain connections read with the kernel's receive timestamps.
    stamped: bool,
    /// Plain connections go through the worker's io_uring.
    uring: bool,
}

impl Connector {
    /// A connector for worker `worker` of `threads`.
    pub fn new(
        cfg: &RunConfig,
        tls: Option<Arc<rustls::ClientConfig>>,
        worker: usize,
        threads: usize,
        io: crate::config::IoUsed,
    ) -> Connector {
        let tls = tls.map(|c| {
            let name = ServerName::try_from(cfg.target.host.clone())
                .unwrap_or_else(|_| ServerName::try_from("localhost").expect("static name"));
            (TlsConnector::from(c), name)
        });
        Connector {
            addr: cfg.target.addrs[0],
            sources: cfg.source_addrs.clone(),
            next_source: std::cell::Cell::new(worker),
            stride: threads.max(1),
            stamped: tls.is_none() && stamps_receipts(cfg),
            uring: tls.is_none() && io == crate::config::IoUsed::Uring,
            tls,
        }
    }

    /// A connection for a request about to be written: over io_uring its connect is
    /// deferred and goes in linked ahead of the request ([`crate::transport::uring::UringConn::open`]:
    /// [`Conn::connecting`] until it is up, a failed connect reported by the first read,
    /// its time recorded through [`crate::transport::uring::take_connects`]); otherwise
    /// [`Connector::connect`]. `single_use`: one request, then closed (keep-alive off).
    pub async fn open(&self, single_use: bool) -> Result<Conn, ErrorClass> {
        if self.uring {
            let source = (!self.sources.is_empty()).then(|| self.next_source());
            return crate::transport::uring::UringConn::open(
                self.addr,
                source,
                self.stamped,
                single_use,
            )
            .map(Conn::Uring)
            .map_err(|e| ErrorClass::from_io(&e, true));
        }
        self.connect().await
    }

    /// Opens one connection.
    pub async fn connect(&self) -> Result<Conn, ErrorClass> {
        let classify = |e: io::Error| ErrorClass::from_io(&e, true);
        if self.uring {
            let source = (!self.sources.is_empty()).then(|| self.next_source());
            return crate::transport::uring::UringConn::connect(self.addr, source, self.stamped)
                .await
                .map(Conn::Uring)
                .map_err(classify);
        }
        let sock = if self.addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(classify)?;
        if !self.sources.is_empty() {
            let src = self.next_source();
            // Defer the port choice to connect(), where the kernel can share a port across
            // different destinations instead of reserving one per bind.
            loadlab_system::os::set_bind_address_no_port(sock.as_fd());
            sock.bind(SocketAddr::new(src, 0)).map_err(classify)?;
        }
        let stream = sock.connect(self.addr).await.map_err(classify)?;
        let _ = stream.set_nodelay(true);
        match &self.tls {
            None if self.stamped => {
                loadlab_system::os::enable_rx_timestamps(stream.as_fd()).map_err(classify)?;
                Ok(Conn::Stamped(stream, 0))
            }
            None => Ok(Conn::Plain(stream)),
            Some((connector, name)) => connector
                .connect(name.clone(), stream)
                .await
                .map(|s| Conn::Tls(Box::new(s)))
                .map_err(|e| match ErrorClass::from_io(&e, true) {
                    ErrorClass::Other => ErrorClass::TlsHandshake,
                    c => c,
                }),
        }
    }
}

impl Connector {
    /// The source address of the next connection (round robin, interleaved by worker).
    fn next_source(&self) -> IpAddr {
        let i = self.next_source.get();
        self.next_source.set(i.wrapping_add(self.stride));
        self.sources[i % self.sources.len()]
    }
}

/// Whether a run's connections read with the kernel's receive timestamps, so that a
/// response that waited in the socket while the worker was busy (sending a release's
/// requests, recording, or preempted) is charged its arrival, not loadlab's delay: open
/// loop, HTTP/1.1 (an HTTP/2 reader cannot tell which bytes completed a response), plain
/// TCP (nor can a TLS one).
///
/// The timestamps are also what lets an io_uring worker sleep through the responses between
/// two releases and take them together ([`crate::transport::uring::pace`]). Over epoll the same was
/// tried and left out: it cut loadlab's wake-ups per request (`epoll_wait` 0.95 to 0.19,
/// context switches 0.7 to 0.19 at 20,000 req/s) but saved no CPU on this VM, each response
/// still costing its own `recvmsg`; over io_uring the responses of a wake-up come in with
/// one `io_uring_enter`.
fn stamps_receipts(cfg: &RunConfig) -> bool {
    matches!(cfg.model, crate::config::LoadModel::Open { .. })
        && cfg.target.scheme != Scheme::Https
        && match cfg.transport.protocol() {
            crate::config::Protocol::Http1 => true,
            // A WebSocket over epoll reads each reply as it comes; over io_uring the paced
            // ring reads them late, and the stamps keep their time.
            crate::config::Protocol::Ws => cfg.io_used().0 == crate::config::IoUsed::Uring,
            _ => false,
        }
}

/// The TLS client configuration for a run, or `None` for plain HTTP; built once per run,
/// shared by every connection. With it, a warning when the system's trust store could not
/// be read and the bundled public roots stand in for it.
///
/// Trusted: the operating system's store ([`system_roots`]) and `--cacert`'s certificates
/// on top; nothing is checked with `--insecure`. The client certificate (mTLS), if any, is
/// offered to servers that ask for one.
pub fn tls_config(cfg: &RunConfig) -> (Option<Arc<rustls::ClientConfig>>, Option<String>) {
    if cfg.target.scheme != Scheme::Https {
        return (None, None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let (builder, warning) = if cfg.insecure {
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)));
        (builder, None)
    } else {
        let system = system_roots();
        let mut roots = system.roots.clone();
        roots.add_parsable_certificates(cfg.ca_certs.iter().cloned());
        (
            builder.with_root_certificates(roots),
            system.warning.clone(),
        )
    };
    let mut config = match &cfg.client_cert {
        Some(key) => builder
            .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key.clone()))),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![cfg.transport.protocol().alpn().to_vec()];
    (Some(Arc::new(config)), warning)
}

/// The roots every verified run trusts before `--cacert`: the operating system's store.
struct SystemRoots {
    roots: rustls::RootCertStore,
    /// Set when the store could not be read and the bundled roots stand in for it.
    warning: Option<String>,
}

/// The operating system's trust store (on Linux `/etc/ssl/certs` and the like, or the
/// files `SSL_CERT_FILE` and `SSL_CERT_DIR` name, as OpenSSL reads them), loaded once per
/// process: a few hundred certificates parsed once, not per run or per connection. A store
/// that cannot be read, or holds no certificate, does not stop a run: the public roots
/// bundled with loadlab (Mozilla's, from `webpki-roots`) are trusted instead, and each run
/// says so in a warning. Certificates of the store that rustls cannot parse are skipped.
fn system_roots() -> &'static SystemRoots {
    static ROOTS: std::sync::OnceLock<SystemRoots> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(found.certs);
        if !roots.is_empty() {
            return SystemRoots {
                roots,
                warning: None,
            };
        }
        let why = match found.errors.first() {
            Some(e) => e.to_string(),
            None => "it holds no certificate".into(),
        };
        SystemRoots {
            roots: rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
            warning: Some(format!(
                "the system's trust store could not be read ({why}): certificates were \
                 checked against the public roots bundled with loadlab, and --cacert"
            )),
        }
    })
}

/// `--insecure`: accepts any certificate and any handshake signature (nothing is checked),
/// for servers with self-signed certificates where a man in the middle is not a concern.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A stamped connection read late still knows when its bytes arrived, and a read the
    /// kernel did not stamp leaves no stale time behind.
    #[test]
    fn stamped_reads_keep_the_arrival_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _on = loadlab_system::os::hold_rx_timestamps().unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/", l.local_addr().unwrap());
            // Open loop reads with timestamps; closed loop does not.
            for stamped in [true, false] {
                let cfg = crate::config::Workload {
                    url: url.clone(),
                    load: if stamped {
                        crate::config::LoadModel::Open {
                            rate: 100.0,
                            arrival: crate::config::Arrival::Constant,
                        }
                    } else {
                        crate::config::LoadModel::Closed
                    },
                    ..Default::default()
                }
                .validate()
                .unwrap();
                let c = Connector::new(&cfg, None, 0, 1, crate::config::IoUsed::Epoll);
                assert_eq!(c.stamped, stamped);
                let (conn, accepted) = tokio::join!(c.connect(), l.accept());
                let (mut conn, (mut server, _)) = (conn.unwrap(), accepted.unwrap());
                let before = loadlab_system::os::realtime_ns();
                server.write_all(b"ok").await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                let mut buf = [0u8; 8];
                let n = conn.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], b"ok");
                let read = loadlab_system::os::realtime_ns();
                match conn.received_at() {
                    Some(at) => {
                        assert!(stamped, "a timestamp on a plain connection");
                        assert!(at >= before, "stamped before the write");
                        assert!(
                            read - at >= 25_000_000,
                            "stamped when read, not when it arrived"
                        );
                    }
                    None => assert!(!stamped, "no timestamp on a stamped connection"),
                }
            }
        });
    }
}
