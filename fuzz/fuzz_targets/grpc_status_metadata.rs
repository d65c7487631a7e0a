//! `grpc-status` values and `--metadata` entries from any bytes: a status or `None`, pairs
//! or a `Metadata` error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_grpc::{parse_metadata, GrpcError, GrpcStatus};

fuzz_target!(|input: &[u8]| {
    if let Some(status) = GrpcStatus::from_trailer(input) {
        let text = std::str::from_utf8(input)
            .unwrap()
            .trim_matches([' ', '\t']);
        assert_eq!(text, status.code().to_string());
    }
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let entries: Vec<&str> = text.split('\n').collect();
    match parse_metadata(&entries) {
        Ok(pairs) => assert!(pairs
            .iter()
            .all(|(k, _)| !k.is_empty() && !k.starts_with("grpc-"))),
        Err(GrpcError::Metadata { .. }) => {}
        Err(e) => panic!("not a metadata error: {e}"),
    }
});
