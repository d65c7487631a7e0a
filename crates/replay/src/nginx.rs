//! Access logs written by a format string: nginx's `log_format` (`$remote_addr - $remote_user
//! [$time_local] "$request" …`), of which the `combined` and `common` formats are two that
//! Apache writes the same way.
//!
//! A format compiles into literals and variables; a line matches when every literal is where
//! the format puts it, each variable taking the text up to the literal after it (nginx
//! escapes a `"` inside a value as `\x22`, so a quoted value ends at its quote). The
//! variables a replay needs are read, the others skipped:
//!
//! | variable | read as |
//! |---|---|
//! | `$request` | the method and the target (`GET /a?b=1 HTTP/1.1`) |
//! | `$request_method`, `$request_uri`, `$uri` and `$args` | the same, apart |
//! | `$time_local`, `$time_iso8601`, `$msec` | when it was logged (to the second; `$msec` to the millisecond) |
//! | `$request_time` | how long it took: nginx logs a request when it ends, so it started that much earlier |
//! | `$status` | the status it had |
//! | `$host`, `$http_host` | the host it was sent to |
//! | `$http_NAME` | a request header (`$http_user_agent`: `User-Agent`) |
//!
//! A value of `-` is nginx's "none".

use crate::{Entry, LineError};

/// nginx's and Apache's `combined` format.
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";
/// The common log format.
pub const COMMON: &str =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent";

/// A variable of a format, as the reader uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Var {
    Request,
    Method,
    RequestUri,
    Uri,
    Args,
    TimeLocal,
    TimeIso,
    Msec,
    RequestTime,
    Status,
    Host,
    /// A request header, its name as sent (`User-Agent`).
    Header(String),
    /// Any other: matched and skipped.
    Other,
}

impl Var {
    fn named(name: &str) -> Var {
        match name {
            "request" => Var::Request,
            "request_method" => Var::Method,
            "request_uri" => Var::RequestUri,
            "uri" | "document_uri" => Var::Uri,
            "args" | "query_string" => Var::Args,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso,
            "msec" => Var::Msec,
            "request_time" => Var::RequestTime,
            "status" => Var::Status,
            "host" | "http_host" => Var::Host,
            // Cookies and credentials are headers like any other here; whether a replay
            // sends them is the replay's choice ([`crate::Policy`]).
            h if h.starts_with("http_") => Var::Header(header_name(&h[5..])),
            _ => Var::Other,
        }
    }
}

/// `user_agent` → `User-Agent`.
fn header_name(var: &str) -> String {
    var.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| {
                f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Var(Var, String),
}

/// A compiled format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFormat {
    pieces: Vec<Piece>,
    text: String,
}

/// Why a format string cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Two variables with nothing between them: where one ends is unknowable.
    #[error("`${0}` and `${1}` have nothing between them, so a line cannot say where one ends: put a space or a quote between them")]
    Adjacent(String, String),
    /// A `${` without its `}`.
    #[error("`${{` at byte {0} has no closing `}}`")]
    Unclosed(usize),
    /// Neither `$request` nor `$request_uri`/`$uri`: no request to replay.
    #[error("the format has no `$request`, `$request_uri` or `$uri`: it logs no request that could be replayed")]
    NoRequest,
}

