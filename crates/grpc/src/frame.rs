//! gRPC message framing: each message on the wire is a 1-byte compressed flag, a 4-byte
//! big-endian length and the message bytes ("Length-Prefixed-Message" in the gRPC over
//! HTTP/2 protocol).

use bytes::{BufMut, Bytes, BytesMut};

use crate::GrpcError;

/// Length of the frame header: compressed flag and message length.
pub const HEADER_LEN: usize = 5;

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

#[cfg(test)]
mod tests {
    use super::*;

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
