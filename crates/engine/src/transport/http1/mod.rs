//! HTTP/1.1 on the wire: requests are encoded once per run; responses are read
//! incrementally from a per-connection buffer, their heads parsed in one pass where they have
//! the shape servers send (`quick_head`) and by `httparse` otherwise, and their bodies
//! skipped without copying (Content-Length, chunked, or until close). Leftover bytes stay in
//! the buffer, so pipelined responses are read in order.

pub(crate) mod link;

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use loadlab_template::Template;

use crate::config::{CloseBy, RunConfig};
use crate::error::ErrorClass;

/// Encodes the run's fixed request once.
pub fn encode_request(cfg: &RunConfig) -> Vec<u8> {
    let headers: Vec<(String, Template)> = cfg
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), Template::literal(v.as_bytes())))
        .collect();
    let request = H1Request::new(
        cfg,
        &cfg.method,
        Template::literal(cfg.target.path_and_query.as_bytes()),
        &headers,
        Template::literal(cfg.body.clone()),
    );
    let mut out = Vec::new();
    let mut gen = loadlab_template::Generator::new(0, 0);
    request.render(
        &loadlab_template::Draw::default(),
        &mut gen,
        &mut out,
        &mut Vec::new(),
    );
    out
}

/// A piece of an HTTP/1.1 request.
#[derive(Debug)]
enum Piece {
    /// Fixed bytes.
    Lit(Vec<u8>),
    /// A template's rendering.
    Tpl(Template),
    /// The rendered body's length, in decimal.
    BodyLen,
}

/// One kind of request as HTTP/1.1 bytes, compiled once: fixed pieces (merged) and
/// templates, the body rendered first so that its length can be written before it.
#[derive(Debug)]
pub struct H1Request {
    head: Vec<Piece>,
    body: Template,
    /// A HEAD request (its response has no body).
    pub(crate) head_request: bool,
}

impl H1Request {
    /// The request `method path` with `headers` and `body`, on `cfg`'s target with its
    /// connection settings (`Host`, `User-Agent`, `Content-Length` and `Connection: close`
    /// added unless given).
    pub(crate) fn new(
        cfg: &RunConfig,
        method: &str,
        path: Template,
        headers: &[(String, Template)],
        body: Template,
    ) -> H1Request {
        let t = &cfg.target;
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let mut head = Vec::new();
        let lit = |head: &mut Vec<Piece>, bytes: &[u8]| match head.last_mut() {
            Some(Piece::Lit(v)) => v.extend_from_slice(bytes),
            _ => head.push(Piece::Lit(bytes.to_vec())),
        };
        let tpl = |head: &mut Vec<Piece>, t: Template| match t.as_literal() {
            Some(bytes) => {
                let bytes = bytes.to_vec();
                lit(head, &bytes)
            }
            None => head.push(Piece::Tpl(t)),
        };
        lit(&mut head, format!("{method} ").as_bytes());
        tpl(&mut head, path);
        lit(&mut head, b" HTTP/1.1\r\n");
        if !has("host") {
            let default_port = match t.scheme {
                crate::config::Scheme::Http => 80,
                crate::config::Scheme::Https => 443,
            };
            let host = if t.host.contains(':') {
                format!("[{}]", t.host)
            } else {
                t.host.clone()
            };
            if t.port == default_port {
                lit(&mut head, format!("Host: {host}\r\n").as_bytes());
            } else {
                lit(&mut head, format!("Host: {host}:{}\r\n", t.port).as_bytes());
            }
        }
        if !has("user-agent") {
            lit(
                &mut head,
                concat!("User-Agent: loadlab/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            );
        }
        for (n, v) in headers {
            lit(&mut head, format!("{n}: ").as_bytes());
            tpl(&mut head, v.clone());
            lit(&mut head, b"\r\n");
        }
        let fixed_body = body.as_literal();
        let needs_length =
            fixed_body.is_none_or(|b| !b.is_empty()) || matches!(method, "POST" | "PUT" | "PATCH");
        if needs_length && !has("content-length") {
            match fixed_body {
                Some(b) => lit(
                    &mut head,
                    format!("Content-Length: {}\r\n", b.len()).as_bytes(),
                ),
                None => {
                    lit(&mut head, b"Content-Length: ");
                    head.push(Piece::BodyLen);
                    lit(&mut head, b"\r\n");
                }
            }
        }
        if cfg.transport.closes() == Some(CloseBy::Server) && !has("connection") {
            lit(&mut head, b"Connection: close\r\n");
        }
        lit(&mut head, b"\r\n");
        H1Request {
            head,
            body,
            head_request: method == "HEAD",
        }
    }

    /// Appends the request's bytes to `out`; `scratch` holds the body while its length is
    /// written. Allocates nothing once both buffers have grown to a request's size.
    pub(crate) fn render(
        &self,
        draw: &loadlab_template::Draw<'_>,
        gen: &mut loadlab_template::Generator,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) {
        scratch.clear();
        let body: &[u8] = match self.body.as_literal() {
            Some(b) => b,
            None => {
                self.body.render(draw, gen, scratch);
                scratch
            }
        };
        for piece in &self.head {
            match piece {
                Piece::Lit(b) => out.extend_from_slice(b),
                Piece::Tpl(t) => t.render(draw, gen, out),
                Piece::BodyLen => {
                    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes())
                }
            }
        }
        out.extend_from_slice(body);
    }
}

impl H1Request {
    /// Inserts `header` (`Name: value\r\n`) at the end of the head of a request
    /// [`H1Request::render`] just appended to `out` with `scratch`.
    pub(crate) fn insert_header(&self, out: &mut Vec<u8>, scratch: &[u8], header: &[u8]) {
        let body = self.body.as_literal().map_or(scratch.len(), <[u8]>::len);
        // The head ends with the empty line's CRLF, just before the body.
        let at = out.len() - body - 2;
        out.splice(at..at, header.iter().copied());
    }
}

/// What the engine needs to know of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseMeta {
    /// Status code.
    pub status: u16,
    /// The connection cannot be reused after this response.
    pub close: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Body {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

const INITIAL_BUF: usize = 16 * 1024;
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// Reads responses from one connection.
pub struct ResponseReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    head_request: bool,
    /// Some byte of the response being read has arrived.
    began: bool,
}

impl ResponseReader {
    /// A reader for responses to `method` requests.
    pub fn new(method: &str) -> ResponseReader {
        ResponseReader {
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
            head_request: method == "HEAD",
            began: false,
        }
    }

