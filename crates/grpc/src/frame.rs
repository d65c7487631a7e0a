//! gRPC message framing: each message on the wire is a 1-byte compressed flag, a 4-byte
//! big-endian length and the message bytes ("Length-Prefixed-Message" in the gRPC over
//! HTTP/2 protocol).

use bytes::{BufMut, Bytes, BytesMut};

use crate::GrpcError;

/// Length of the frame header: compressed flag and message length.
pub const HEADER_LEN: usize = 5;

/// The largest message a reply may carry, 4 MiB: gRPC clients' default limit on what they
/// receive (grpc-go's, grpcio's and grpc-java's `max_receive_message_length`). A larger one
/// fails the call with `RESOURCE_EXHAUSTED`, as it does there.
pub const MAX_RECEIVE: u64 = 4 * 1024 * 1024;

/// Wraps an uncompressed message in a gRPC frame.
///
/// # Panics
///
/// If `message` is longer than `u32::MAX` bytes, which the frame cannot express.
pub fn encode(message: &[u8]) -> Bytes {
    let len = u32::try_from(message.len()).expect("gRPC message longer than 4 GiB");
    let mut frame = BytesMut::with_capacity(HEADER_LEN + message.len());
    frame.put_u8(0);
    frame.put_u32(len);
    frame.put_slice(message);
    frame.freeze()
}

/// Returns the message inside exactly one uncompressed gRPC frame.
///
/// Rejects a frame shorter than its header, a compressed frame (this crate never offers
/// compression, so a compressed reply is a server error), an unknown flag, and a length
/// that does not match the bytes given.
pub fn decode(frame: &[u8]) -> Result<&[u8], GrpcError> {
    let invalid = |message: String| GrpcError::Frame { message };
    if frame.len() < HEADER_LEN {
        return Err(invalid(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header",
            frame.len()
        )));
    }
    match frame[0] {
        0 => {}
        1 => {
            return Err(invalid(
                "the message is compressed, but no compression was negotiated".to_owned(),
            ))
        }
        flag => return Err(invalid(format!("unknown compressed flag {flag}"))),
    }
    let declared = u32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize;
    let message = &frame[HEADER_LEN..];
    if declared != message.len() {
        return Err(invalid(format!(
            "header declares a {declared}-byte message, but {} bytes follow it",
            message.len()
        )));
    }
    Ok(message)
}

/// Follows the frames of a reply body as its chunks arrive, without copying or buffering
/// them: what a client checks of messages it does not decode. Any split of the body into
/// chunks gives the same verdict.
#[derive(Clone, Debug, Default)]
pub struct FrameScan {
    /// Header bytes of the frame being read (0 to 5).
    header: [u8; HEADER_LEN],
    /// How many of `header` have arrived.
    have: usize,
    /// Message bytes still due in the current frame.
    remaining: u64,
    /// Some frame set the compressed flag.
    compressed: bool,
    /// Some frame had a flag other than 0 or 1.
    bad_flag: Option<u8>,
    /// Complete frames seen.
    frames: u64,
    /// The first frame whose length prefix declared more than [`MAX_RECEIVE`]: its length.
    too_large: Option<u64>,
    /// Numbers read from each message ([`FrameScan::tapping`]).
    tap: Option<Box<Tap>>,
}

/// The numbers [`FrameScan::tapping`] reads from each message, and what it read.
#[derive(Clone, Debug)]
struct Tap {
    fields: [Option<crate::fields::FieldPath>; 2],
    /// The message so far.
    message: Vec<u8>,
    /// It is longer than [`TAP_LIMIT`]: not kept, its numbers not read.
    over: bool,
    /// Each message's numbers (or `None`), oldest first, until taken.
    values: std::collections::VecDeque<Tapped>,
}

/// The numbers a tap read from one message, in the order of its fields (`None`: no such
/// field asked for, or the message did not hold it).
pub type Tapped = [Option<f64>; 2];

/// The longest message whose number a tap reads (a timestamp is near the top of a small
/// message; a larger one is not copied).
const TAP_LIMIT: usize = 64 * 1024;

