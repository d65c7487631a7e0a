//! Property tests of the engine's parsers of outside input: the HTTP/1.1 response reader
//! (any bytes, split at any points) and the values flags and plans give (`--header`,
//! `--source-addrs`, `--cpus`, durations). Each returns a value or a typed error, never
//! panics, and reads a bounded amount.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use loadlab_engine::config::values::{parse_header, CPU_LIST_FORMS};
use loadlab_engine::config::{parse_duration, CpuList, SourceAddrs};
use loadlab_engine::records::{decode_histogram, encode_histogram};
use loadlab_engine::transport::http1::{ResponseMeta, ResponseReader};
use loadlab_engine::ErrorClass;
use proptest::prelude::*;
use tokio::io::{AsyncRead, ReadBuf};

/// The most bytes a response head may take (the reader's 64 KiB cap) plus one read.
const HEAD_BOUND: usize = 64 * 1024 + 16 * 1024;

/// Hands out `data` in pieces of the given sizes (cycled), then end of stream.
struct Pieces<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let size = self.sizes[self.next % self.sizes.len()];
        self.next += 1;
        let n = self.data.len().min(size).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// Never ends: `prefix`, then `filler` repeated; counts the bytes it handed out.
struct Endless {
    prefix: Vec<u8>,
    filler: Vec<u8>,
    sent: usize,
}

impl AsyncRead for Endless {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = buf.remaining().min(4096);
        for _ in 0..n {
            let i = self.sent;
            let b = match self.prefix.get(i) {
                Some(b) => *b,
                None => self.filler[(i - self.prefix.len()) % self.filler.len()],
            };
            buf.put_slice(&[b]);
            self.sent += 1;
        }
        Poll::Ready(Ok(()))
    }
}

/// Reads up to `count` responses from `data` split by `sizes`, stopping at the first error.
fn read_all(
    data: &[u8],
    sizes: Vec<usize>,
    method: &str,
    count: usize,
) -> Vec<Result<ResponseMeta, ErrorClass>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut s = Pieces {
            data,
            sizes,
            next: 0,
        };
        let mut r = ResponseReader::new(method);
        let mut out = Vec::new();
        for _ in 0..count {
            let res = r.read(&mut s).await;
            let end = res.is_err();
            out.push(res);
            if end {
                break;
            }
        }
        out
    })
}

/// Read sizes: at least one, each of 1 byte or more.
fn splits() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..64, 1..8)
}

/// A well-formed response and what the reader must make of it.
#[derive(Clone, Debug)]
struct Response {
    bytes: Vec<u8>,
    meta: ResponseMeta,
}

/// Framing of a generated response's body.
#[derive(Clone, Copy, Debug)]
enum Framing {
    Length,
    Chunked,
    UntilClose,
}