    /// Whether the next responses answer HEAD requests (a run of several methods says so
    /// before each read).
    pub fn expect_head(&mut self, head: bool) {
        self.head_request = head;
    }

    /// Forgets buffered bytes (for a new connection).
    pub fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Whether any byte of the response [`ResponseReader::read`] last read (or failed to
    /// read) had arrived: `false` after a clean close before the response began.
    pub fn began(&self) -> bool {
        self.began
    }

    /// Whether the server sent bytes no request asked for, checked before a request is
    /// written on a kept-alive connection: bytes left over after the last complete response
    /// (a second response for one request, a 204 or 304 with a body), or, with `peek`, bytes
    /// readable right now without waiting (a response sent before its request: every
    /// answer then lands one request late). One non-blocking read, done only when `peek`;
    /// a clean close or an error is left for the next read to meet.
    pub fn unsolicited<S: AsyncRead + Unpin>(&mut self, s: &mut S, peek: bool) -> bool {
        if self.start != self.end {
            return true;
        }
        if !peek {
            return false;
        }
        self.start = 0;
        self.end = 0;
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = ReadBuf::new(&mut self.buf[..]);
        match Pin::new(s).poll_read(&mut cx, &mut out) {
            Poll::Ready(Ok(())) => {
                self.end = out.filled().len();
                self.end > 0
            }
            Poll::Ready(Err(_)) | Poll::Pending => false,
        }
    }

    /// Reads more bytes; returns how many (0 at end of stream).
    async fn fill<S: AsyncRead + Unpin>(&mut self, s: &mut S) -> Result<usize, ErrorClass> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                if self.buf.len() >= MAX_HEAD {
                    return Err(ErrorClass::MalformedResponse);
                }
                self.buf.resize(MAX_HEAD, 0);
            }
        }
        let n = s
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|e| ErrorClass::from_io(&e, false))?;
        self.end += n;
        Ok(n)
    }

    /// Reads one complete response, skipping its body.
    pub async fn read<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
    ) -> Result<ResponseMeta, ErrorClass> {
        self.read_into(s, None).await
    }

    /// Reads one complete response, keeping its headers and (if `capture` asks) its body
    /// in `capture`: a session's response, for its cookies and extract rules.
    pub async fn read_captured<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        capture: &mut Capture,
    ) -> Result<ResponseMeta, ErrorClass> {
        capture.clear();
        self.read_into(s, Some(capture)).await
    }

    async fn read_into<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        mut capture: Option<&mut Capture>,
    ) -> Result<ResponseMeta, ErrorClass> {
        self.began = self.start != self.end;
        let (meta, body) = loop {
            match self.parse_head(capture.as_deref_mut())? {
                Some((meta, body, used)) => {
                    self.start += used;
                    match meta.status {
                        // Interim responses (100 Continue, 103 Early Hints): read on.
                        100 | 102..=199 => continue,
                        _ => break (meta, body),
                    }
                }
                None => {
                    let had_bytes = self.start != self.end;
                    let n = self.fill(s).await?;
                    self.began |= n > 0;
                    if n == 0 {
                        return Err(if had_bytes {
                            ErrorClass::MalformedResponse
                        } else {
                            ErrorClass::ConnectionClosed
                        });
                    }
                }
            }
        };
        match body {
            Body::None => {}
            Body::Length(n) => self.skip(s, n, capture).await?,
            Body::Chunked => self.skip_chunked(s, capture).await?,
            Body::UntilClose => {
                while {
                    if let Some(c) = capture.as_deref_mut() {
                        c.keep(&self.buf[self.start..self.end]);
                    }
                    self.start = self.end;
                    self.fill(s).await? > 0
                } {}
            }
        }
        Ok(meta)
    }

    fn parse_head(
        &self,
        capture: Option<&mut Capture>,
    ) -> Result<Option<(ResponseMeta, Body, usize)>, ErrorClass> {
        let bytes = &self.buf[self.start..self.end];
        if bytes.is_empty() {
            // Every read asks before its first bytes are in.
            return Ok(None);
        }
        if capture.is_none() {
            if let Some(quick) = quick_head(bytes) {
                let (status, framing, used) = quick?;
                return Ok(Some(framing.meta(status, self.head_request, used)));
            }
        }
        // Left uninitialised: httparse writes the headers it finds (zeroing 64 of them for
        // every response was half of this function's time at 50,000 responses a second).
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let used = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            bytes,
            &mut headers,
        ) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(ErrorClass::MalformedResponse),
        };
        let status = resp.code.unwrap_or(0);
        if let Some(c) = capture {
            // Interim responses' headers are replaced by the final one's.
            c.clear();
            for h in resp.headers.iter() {
                c.header(h.name.as_bytes(), h.value);
            }
        }
        let mut framing = Framing::new(resp.version == Some(0));
        for h in resp.headers.iter() {
            framing.header(h.name.as_bytes(), h.value)?;
        }
        Ok(Some(framing.meta(status, self.head_request, used)))
    }

    async fn skip<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        mut n: usize,
        mut capture: Option<&mut Capture>,
    ) -> Result<(), ErrorClass> {
        loop {
            let take = n.min(self.end - self.start);
            if let Some(c) = capture.as_deref_mut() {
                c.keep(&self.buf[self.start..self.start + take]);
            }
            self.start += take;
            n -= take;
            if n == 0 {
                return Ok(());
            }
            if self.fill(s).await? == 0 {
                return Err(ErrorClass::ConnectionClosed);
            }
        }
    }

    async fn skip_chunked<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        mut capture: Option<&mut Capture>,
    ) -> Result<(), ErrorClass> {
        loop {
            match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                Ok(httparse::Status::Complete((used, 0))) => {
                    self.start += used;
                    return self.skip_trailers(s).await;
                }
                Ok(httparse::Status::Complete((used, size))) => {
                    self.start += used;
                    let size = usize::try_from(size).map_err(|_| ErrorClass::MalformedResponse)?;
                    self.skip(s, size, capture.as_deref_mut()).await?;
                    self.skip(s, 2, None).await?;
                }
                Ok(httparse::Status::Partial) => {
                    if self.fill(s).await? == 0 {
                        return Err(ErrorClass::ConnectionClosed);
                    }
                }
                Err(_) => return Err(ErrorClass::MalformedResponse),
            }
        }
    }

    async fn skip_trailers<S: AsyncRead + Unpin>(&mut self, s: &mut S) -> Result<(), ErrorClass> {
        loop {
            let avail = &self.buf[self.start..self.end];
            match avail.windows(2).position(|w| w == b"\r\n") {
                Some(0) => {
                    self.start += 2;
                    return Ok(());
                }
                Some(p) => self.start += p + 2,
                None => {
                    if self.fill(s).await? == 0 {
                        return Err(ErrorClass::ConnectionClosed);
                    }
                }
            }
        }
    }
}

