//! Everything that must fail before any load, and what the error says.

mod util;

use loadlab_grpc::GrpcError;
use util::{proto_dir, repo_proto, resolve_err};

const GREETER: &str = "helloworld.Greeter/SayHello";

#[test]
fn syntax_error_names_file_and_line() {
    let dir = proto_dir(&[(
        "broken.proto",
        "syntax = \"proto3\";\npackage p;\n\nmessage A {\n  string name = 1\n}\n",
    )]);
    let proto = dir.path().join("broken.proto");
    let err = resolve_err(&proto, &[], "p.S/M", "{}");
    let GrpcError::Proto { file, line, .. } = &err else {
        panic!("not a proto error: {err:?}");
    };
    assert_eq!(file, &proto.display().to_string());
    // The missing `;` is reported where the `}` is found, on line 6.
    assert_eq!(*line, Some(6), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}:6:", proto.display())),
        "{text}"
    );
    assert!(text.contains("expected ';'"), "{text}");
}

#[test]
fn semantic_error_names_file_and_line() {
    let dir = proto_dir(&[(
        "types.proto",
        "syntax = \"proto3\";\npackage p;\nmessage A {\n  Missing m = 1;\n}\n",
    )]);
    let proto = dir.path().join("types.proto");
    let err = resolve_err(&proto, &[], "p.S/M", "{}");
    let text = err.to_string();
    assert!(
        matches!(err, GrpcError::Proto { line: Some(4), .. }),
        "{text}"
    );
    assert!(text.contains("Missing"), "{text}");
}

#[test]
fn error_in_imported_file_names_that_file() {
    let dir = proto_dir(&[
        (
            "main.proto",
            "syntax = \"proto3\";\nimport \"dep/bad.proto\";\n",
        ),
        ("dep/bad.proto", "syntax = \"proto3\";\nmessage {\n"),
    ]);
    let err = resolve_err(&dir.path().join("main.proto"), &[], GREETER, "{}");
    let text = err.to_string();
    let bad = dir.path().join("dep/bad.proto");
    assert!(text.starts_with(&format!("{}:2:", bad.display())), "{text}");
}

#[test]
fn missing_import_and_missing_file() {
    let dir = proto_dir(&[(
        "main.proto",
        "syntax = \"proto3\";\nimport \"nowhere.proto\";\n",
    )]);
    let text = resolve_err(&dir.path().join("main.proto"), &[], GREETER, "{}").to_string();
    assert!(text.contains("nowhere.proto"), "{text}");
    assert!(text.contains(":2:"), "{text}");

    let missing = dir.path().join("absent.proto");
    let text = resolve_err(&missing, &[], GREETER, "{}").to_string();
    assert!(text.starts_with(&missing.display().to_string()), "{text}");
    assert!(text.contains("cannot read the file"), "{text}");
}

#[test]
fn malformed_call() {
    let err = resolve_err(&repo_proto("helloworld.proto"), &[], "SayHello", "{}");
    assert!(matches!(err, GrpcError::CallSyntax { .. }));
    assert!(err.to_string().contains("package.Service/Method"));
}

#[test]
fn unknown_service_lists_services() {
    let err = resolve_err(
        &repo_proto("helloworld.proto"),
        &[],
        "Greeter/SayHello",
        "{}",
    );
    let text = err.to_string();
    assert!(matches!(err, GrpcError::UnknownService { .. }), "{text}");
    assert!(text.contains("service `Greeter` not found"), "{text}");
    assert!(
        text.contains("services found: helloworld.Greeter"),
        "{text}"
    );
}

