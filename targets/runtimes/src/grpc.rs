//! gRPC over HTTP/2, the parts a unary server needs: the length-prefixed message frame,
//! the response headers and the `grpc-status` trailers.
//!
//! A message on the wire is one byte of compressed flag, four bytes of big-endian length,
//! then the protobuf encoding. These functions neither allocate per byte nor depend on a
//! runtime; [`crate::connection`] moves the bytes.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use prost::Message;
use tonic::Code;

/// The content type of gRPC requests and responses (`application/grpc+proto` and other
/// `application/grpc+…` subtypes are accepted on requests).
pub const CONTENT_TYPE: &str = "application/grpc";

/// The largest request message accepted, as tonic's default `max_decoding_message_size`.
pub const MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// Bytes before the message: the compressed flag and the big-endian length.
const PREFIX_LEN: usize = 5;

/// A call that ends without a reply message: a gRPC status code and its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The `grpc-status` sent in the trailers.
    pub code: Code,
    /// The `grpc-message`: printable ASCII, so it needs no percent-encoding.
    pub message: &'static str,
}

impl Failure {
    /// The path names no method of this server.
    pub const UNIMPLEMENTED: Failure = Failure {
        code: Code::Unimplemented,
        message: "unknown method",
    };
    /// The request message was compressed; this server negotiates no compression.
    pub const COMPRESSED: Failure = Failure {
        code: Code::Unimplemented,
        message: "compressed messages are not supported",
    };
    /// The request message is larger than [`MAX_MESSAGE_SIZE`].
    pub const TOO_LARGE: Failure = Failure {
        code: Code::ResourceExhausted,
        message: "request message larger than 4 MiB",
    };
    /// The body is not exactly one length-prefixed message.
    pub const BAD_FRAME: Failure = Failure {
        code: Code::Internal,
        message: "request body is not one length-prefixed gRPC message",
    };
    /// The message is not a valid protobuf encoding of the request type.
    pub const BAD_MESSAGE: Failure = Failure {
        code: Code::Internal,
        message: "request message is not valid protobuf",
    };
}

/// Decodes the body of a unary request: exactly one uncompressed length-prefixed message.
pub fn decode_unary<M: Message + Default>(body: &[u8]) -> Result<M, Failure> {
    let Some((prefix, message)) = body.split_first_chunk::<PREFIX_LEN>() else {
        return Err(Failure::BAD_FRAME);
    };
    let [compressed, length @ ..] = *prefix;
    match compressed {
        0 => {}
        1 => return Err(Failure::COMPRESSED),
        _ => return Err(Failure::BAD_FRAME),
    }
    let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
    if length > MAX_MESSAGE_SIZE {
        return Err(Failure::TOO_LARGE);
    }
    if length != message.len() {
        return Err(Failure::BAD_FRAME);
    }
    M::decode(message).map_err(|_| Failure::BAD_MESSAGE)
}

/// The length of the first whole frame (prefix and message) a stream of messages starts
/// with: `None` until its prefix is in, `Err` for a frame this server refuses (compressed,
/// an unknown flag, larger than [`MAX_MESSAGE_SIZE`]).
pub fn frame_len(stream: &[u8]) -> Option<Result<usize, Failure>> {
    let [compressed, length @ ..] = *stream.first_chunk::<PREFIX_LEN>()?;
    let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
    Some(match compressed {
        0 if length <= MAX_MESSAGE_SIZE => Ok(PREFIX_LEN + length),
        0 => Err(Failure::TOO_LARGE),
        1 => Err(Failure::COMPRESSED),
        _ => Err(Failure::BAD_FRAME),
    })
}

/// Encodes `message` as one uncompressed length-prefixed frame.
pub fn encode(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut frame = BytesMut::with_capacity(PREFIX_LEN + len);
    frame.put_u8(0);
    // A reply is far below 4 GiB; saturate rather than wrap if that ever changes.
    frame.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    message
        .encode(&mut frame)
        .expect("BytesMut grows to fit the message");
    frame.freeze()
}

/// The response headers of a call that sends a message: `200`, `content-type: application/grpc`.
pub fn response_headers() -> Response<()> {
    let mut response = Response::new(());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    response
}

