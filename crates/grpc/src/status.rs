//! gRPC status codes, as carried by the `grpc-status` trailer (or header, for a
//! trailers-only response).

use std::fmt;

/// One of the 17 canonical gRPC status codes.
///
/// A cheap `Copy` value so the load loop can count replies per code without allocating;
/// [`name`](GrpcStatus::name) gives the canonical upper-case name used in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum GrpcStatus {
    /// 0: not an error.
    Ok = 0,
    /// 1: the operation was cancelled, typically by the caller.
    Cancelled = 1,
    /// 2: unknown error.
    Unknown = 2,
    /// 3: the client specified an invalid argument.
    InvalidArgument = 3,
    /// 4: the deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// 5: some requested entity was not found.
    NotFound = 5,
    /// 6: the entity the client tried to create already exists.
    AlreadyExists = 6,
    /// 7: the caller lacks permission for the operation.
    PermissionDenied = 7,
    /// 8: some resource has been exhausted (quota, memory…).
    ResourceExhausted = 8,
    /// 9: the system is not in a state required for the operation.
    FailedPrecondition = 9,
    /// 10: the operation was aborted (concurrency conflict…).
    Aborted = 10,
    /// 11: the operation was attempted past the valid range.
    OutOfRange = 11,
    /// 12: the operation is not implemented or supported by the server.
    Unimplemented = 12,
    /// 13: internal error.
    Internal = 13,
    /// 14: the service is currently unavailable.
    Unavailable = 14,
    /// 15: unrecoverable data loss or corruption.
    DataLoss = 15,
    /// 16: the request lacks valid authentication credentials.
    Unauthenticated = 16,
}

impl GrpcStatus {
    /// All codes, in numeric order (`ALL[n].code() == n`).
    pub const ALL: [GrpcStatus; 17] = [
        GrpcStatus::Ok,
        GrpcStatus::Cancelled,
        GrpcStatus::Unknown,
        GrpcStatus::InvalidArgument,
        GrpcStatus::DeadlineExceeded,
        GrpcStatus::NotFound,
        GrpcStatus::AlreadyExists,
        GrpcStatus::PermissionDenied,
        GrpcStatus::ResourceExhausted,
        GrpcStatus::FailedPrecondition,
        GrpcStatus::Aborted,
        GrpcStatus::OutOfRange,
        GrpcStatus::Unimplemented,
        GrpcStatus::Internal,
        GrpcStatus::Unavailable,
        GrpcStatus::DataLoss,
        GrpcStatus::Unauthenticated,
    ];

    /// The numeric code, 0 to 16.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status with this numeric code, if it is one of the 17 defined.
    pub fn from_code(code: u32) -> Option<GrpcStatus> {
        usize::try_from(code)
            .ok()
            .and_then(|i| GrpcStatus::ALL.get(i).copied())
    }

