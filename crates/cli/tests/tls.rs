//! https:// through rustls: --insecure accepts a self-signed certificate; without it the
//! handshake fails and is counted as such.

mod util;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use util::run;

/// A TLS server answering every request `200 ok` on a keep-alive connection.
fn tls_server() -> (
    std::net::SocketAddr,
    Arc<AtomicU64>,
    tokio::runtime::Runtime,
) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicU64::new(0));
    let counter = served.clone();
    rt.spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
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
            });
        }
    });
    (addr, served, rt)
}

#[test]
fn https_with_insecure_succeeds() {
    let (addr, served, _rt) = tls_server();
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "200", "-c", "4", "--insecure", "-q"]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["successful"], 200);
    assert_eq!(served.load(Ordering::Relaxed), 200);
}

#[test]
fn https_with_untrusted_certificate_fails_the_handshake() {
    let (addr, _served, _rt) = tls_server();
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "10", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(1));
    assert_eq!(
        r.error_count("tls_handshake"),
        10,
        "{:?}",
        r.json()["errors"]
    );
}