/// The trailers that end a successful call: `grpc-status: 0`.
pub fn ok_trailers() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers
}

/// A "trailers-only" response: headers that end the call with `failure` and no message.
pub fn failure_response(failure: Failure) -> Response<()> {
    let mut response = response_headers();
    put_status(response.headers_mut(), failure);
    response
}

/// The trailers that end a call with `failure` after its headers (and messages) went.
pub fn failure_trailers(failure: Failure) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    put_status(&mut trailers, failure);
    trailers
}

fn put_status(headers: &mut HeaderMap, failure: Failure) {
    headers.insert("grpc-status", HeaderValue::from(failure.code as i32));
    headers.insert("grpc-message", HeaderValue::from_static(failure.message));
}

/// The HTTP response to a request that is not gRPC at all (wrong content type).
pub fn not_grpc_response() -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    response
}

/// Whether a request `content-type` is gRPC: `application/grpc` or `application/grpc+…`.
pub fn is_grpc_content_type(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    value == CONTENT_TYPE
        || value
            .strip_prefix(CONTENT_TYPE)
            .is_some_and(|rest| rest.starts_with('+') || rest.starts_with(';'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_target_common::proto::helloworld::{HelloReply, HelloRequest};

    fn request(name: &str) -> HelloRequest {
        HelloRequest { name: name.into() }
    }

    #[test]
    fn round_trip() {
        let frame = encode(&request("ferris"));
        assert_eq!(frame[0], 0);
        assert_eq!(
            u32::from_be_bytes(frame[1..5].try_into().unwrap()) as usize,
            frame.len() - 5
        );
        assert_eq!(
            decode_unary::<HelloRequest>(&frame).unwrap(),
            request("ferris")
        );
    }

    #[test]
    fn empty_message_is_five_bytes() {
        let frame = encode(&HelloReply::default());
        assert_eq!(&frame[..], &[0, 0, 0, 0, 0]);
        assert_eq!(
            decode_unary::<HelloReply>(&frame).unwrap(),
            HelloReply::default()
        );
    }

    #[test]
    fn rejects_bad_frames() {
        let frame = encode(&request("ferris"));
        assert_eq!(
            decode_unary::<HelloRequest>(&frame[..3]),
            Err(Failure::BAD_FRAME)
        );
        assert_eq!(
            decode_unary::<HelloRequest>(&frame[..frame.len() - 1]),
            Err(Failure::BAD_FRAME)
        );
        let mut two = frame.to_vec();
        two.extend_from_slice(&frame);
        assert_eq!(decode_unary::<HelloRequest>(&two), Err(Failure::BAD_FRAME));
        let mut compressed = frame.to_vec();
        compressed[0] = 1;
        assert_eq!(
            decode_unary::<HelloRequest>(&compressed),
            Err(Failure::COMPRESSED)
        );
        let huge = [0, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(decode_unary::<HelloRequest>(&huge), Err(Failure::TOO_LARGE));
        // Field 1 as a string whose length runs past the end.
        let invalid = [0, 0, 0, 0, 2, 0x0a, 0x05];
        assert_eq!(
            decode_unary::<HelloRequest>(&invalid),
            Err(Failure::BAD_MESSAGE)
        );
    }

    #[test]
    fn content_types() {
        let check = |v: &'static str| is_grpc_content_type(Some(&HeaderValue::from_static(v)));
        assert!(check("application/grpc"));
        assert!(check("application/grpc+proto"));
        assert!(!check("application/grpcx"));
        assert!(!check("application/json"));
        assert!(!is_grpc_content_type(None));
    }

    #[test]
    fn failure_headers_end_the_call() {
        let response = failure_response(Failure::UNIMPLEMENTED);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "12");
        assert_eq!(response.headers()["content-type"], CONTENT_TYPE);
        for failure in [
            Failure::UNIMPLEMENTED,
            Failure::COMPRESSED,
            Failure::TOO_LARGE,
            Failure::BAD_FRAME,
            Failure::BAD_MESSAGE,
        ] {
            assert!(failure.message.bytes().all(|b| (0x20..0x7f).contains(&b)));
            assert_ne!(failure.message.as_bytes().first(), Some(&b' '));
        }
        assert_eq!(ok_trailers()["grpc-status"], "0");
    }
}