/// What a session keeps of a response: its headers (for `Set-Cookie` and header extract
/// rules) and, when asked, its body up to a cap (for body extract rules). Reused across
/// responses: it allocates only while growing.
#[derive(Debug, Default)]
pub struct Capture {
    /// The header names and values, back to back.
    bytes: Vec<u8>,
    /// Each header's name and value as ranges of `bytes`.
    fields: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    /// The body, up to `body_cap` bytes.
    body: Vec<u8>,
    /// The most body bytes kept (0: none).
    body_cap: usize,
    /// The body was longer than `body_cap`.
    truncated: bool,
}

/// The most bytes of a body a session keeps for its extract rules.
pub const MAX_CAPTURED_BODY: usize = 1 << 20;

impl Capture {
    /// A capture that keeps at most `body_cap` bytes of each body (0: headers only).
    pub fn new(body_cap: usize) -> Capture {
        Capture {
            body_cap,
            ..Capture::default()
        }
    }

    /// Keeps at most `cap` bytes of the next bodies (0: none).
    pub fn keep_body(&mut self, cap: usize) {
        self.body_cap = cap;
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
        self.body.clear();
        self.truncated = false;
    }

    fn header(&mut self, name: &[u8], value: &[u8]) {
        let n0 = self.bytes.len();
        self.bytes.extend_from_slice(name);
        let v0 = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.fields.push((n0..v0, v0..self.bytes.len()));
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = self.body_cap.saturating_sub(self.body.len());
        if bytes.len() > room {
            self.truncated = true;
        }
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The values of every header named `name` (ASCII case-insensitive), in order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| self.bytes[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| &self.bytes[v.clone()])
    }

