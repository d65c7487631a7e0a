//! https:// through rustls: --insecure accepts a self-signed certificate; without it the
//! handshake fails and is counted as such.

mod util;

use std::sync::atomic::Ordering;
use std::time::Duration;

use util::run;
use util::tls::{self_signed, tls_server};

#[test]
fn https_with_insecure_succeeds() {
    let (addr, served, _rt) = tls_server(self_signed());
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "200", "-c", "4", "--insecure", "-q"]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["successful"], 200);
    assert_eq!(served.load(Ordering::Relaxed), 200);
    // 200 requests to a local server: a bound that catches a hang, not a threshold.
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);
}

#[test]
fn https_with_untrusted_certificate_fails_the_handshake() {
    let (addr, _served, _rt) = tls_server(self_signed());
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "10", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(1));
    assert_eq!(
        r.error_count("tls_handshake"),
        10,
        "{:?}",
        r.json()["errors"]
    );
    // 10 handshakes refused at once: a bound that catches a hang, not a threshold.
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);
}