impl LogFormat {
    /// Compiles an nginx `log_format` string (the quotes nginx's configuration puts around
    /// its parts are left out: `'$remote_addr - [$time_local] "$request"'` is
    /// `$remote_addr - [$time_local] "$request"`).
    pub fn compile(text: &str) -> Result<LogFormat, FormatError> {
        let mut pieces: Vec<Piece> = Vec::new();
        let b = text.as_bytes();
        let mut lit = String::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                let (name, next) = if b.get(i + 1) == Some(&b'{') {
                    let end = text[i + 2..].find('}').ok_or(FormatError::Unclosed(i))?;
                    (&text[i + 2..i + 2 + end], i + 3 + end)
                } else {
                    let len = b[i + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                        .count();
                    (&text[i + 1..i + 1 + len], i + 1 + len)
                };
                if name.is_empty() {
                    lit.push('$');
                    i += 1;
                    continue;
                }
                if !lit.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                } else if let Some(Piece::Var(_, before)) = pieces.last() {
                    return Err(FormatError::Adjacent(before.clone(), name.to_string()));
                }
                pieces.push(Piece::Var(Var::named(name), name.to_string()));
                i = next;
            } else {
                let ch = text[i..].chars().next().expect("in bounds");
                lit.push(ch);
                i += ch.len_utf8();
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit));
        }
        let has = |v: &Var| {
            pieces
                .iter()
                .any(|p| matches!(p, Piece::Var(x, _) if x == v))
        };
        if !has(&Var::Request) && !has(&Var::RequestUri) && !has(&Var::Uri) {
            return Err(FormatError::NoRequest);
        }
        Ok(LogFormat {
            pieces,
            text: text.to_string(),
        })
    }

    /// The format string as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Reads line `line` (its number, for errors) into a request.
    pub fn parse(&self, text: &str, line: u64) -> Result<Entry, LineError> {
        let bad = |why: String| LineError::new(line, text, why);
        let mut e = Entry::at_line(line);
        let (mut uri, mut args, mut request_time) = (None, None, None);
        let mut end_ns: Option<(u64, u64)> = None;
        let mut pos = 0;
        for (k, piece) in self.pieces.iter().enumerate() {
            match piece {
                Piece::Literal(l) => {
                    if !text[pos..].starts_with(l.as_str()) {
                        return Err(bad(format!(
                            "expected {l:?} at column {} (format `{}`)",
                            pos + 1,
                            self.text
                        )));
                    }
                    pos += l.len();
                }
                Piece::Var(var, name) => {
                    let end = match self.pieces.get(k + 1) {
                        Some(Piece::Literal(next)) => {
                            pos + text[pos..].find(next.as_str()).ok_or_else(|| {
                                bad(format!(
                                    "no {next:?} after `${name}` (format `{}`)",
                                    self.text
                                ))
                            })?
                        }
                        _ => text.len(),
                    };
                    let v = &text[pos..end];
                    pos = end;
                    let none = v == "-" || v.is_empty();
                    match var {
                        Var::Request => {
                            let mut w = v.split(' ');
                            match (w.next(), w.next()) {
                                (Some(m), Some(t))
                                    if !m.is_empty()
                                        && m.bytes().all(|c| c.is_ascii_uppercase())
                                        && (t.starts_with('/')
                                            || t.contains("://")
                                            || t == "*") =>
                                {
                                    e.method = m.to_string();
                                    // A proxy's absolute form: its host apart, its path
                                    // the target.
                                    match t.split_once("://") {
                                        Some((_, rest)) => {
                                            let i = rest.find('/').unwrap_or(rest.len());
                                            e.host.get_or_insert_with(|| rest[..i].to_string());
                                            e.target = match &rest[i..] {
                                                "" => "/".to_string(),
                                                p => p.to_string(),
                                            };
                                        }
                                        None => e.target = t.to_string(),
                                    }
                                }
                                _ => {
                                    return Err(bad(format!(
                                        "`$request` is not METHOD TARGET PROTOCOL: {v:?}"
                                    )))
                                }
                            }
                        }
                        Var::Method if !none => e.method = v.to_string(),
                        Var::RequestUri if !none => e.target = v.to_string(),
                        Var::Uri if !none => uri = Some(v),
                        Var::Args if !none => args = Some(v),
                        Var::TimeLocal => {
                            let t = crate::time::clf(v).ok_or_else(|| {
                                bad(format!("`$time_local` is not a time: {v:?}"))
                            })?;
                            end_ns.get_or_insert((t, 1_000_000_000));
                        }
                        Var::TimeIso => {
                            let t = crate::time::iso8601(v).ok_or_else(|| {
                                bad(format!("`$time_iso8601` is not a time: {v:?}"))
                            })?;
                            end_ns.get_or_insert((t, 1_000_000_000));
                        }
                        Var::Msec => {
                            let t = crate::time::epoch_text(v)
                                .ok_or_else(|| bad(format!("`$msec` is not a time: {v:?}")))?;
                            // The finest time wins over `$time_local`'s second.
                            end_ns = Some(t);
                        }
                        Var::RequestTime if !none => {
                            request_time = v.parse::<f64>().ok().filter(|s| *s >= 0.0);
                        }
                        Var::Status if !none => e.status = v.parse().ok(),
                        Var::Host if !none => e.host = Some(v.to_string()),
                        Var::Header(h) if !none => e.headers.push((h.clone(), unescape(v))),
                        _ => {}
                    }
                }
            }
        }
        if e.target.is_empty() {
            if let Some(u) = uri {
                e.target = match args {
                    Some(a) => format!("{u}?{a}"),
                    None => u.to_string(),
                };
            }
        }
        if e.target.is_empty() {
            return Err(bad("no request target".into()));
        }
        if e.method.is_empty() {
            e.method = "GET".into();
        }
        if let Some((end, res)) = end_ns {
            // Logged when it ended: it started `$request_time` earlier.
            let took = request_time.map_or(0, |s| (s * 1e9).round() as u64);
            e.at_ns = Some(end.saturating_sub(took));
            e.resolution_ns = res;
        }
        Ok(e)
    }
}

