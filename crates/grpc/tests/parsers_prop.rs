//! Property tests of what the gRPC crate reads from outside: reply frames (arbitrary
//! bytes, arbitrary length prefixes, any split into chunks), `grpc-status` values,
//! `--metadata` entries, request JSON and reply messages. Each gives a value or a typed
//! error, never a panic.

mod util;

use std::sync::OnceLock;

use loadlab_grpc::frame::{self, FrameFault, FrameScan, HEADER_LEN};
use loadlab_grpc::{parse_metadata, GrpcError, GrpcStatus, UnaryCall};
use proptest::prelude::*;

/// A request and a reply type with a field of most kinds, so request JSON and reply bytes
/// reach most of the JSON checker and the decoder.
const KINDS_PROTO: &str = r#"
syntax = "proto3";
package kinds;
enum Color { RED = 0; GREEN = 1; }
message Inner { int32 n = 1; repeated string tags = 2; }
message All {
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  double d = 6;
  float f = 7;
  bool b = 8;
  string s = 9;
  bytes raw = 10;
  Color color = 11;
  Inner inner = 12;
  repeated Inner items = 13;
  map<string, int32> counts = 14;
  oneof choice { string text = 15; int32 number = 16; }
}
service Kinds { rpc Call(All) returns (All); }
"#;

/// The call, resolved once for every case.
fn kinds_call() -> &'static UnaryCall {
    static CALL: OnceLock<UnaryCall> = OnceLock::new();
    CALL.get_or_init(|| {
        let dir = util::proto_dir(&[("kinds.proto", KINDS_PROTO)]);
        UnaryCall::resolve(
            &dir.path().join("kinds.proto"),
            &[],
            "kinds.Kinds/Call",
            "{}",
        )
        .expect("the kinds proto resolves")
    })
}

/// The status a canonical `grpc-status` value names, computed another way.
fn reference_status(value: &[u8]) -> Option<GrpcStatus> {
    let text = std::str::from_utf8(value).ok()?;
    let text = text.trim_matches([' ', '\t']);
    let n: u8 = text.parse().ok()?;
    if n.to_string() != text {
        return None;
    }
    GrpcStatus::from_code(u32::from(n))
}

