//! Resolving real protos and building real requests, checked with the prost-generated types.

mod util;

use loadlab_grpc::UnaryCall;
use loadlab_target_common::proto::{hello, helloworld};
use prost::Message;
use serde_json::json;
use util::{proto_dir, repo_proto, unframe};

/// `helloworld.Greeter/SayHello` with `{"name":"loadlab"}`.
fn greeter_call() -> UnaryCall {
    UnaryCall::resolve(
        &repo_proto("helloworld.proto"),
        &[],
        "helloworld.Greeter/SayHello",
        r#"{"name":"loadlab"}"#,
    )
    .unwrap()
}

#[test]
fn greeter_say_hello() {
    let call = greeter_call();
    assert_eq!(call.path(), "/helloworld.Greeter/SayHello");
    assert_eq!(call.request_type(), "helloworld.HelloRequest");
    assert_eq!(call.response_type(), "helloworld.HelloReply");

    let frame = call.request_frame();
    let request = helloworld::HelloRequest::decode(unframe(&frame)).unwrap();
    assert_eq!(request.name, "loadlab");
    // The same bytes every time.
    assert_eq!(call.request_frame(), frame);
}

#[test]
fn dotted_call_form_and_include_dir() {
    let proto_root = repo_proto("");
    let call = UnaryCall::resolve(
        &repo_proto("helloworld.proto"),
        &[proto_root],
        "helloworld.Greeter.SayHello",
        "{}",
    )
    .unwrap();
    assert_eq!(call.path(), "/helloworld.Greeter/SayHello");
    // An empty message is an empty frame.
    assert_eq!(&call.request_frame()[..], &[0, 0, 0, 0, 0]);
}

#[test]
fn hello_service_say() {
    let call = UnaryCall::resolve(
        &repo_proto("hello.proto"),
        &[],
        "hello.HelloService/Say",
        r#"{"id":"1","message":"hi"}"#,
    )
    .unwrap();
    assert_eq!(call.path(), "/hello.HelloService/Say");
    let frame = call.request_frame();
    let request = hello::HelloRequest::decode(unframe(&frame)).unwrap();
    assert_eq!(request.id, "1");
    assert_eq!(request.message, "hi");
}

#[test]
fn decode_responses() {
    let call = greeter_call();
    let reply = helloworld::HelloReply {
        message: "Hello loadlab".to_owned(),
    };
    let frame = loadlab_grpc::frame::encode(&reply.encode_to_vec());
    assert_eq!(
        call.decode_response(&frame).unwrap(),
        json!({"message": "Hello loadlab"})
    );
    // Default values are omitted, as in canonical proto3 JSON.
    let empty = loadlab_grpc::frame::encode(&[]);
    assert_eq!(call.decode_response(&empty).unwrap(), json!({}));

    let hello = UnaryCall::resolve(
        &repo_proto("hello.proto"),
        &[],
        "hello.HelloService/Say",
        r#"{"id":"1","message":"hi"}"#,
    )
    .unwrap();
    let response = hello::HelloResponse {
        id: "7".to_owned(),
        message: "pong".to_owned(),
    };
    let frame = loadlab_grpc::frame::encode(&response.encode_to_vec());
    assert_eq!(
        hello.decode_response(&frame).unwrap(),
        json!({"id": "7", "message": "pong"})
    );
}

#[test]
fn decode_response_rejects_bad_frames_and_bytes() {
    let call = UnaryCall::resolve(
        &repo_proto("helloworld.proto"),
        &[],
        "helloworld.Greeter/SayHello",
        "{}",
    )
    .unwrap();
    let err = call.decode_response(&[0, 0, 0]).unwrap_err().to_string();
    assert!(err.contains("shorter than the 5-byte header"), "{err}");
    let err = call
        .decode_response(&[1, 0, 0, 0, 0])
        .unwrap_err()
        .to_string();
    assert!(err.contains("compressed"), "{err}");
    // Field 1 (string) with a length running past the end of the message.
    let err = call
        .decode_response(&loadlab_grpc::frame::encode(&[0x0a, 0x05, b'a']))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot decode response as `helloworld.HelloReply`"),
        "{err}"
    );
}

/// A richer message: nested messages, repeated and map fields, enums, 64-bit integers,
/// bytes, imports and proto3 JSON names, checked field by field after decoding.
#[test]
fn rich_messages_and_imports() {
    let dir = proto_dir(&[
        (
            "common/types.proto",
            r#"syntax = "proto3";
package common;
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
message Item { string item_id = 1; uint64 count = 2; }
"#,
        ),
        (
            "shop.proto",
            r#"syntax = "proto3";
package shop.v1;
import "common/types.proto";
import "google/protobuf/timestamp.proto";
message Order {
  string customer_name = 1;
  repeated common.Item items = 2;
  map<string, int32> tags = 3;
  common.Color color = 4;
  int64 total = 5;
  bytes blob = 6;
  google.protobuf.Timestamp at = 7;
  double ratio = 8;
  bool urgent = 9;
}
message Ack { bool ok = 1; }
service Shop { rpc Place(Order) returns (Ack); }
"#,
        ),
    ]);
    let data = r#"{
        "customerName": "ada",
        "items": [{"itemId": "x", "count": "18446744073709551615"}, {"item_id": "y", "count": 2}],
        "tags": {"a": 1, "b": -2},
        "color": "GREEN",
        "total": -9007199254740993,
        "blob": "AAEC",
        "at": "2024-01-02T03:04:05Z",
        "ratio": "NaN",
        "urgent": null
    }"#;
    let call = UnaryCall::resolve(
        &dir.path().join("shop.proto"),
        &[],
        "shop.v1.Shop/Place",
        data,
    )
    .unwrap();
    assert_eq!(call.path(), "/shop.v1.Shop/Place");
    // Re-decode with the descriptor-driven decoder of the response side: build the reply
    // JSON from the request bytes by resolving the opposite direction.
    let echo = proto_dir(&[(
        "echo.proto",
        &std::fs::read_to_string(dir.path().join("shop.proto"))
            .unwrap()
            .replace(
                "rpc Place(Order) returns (Ack);",
                "rpc Echo(Ack) returns (Order);",
            ),
    )]);
    std::fs::create_dir_all(echo.path().join("common")).unwrap();
    std::fs::copy(
        dir.path().join("common/types.proto"),
        echo.path().join("common/types.proto"),
    )
    .unwrap();
    let echo_call = UnaryCall::resolve(
        &echo.path().join("echo.proto"),
        &[],
        "shop.v1.Shop/Echo",
        "{}",
    )
    .unwrap();
    let decoded = echo_call.decode_response(&call.request_frame()).unwrap();
    assert_eq!(
        decoded,
        json!({
            "customerName": "ada",
            "items": [{"itemId": "x", "count": "18446744073709551615"}, {"itemId": "y", "count": "2"}],
            "tags": {"a": 1, "b": -2},
            "color": "GREEN",
            "total": "-9007199254740993",
            "blob": "AAEC",
            "at": "2024-01-02T03:04:05Z",
            "ratio": "NaN"
        })
    );
}
