//! Shared helpers of the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use loadlab_grpc::{GrpcError, UnaryCall};

/// A file of the repository's `proto/` directory.
pub fn repo_proto(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../proto")
        .join(name)
}

/// Writes `files` (name, contents) into a new temporary directory.
pub fn proto_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, contents) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    dir
}

/// The message inside a gRPC frame, after checking its header.
pub fn unframe(frame: &[u8]) -> &[u8] {
    assert!(frame.len() >= 5, "frame shorter than its header");
    assert_eq!(frame[0], 0, "compressed flag");
    let len = u32::from_be_bytes(frame[1..5].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 5, "declared length");
    &frame[5..]
}

/// Resolves a call that must fail, returning the error.
pub fn resolve_err(proto: &Path, includes: &[PathBuf], call: &str, data: &str) -> GrpcError {
    match UnaryCall::resolve(proto, includes, call, data) {
        Ok(call) => panic!("resolved unexpectedly: {}", call.path()),
        Err(err) => err,
    }
}

/// Resolves a call that must succeed.
pub fn resolve_ok(proto: &Path, call: &str, data: &str) -> UnaryCall {
    UnaryCall::resolve(proto, &[], call, data).unwrap_or_else(|err| panic!("{err}"))
}