#[test]
fn unknown_method_lists_methods() {
    let dir = proto_dir(&[(
        "svc.proto",
        "syntax = \"proto3\";\npackage p;\nmessage A {}\n\
         service S { rpc One(A) returns (A); rpc Two(A) returns (A); }\n",
    )]);
    let err = resolve_err(&dir.path().join("svc.proto"), &[], "p.S/Three", "{}");
    let GrpcError::UnknownMethod { available, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(available, &["One", "Two"]);
    assert!(
        err.to_string()
            .contains("service `p.S` has no method `Three`; its methods: One, Two"),
        "{err}"
    );
}

#[test]
fn every_kind_of_method_resolves_and_says_its_kind() {
    let dir = proto_dir(&[(
        "stream.proto",
        "syntax = \"proto3\";\npackage p;\nmessage A {}\nmessage B {}\nservice S {\n\
         rpc C(stream A) returns (B);\n  rpc D(A) returns (stream B);\n\
         rpc E(stream A) returns (stream B);\n}\n",
    )]);
    let proto = dir.path().join("stream.proto");
    // A stream of requests, one reply: client-streaming, not bidirectional.
    let c = util::resolve_ok(&proto, "p.S/C", "{}");
    assert!(
        c.client_streaming() && !c.server_streaming() && !c.bidirectional(),
        "{}",
        c.path()
    );
    // One request, a stream of replies: resolved, and said so.
    let d = util::resolve_ok(&proto, "p.S/D", "{}");
    assert!(
        d.server_streaming() && !d.bidirectional() && !d.client_streaming(),
        "{}",
        d.path()
    );
    // Both sides stream: resolved as bidirectional.
    let e = util::resolve_ok(&proto, "p.S/E", "{}");
    assert!(
        e.server_streaming() && e.bidirectional() && !e.client_streaming(),
        "{}",
        e.path()
    );
    assert!(!util::resolve_ok(&repo_proto("helloworld.proto"), GREETER, "{}").server_streaming());
}

fn data_error(data: &str) -> (String, String) {
    match resolve_err(&repo_proto("helloworld.proto"), &[], GREETER, data) {
        err @ GrpcError::Data { .. } => {
            let GrpcError::Data { ref field, .. } = err else {
                unreachable!()
            };
            (field.clone(), err.to_string())
        }
        other => panic!("not a data error: {other:?}"),
    }
}

#[test]
fn unknown_field_is_named() {
    let (field, text) = data_error(r#"{"nmae":"x"}"#);
    assert_eq!(field, "nmae");
    assert!(text.contains("`helloworld.HelloRequest`"), "{text}");
    assert!(text.contains("field `nmae`: unknown field"), "{text}");
    assert!(text.contains("are: name"), "{text}");
}

#[test]
fn wrong_type_names_field_and_expected_type() {
    let (field, text) = data_error(r#"{"name": 5}"#);
    assert_eq!(field, "name");
    assert!(
        text.contains("field `name`: expected string, found number 5"),
        "{text}"
    );

    let (field, text) = data_error(r#"{"name": ["a"]}"#);
    assert_eq!(field, "name");
    assert!(text.contains("expected string, found an array"), "{text}");

    let (field, text) = data_error(r#"["name"]"#);
    assert_eq!(field, "");
    assert!(
        text.contains("expected message `helloworld.HelloRequest` (a JSON object)"),
        "{text}"
    );
}

#[test]
fn nested_fields_are_named_by_path() {
    let dir = proto_dir(&[(
        "n.proto",
        r#"syntax = "proto3";
package n;
import "google/protobuf/timestamp.proto";
enum Mode { MODE_UNSPECIFIED = 0; FAST = 1; }
message Item { uint32 count = 1; Mode mode = 2; bytes blob = 3; }
message Req {
  repeated Item items = 1;
  map<string, Item> by_name = 2;
  int32 small = 3;
  google.protobuf.Timestamp at = 4;
}
service S { rpc M(Req) returns (Req); }
"#,
    )]);
    let proto = dir.path().join("n.proto");
    let check = |data: &str, field: &str, needle: &str| {
        let err = resolve_err(&proto, &[], "n.S/M", data);
        let GrpcError::Data { field: got, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(got, field, "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    };
    check(
        r#"{"items": [{}, {"count": "many"}]}"#,
        "items[1].count",
        "expected uint32 (a JSON integer or integer string), found string \"many\"",
    );
    check(
        r#"{"items": [{"count": -1}]}"#,
        "items[0].count",
        "out of range for uint32",
    );
    check(
        r#"{"small": 3000000000}"#,
        "small",
        "out of range for int32",
    );
    check(r#"{"small": 1.5}"#, "small", "expected int32");
    check(
        r#"{"items": {"count": 1}}"#,
        "items",
        "expected repeated message `n.Item` (a JSON array)",
    );
    check(
        r#"{"byName": {"k": {"mode": "SLOW"}}}"#,
        "byName[\"k\"].mode",
        "unknown value \"SLOW\" of enum `n.Mode`; its values: MODE_UNSPECIFIED, FAST",
    );
    check(
        r#"{"by_name": []}"#,
        "by_name",
        "expected map<string, message `n.Item`> (a JSON object)",
    );
    check(
        r#"{"items": [{"blob": "***"}]}"#,
        "items[0].blob",
        "expected bytes (a base64 string)",
    );
    check(
        r#"{"items": [{"colour": 1}]}"#,
        "items[0].colour",
        "unknown field; the fields of `n.Item` are: count, mode, blob",
    );

    check(
        r#"{"at": 5}"#,
        "at",
        "invalid message `google.protobuf.Timestamp`",
    );
    check(
        r#"{"at": "yesterday"}"#,
        "at",
        "invalid message `google.protobuf.Timestamp`",
    );

    // And what fits, fits.
    util::resolve_ok(
        &proto,
        "n.S/M",
        r#"{"items": [{"count": "7", "mode": 1, "blob": "-_8"}], "byName": {"k": {"mode": "FAST"}}, "small": -5, "at": "2024-01-02T03:04:05.5Z"}"#,
    );
}

#[test]
fn invalid_json_syntax() {
    let err = resolve_err(
        &repo_proto("helloworld.proto"),
        &[],
        GREETER,
        r#"{"name": "#,
    );
    assert!(matches!(err, GrpcError::DataSyntax { .. }), "{err:?}");
    assert!(err.to_string().contains("line 1"), "{err}");
}