    /// The body kept (its first `body_cap` bytes).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body was longer than what was kept.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl loadlab_session::Headers for Capture {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| self.bytes[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| &self.bytes[v.clone()])
    }
}

/// What a response's head says of where its body ends and whether the connection is kept,
/// gathered header by header.
struct Framing {
    length: Option<usize>,
    chunked: bool,
    encoded: bool,
    close: bool,
}

impl Framing {
    /// Before any header: an HTTP/1.0 response closes unless it says keep-alive.
    fn new(http10: bool) -> Framing {
        Framing {
            length: None,
            chunked: false,
            encoded: false,
            close: http10,
        }
    }

    /// One header line; a Content-Length that is not one, or differs from an earlier one,
    /// is malformed.
    #[inline]
    fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), ErrorClass> {
        // Most headers are none of the three: their length says so.
        if !matches!(name.len(), 14 | 17 | 10) {
            return Ok(());
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = content_length(value).ok_or(ErrorClass::MalformedResponse)?;
            // RFC 9112 §6.3: differing lengths leave the message's end unknown.
            if self.length.is_some_and(|l| l != n) {
                return Err(ErrorClass::MalformedResponse);
            }
            self.length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // The codings of every Transfer-Encoding line, in order: the body is chunked
            // only if chunked is the last of them (RFC 9112 §6.3).
            self.encoded = true;
            self.chunked = last_token(value).eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_token(value, b"close") {
                self.close = true;
            } else if contains_token(value, b"keep-alive") {
                self.close = false;
            }
        }
        Ok(())
    }

    /// The response's status, body and reuse, its head `used` bytes long.
    fn meta(self, status: u16, head_request: bool, used: usize) -> (ResponseMeta, Body, usize) {
        let mut close = self.close;
        let body = if head_request || status == 204 || status == 304 || (100..200).contains(&status)
        {
            Body::None
        } else if self.chunked {
            // RFC 9112 §6.3: with both, Transfer-Encoding wins and the connection must not
            // be reused (the length may be a smuggling attempt).
            if self.length.is_some() {
                close = true;
            }
            Body::Chunked
        } else if self.encoded {
            // A transfer coding other than chunked last: the body ends at the close.
            close = true;
            Body::UntilClose
        } else if let Some(n) = self.length {
            Body::Length(n)
        } else {
            close = true;
            Body::UntilClose
        };
        (ResponseMeta { status, close }, body, used)
    }
}

/// `HEAD_BYTES[b]`: whether `b` may be in a header name (a token character, RFC 9110 §5.6.2)
/// and whether it may be in a header value or a reason phrase (HTAB, SP, visible ASCII,
/// obs-text).
const NAME: u8 = 1;
const VALUE: u8 = 2;
static HEAD_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        if c == b'\t' || c == b' ' || (c >= 0x21 && c != 0x7f) {
            t[b] |= VALUE;
        }
        if c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            )
        {
            t[b] |= NAME;
        }
        b += 1;
    }
    t
};

/// The head servers send, read in one pass without httparse: `HTTP/1.0` or `HTTP/1.1`, a
/// three-digit status and a reason, then header lines `name: value`, every line ended by
/// CRLF, at most [`MAX_HEADERS`] of them: `(status, framing, head length)`, or the
/// malformed framing a header declared. `None` for anything else (an incomplete head, bare
/// LF line ends, folded or otherwise unusual lines, a byte either grammar refuses): httparse
/// reads those. What this accepts is a subset of what httparse accepts, read the same way
/// (tested against httparse on generated heads).
#[inline]
fn quick_head(b: &[u8]) -> Option<Result<(u16, Framing, usize), ErrorClass>> {
    if b.len() < 16 || !b.starts_with(b"HTTP/1.") || !matches!(b[7], b'0' | b'1') || b[8] != b' ' {
        return None;
    }
    let digit = |c: u8| c.is_ascii_digit().then(|| u16::from(c - b'0'));
    let status = digit(b[9])? * 100 + digit(b[10])? * 10 + digit(b[11])?;
    if b[12] != b' ' {
        return None;
    }
    // The reason phrase, to its CRLF.
    let mut i = value_end(b, 13)?;
    let mut framing = Framing::new(b[7] == b'0');
    let mut malformed = None;
    let mut headers = 0;
    loop {
        // At a CR: the end of the line before.
        if *b.get(i + 1)? != b'\n' {
            return None;
        }
        i += 2;
        if *b.get(i)? == b'\r' {
            // The empty line: the head ends after its LF.
            return (*b.get(i + 1)? == b'\n').then(|| match malformed {
                Some(e) => Err(e),
                None => Ok((status, framing, i + 2)),
            });
        }
        headers += 1;
        if headers > MAX_HEADERS {
            return None;
        }
        let name_at = i;
        while HEAD_BYTES[usize::from(*b.get(i)?)] & NAME != 0 {
            i += 1;
        }
        if i == name_at || b[i] != b':' {
            return None;
        }
        let name = &b[name_at..i];
        i += 1;
        while matches!(*b.get(i)?, b' ' | b'\t') {
            i += 1;
        }
        let value_at = i;
        i = value_end(b, i)?;
        // Its trailing whitespace stays: every reading of a value trims it.
        if malformed.is_none() {
            malformed = framing.header(name, &b[value_at..i]).err();
        }
    }
}