/// JSON values, nested, with the request's field names among the keys.
fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(Value::from(1e300)),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "GREEN",
            "BLUE",
            "AAEC",
            "!!",
            "-1",
            "4294967296",
            "NaN"
        ])
        .prop_map(Value::from),
    ];
    let keys = prop_oneof![
        prop::sample::select(vec![
            "i32", "i64", "u32", "u64", "s32", "d", "f", "b", "s", "raw", "color", "inner",
            "items", "counts", "text", "number", "n", "tags", "bogus", "[ext]"
        ])
        .prop_map(str::to_string),
        "[a-z]{1,4}",
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// `frame::decode` takes exactly one uncompressed frame whose prefix matches the bytes
    /// after it; anything else is a `Frame` error.
    #[test]
    fn decode_accepts_exactly_one_matching_frame(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let exact = bytes.len() >= HEADER_LEN
            && bytes[0] == 0
            && u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize
                == bytes.len() - HEADER_LEN;
        match frame::decode(&bytes) {
            Ok(message) => {
                prop_assert!(exact);
                prop_assert_eq!(message, &bytes[HEADER_LEN..]);
            }
            Err(GrpcError::Frame { message }) => prop_assert!(!exact, "{}", message),
            Err(e) => prop_assert!(false, "not a frame error: {}", e),
        }
    }

    /// Any message survives `encode` then `decode`.
    #[test]
    fn encode_decode_round_trip(message in prop::collection::vec(any::<u8>(), 0..300)) {
        let encoded = frame::encode(&message);
        prop_assert_eq!(frame::decode(&encoded).unwrap(), &message[..]);
    }

    /// Any body, any split into chunks: the scan's verdict is the one for the whole body.
    #[test]
    fn scan_verdict_does_not_depend_on_the_split(
        body in prop::collection::vec(any::<u8>(), 0..128),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        encoded: bool,
    ) {
        let mut whole = FrameScan::default();
        whole.feed(&body);
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        at.sort_unstable();
        let mut split = FrameScan::default();
        let mut from = 0;
        for cut in at.into_iter().chain([body.len()]) {
            split.feed(&body[from..cut]);
            from = cut;
        }
        prop_assert_eq!(split.finish(encoded), whole.finish(encoded));
    }

    /// Well-formed frames are counted; a length prefix longer than what follows is
    /// `Truncated`, whatever it declares (up to 4 MiB; more is `TooLarge`) and however the
    /// body is split.
    #[test]
    fn length_prefixes_are_checked(
        messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..5),
        declared in prop_oneof![3 => 0u32..=(4 << 20), 1 => any::<u32>()],
        sent in 0usize..40,
        split in any::<prop::sample::Index>(),
    ) {
        let mut body: Vec<u8> = messages.iter().flat_map(|m| frame::encode(m).to_vec()).collect();
        let mut scan = FrameScan::default();
        scan.feed(&body);
        prop_assert_eq!(scan.finish(false), Ok(messages.len() as u64));
        // One more frame promising `declared` bytes and sending fewer.
        let sent = sent.min(declared as usize);
        body.push(0);
        body.extend_from_slice(&declared.to_be_bytes());
        body.extend(std::iter::repeat_n(7u8, sent));
        let cut = split.index(body.len() + 1);
        let mut scan = FrameScan::default();
        scan.feed(&body[..cut]);
        scan.feed(&body[cut..]);
        if u64::from(declared) > frame::MAX_RECEIVE {
            // Over what a client receives: refused at its header, whatever follows.
            prop_assert_eq!(scan.finish(false), Err(FrameFault::TooLarge(u64::from(declared))));
        } else if sent == declared as usize {
            prop_assert_eq!(scan.finish(false), Ok(messages.len() as u64 + 1));
        } else {
            prop_assert_eq!(scan.finish(false), Err(FrameFault::Truncated));
        }
    }

    /// A `grpc-status` value is one of the 17 codes exactly when it is a canonical decimal
    /// from 0 to 16 between optional spaces and tabs; anything else is `None`.
    #[test]
    fn grpc_status_values(value in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..6),
        "[ \t]{0,2}[0-9+-]{0,3}[ \t]{0,2}".prop_map(String::into_bytes),
    ]) {
        prop_assert_eq!(GrpcStatus::from_trailer(&value), reference_status(&value));
    }

    /// `--metadata`: any entries give pairs with lower-case, valid keys, or a `Metadata`
    /// error naming the entry.
    #[test]
    fn metadata_entries(entries in prop::collection::vec(prop_oneof![
        "(?s).{0,24}",
        "[A-Za-z:_.-]{0,8}: ?[ -~]{0,12}",
        "\\{\"[a-z-]{0,8}\": ?(\"[ -~]{0,8}\"|[0-9]|null|\\[\\])\\}",
    ], 0..4)) {
        match parse_metadata(&entries) {
            Ok(pairs) => {
                for (k, v) in &pairs {
                    prop_assert!(!k.is_empty());
                    prop_assert!(k.chars().all(|c| matches!(c, '0'..='9' | 'a'..='z' | '_' | '-' | '.')), "{}", k);
                    prop_assert!(!k.starts_with("grpc-"));
                    if !k.ends_with("-bin") {
                        prop_assert!(v.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{:?}", v);
                    }
                }
            }
            Err(GrpcError::Metadata { entry, reason }) => {
                prop_assert!(!reason.is_empty());
                prop_assert!(entries.iter().any(|e| e.contains(entry.as_str())), "{} not in {:?}", entry, entries);
            }
            Err(e) => prop_assert!(false, "not a metadata error: {}", e),
        }
    }

    /// Any bytes as a reply: a JSON message, or a `Frame` / `Decode` error.
    #[test]
    fn reply_bytes_decode_or_say_why(
        message in prop::collection::vec(any::<u8>(), 0..64),
        framed: bool,
    ) {
        let bytes = if framed { frame::encode(&message).to_vec() } else { message };
        match kinds_call().decode_response(&bytes) {
            Ok(v) => prop_assert!(v.is_object()),
            Err(GrpcError::Frame { .. }) => prop_assert!(!framed),
            Err(GrpcError::Decode { message_type, .. }) => prop_assert_eq!(message_type, "kinds.All"),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

proptest! {
    // Each case compiles the proto: fewer cases.
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Request JSON of any shape: resolved into a frame that decodes back, or a typed
    /// error (`DataSyntax`, or `Data` naming the field).
    #[test]
    fn request_json_resolves_or_names_the_field(data in prop_oneof![
        json().prop_map(|v| v.to_string()),
        "(?s).{0,16}",
    ]) {
        let dir = util::proto_dir(&[("kinds.proto", KINDS_PROTO)]);
        match UnaryCall::resolve(&dir.path().join("kinds.proto"), &[], "kinds.Kinds/Call", &data) {
            Ok(call) => {
                let reply = call.decode_response(&call.request_frame());
                prop_assert!(reply.is_ok(), "{:?}", reply);
            }
            Err(GrpcError::DataSyntax { message }) => prop_assert!(!message.is_empty()),
            Err(GrpcError::Data { message_type, message, .. }) => {
                prop_assert_eq!(message_type, "kinds.All");
                prop_assert!(!message.is_empty());
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}
