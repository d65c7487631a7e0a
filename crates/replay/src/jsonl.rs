//! JSON Lines logs: one object a line, its fields found by a mapping
//! (`time=ts,method=req.method,url=req.url,status=code`) or by their usual names.

use serde_json::Value;

use crate::{Entry, LineError};

/// Where each field of a request is in a JSON log line: dotted paths (`req.url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The time (a number since the epoch, or ISO 8601 or common-log-format text).
    pub time: Vec<String>,
    /// The method.
    pub method: Vec<String>,
    /// The target: a path (with its query) or a whole URL.
    pub url: Vec<String>,
    /// The status.
    pub status: Vec<String>,
    /// The host.
    pub host: Vec<String>,
    /// How long it took, in seconds; when set, the time is taken as its end.
    pub duration: Vec<String>,
}

impl Default for Mapping {
    /// The usual names: `time`/`timestamp`/`ts`/`@timestamp`, `method`/`request_method`,
    /// `url`/`uri`/`path`/`request_uri`, `status`/`status_code`, `host`.
    fn default() -> Mapping {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        Mapping {
            time: v(&["time", "timestamp", "ts", "@timestamp"]),
            method: v(&["method", "request_method"]),
            url: v(&["url", "uri", "path", "request_uri"]),
            status: v(&["status", "status_code"]),
            host: v(&["host"]),
            duration: Vec::new(),
        }
    }
}

/// Why a mapping cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MappingError(String);

impl std::str::FromStr for Mapping {
    type Err = MappingError;

    /// `time=ts,url=req.url`: the fields named replace the usual names; the others keep them.
    fn from_str(s: &str) -> Result<Mapping, MappingError> {
        let mut m = Mapping::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, path) = part.split_once('=').ok_or_else(|| {
                MappingError(format!(
                    "`{part}` is not FIELD=PATH (e.g. `url=request.url`)"
                ))
            })?;
            let slot = match k.trim() {
                "time" => &mut m.time,
                "method" => &mut m.method,
                "url" | "path" => &mut m.url,
                "status" => &mut m.status,
                "host" => &mut m.host,
                "duration" => &mut m.duration,
                other => {
                    return Err(MappingError(format!(
                        "`{other}` is not a field of a request: time, method, url, status, host or duration"
                    )))
                }
            };
            *slot = vec![path.trim().to_string()];
        }
        Ok(m)
    }
}

/// The first of `paths` that the object has.
fn find<'a>(v: &'a Value, paths: &[String]) -> Option<&'a Value> {
    paths.iter().find_map(|p| {
        p.split('.')
            .try_fold(v, |v, k| v.get(k))
            .filter(|v| !v.is_null())
    })
}

/// Reads one JSON log line.
pub fn parse(text: &str, line: u64, m: &Mapping) -> Result<Entry, LineError> {
    let bad = |why: String| LineError::new(line, text, why);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let mut e = Entry::at_line(line);
    let url = find(&v, &m.url)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("no URL or path at {}", m.url.join(" or "))))?;
    match url.split_once("://") {
        Some((_, rest)) => {
            let (host, path) = rest
                .find('/')
                .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
            e.host = Some(host.to_string());
            e.target = path.to_string();
        }
        None if url.starts_with('/') => e.target = url.to_string(),
        // `GET /a HTTP/1.1`, as `$request` logs it.
        None => match url.split(' ').collect::<Vec<_>>()[..] {
            [method, target, ..] if target.starts_with('/') => {
                e.method = method.to_string();
                e.target = target.to_string();
            }
            _ => return Err(bad(format!("the URL is not a path or a URL: {url:?}"))),
        },
    }
    if let Some(method) = find(&v, &m.method).and_then(Value::as_str) {
        e.method = method.to_ascii_uppercase();
    }
    if e.method.is_empty() {
        e.method = "GET".into();
    }
    e.status = find(&v, &m.status).and_then(|s| match s {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    if let Some(h) = find(&v, &m.host).and_then(Value::as_str) {
        e.host = Some(h.to_string());
    }
    if let Some(t) = find(&v, &m.time) {
        let (at, res) = match t {
            Value::Number(n) => match crate::time::epoch_text(&n.to_string()) {
                Some((at, res)) => (Some(at), res),
                None => (None, 0),
            },
            Value::String(s) => match crate::time::epoch_text(s) {
                Some((at, res)) => (Some(at), res),
                None => {
                    let at = crate::time::iso8601(s).or_else(|| crate::time::clf(s));
                    (at, crate::time::text_resolution_ns(s))
                }
            },
            _ => (None, 0),
        };
        let at = at.ok_or_else(|| bad(format!("the time is not a time: {t}")))?;
        let took = find(&v, &m.duration)
            .and_then(Value::as_f64)
            .filter(|s| *s >= 0.0)
            .map_or(0, |s| (s * 1e9).round() as u64);
        e.at_ns = Some(at.saturating_sub(took));
        e.resolution_ns = res.max(1);
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_names_or_a_mapping_find_the_request() {
        let e = parse(
            r#"{"ts": 1700000000.5, "method": "post", "url": "https://shop.example/cart?x=1", "status": 201}"#,
            4,
            &Mapping::default(),
        )
        .unwrap();
        assert_eq!(e.method, "POST");
        assert_eq!(e.target, "/cart?x=1");
        assert_eq!(e.host.as_deref(), Some("shop.example"));
        assert_eq!(e.status, Some(201));
        assert_eq!(e.at_ns, Some(1_700_000_000_500_000_000));
        assert_eq!(e.resolution_ns, 100_000_000);
        let m: Mapping = "time=req.at,url=req.line,status=code,duration=took"
            .parse()
            .unwrap();
        let e = parse(
            r#"{"req": {"at": "2023-11-14T22:13:20.750Z", "line": "DELETE /items/3 HTTP/1.1"}, "code": "204", "took": 0.25}"#,
            5,
            &m,
        )
        .unwrap();
        assert_eq!(
            (e.method.as_str(), e.target.as_str()),
            ("DELETE", "/items/3")
        );
        assert_eq!(e.status, Some(204));
        assert_eq!(e.at_ns, Some(1_700_000_000_500_000_000));
        assert_eq!(e.resolution_ns, 1_000_000);
    }

    #[test]
    fn what_is_missing_is_named() {
        let m = Mapping::default();
        assert!(parse("{", 1, &m).unwrap_err().why.starts_with("not JSON"));
        let err = parse(r#"{"status": 200}"#, 2, &m).unwrap_err();
        assert!(
            err.why
                .contains("no URL or path at url or uri or path or request_uri"),
            "{}",
            err.why
        );
        let err = parse(r#"{"url": "/", "ts": "soon"}"#, 3, &m).unwrap_err();
        assert!(err.why.contains("the time is not a time"), "{}", err.why);
        assert!("verb=method".parse::<Mapping>().is_err());
        assert!("time".parse::<Mapping>().is_err());
    }
}