/// Where the value (or reason phrase) starting at `b[i]` ends: the index of its CR; `None`
/// at a byte a value may not hold or at the end of `b`. Eight bytes at a time while none of
/// them is below 0x20 (HTAB, CR and every control byte are) or DEL.
#[inline]
fn value_end(b: &[u8], mut i: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_ne_bytes(chunk.try_into().ok()?);
        // A byte below 0x20 or equal to 0x7f sets its high bit here (the classic "has a
        // byte less than n" test, on `w` and on `w` with DEL turned to zero).
        let low = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let d = w ^ (ONES * 0x7f);
        let del = d.wrapping_sub(ONES) & !d & HIGH;
        if low | del != 0 {
            break;
        }
        i += 8;
    }
    while *b.get(i)? != b'\r' {
        if HEAD_BYTES[usize::from(b[i])] & VALUE == 0 {
            return None;
        }
        i += 1;
    }
    Some(i)
}

/// A Content-Length value: ASCII digits only (RFC 9110 §8.6; `+5` or `5 5` are not lengths),
/// `None` if it is not one or does not fit.
fn content_length(value: &[u8]) -> Option<usize> {
    let v = value.trim_ascii();
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0usize, |n, &d| {
        d.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
    })
}

/// The last element of a comma-separated header value, trimmed (empty elements skipped).
fn last_token(value: &[u8]) -> &[u8] {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .rfind(|t| !t.is_empty())
        .unwrap_or_default()
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_server_closing_is_asked_for_with_connection_close() {
        let encoded = |keep_alive: bool, close_by: CloseBy| {
            let w = crate::config::Workload {
                url: "http://127.0.0.1:8080/x".into(),
                transport: crate::config::Transport::Http1 {
                    keep_alive,
                    close_by,
                    pipeline: 1,
                    max_connections: None,
                    retry_unprocessed: false,
                },
                ..Default::default()
            };
            String::from_utf8(encode_request(&w.validate().unwrap())).unwrap()
        };
        assert!(encoded(false, CloseBy::Server).contains("\r\nConnection: close\r\n"));
        // loadlab closes itself: the request is an ordinary HTTP/1.1 one, kept open by the
        // server until loadlab closes after the response.
        let client = encoded(false, CloseBy::Client);
        assert!(
            !client.to_ascii_lowercase().contains("connection:"),
            "{client}"
        );
        assert!(!encoded(true, CloseBy::Server).contains("Connection:"));
    }

    fn read_all(input: &[u8], method: &str, count: usize) -> Vec<Result<ResponseMeta, ErrorClass>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            // Feed in 7-byte pieces to exercise every partial path.
            let mut builder = tokio_test_reader(input);
            let mut r = ResponseReader::new(method);
            let mut out = Vec::new();
            for _ in 0..count {
                out.push(r.read(&mut builder).await);
            }
            out
        })
    }

    /// A reader that hands out at most 7 bytes per read.
    fn tokio_test_reader(input: &[u8]) -> impl AsyncRead + Unpin + '_ {
        struct Slow<'a>(&'a [u8]);
        impl AsyncRead for Slow<'_> {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let n = self.0.len().min(7).min(buf.remaining());
                buf.put_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                std::task::Poll::Ready(Ok(()))
            }
        }
        Slow(input)
    }

    type Parsed = Result<Option<(ResponseMeta, Body, usize)>, ErrorClass>;

    /// A reader holding `head` whole: what `parse_head` makes of it on the quick path (where
    /// it takes it) and through httparse (a capture always goes there).
    fn both_ways(head: &[u8], method: &str) -> (Parsed, Parsed) {
        let mut r = ResponseReader::new(method);
        r.buf = head.to_vec();
        r.end = head.len();
        (r.parse_head(None), r.parse_head(Some(&mut Capture::new(0))))
    }

    #[test]
    fn the_heads_servers_send_take_the_quick_path_and_read_as_httparse_reads_them() {
        let nginx = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sat, 28 Nov 2026 23:40:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";
        let heads: [(&[u8], ResponseMeta, Body); 6] = [
            (
                nginx,
                ResponseMeta {
                    status: 200,
                    close: false,
                },
                Body::Length(2),
            ),
            (
                b"HTTP/1.0 404 Not Found\r\ncontent-length:  7 \r\n\r\n",
                ResponseMeta {
                    status: 404,
                    close: true,
                },
                Body::Length(7),
            ),
            (
                b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                ResponseMeta {
                    status: 200,
                    close: false,
                },
                Body::Length(0),
            ),
            (
                b"HTTP/1.1 503 \r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
                ResponseMeta {
                    status: 503,
                    close: true,
                },
                Body::Chunked,
            ),
            (
                b"HTTP/1.1 200 OK\r\nX-Odd:\t\xe9t\xe9 \t\r\nconnection: close\r\n\r\n",
                ResponseMeta {
                    status: 200,
                    close: true,
                },
                Body::UntilClose,
            ),
            (
                b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
                ResponseMeta {
                    status: 204,
                    close: false,
                },
                Body::None,
            ),
        ];
        for (head, meta, body) in heads {
            assert!(
                quick_head(head).is_some(),
                "{}",
                String::from_utf8_lossy(head)
            );
            let (quick, slow) = both_ways(head, "GET");
            let used = head.len() - usize::from(head.ends_with(b"ok")) * 2;
            assert_eq!(quick, Ok(Some((meta, body, used))));
            assert_eq!(quick, slow);
        }
        // Malformed framing is malformed either way; so are differing lengths.
        for head in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        ] {
            assert!(quick_head(head).is_some());
            let (quick, slow) = both_ways(head, "GET");
            assert_eq!(quick, Err(ErrorClass::MalformedResponse));
            assert_eq!(quick, slow);
        }
        // What the quick path leaves to httparse.
        for head in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"[..], // incomplete
            b"HTTP/1.1 200 OK\nContent-Length: 2\n\n",        // bare LF
            b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",         // folded
            b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",              // space before the colon
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: \x01\r\n\r\n",
        ] {
            assert!(
                quick_head(head).is_none(),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    // The pieces of generated heads: in each list, those servers send come first (`CLEAN`
    // of them), then those they should not.
    const VERSIONS: [&str; 5] = ["HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "http/1.1", "HTTP/1.1 "];
    const CODES: [&str; 9] = [
        "200", "204", "304", "101", "404", "999", "20", "2x0", "0200",
    ];
    const REASONS: [&str; 8] = [
        " OK",
        " ",
        " Not\tFound",
        " caf\u{e9}",
        "",
        " a\x7fb",
        " a\rb",
        " a\nb",
    ];
    const NAMES: [&str; 10] = [
        "Content-Length",
        "content-length",
        "Transfer-Encoding",
        "Connection",
        "X-A",
        "Set-Cookie",
        "X A",
        "",
        "X\x00",
        "X\u{e9}",
    ];
    const COLONS: [&str; 5] = [":", ": ", ":\t ", " :", ":\r\n"];
    const VALUES: [&str; 17] = [
        "2",
        " 2 ",
        "0",
        "chunked",
        "gzip, chunked",
        "chunked, gzip",
        "close",
        "keep-alive",
        "Keep-Alive, close",
        "",
        "a\tb",
        "\u{e9}t\u{e9}",
        "a \t",
        "+2",
        "2, 2",
        "18446744073709551616",
        "a\x01b",
    ];
    const EOLS: [&str; 5] = ["\r\n", "\n", "\r\n ", "\r\r\n", "\r\n\t"];
    const ENDS: [&str; 4] = ["\r\n", "\n", "", "\r"];

    /// Piece `i` of `list`: among its first `clean` only, when the head is to be clean.
    fn piece<'a>(list: &[&'a str], clean: usize, only_clean: bool, i: usize) -> &'a str {
        list[if only_clean {
            i % clean
        } else {
            i % list.len()
        }]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Heads built from the pieces servers send and the bytes they should not, clean
        /// (every piece one a server sends: the quick path's) or not, up to 70 header lines
        /// (past its 64), cut anywhere or whole: wherever the quick path reads one, it reads
        /// it as httparse does (status, framing, reuse, length, or the error).
        #[test]
        fn the_quick_path_reads_every_head_it_takes_as_httparse_does(
            clean in proptest::bool::ANY,
            first in (0usize..64, 0usize..64, 0usize..64),
            lines in proptest::collection::vec((0usize..64, 0usize..64, 0usize..64, 0usize..64), 0..70),
            end in 0usize..64,
            cut in proptest::option::weighted(0.3, 0usize..600),
            head_request in proptest::bool::ANY,
        ) {
            let mut head = format!(
                "{} {}{}\r\n",
                piece(&VERSIONS, 2, clean, first.0),
                piece(&CODES, 5, clean, first.1),
                piece(&REASONS, 5, clean, first.2),
            );
            for &(n, c, v, e) in &lines {
                head.push_str(piece(&NAMES, 6, clean, n));
                head.push_str(piece(&COLONS, 3, clean, c));
                head.push_str(piece(&VALUES, 13, clean, v));
                // A clean head's lines end with CRLF, mostly even in a noisy one.
                head.push_str(piece(&EOLS, 1, clean || e % 8 != 0, e));
            }
            head.push_str(piece(&ENDS, 1, clean, end));
            let mut head = head.into_bytes();
            if let Some(cut) = cut {
                head.truncate(cut);
            }
            let (quick, slow) = both_ways(&head, if head_request { "HEAD" } else { "GET" });
            proptest::prop_assert_eq!(quick, slow, "{}", String::from_utf8_lossy(&head));
        }
    }

    /// A value's end is found eight bytes at a time: every byte a value may not hold stops
    /// it wherever it sits, and every byte it may hold (HTAB, visible ASCII, obs-text) does
    /// not.
    #[test]
    fn a_value_ends_at_its_cr_and_no_forbidden_byte_is_skipped() {
        let clean = b"Sat, 28 Nov 2026 23:40:00 GMT and a longer tail";
        for at in 0..clean.len() {
            for byte in 0..=255u8 {
                let mut v = clean.to_vec();
                v[at] = byte;
                v.extend_from_slice(b"\r\nX: y\r\n\r\n");
                let allowed = byte == b'\t' || (byte >= 0x20 && byte != 0x7f);
                let end = value_end(&v, 0);
                if allowed {
                    assert_eq!(end, Some(clean.len()), "byte {byte:#04x} at {at}");
                } else if byte == b'\r' {
                    assert_eq!(end, Some(at), "a CR at {at}");
                } else {
                    assert_eq!(end, None, "byte {byte:#04x} at {at}");
                }
            }
        }
        assert_eq!(value_end(clean, 0), None, "no CR before the end");
    }

    /// The generated heads are not all left to httparse: a clean whole head of at most 64
    /// lines takes the quick path, so the test above compares the two.
    #[test]
    fn clean_generated_heads_take_the_quick_path() {
        let mut head = String::from("HTTP/1.0 304 Not\tFound\r\n");
        for i in 0..64 {
            head.push_str(NAMES[i % 6]);
            head.push_str(COLONS[i % 3]);
            head.push_str(VALUES[if i % 6 < 2 { 2 } else { i % 13 }]);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        assert!(quick_head(head.as_bytes()).is_some(), "{head}");
        let more = head.replacen("\r\n", "\r\nX-A: 1\r\n", 1);
        assert!(quick_head(more.as_bytes()).is_none(), "65 header lines");
        assert_eq!(
            both_ways(more.as_bytes(), "GET").0,
            Err(ErrorClass::MalformedResponse)
        );
    }

    #[test]
    fn pipelined_length_and_chunked() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let r = read_all(input, "GET", 4);
        assert_eq!(
            r[0],
            Ok(ResponseMeta {
                status: 200,
                close: false
            })
        );
        assert_eq!(
            r[1],
            Ok(ResponseMeta {
                status: 503,
                close: false
            })
        );
        assert_eq!(
            r[2],
            Ok(ResponseMeta {
                status: 204,
                close: false
            })
        );
        assert_eq!(r[3], Err(ErrorClass::ConnectionClosed));
    }

    #[test]
    fn close_delimited_and_interim() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nbody until close";
        let r = read_all(input, "GET", 1);
        assert_eq!(
            r[0],
            Ok(ResponseMeta {
                status: 200,
                close: true
            })
        );
    }

    #[test]
    fn malformed_and_truncated() {
        assert_eq!(
            read_all(b"garbage\r\n\r\n", "GET", 1)[0],
            Err(ErrorClass::MalformedResponse)
        );
        assert_eq!(
            read_all(b"HTTP/1.1 200 OK\r\nContent-Le", "GET", 1)[0],
            Err(ErrorClass::MalformedResponse)
        );
        assert_eq!(
            read_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                "GET",
                1
            )[0],
            Err(ErrorClass::ConnectionClosed)
        );
        assert_eq!(
            read_all(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "GET", 1)[0],
            Err(ErrorClass::MalformedResponse)
        );
    }

    #[test]
    fn head_has_no_body() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n";
        assert_eq!(
            read_all(input, "HEAD", 1)[0],
            Ok(ResponseMeta {
                status: 200,
                close: true
            })
        );
    }

    #[test]
    fn large_body_is_skipped_without_growing() {
        let mut input = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1_000_000));
        input.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut r = ResponseReader::new("GET");
            let mut s = &input[..];
            assert_eq!(r.read(&mut s).await.unwrap().status, 200);
            assert_eq!(r.read(&mut s).await.unwrap().status, 404);
            assert_eq!(r.buf.len(), INITIAL_BUF);
        });
    }

    #[test]
    fn content_length_is_digits_and_one_value() {
        let head = |cl: &str| format!("HTTP/1.1 200 OK\r\n{cl}\r\n\r\nok");
        for bad in [
            "Content-Length: +2",
            "Content-Length: 2, 2",
            "Content-Length: -2",
            "Content-Length: 2\r\nContent-Length: 3",
            "Content-Length: 99999999999999999999999",
        ] {
            let r = read_all(head(bad).as_bytes(), "GET", 1);
            assert_eq!(r[0], Err(ErrorClass::MalformedResponse), "{bad}");
        }
        // The same length twice is one length.
        let r = read_all(
            head("Content-Length: 2\r\nContent-Length:  2 ").as_bytes(),
            "GET",
            2,
        );
        assert_eq!(r[0].map(|m| m.status), Ok(200));
        assert_eq!(r[1], Err(ErrorClass::ConnectionClosed));
    }

    #[test]
    fn transfer_encoding_framing() {
        // Chunked with a Content-Length: chunked wins, the connection is not reused.
        let input =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        let r = read_all(input, "GET", 2);
        assert_eq!(
            r[0],
            Ok(ResponseMeta {
                status: 200,
                close: true
            })
        );
        assert_eq!(r[1], Err(ErrorClass::ConnectionClosed));
        // Chunked not last (or on an earlier line only): the body runs to the close.
        for te in [
            "Transfer-Encoding: chunked, gzip",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip",
        ] {
            let input = format!("HTTP/1.1 200 OK\r\n{te}\r\n\r\n2\r\nok\r\n0\r\n\r\n");
            let r = read_all(input.as_bytes(), "GET", 1);
            assert_eq!(
                r[0],
                Ok(ResponseMeta {
                    status: 200,
                    close: true
                }),
                "{te}"
            );
        }
        // Chunked last, with empty list elements, is chunked.
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked ,\r\n\r\n0\r\n\r\n";
        assert_eq!(read_all(input, "GET", 1)[0].map(|m| m.close), Ok(false));
    }

    /// Up to `MAX_HEADERS` header lines are read, the framing ones wherever they come (here
    /// last, after 63 others); one more and the response is malformed, never a response
    /// framed from half its head.
    #[test]
    fn a_head_of_up_to_64_headers_is_read_and_one_more_is_malformed() {
        let head = |n: usize| {
            let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
            for i in 0..n - 2 {
                h.extend_from_slice(format!("X-Filler-{i}: {i}\r\n").as_bytes());
            }
            h.extend_from_slice(b"Connection: close\r\nContent-Length: 2\r\n\r\nok");
            h
        };
        let full = read_all(&head(MAX_HEADERS), "GET", 1);
        assert_eq!(
            full[0],
            Ok(ResponseMeta {
                status: 200,
                close: true
            })
        );
        let over = read_all(&head(MAX_HEADERS + 1), "GET", 1);
        assert_eq!(over[0], Err(ErrorClass::MalformedResponse));
    }

    #[test]
    fn obsolete_line_folding_is_malformed() {
        let input = b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            read_all(input, "GET", 1)[0],
            Err(ErrorClass::MalformedResponse)
        );
    }

    #[test]
    fn an_endless_header_block_stops_at_the_limit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        while input.len() < 4 * MAX_HEAD {
            input.extend_from_slice(
                b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
            );
        }
        // One long header line too.
        let mut long = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
        long.resize(4 * MAX_HEAD, b'a');
        for input in [input, long] {
            rt.block_on(async {
                let mut r = ResponseReader::new("GET");
                let mut s = &input[..];
                assert_eq!(r.read(&mut s).await, Err(ErrorClass::MalformedResponse));
                assert!(r.buf.len() <= MAX_HEAD, "{}", r.buf.len());
            });
        }
    }

    /// Hands out its bytes once, then is never ready again (an open, quiet connection).
    struct Quiet<'a>(&'a [u8]);
    impl AsyncRead for Quiet<'_> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if self.0.is_empty() {
                return Poll::Pending;
            }
            let n = self.0.len().min(buf.remaining());
            buf.put_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn bytes_on_an_idle_connection_are_unsolicited() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            // Left over after a complete response: found without a read.
            let mut r = ResponseReader::new("GET");
            let mut s = Quiet(b"HTTP/1.1 204 No Content\r\n\r\nhello");
            assert_eq!(r.read(&mut s).await.unwrap().status, 204);
            assert!(r.unsolicited(&mut s, false));
            // A quiet connection: nothing, with or without a peek.
            let mut r = ResponseReader::new("GET");
            let mut s = Quiet(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            r.read(&mut s).await.unwrap();
            assert!(!r.unsolicited(&mut s, false));
            assert!(!r.unsolicited(&mut s, true));
            // Bytes that arrive later: only a peek sees them.
            let mut r = ResponseReader::new("GET");
            let mut s = Quiet(b"HTTP/1.1 200 OK\r\n\r\n");
            assert!(!r.unsolicited(&mut s, false));
            assert!(r.unsolicited(&mut s, true));
            // A clean close is left for the next read.
            let mut r = ResponseReader::new("GET");
            let mut s: &[u8] = b"";
            assert!(!r.unsolicited(&mut s, true));
            assert_eq!(r.read(&mut s).await, Err(ErrorClass::ConnectionClosed));
        });
    }
}