impl Tap {
    fn bytes(&mut self, b: &[u8]) {
        if self.over || self.message.len() + b.len() > TAP_LIMIT {
            self.over = true;
            self.message.clear();
        } else {
            self.message.extend_from_slice(b);
        }
    }

    fn end(&mut self) {
        let read = |f: &Option<crate::fields::FieldPath>| {
            f.as_ref()
                .filter(|_| !self.over)
                .and_then(|f| f.read(&self.message))
        };
        let v = [read(&self.fields[0]), read(&self.fields[1])];
        self.values.push_back(v);
        self.message.clear();
        self.over = false;
    }
}

/// What is wrong with a reply body, as [`FrameScan::finish`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFault {
    /// The body ends inside a frame: its length prefix promised more than was sent.
    Truncated,
    /// A frame is compressed, but the reply named no `grpc-encoding` to decode it with.
    CompressedWithoutEncoding,
    /// A frame's flag is neither 0 nor 1.
    UnknownFlag(u8),
    /// A message longer than [`MAX_RECEIVE`] (its declared length).
    TooLarge(u64),
}

impl std::fmt::Display for FrameFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameFault::Truncated => f.write_str("the body ends inside a message"),
            FrameFault::CompressedWithoutEncoding => {
                f.write_str("a compressed message without grpc-encoding")
            }
            FrameFault::UnknownFlag(b) => write!(f, "unknown compressed flag {b}"),
            FrameFault::TooLarge(n) => {
                write!(
                    f,
                    "a message of {n} bytes, over the {MAX_RECEIVE} a client receives"
                )
            }
        }
    }
}