/// nginx's `\xHH` escapes (of `"`, `\` and bytes outside printable ASCII) put back.
fn unescape(v: &str) -> String {
    if !v.contains("\\x") {
        return v.to_string();
    }
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') {
            if let Some(h) = v
                .get(i + 2..i + 4)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(h);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_combined_line_gives_its_request_time_status_and_headers() {
        let f = LogFormat::compile(COMBINED).unwrap();
        let e = f
            .parse(
                r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?x=1 HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#,
                7,
            )
            .unwrap();
        assert_eq!(e.line, 7);
        assert_eq!(
            (e.method.as_str(), e.target.as_str()),
            ("GET", "/apache_pb.gif?x=1")
        );
        assert_eq!(e.status, Some(200));
        assert_eq!(e.at_ns, Some(971_211_336 * S));
        assert_eq!(e.resolution_ns, S);
        assert_eq!(
            e.headers,
            vec![
                (
                    "Referer".to_string(),
                    "http://www.example.com/start.html".to_string()
                ),
                (
                    "User-Agent".to_string(),
                    "Mozilla/4.08 [en] (Win98; I ;Nav)".to_string()
                ),
            ]
        );
        // A proxy's log holds absolute targets: the path is the target, the host apart.
        let e = f
            .parse(
                r#"::1 - - [10/Oct/2000:13:55:36 -0700] "GET http://shop.example/a?b=1 HTTP/1.1" 200 1 "-" "-""#,
                2,
            )
            .unwrap();
        assert_eq!(e.target, "/a?b=1");
        assert_eq!(e.host.as_deref(), Some("shop.example"));
        // The common format: the same without the two headers.
        let c = LogFormat::compile(COMMON).unwrap();
        let e = c
            .parse(
                r#"::1 - - [10/Oct/2000:13:55:36 -0700] "POST /form HTTP/1.1" 302 -"#,
                1,
            )
            .unwrap();
        assert_eq!((e.method.as_str(), e.status), ("POST", Some(302)));
        assert!(e.headers.is_empty());
    }

    #[test]
    fn msec_and_request_time_place_the_start_to_the_millisecond() {
        let f = LogFormat::compile(
            "$msec $request_time \"$request_method $uri?$args\" ${status} \"$http_x_request_id\" $host",
        )
        .unwrap();
        let e = f
            .parse(
                r#"1700000000.250 0.050 "GET /a/b?c=1" 404 "abc\x22def" shop.example"#,
                3,
            )
            .unwrap();
        assert_eq!(e.at_ns, Some(1_700_000_000_200_000_000));
        assert_eq!(e.resolution_ns, 1_000_000);
        assert_eq!(e.target, "/a/b?c=1");
        assert_eq!(e.status, Some(404));
        assert_eq!(e.host.as_deref(), Some("shop.example"));
        assert_eq!(e.headers, vec![("X-Request-Id".into(), "abc\"def".into())]);
    }

    #[test]
    fn lines_and_formats_that_do_not_fit_say_where() {
        let f = LogFormat::compile(COMBINED).unwrap();
        let err = f.parse("garbage", 12).unwrap_err();
        assert_eq!(err.line, 12);
        assert!(
            err.why.contains("no \" - \" after `$remote_addr`"),
            "{}",
            err.why
        );
        // A TLS handshake sent to a plaintext port, as nginx logs it.
        let err = f
            .parse(
                r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03\x01" 400 157 "-" "-""#,
                2,
            )
            .unwrap_err();
        assert!(
            err.why.contains("not METHOD TARGET PROTOCOL"),
            "{}",
            err.why
        );
        let err = f
            .parse(
                r#"1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 1 "-" "-""#,
                2,
            )
            .unwrap_err();
        assert!(
            err.why.contains("`$time_local` is not a time"),
            "{}",
            err.why
        );
        assert_eq!(
            LogFormat::compile("$status$request"),
            Err(FormatError::Adjacent("status".into(), "request".into()))
        );
        assert_eq!(
            LogFormat::compile("$status ${request"),
            Err(FormatError::Unclosed(8))
        );
        assert_eq!(
            LogFormat::compile("$status $bytes_sent"),
            Err(FormatError::NoRequest)
        );
    }
}