fn response() -> impl Strategy<Value = Response> {
    let status = prop_oneof![200u16..=599, Just(204u16), Just(304u16)];
    let framing = prop_oneof![
        Just(Framing::Length),
        Just(Framing::Chunked),
        Just(Framing::UntilClose)
    ];
    let body = prop::collection::vec(any::<u8>(), 0..200);
    let chunks = prop::collection::vec(1usize..50, 1..5);
    let extra = prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,10}", "[ -~]{0,20}"), 0..5);
    (
        status,
        framing,
        body,
        chunks,
        extra,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(status, framing, body, chunks, extra, interim, close_header)| {
                let mut out = Vec::new();
                if interim {
                    out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                out.extend_from_slice(format!("HTTP/1.1 {status} Whatever\r\n").as_bytes());
                for (n, v) in &extra {
                    let lower = n.to_ascii_lowercase();
                    if ["content-length", "transfer-encoding", "connection"]
                        .contains(&lower.as_str())
                    {
                        continue;
                    }
                    out.extend_from_slice(format!("{n}: {}\r\n", v.trim()).as_bytes());
                }
                let no_body = status == 204 || status == 304;
                let until_close = matches!(framing, Framing::UntilClose) && !no_body;
                if close_header {
                    out.extend_from_slice(b"Connection: close\r\n");
                }
                match framing {
                    _ if no_body => {}
                    Framing::Length => out.extend_from_slice(
                        format!("Content-Length: {}\r\n", body.len()).as_bytes(),
                    ),
                    Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
                    Framing::UntilClose => {}
                }
                out.extend_from_slice(b"\r\n");
                match framing {
                    _ if no_body => {}
                    Framing::Chunked => {
                        let mut rest = &body[..];
                        for size in chunks.iter().cycle() {
                            if rest.is_empty() {
                                break;
                            }
                            let n = (*size).min(rest.len());
                            out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                            out.extend_from_slice(&rest[..n]);
                            out.extend_from_slice(b"\r\n");
                            rest = &rest[n..];
                        }
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                    Framing::Length | Framing::UntilClose => out.extend_from_slice(&body),
                }
                Response {
                    bytes: out,
                    meta: ResponseMeta {
                        status,
                        close: close_header || until_close,
                    },
                }
            },
        )
}

/// Responses on one connection, up to the first that closes it.
fn responses() -> impl Strategy<Value = Vec<Response>> {
    prop::collection::vec(response(), 1..5).prop_map(|mut v| {
        if let Some(i) = v.iter().position(|r| r.meta.close) {
            v.truncate(i + 1);
        }
        v
    })
}

/// The only errors a stream that simply ends can give.
fn is_stream_error(r: Result<ResponseMeta, ErrorClass>) -> bool {
    matches!(
        r,
        Ok(_) | Err(ErrorClass::MalformedResponse | ErrorClass::ConnectionClosed)
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any bytes, any split: each read is a response, `malformed_response` or
    /// `connection_closed`, and the verdicts do not depend on how the bytes were split.
    #[test]
    fn any_bytes_any_split(
        data in prop::collection::vec(any::<u8>(), 0..512),
        a in splits(),
        b in splits(),
        head: bool,
    ) {
        let method = if head { "HEAD" } else { "GET" };
        let whole = read_all(&data, vec![usize::MAX], method, 4);
        prop_assert!(!whole.is_empty());
        prop_assert!(whole.iter().all(|r| is_stream_error(*r)), "{:?}", whole);
        prop_assert_eq!(&read_all(&data, a, method, 4), &whole);
        prop_assert_eq!(&read_all(&data, b, method, 4), &whole);
    }

    /// Bytes that look like HTTP (a status line, then pieces of heads and bodies): the
    /// same properties, on inputs that get past the first line.
    #[test]
    fn http_like_bytes_any_split(
        tail in prop::collection::vec(prop_oneof![
            Just(b"\r\n".to_vec()),
            Just(b"Content-Length: 3\r\n".to_vec()),
            Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
            Just(b"5\r\n".to_vec()),
            Just(b"0\r\n".to_vec()),
            Just(b"HTTP/1.1 200 OK\r\n".to_vec()),
            Just(b"HTTP/1.1 100 Continue\r\n".to_vec()),
            Just(b"Content-Length: 99999999999999999999999\r\n".to_vec()),
            Just(b"ffffffffffffffffff\r\n".to_vec()),
            prop::collection::vec(any::<u8>(), 0..8),
        ], 0..24),
        a in splits(),
    ) {
        let mut data = b"HTTP/1.1 200 OK\r\n".to_vec();
        data.extend(tail.concat());
        let whole = read_all(&data, vec![usize::MAX], "GET", 4);
        prop_assert!(whole.iter().all(|r| is_stream_error(*r)), "{:?}", whole);
        prop_assert_eq!(&read_all(&data, a, "GET", 4), &whole);
    }

    /// Well-formed responses give the same status and close flag whatever the split into
    /// reads, then `connection_closed` once the stream ends.
    #[test]
    fn valid_responses_read_the_same_whatever_the_split(rs in responses(), a in splits()) {
        let data: Vec<u8> = rs.iter().flat_map(|r| r.bytes.clone()).collect();
        let got = read_all(&data, a, "GET", rs.len() + 1);
        let mut want: Vec<_> = rs.iter().map(|r| Ok(r.meta)).collect();
        want.push(Err(ErrorClass::ConnectionClosed));
        prop_assert_eq!(got, want);
    }

    /// A head that never ends (no blank line, or one endless header) is refused as
    /// `malformed_response` after a bounded number of bytes, not read forever.
    #[test]
    fn an_endless_head_is_refused_after_a_bounded_read(
        filler in prop_oneof![
            "[a-z]{1,16}".prop_map(String::into_bytes),
            "X-[a-z]{1,8}: [a-z]{1,16}\r\n".prop_map(String::into_bytes),
        ],
        status_line: bool,
    ) {
        let prefix = if status_line { b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec() } else { Vec::new() };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (result, sent) = rt.block_on(async {
            let mut s = Endless { prefix, filler, sent: 0 };
            let result = ResponseReader::new("GET").read(&mut s).await;
            (result, s.sent)
        });
        prop_assert_eq!(result, Err(ErrorClass::MalformedResponse));
        prop_assert!(sent <= HEAD_BOUND, "read {} bytes", sent);
    }

    /// Durations: any text is a duration or an error that says what a duration looks like.
    #[test]
    fn any_text_is_a_duration_or_says_why_not(
        s in "(?s).{0,40}|[0-9. eE+-]{0,24}|[0-9]{1,30}(ns|us|ms|s|m|h|d|w|y)"
    ) {
        match parse_duration(&s) {
            Ok(d) => prop_assert!(d.as_secs_f64().is_finite()),
            Err(e) => prop_assert!(e.contains("duration") || e.contains("negative"), "{}", e),
        }
    }

    /// Durations round-trip through the text bundles and plans hold.
    #[test]
    fn durations_round_trip(secs in 0u64..=10_000_000_000, nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        let text = humantime::format_duration(d).to_string();
        prop_assert_eq!(parse_duration(&text), Ok(d));
    }

    /// `--cpus`: a non-empty list of CPUs below 4096 that prints back to itself, or the
    /// forms it takes.
    #[test]
    fn any_text_is_a_cpu_list_or_the_forms(s in "(?s).{0,24}|[0-9 ,-]{0,24}") {
        match s.parse::<CpuList>() {
            Ok(l) => {
                prop_assert!(!l.as_slice().is_empty());
                prop_assert!(l.as_slice().iter().all(|&c| c < 4096));
                prop_assert_eq!(l.to_string().parse::<CpuList>(), Ok(l));
            }
            Err(e) => prop_assert_eq!(e, CPU_LIST_FORMS),
        }
    }

    /// `--source-addrs`: 1 to 65 000 addresses that print back to themselves, or an error
    /// saying what is allowed.
    #[test]
    fn any_text_is_source_addrs_or_the_forms(
        s in "(?s).{0,24}|[0-9.,: -]{0,40}|127\\.0\\.[0-9]{1,3}\\.[0-9]{1,3}-127\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}"
    ) {
        match s.parse::<SourceAddrs>() {
            Ok(a) => {
                prop_assert!((1..=65_000).contains(&a.len()), "{} addresses", a.len());
                prop_assert_eq!(a.to_string().parse::<SourceAddrs>(), Ok(a.clone()));
                match a.resolve("127.0.0.1".parse().unwrap()) {
                    Ok(v) => prop_assert_eq!(v.len(), a.len()),
                    Err(e) => prop_assert!(e.contains("family"), "{}", e),
                }
            }
            Err(e) => prop_assert!(
                e.contains("range") || e.contains("count") || e.contains("list"),
                "{}", e
            ),
        }
    }

    /// `--header`: a token name and a value without CR or LF that parse back the same, or
    /// the form it takes.
    #[test]
    fn any_text_is_a_header_or_the_form(s in "(?s).{0,40}|[A-Za-z-]{0,8}:[ -~\t\r\n]{0,16}") {
        match parse_header(&s) {
            Ok((name, value)) => {
                prop_assert!(!name.is_empty());
                prop_assert!(!value.contains(['\r', '\n']));
                prop_assert_eq!(parse_header(&format!("{name}: {value}")), Ok((name, value)));
            }
            Err(e) => prop_assert!(e.contains("Name: value"), "{}", e),
        }
    }

    /// A bundle's histogram text: any text or any bytes in base64 decode to a histogram or
    /// an error saying which layer is bad; a real histogram decodes to itself.
    #[test]
    fn histogram_text_decodes_or_says_why(
        text in "(?s).{0,40}",
        bytes in prop::collection::vec(any::<u8>(), 0..128),
        values in prop::collection::vec(1u64..10_000_000, 0..50),
    ) {
        for t in [text, base64::engine::general_purpose::STANDARD.encode(&bytes)] {
            if let Err(e) = decode_histogram(&t) {
                prop_assert!(e.starts_with("bad base64") || e.starts_with("bad histogram"), "{}", e);
            }
        }
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for v in &values {
            h.record(*v).unwrap();
        }
        prop_assert_eq!(decode_histogram(&encode_histogram(&h)), Ok(h));
    }
}
