//! HAR 1.2 files (a browser's or a proxy's recording): each entry's request, with its
//! headers and body, at its `startedDateTime`. A HAR is one JSON document, read whole.

use base64::Engine as _;
use serde::Deserialize;

use crate::{Entry, LineError};

#[derive(Deserialize)]
struct Har {
    log: Log,
}

#[derive(Deserialize)]
struct Log {
    #[serde(default)]
    entries: Vec<HarEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HarEntry {
    started_date_time: Option<String>,
    request: Option<Request>,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<Header>,
    post_data: Option<PostData>,
}

#[derive(Deserialize)]
struct Response {
    status: Option<i64>,
}

#[derive(Deserialize)]
struct Header {
    name: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PostData {
    #[serde(default)]
    text: Option<String>,
    /// Not in HAR 1.2's `postData`, but written by tools that record binary bodies (as
    /// HAR's `content.encoding` for responses).
    #[serde(default)]
    encoding: Option<String>,
}

/// Headers a replay never copies: the connection's own (HTTP/2's pseudo-headers, hop-by-hop
/// ones) and the length, which the body sets.
fn connection_header(name: &str) -> bool {
    name.starts_with(':')
        || [
            "host",
            "connection",
            "keep-alive",
            "content-length",
            "transfer-encoding",
            "upgrade",
            "proxy-connection",
            "te",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// Why a HAR file cannot be read at all.
#[derive(Debug, thiserror::Error)]
#[error("not a HAR file: {0}")]
pub struct HarError(String);

/// Reads a HAR document: its entries in order (entry `i` is "line" `i + 1`), each a
/// request or why it is not one.
pub fn read(text: &str) -> Result<Vec<Result<Entry, LineError>>, HarError> {
    let har: Har = serde_json::from_str(text).map_err(|e| HarError(e.to_string()))?;
    Ok(har
        .log
        .entries
        .into_iter()
        .enumerate()
        .map(|(i, h)| entry(h, i as u64 + 1))
        .collect())
}

fn entry(h: HarEntry, n: u64) -> Result<Entry, LineError> {
    let bad = |why: String| LineError::new(n, &format!("entry {n}"), why);
    let r = h.request.ok_or_else(|| bad("no request".into()))?;
    let mut e = Entry::at_line(n);
    let rest = r
        .url
        .split_once("://")
        .map(|(_, rest)| rest)
        .ok_or_else(|| bad(format!("the URL is not absolute: {:?}", r.url)))?;
    let (host, target) = rest
        .find('/')
        .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    e.host = Some(host.to_string());
    e.target = target.split('#').next().unwrap_or("/").to_string();
    e.method = r.method.to_ascii_uppercase();
    e.headers = r
        .headers
        .into_iter()
        .filter(|h| !connection_header(&h.name))
        .map(|h| (h.name, h.value))
        .collect();
    if let Some(p) = r.post_data {
        if let Some(text) = p.text {
            e.body = Some(match p.encoding.as_deref() {
                Some("base64") => base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .map_err(|err| bad(format!("its base64 body does not decode: {err}")))?,
                _ => text.into_bytes(),
            });
        }
    }
    e.status = h
        .response
        .and_then(|r| r.status)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| *s > 0);
    if let Some(t) = h.started_date_time {
        e.at_ns = Some(
            crate::time::iso8601(&t)
                .ok_or_else(|| bad(format!("startedDateTime is not a time: {t:?}")))?,
        );
        e.resolution_ns = crate::time::text_resolution_ns(&t);
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_headers_and_bodies_binary_or_not() {
        let har = r#"{"log": {"version": "1.2", "entries": [
          {"startedDateTime": "2023-11-14T22:13:20.123Z",
           "request": {"method": "POST", "url": "https://shop.example/cart?x=1#top",
             "headers": [{"name": ":authority", "value": "shop.example"},
                         {"name": "Content-Type", "value": "application/json"},
                         {"name": "Content-Length", "value": "9"}],
             "postData": {"mimeType": "application/json", "text": "{\"n\": 1}"}},
           "response": {"status": 200}},
          {"startedDateTime": "2023-11-14T22:13:21Z",
           "request": {"method": "PUT", "url": "http://shop.example/blob",
             "postData": {"mimeType": "application/octet-stream", "text": "AAH/", "encoding": "base64"}},
           "response": {"status": 0}},
          {"request": {"method": "GET", "url": "/relative"}}
        ]}}"#;
        let entries = read(har).unwrap();
        let a = entries[0].as_ref().unwrap();
        assert_eq!(
            (a.method.as_str(), a.target.as_str()),
            ("POST", "/cart?x=1")
        );
        assert_eq!(a.host.as_deref(), Some("shop.example"));
        assert_eq!(
            a.headers,
            vec![("Content-Type".into(), "application/json".into())]
        );
        assert_eq!(a.body.as_deref(), Some(&b"{\"n\": 1}"[..]));
        assert_eq!(a.at_ns, Some(1_700_000_000_123_000_000));
        assert_eq!(a.resolution_ns, 1_000_000);
        assert_eq!(a.status, Some(200));
        let b = entries[1].as_ref().unwrap();
        assert_eq!(b.body.as_deref(), Some(&[0u8, 1, 255][..]));
        // A request the browser never got an answer to is logged with status 0: none.
        assert_eq!(b.status, None);
        let c = entries[2].as_ref().unwrap_err();
        assert_eq!(c.line, 3);
        assert!(c.why.contains("not absolute"), "{}", c.why);
        assert!(read("{\"log\": 3}").is_err());
    }
}
