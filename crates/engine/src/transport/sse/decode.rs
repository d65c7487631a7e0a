//! An event stream decoded as its bytes arrive: the response head, the chunked transfer
//! coding (or a body that runs to the connection's end), and the event stream format of
//! the HTML standard (lines of `field: value`, an event dispatched at a blank line when it
//! carried data; comments, `event`, and unknown fields ignored).

use crate::error::ErrorClass;

/// The largest response head read (a larger one is not an event stream's).
const MAX_HEAD: usize = 64 * 1024;
/// The longest line kept (a longer one's excess is dropped; its field still counts).
const MAX_LINE: usize = 64 * 1024;

/// What a stream said, one step at a time.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// An event was dispatched; `id` if it set one.
    Event {
        /// The `id:` field of the event, if any.
        id: Option<String>,
        /// Its data (its `data:` lines joined by newlines), when the decoder keeps it
        /// ([`Decoder::keeping_data`]).
        data: Option<Vec<u8>>,
    },
    /// The server asked for this reconnection time (`retry:`), ms.
    Retry(u64),
    /// The response was not a stream: a 4xx or 5xx, or `204 No Content`.
    Refused(u16),
    /// The server ended the stream (its chunked body's end, or the connection's).
    Ended,
}

/// The response head's facts an event stream needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// The body is chunked.
    pub chunked: bool,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Head,
    Body,
    Ended,
}

#[derive(Debug, Default)]
enum Chunk {
    /// Reading a chunk-size line: its value so far, and whether an extension began.
    #[default]
    Size,
    /// After the size's CR.
    SizeLf,
    /// Bytes of chunk data left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataCr,
    DataLf,
}

/// The decoder of one stream (made again for each stream).
#[derive(Debug, Default)]
pub struct Decoder {
    state: State,
    head: Vec<u8>,
    chunked: bool,
    chunk: Chunk,
    size: u64,
    size_digits: u32,
    size_ext: bool,
    line: Vec<u8>,
    last_cr: bool,
    data: bool,
    id: Option<String>,
    /// Keep each event's data ([`Decoder::keeping_data`]).
    keep_data: bool,
    data_buf: Vec<u8>,
}

impl Decoder {
    /// A decoder whose events carry their data (`--sent-at` reads a time in it); without,
    /// data is only noted, not kept.
    pub fn keeping_data(keep: bool) -> Decoder {
        Decoder {
            keep_data: keep,
            ..Decoder::default()
        }
    }

