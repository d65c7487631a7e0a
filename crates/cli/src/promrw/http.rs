//! The endpoint (`http://HOST[:PORT]/PATH`) and one POST to it: plain HTTP/1.1 over a
//! `TcpStream`, one connection per push, every step under a timeout.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where pushes go, checked before any load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as given.
    pub url: String,
    /// Host name or address (IPv6 without brackets).
    host: String,
    /// Port (80 by default).
    port: u16,
    /// `Host` header value.
    authority: String,
    /// Path and query, at least `/`.
    path: String,
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(url: &str) -> Result<Endpoint, String> {
        if url.starts_with("https://") {
            return Err(
                "https:// is not supported: give the receiver's plain http:// address (a TLS-terminating proxy on this host can forward to an https endpoint)"
                    .into(),
            );
        }
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!(
                "`{url}` is not an http:// URL (e.g. http://127.0.0.1:9090/api/v1/write)"
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("user names and passwords in the URL are not supported".into());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("`{authority}`: unclosed `[`"))?;
            match after {
                "" => (h, None),
                p => (
                    h,
                    Some(
                        p.strip_prefix(':')
                            .ok_or_else(|| format!("`{authority}`: bad port"))?,
                    ),
                ),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("`{url}` has no host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("`{p}` is not a port (1 to 65535)"))?,
        };
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the path must not contain spaces or control characters".into());
        }
        Ok(Endpoint {
            url: url.to_string(),
            host: host.to_string(),
            port,
            authority: authority.to_string(),
            path: path.to_string(),
        })
    }
}

/// Why a push failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// No connection, a timeout, or a broken one.
    Io(String),
    /// The server answered with a status other than 2xx.
    Status {
        /// The status code.
        code: u16,
        /// The start of the body (what Prometheus says was wrong).
        body: String,
    },
}

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushError::Io(e) => f.write_str(e),
            PushError::Status { code, body } => write!(f, "HTTP {code}: {}", body.trim()),
        }
    }
}

/// The most of a response read (an answer to a push is short).
const MAX_RESPONSE: usize = 64 << 10;

/// POSTs `body` (snappy-compressed protobuf) to `ep`; gives up at `deadline`.
pub fn post(ep: &Endpoint, body: &[u8], deadline: Instant) -> Result<(), PushError> {
    let io = |what: &str, e: std::io::Error| {
        PushError::Io(match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                format!(
                    "{what}: no progress within the {} s a push is given",
                    PUSH_TIMEOUT.as_secs()
                )
            }
            _ => format!("{what}: {e}"),
        })
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| PushError::Io("timed out".into()))
    };
    let addrs: Vec<_> = (ep.host.as_str(), ep.port)
        .to_socket_addrs()
        .map_err(|e| io(&format!("resolving {}", ep.host), e))?
        .collect();
    let mut last = PushError::Io(format!("{} resolves to no address", ep.host));
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, left()?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = io(&format!("connecting to {a}"), e),
        }
    }
    let mut s = stream.ok_or(last)?;
    let _ = s.set_nodelay(true);
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: loadlab/{}\r\nContent-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        ep.path,
        ep.authority,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    s.set_write_timeout(Some(left()?))
        .map_err(|e| io("setting a timeout", e))?;
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .map_err(|e| io("sending", e))?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left()?))
            .map_err(|e| io("setting a timeout", e))?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&chunk[..n]);
                if response.len() >= MAX_RESPONSE || complete(&response) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io("reading the answer", e)),
        }
    }
    let text = String::from_utf8_lossy(&response);
    let code = text
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| PushError::Io("no HTTP answer".into()))?;
    if (200..300).contains(&code) {
        return Ok(());
    }
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .chars()
        .take(300)
        .collect();
    Err(PushError::Status { code, body })
}

/// Whether `response` holds a whole answer by its `Content-Length` (a server may keep the
/// connection open despite `Connection: close`).
fn complete(response: &[u8]) -> bool {
    let text = String::from_utf8_lossy(response);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .is_some_and(|n| body.len() >= n)
}

/// Connect and read timeouts of one push while the run goes (the whole push is bounded
/// by this; the background thread sends the next when it is done).
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_urls() {
        let e: Endpoint = "http://127.0.0.1:9090/api/v1/write".parse().unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 9090, "/api/v1/write")
        );
        let e: Endpoint = "http://[::1]:9/w?x=1".parse().unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("::1", 9, "/w?x=1")
        );
        let e: Endpoint = "http://prom".parse().unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("prom", 80, "/")
        );
    }

    #[test]
    fn refuses_what_it_cannot_send_to() {
        for bad in [
            "https://x/api/v1/write",
            "ftp://x",
            "127.0.0.1:9090",
            "http://:9090/",
            "http://x:0/",
            "http://x:99999/",
            "http://x:port/",
            "http://u:p@x/",
            "http://x/a b",
        ] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_closed_port_is_an_io_error_in_time() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let ep: Endpoint = format!("http://127.0.0.1:{port}/").parse().unwrap();
        let started = Instant::now();
        let r = post(&ep, b"x", Instant::now() + Duration::from_secs(2));
        assert!(matches!(r, Err(PushError::Io(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