    /// The canonical name, such as `"DEADLINE_EXCEEDED"`.
    pub fn name(self) -> &'static str {
        match self {
            GrpcStatus::Ok => "OK",
            GrpcStatus::Cancelled => "CANCELLED",
            GrpcStatus::Unknown => "UNKNOWN",
            GrpcStatus::InvalidArgument => "INVALID_ARGUMENT",
            GrpcStatus::DeadlineExceeded => "DEADLINE_EXCEEDED",
            GrpcStatus::NotFound => "NOT_FOUND",
            GrpcStatus::AlreadyExists => "ALREADY_EXISTS",
            GrpcStatus::PermissionDenied => "PERMISSION_DENIED",
            GrpcStatus::ResourceExhausted => "RESOURCE_EXHAUSTED",
            GrpcStatus::FailedPrecondition => "FAILED_PRECONDITION",
            GrpcStatus::Aborted => "ABORTED",
            GrpcStatus::OutOfRange => "OUT_OF_RANGE",
            GrpcStatus::Unimplemented => "UNIMPLEMENTED",
            GrpcStatus::Internal => "INTERNAL",
            GrpcStatus::Unavailable => "UNAVAILABLE",
            GrpcStatus::DataLoss => "DATA_LOSS",
            GrpcStatus::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The status with this canonical name (exact, upper case), such as `"UNAVAILABLE"`.
    pub fn from_name(name: &str) -> Option<GrpcStatus> {
        GrpcStatus::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Parses the value of a `grpc-status` header or trailer: a decimal code from `0` to
    /// `16`, without sign or leading zeros, optionally surrounded by spaces or tabs.
    ///
    /// Returns `None` for anything else, including well-formed numbers above 16; the gRPC
    /// spec tells clients to treat such codes as [`GrpcStatus::Unknown`], which is left to
    /// the caller so a report can tell a malformed reply from a real `UNKNOWN`.
    pub fn from_trailer(value: &[u8]) -> Option<GrpcStatus> {
        let code = match trim_ows(value) {
            [d @ b'0'..=b'9'] => d - b'0',
            [b'1', d @ b'0'..=b'9'] => 10 + (d - b'0'),
            _ => return None,
        };
        GrpcStatus::from_code(u32::from(code))
    }

    /// True for [`GrpcStatus::Ok`].
    pub fn is_ok(self) -> bool {
        self == GrpcStatus::Ok
    }
}

/// Strips HTTP optional whitespace (spaces and tabs) from both ends.
fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

impl fmt::Display for GrpcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for n in 0..=16u8 {
            let status = GrpcStatus::from_code(u32::from(n)).unwrap();
            assert_eq!(status.code(), n);
            assert_eq!(GrpcStatus::ALL[usize::from(n)], status);
            assert_eq!(GrpcStatus::from_name(status.name()), Some(status));
            assert_eq!(
                GrpcStatus::from_trailer(n.to_string().as_bytes()),
                Some(status)
            );
            assert_eq!(status.to_string(), status.name());
        }
        assert_eq!(GrpcStatus::from_code(17), None);
        assert_eq!(GrpcStatus::from_code(u32::MAX), None);
        assert_eq!(GrpcStatus::from_name("deadline_exceeded"), None);
    }

    #[test]
    fn canonical_names() {
        let names: Vec<&str> = GrpcStatus::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "OK",
                "CANCELLED",
                "UNKNOWN",
                "INVALID_ARGUMENT",
                "DEADLINE_EXCEEDED",
                "NOT_FOUND",
                "ALREADY_EXISTS",
                "PERMISSION_DENIED",
                "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION",
                "ABORTED",
                "OUT_OF_RANGE",
                "UNIMPLEMENTED",
                "INTERNAL",
                "UNAVAILABLE",
                "DATA_LOSS",
                "UNAUTHENTICATED",
            ]
        );
        assert_eq!(
            GrpcStatus::from_trailer(b"4"),
            Some(GrpcStatus::DeadlineExceeded)
        );
        assert_eq!(
            GrpcStatus::from_trailer(b"14"),
            Some(GrpcStatus::Unavailable)
        );
        assert!(GrpcStatus::Ok.is_ok() && !GrpcStatus::Internal.is_ok());
    }

    #[test]
    fn trailer_whitespace_is_tolerated() {
        assert_eq!(GrpcStatus::from_trailer(b" 0 "), Some(GrpcStatus::Ok));
        assert_eq!(
            GrpcStatus::from_trailer(b"\t16"),
            Some(GrpcStatus::Unauthenticated)
        );
    }

    #[test]
    fn invalid_trailers() {
        for value in [
            &b""[..],
            b" ",
            b"17",
            b"20",
            b"99",
            b"100",
            b"-1",
            b"+1",
            b"01",
            b"00",
            b"1 4",
            b"OK",
            b"UNAVAILABLE",
            b"0x1",
            b"1.0",
            b"\xff",
            b"4\x00",
            b"\n4",
        ] {
            assert_eq!(GrpcStatus::from_trailer(value), None, "{value:?}");
        }
    }
}
