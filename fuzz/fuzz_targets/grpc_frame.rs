//! gRPC reply framing on any bytes: `frame::decode` accepts exactly one matching frame,
//! and `FrameScan` gives the same verdict however the body is split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_grpc::frame::{self, FrameScan, HEADER_LEN};

fuzz_target!(|input: &[u8]| {
    if let Ok(message) = frame::decode(input) {
        assert_eq!(input[0], 0);
        assert_eq!(message, &input[HEADER_LEN..]);
    }
    let mut whole = FrameScan::default();
    whole.feed(input);
    let cut = input
        .first()
        .map_or(0, |&b| usize::from(b) % (input.len() + 1));
    let mut split = FrameScan::default();
    split.feed(&input[..cut]);
    split.feed(&input[cut..]);
    assert_eq!(split.finish(false), whole.finish(false));
    assert_eq!(split.finish(true), whole.finish(true));
});
