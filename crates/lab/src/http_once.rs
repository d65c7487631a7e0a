//! One HTTP/1.1 request over plain TCP, sent by hand outside the engine: a target's
//! readiness probe, and the request of a step whose requests the server rejected, sent
//! again to read what the server says is wrong.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// What the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The reason phrase.
    pub reason: String,
    /// The start of the body (at most the bytes asked for; chunked bodies as sent).
    pub body: Vec<u8>,
}

impl Answer {
    /// `404 Not Found, body "no such page"` with the body cut at `chars` characters.
    /// An HTML body is said as its text (tags left out); whitespace runs are one space.
    pub fn describe(&self, chars: usize) -> String {
        let raw = String::from_utf8_lossy(&self.body);
        let html = raw.trim_start().starts_with('<');
        let text = if html {
            strip_tags(&raw)
        } else {
            raw.into_owned()
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let cut: String = text.chars().take(chars).collect();
        let more = if text.chars().count() > chars {
            "…"
        } else {
            ""
        };
        let body = match (cut.is_empty(), html) {
            (true, _) => "an empty body".to_string(),
            (false, true) => format!("an HTML body reading \"{cut}{more}\""),
            (false, false) => format!("the body \"{cut}{more}\""),
        };
        format!("{} {} with {body}", self.status, self.reason)
    }
}

/// Sends `method url` with `headers` (`Name: value`) and `body` over a new connection
/// (`Connection: close`), and reads the status and at most `max_body` bytes of the body,
/// within `timeout` in all. Plain `http://` only.
pub fn request(
    url: &str,
    method: &str,
    headers: &[String],
    body: &[u8],
    timeout: Duration,
    max_body: usize,
) -> Result<Answer, String> {
    let u = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    if u.scheme() != "http" {
        return Err(format!("{url}: only http:// is sent by hand"));
    }
    let host = u.host_str().unwrap_or("127.0.0.1").to_string();
    let port = u.port_or_known_default().unwrap_or(80);
    let deadline = Instant::now() + timeout;
    let mut s = loadlab_system::net::connect_host(&host, port, timeout)
        .map_err(|e| format!("{url}: {e}"))?;
    let path = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_string(),
    };
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    s.write_all(&out).map_err(|e| format!("{url}: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left)).ok();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) if !got.is_empty() => break,
            Err(e) => return Err(format!("{url}: {e}")),
        }
        if let Some(end) = head_end(&got) {
            if got.len() - end >= max_body {
                break;
            }
        }
    }
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    let Ok(httparse::Status::Complete(end)) = resp.parse(&got) else {
        return Err(format!("{url}: no HTTP response"));
    };
    let status = resp.code.ok_or_else(|| format!("{url}: no status"))?;
    let reason = resp.reason.unwrap_or("").to_string();
    let mut body = got[end..].to_vec();
    body.truncate(max_body);
    Ok(Answer {
        status,
        reason,
        body,
    })
}

/// The text of an HTML document: tags, and the contents of `<head>`, left out.
fn strip_tags(html: &str) -> String {
    let body = match (html.find("<head"), html.find("</head>")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &html[..a], &html[b + 7..]),
        _ => html.to_string(),
    };
    let mut out = String::with_capacity(body.len());
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_is_read_with_its_body() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = [0u8; 1024];
            let n = s.read(&mut req).unwrap();
            let text = String::from_utf8_lossy(&req[..n]).to_string();
            s.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 21\r\n\r\nno route for /nowhere",
            )
            .unwrap();
            text
        });
        let a = request(
            &format!("http://127.0.0.1:{port}/nowhere?x=1"),
            "POST",
            &["X-Try: 1".into()],
            b"{}",
            Duration::from_secs(5),
            10,
        )
        .unwrap();
        let sent = server.join().unwrap();
        assert!(sent.starts_with("POST /nowhere?x=1 HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.contains("X-Try: 1\r\n") && sent.ends_with("\r\n\r\n{}"),
            "{sent}"
        );
        assert_eq!((a.status, a.reason.as_str()), (404, "Not Found"));
        assert_eq!(a.body, b"no route f");
        assert_eq!(a.describe(5), "404 Not Found with the body \"no ro…\"");
        let page = Answer {
            status: 404,
            reason: "File not found".into(),
            body: b"<!DOCTYPE HTML>\n<html><head><title>Error response</title></head>\n<body><h1>Error response</h1>\n<p>Error code: 404</p></body></html>".to_vec(),
        };
        assert_eq!(
            page.describe(200),
            "404 File not found with an HTML body reading \"Error response Error code: 404\""
        );
        assert!(request(
            "https://127.0.0.1:1/",
            "GET",
            &[],
            b"",
            Duration::from_secs(1),
            1
        )
        .unwrap_err()
        .contains("only http://"));
    }
}