impl FrameScan {
    /// Takes the next chunk of the body.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.remaining > 0 {
                let take = self.remaining.min(chunk.len() as u64);
                self.remaining -= take;
                if let Some(t) = &mut self.tap {
                    t.bytes(&chunk[..take as usize]);
                }
                chunk = &chunk[take as usize..];
                if self.remaining == 0 {
                    self.frames += 1;
                    if let Some(t) = &mut self.tap {
                        t.end();
                    }
                }
                continue;
            }
            let take = (HEADER_LEN - self.have).min(chunk.len());
            self.header[self.have..self.have + take].copy_from_slice(&chunk[..take]);
            self.have += take;
            chunk = &chunk[take..];
            if self.have == HEADER_LEN {
                self.have = 0;
                match self.header[0] {
                    0 => {}
                    1 => self.compressed = true,
                    flag => {
                        self.bad_flag.get_or_insert(flag);
                    }
                }
                self.remaining = u64::from(u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]));
                if self.remaining > MAX_RECEIVE {
                    self.too_large.get_or_insert(self.remaining);
                }
                if self.remaining == 0 {
                    self.frames += 1;
                    if let Some(t) = &mut self.tap {
                        t.end();
                    }
                }
            }
        }
    }

    /// A scan that also reads `fields` from each message (`--sent-at`, `--match-field`),
    /// kept until [`FrameScan::take_value`] takes them.
    pub fn tapping(fields: [Option<crate::fields::FieldPath>; 2]) -> FrameScan {
        FrameScan {
            tap: Some(Box::new(Tap {
                fields,
                message: Vec::new(),
                over: false,
                values: std::collections::VecDeque::new(),
            })),
            ..FrameScan::default()
        }
    }

    /// The numbers read from the oldest message not yet taken (each `None` where it held
    /// none); `None` when every message's were taken, or the scan does not tap.
    pub fn take_value(&mut self) -> Option<Tapped> {
        self.tap.as_mut()?.values.pop_front()
    }

    /// The declared length of a message over [`MAX_RECEIVE`], once its header came: the
    /// call has failed (`RESOURCE_EXHAUSTED`), and the rest need not be read.
    pub fn too_large(&self) -> Option<u64> {
        self.too_large
    }

    /// Complete frames (messages) seen so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The body is over: its fault, if any (`encoded`: the reply named a `grpc-encoding`).
    pub fn finish(&self, encoded: bool) -> Result<u64, FrameFault> {
        if let Some(n) = self.too_large {
            return Err(FrameFault::TooLarge(n));
        }
        if let Some(flag) = self.bad_flag {
            return Err(FrameFault::UnknownFlag(flag));
        }
        if self.have > 0 || self.remaining > 0 {
            return Err(FrameFault::Truncated);
        }
        if self.compressed && !encoded {
            return Err(FrameFault::CompressedWithoutEncoding);
        }
        Ok(self.frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_frames_across_any_split() {
        let body: Vec<u8> = [encode(b"abc"), encode(b""), encode(&[7; 300])].concat();
        for cut in 0..body.len() {
            let mut s = FrameScan::default();
            s.feed(&body[..cut]);
            s.feed(&body[cut..]);
            assert_eq!(s.finish(false), Ok(3), "cut at {cut}");
        }
        let mut s = FrameScan::default();
        s.feed(&body[..body.len() - 1]);
        assert_eq!(s.finish(false), Err(FrameFault::Truncated));
        let mut s = FrameScan::default();
        s.feed(&[0, 0, 0]);
        assert_eq!(s.finish(false), Err(FrameFault::Truncated));
        let mut s = FrameScan::default();
        s.feed(&[1, 0, 0, 0, 1, 9]);
        assert_eq!(s.finish(false), Err(FrameFault::CompressedWithoutEncoding));
        assert_eq!(s.finish(true), Ok(1));
        let mut s = FrameScan::default();
        s.feed(&[4, 0, 0, 0, 0]);
        assert_eq!(s.finish(true), Err(FrameFault::UnknownFlag(4)));
    }

    #[test]
    fn a_tap_reads_each_message_across_any_split() {
        use crate::fields::{FieldPath, NumberKind};
        let field = FieldPath {
            numbers: vec![2],
            kind: NumberKind::Unsigned,
            pointer: "/at".into(),
        };
        // { 2: 300 }, an empty message, { 1: 1 }.
        let body: Vec<u8> = [encode(&[0x10, 0xac, 0x02]), encode(b""), encode(&[8, 1])].concat();
        for cut in 0..body.len() {
            let one = FieldPath {
                numbers: vec![1],
                ..field.clone()
            };
            let mut s = FrameScan::tapping([Some(field.clone()), Some(one)]);
            s.feed(&body[..cut]);
            s.feed(&body[cut..]);
            let taken: Vec<_> = std::iter::from_fn(|| s.take_value()).collect();
            assert_eq!(
                taken,
                [[Some(300.0), None], [None, None], [None, Some(1.0)]],
                "cut at {cut}"
            );
        }
        assert_eq!(FrameScan::default().take_value(), None);
    }

    #[test]
    fn a_message_over_the_limit_is_caught_at_its_header() {
        // 4 MiB exactly is allowed; one byte more fails as soon as its header is in.
        let mut s = FrameScan::default();
        s.feed(&[0, 0, 0x40, 0, 0]);
        assert_eq!(s.too_large(), None);
        s.feed(&vec![7; MAX_RECEIVE as usize]);
        assert_eq!(s.finish(false), Ok(1));
        let mut s = FrameScan::default();
        s.feed(&[0, 0, 0x40, 0]);
        assert_eq!(s.too_large(), None);
        s.feed(&[1]);
        assert_eq!(s.too_large(), Some(MAX_RECEIVE + 1));
        assert_eq!(s.finish(false), Err(FrameFault::TooLarge(MAX_RECEIVE + 1)));
    }

    #[test]
    fn round_trip() {
        let frame = encode(b"abc");
        assert_eq!(&frame[..], &[0, 0, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(decode(&frame).unwrap(), b"abc");
        assert_eq!(decode(&encode(b"")).unwrap(), b"");
    }

    #[test]
    fn bad_frames() {
        let message = |frame: &[u8]| decode(frame).unwrap_err().to_string();
        assert!(message(&[0, 0, 0]).contains("shorter than the 5-byte header"));
        assert!(message(&[1, 0, 0, 0, 0]).contains("compressed"));
        assert!(message(&[7, 0, 0, 0, 0]).contains("unknown compressed flag 7"));
        assert!(message(&[0, 0, 0, 0, 2, 1]).contains("declares a 2-byte message, but 1"));
        assert!(message(&[0, 0, 0, 0, 0, 1]).contains("declares a 0-byte message, but 1"));
    }
}