    /// Decodes from `bytes` up to the first step; returns the bytes used (the rest are
    /// for the next call) and the step, if one completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(usize, Option<Step>), ErrorClass> {
        let mut i = 0;
        if let State::Head = self.state {
            let before = self.head.len();
            self.head.extend_from_slice(bytes);
            let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                if self.head.len() > MAX_HEAD {
                    return Err(ErrorClass::MalformedResponse);
                }
                return Ok((bytes.len(), None));
            };
            i = end + 4 - before;
            match self.parse_head(end + 4)? {
                Ok(()) => self.state = State::Body,
                Err(status) => {
                    self.state = State::Ended;
                    return Ok((bytes.len(), Some(Step::Refused(status))));
                }
            }
        }
        while i < bytes.len() {
            if let State::Ended = self.state {
                return Ok((bytes.len(), None));
            }
            let b = bytes[i];
            i += 1;
            if !self.chunked {
                if let Some(step) = self.body_byte(b) {
                    return Ok((i, Some(step)));
                }
                continue;
            }
            match self.chunk {
                Chunk::Size => match b {
                    b'\r' => self.chunk = Chunk::SizeLf,
                    b';' => self.size_ext = true,
                    _ if self.size_ext => {}
                    _ => {
                        let d = (b as char)
                            .to_digit(16)
                            .ok_or(ErrorClass::MalformedResponse)?;
                        self.size_digits += 1;
                        if self.size_digits > 15 {
                            return Err(ErrorClass::MalformedResponse);
                        }
                        self.size = self.size * 16 + u64::from(d);
                    }
                },
                Chunk::SizeLf => {
                    if b != b'\n' || self.size_digits == 0 {
                        return Err(ErrorClass::MalformedResponse);
                    }
                    let size = std::mem::take(&mut self.size);
                    self.size_digits = 0;
                    self.size_ext = false;
                    if size == 0 {
                        // The last chunk: the server ended the stream.
                        self.state = State::Ended;
                        return Ok((bytes.len(), Some(Step::Ended)));
                    }
                    self.chunk = Chunk::Data(size);
                }
                Chunk::Data(left) => {
                    self.chunk = if left == 1 {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left - 1)
                    };
                    if let Some(step) = self.body_byte(b) {
                        return Ok((i, Some(step)));
                    }
                }
                Chunk::DataCr if b == b'\r' => self.chunk = Chunk::DataLf,
                Chunk::DataLf if b == b'\n' => self.chunk = Chunk::Size,
                Chunk::DataCr | Chunk::DataLf => return Err(ErrorClass::MalformedResponse),
            }
        }
        Ok((i, None))
    }

    /// The connection ended: before the head, a connection closed; after it, the stream
    /// ended (an event not yet dispatched is dropped, as the standard says).
    pub fn eof(&mut self) -> Result<Step, ErrorClass> {
        match self.state {
            State::Head => Err(ErrorClass::ConnectionClosed),
            State::Body | State::Ended => {
                self.state = State::Ended;
                Ok(Step::Ended)
            }
        }
    }

    /// Reads the head (its first `len` bytes of `self.head`); the bytes after it are the
    /// body's and were left in the caller's buffer. `Err(status)` inside: not a stream.
    fn parse_head(&mut self, len: usize) -> Result<Result<(), u16>, ErrorClass> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut headers);
        match r.parse(&self.head[..len]) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err(ErrorClass::MalformedResponse),
        }
        let status = r.code.unwrap_or(0);
        match status {
            200 => {}
            204 | 400..=599 => return Ok(Err(status)),
            _ => return Err(ErrorClass::MalformedResponse),
        }
        let value = |name: &str| {
            r.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
        };
        if !value("content-type").is_some_and(|t| t.trim_start().starts_with("text/event-stream")) {
            return Err(ErrorClass::MalformedResponse);
        }
        self.chunked = value("transfer-encoding").is_some_and(|t| t.contains("chunked"));
        self.head = Vec::new();
        Ok(Ok(()))
    }

    /// One byte of the event stream; a step when it completes a line that makes one.
    fn body_byte(&mut self, b: u8) -> Option<Step> {
        let cr = std::mem::replace(&mut self.last_cr, b == b'\r');
        match b {
            // CRLF: the line ended at its CR.
            b'\n' if cr => None,
            b'\r' | b'\n' => {
                let line = std::mem::take(&mut self.line);
                let step = self.line(&line);
                self.line = line;
                self.line.clear();
                step
            }
            _ => {
                if self.line.len() < MAX_LINE {
                    self.line.push(b);
                }
                None
            }
        }
    }

    /// A complete line.
    fn line(&mut self, line: &[u8]) -> Option<Step> {
        if line.is_empty() {
            if !std::mem::take(&mut self.data) {
                return None;
            }
            let data = self.keep_data.then(|| std::mem::take(&mut self.data_buf));
            return Some(Step::Event {
                id: self.id.take(),
                data,
            });
        }
        if line[0] == b':' {
            return None;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(at) => {
                let v = &line[at + 1..];
                (&line[..at], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.keep_data {
                    if self.data {
                        self.data_buf.push(b'\n');
                    }
                    self.data_buf.extend_from_slice(value);
                }
                self.data = true;
            }
            b"id" if !value.contains(&0) => {
                self.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                return std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .map(Step::Retry);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step of `input` fed in pieces of `piece` bytes, and how it ended.
    fn steps(input: &[u8], piece: usize) -> Vec<Step> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            let mut rest = chunk;
            while !rest.is_empty() {
                let (used, step) = d.feed(rest).unwrap();
                out.extend(step);
                rest = &rest[used..];
            }
        }
        out.push(d.eof().unwrap());
        out
    }

    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";

    #[test]
    fn events_of_a_chunked_stream_in_pieces_of_any_size() {
        let body = b"retry: 300\n\n: a comment\n\nid: 7\ndata: a\ndata: b\n\nevent: x\ndata\r\n\r\nid: 9\n\n";
        let mut chunked = Vec::new();
        for part in body.chunks(5) {
            chunked.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
            chunked.extend_from_slice(part);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let mut input = HEAD.to_vec();
        input.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        input.extend_from_slice(&chunked);
        for piece in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(
                steps(&input, piece),
                vec![
                    Step::Retry(300),
                    Step::Event {
                        id: Some("7".into()),
                        data: None,
                    },
                    Step::Event {
                        id: None,
                        data: None
                    },
                    // The chunked body's end, then the connection's.
                    Step::Ended,
                    Step::Ended,
                ],
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_body_to_the_connections_end_and_what_is_not_a_stream() {
        let mut input = HEAD.to_vec();
        input.extend_from_slice(b"\r\ndata: 1\n\ndata: 2\n\ndata: half");
        assert_eq!(
            steps(&input, 3),
            vec![
                Step::Event {
                    id: None,
                    data: None
                },
                Step::Event {
                    id: None,
                    data: None
                },
                Step::Ended
            ]
        );
        let mut d = Decoder::default();
        let (_, step) = d
            .feed(b"HTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        assert_eq!(step, Some(Step::Refused(503)));
        let mut d = Decoder::default();
        assert_eq!(
            d.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"),
            Err(ErrorClass::MalformedResponse)
        );
        let mut d = Decoder::default();
        let mut input = HEAD.to_vec();
        input.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert_eq!(d.feed(&input), Err(ErrorClass::MalformedResponse));
        // Closed before a head.
        let mut d = Decoder::default();
        assert_eq!(d.feed(b"HTTP/1.1 2").unwrap(), (10, None));
        assert_eq!(d.eof(), Err(ErrorClass::ConnectionClosed));
    }

    #[test]
    fn a_decoder_keeping_data_gives_each_event_its_lines_joined() {
        let mut input = HEAD.to_vec();
        input.extend_from_slice(b"\r\nid: 1\ndata: {\"ts\":\ndata: 5}\n\n: c\ndata: x\r\n\r\n");
        let mut d = Decoder::keeping_data(true);
        let mut rest = &input[..];
        let mut got = Vec::new();
        while let Ok((used, step)) = d.feed(rest) {
            rest = &rest[used..];
            match step {
                Some(s) => got.push(s),
                None if rest.is_empty() => break,
                None => {}
            }
        }
        assert_eq!(
            got,
            vec![
                Step::Event {
                    id: Some("1".into()),
                    data: Some(b"{\"ts\":\n5}".to_vec()),
                },
                Step::Event {
                    id: None,
                    data: Some(b"x".to_vec()),
                },
            ]
        );
    }
}
