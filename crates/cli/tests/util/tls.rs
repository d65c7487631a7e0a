//! TLS test servers: a private CA issuing certificates as a test needs them (for another
//! name, expired), a server answering `200 ok` over TLS with a given certificate, and one
//! that accepts TCP and never answers a ClientHello.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{accept_loop, Background};

/// A certificate and its key, DER.
pub struct Issued {
    pub cert: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
}

/// A private certificate authority.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "loadlab test CA");
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// The CA certificate, PEM (what `--cacert` reads).
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses) and its key, PEM (what
    /// `--tls-cert` and `--tls-key` read).
    pub fn issue_pem(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.cert, &self.key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A certificate for `names` (DNS names or IP addresses), valid now, or expired in
    /// 2021 when `expired`.
    pub fn issue(&self, names: &[&str], expired: bool) -> Issued {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued {
            cert: CertificateDer::from(cert.der().to_vec()),
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }
}

/// A self-signed certificate for `localhost` and `127.0.0.1`.
pub fn self_signed() -> Issued {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    Issued {
        cert: CertificateDer::from(cert.cert.der().to_vec()),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der())),
    }
}

/// A TLS server on 127.0.0.1 answering every request `200 ok` on a keep-alive connection,
/// with `issued` as its certificate; counts the requests it answered.
pub fn tls_server(issued: Issued) -> (SocketAddr, Arc<AtomicU64>, Background) {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![issued.cert], issued.key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let served = Arc::new(AtomicU64::new(0));
    let counter = served.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (addr, rt) = accept_loop(listener, move |sock| {
        let acceptor = acceptor.clone();
        let counter = counter.clone();
        async move {
            let Ok(mut tls) = acceptor.accept(sock).await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    buf.drain(..end + 4);
                    counter.fetch_add(1, Ordering::Relaxed);
                    if tls
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                match tls.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        }
    });
    (addr, served, rt)
}

/// Accepts TCP connections and never answers the ClientHello (it reads and drops it).
pub fn stalled_handshake_server() -> (SocketAddr, Background) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    accept_loop(listener, |mut sock| async move {
        let mut sink = [0u8; 4096];
        while matches!(sock.read(&mut sink).await, Ok(n) if n > 0) {}
    })
}
