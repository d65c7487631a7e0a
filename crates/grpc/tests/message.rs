//! `${...}` templates inside request messages: resolved into a `MessageTemplate`, compiled
//! against data, rendered per call and decoded back with prost-reflect; refused and
//! misfitting templates with their field paths and positions.

mod util;

use std::path::{Path, PathBuf};

use loadlab_grpc::message::{Part, ScalarKind};
use loadlab_grpc::{CompiledMessage, GrpcCall, GrpcError, MessageTemplate, UnaryCall};
use loadlab_target_common::proto::{hello, helloworld};
use loadlab_template::{Data, Draw, Generator, TemplateError};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage, Value};
use serde_json::json;
use util::{repo_proto, unframe};

const KINDS: &str = "kinds.Kinds/Call";
const GREETER: &str = "helloworld.Greeter/SayHello";

fn kinds_proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proto/kinds.proto")
}

/// The message type `name` of `proto` (compiled here, apart from the crate's own code).
fn descriptor(proto: &Path, name: &str) -> MessageDescriptor {
    let mut compiler = protox::Compiler::new([proto.parent().unwrap()]).unwrap();
    compiler.include_imports(true);
    compiler.open_file(proto).unwrap();
    let pool: DescriptorPool = compiler.descriptor_pool();
    pool.get_message_by_name(name).unwrap()
}

fn resolve(proto: &Path, call: &str, json: &str) -> Result<GrpcCall, GrpcError> {
    GrpcCall::resolve(proto, &[], call, json, &[] as &[&str]).map_err(|(_, e)| e)
}

fn template_of(proto: &Path, call: &str, json: &str) -> MessageTemplate {
    resolve(proto, call, json)
        .unwrap_or_else(|e| panic!("{e}"))
        .template
        .expect("a template")
}

fn compile(t: &MessageTemplate, data: Option<&Data>) -> Result<CompiledMessage, TemplateError> {
    CompiledMessage::compile(t, data, "-D")
}

fn render(c: &CompiledMessage, draw: Draw<'_>, gen: &mut Generator) -> Vec<u8> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    c.render_frame(&draw, gen, &mut out, &mut scratch);
    out
}

fn decode(desc: &MessageDescriptor, frame: &[u8]) -> DynamicMessage {
    DynamicMessage::decode(desc.clone(), unframe(frame)).unwrap()
}

/// What untemplated `json` encodes to, decoded.
fn encoded(proto: &Path, call: &str, desc: &MessageDescriptor, json: &str) -> DynamicMessage {
    let call = UnaryCall::resolve(proto, &[], call, json).unwrap_or_else(|e| panic!("{e}"));
    assert!(call.message_template().is_none());
    decode(desc, &call.request_frame())
}

/// `got` and `want` have the same value (and presence, where fields have it) in every
/// field, nested messages and lists compared element by element.
fn assert_same(got: &DynamicMessage, want: &DynamicMessage, path: &str) {
    for f in want.descriptor().fields() {
        let p = format!("{path}{}", f.name());
        if f.supports_presence() {
            assert_eq!(got.has_field(&f), want.has_field(&f), "presence of {p}");
        }
        match (&*got.get_field(&f), &*want.get_field(&f)) {
            (Value::Message(a), Value::Message(b)) => assert_same(a, b, &format!("{p}.")),
            (Value::List(a), Value::List(b)) => {
                assert_eq!(a.len(), b.len(), "length of {p}: {a:?} vs {b:?}");
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    match (x, y) {
                        (Value::Message(x), Value::Message(y)) => {
                            assert_same(x, y, &format!("{p}[{i}]."));
                        }
                        _ => assert_eq!(x, y, "{p}[{i}]"),
                    }
                }
            }
            (a, b) => assert_eq!(a, b, "{p}"),
        }
    }
}

fn data(file: &str, columns: &[&str], rows: &[&[&str]]) -> Data {
    Data::from_rows(
        file,
        columns.iter().map(|c| (*c).to_owned()).collect(),
        rows.iter()
            .map(|r| r.iter().map(|v| (*v).to_owned()).collect())
            .collect(),
    )
    .unwrap()
}

#[test]
fn greeter_name_with_seq_differs_per_call() {
    let call = resolve(
        &repo_proto("helloworld.proto"),
        GREETER,
        r#"{"name": "user-${seq}"}"#,
    )
    .unwrap();
    // The frame holds the message with the template empty: `name` left out.
    assert_eq!(&call.frame[..], &[0, 0, 0, 0, 0]);
    let t = call.template.as_ref().unwrap();
    assert_eq!(t.message_type, "helloworld.HelloRequest");
    let c = compile(t, None).unwrap();
    assert!(c.uses_seq());
    assert!(!c.uses_data());
    let mut gen = Generator::new(1, 0);
    let desc = descriptor(&repo_proto("helloworld.proto"), "helloworld.HelloRequest");
    for seq in [1, 2, 987_654_321] {
        let frame = render(&c, Draw::new(seq, None), &mut gen);
        let request = helloworld::HelloRequest::decode(unframe(&frame)).unwrap();
        assert_eq!(request.name, format!("user-{seq}"));
        // Byte for byte what the JSON with the value written out encodes to.
        let plain = UnaryCall::resolve(
            &repo_proto("helloworld.proto"),
            &[],
            GREETER,
            &format!(r#"{{"name": "user-{seq}"}}"#),
        )
        .unwrap();
        assert_eq!(frame, plain.request_frame());
        assert_eq!(
            decode(&desc, &frame)
                .get_field_by_name("name")
                .unwrap()
                .as_str(),
            Some(&*format!("user-{seq}"))
        );
    }
}

#[test]
fn hello_fields_from_data_columns() {
    let proto = repo_proto("hello.proto");
    let t = template_of(
        &proto,
        "hello.HelloService/Say",
        r#"{"id": "${id}", "message": "hi ${name} $${literal} #${seq}"}"#,
    );
    let rows = data(
        "ids.csv",
        &["id", "name"],
        &[&["17", "ann"], &["18", "bö \"b\""]],
    );
    let c = compile(&t, Some(&rows)).unwrap();
    assert!(c.uses_data());
    let mut gen = Generator::new(3, 1);
    for (i, (id, name)) in [("17", "ann"), ("18", "bö \"b\"")].into_iter().enumerate() {
        let seq = 40 + i as u64;
        let frame = render(&c, Draw::new(seq, Some(rows.row(i))), &mut gen);
        let request = hello::HelloRequest::decode(unframe(&frame)).unwrap();
        assert_eq!(request.id, id);
        assert_eq!(request.message, format!("hi {name} ${{literal}} #{seq}"));
    }
}

/// Every supported kind, nested messages, repeated fields (fixed and templated elements
/// in their order), a oneof, a wrapper, an optional field and a large field number.
const ALL_KINDS: &str = r#"{
  "name": "n-${seq}",
  "scalars": {"s": "${name}", "i32": "${rand:-7--7}", "i64": "${seq}", "u32": "${pick:4000000000}",
    "u64": "${big}", "si32": "${rand:-3--3}", "si64": "${neg}", "f32": "${pick:4294967295}",
    "f64": "${seq}", "sf32": "${pick:-5}", "sf64": "${neg}", "b": "${flag}", "d": "${pick:2.5}",
    "f": "${pick:-0.25}", "colour": "${pick:2}", "blob": "AAE="},
  "inner": {"n": "${rand:42-42}", "label": "fixed", "deep": {"s": "${pick:-1}", "t": "x"},
    "counts": [1, "${pick:7}", 3]},
  "tags": ["a", "${pick:b}", "c$${x}"],
  "items": [{"n": 1}, {"n": "${seq}", "label": "l"}, {"label": "z"}],
  "ids": ["${seq}", 5],
  "labels": {"k": "v$${"},
  "number": "${pick:9}",
  "wrapped": "${seq}",
  "maybe": "${pick:0}",
  "colours": [1, "${pick:2}"],
  "ds": ["${pick:1e3}"],
  "at": "2024-01-02T03:04:05Z",
  "far": "${name}${name}"
}"#;

/// [`ALL_KINDS`] with seq 12345 and the row of [`all_kinds_data`] written out (`${` as
/// `\u0024{`, so that the JSON is not read as a template).
const ALL_KINDS_RENDERED: &str = r#"{
  "name": "n-12345",
  "scalars": {"s": "ann", "i32": -7, "i64": "12345", "u32": 4000000000,
    "u64": "18446744073709551615", "si32": -3, "si64": "-9000000000", "f32": 4294967295,
    "f64": "12345", "sf32": -5, "sf64": "-9000000000", "b": true, "d": 2.5,
    "f": -0.25, "colour": 2, "blob": "AAE="},
  "inner": {"n": "42", "label": "fixed", "deep": {"s": -1, "t": "x"}, "counts": [1, 7, 3]},
  "tags": ["a", "b", "c\u0024{x}"],
  "items": [{"n": 1}, {"n": "12345", "label": "l"}, {"label": "z"}],
  "ids": ["12345", 5],
  "labels": {"k": "v\u0024{"},
  "number": 9,
  "wrapped": "12345",
  "maybe": 0,
  "colours": [1, 2],
  "ds": [1000],
  "at": "2024-01-02T03:04:05Z",
  "far": "annann"
}"#;

fn all_kinds_data() -> Data {
    data(
        "vals.csv",
        &["big", "neg", "name", "flag"],
        &[&["18446744073709551615", "-9000000000", "ann", "true"]],
    )
}

#[test]
fn every_kind_decodes_as_the_json_with_the_values_written_out() {
    let proto = kinds_proto();
    let desc = descriptor(&proto, "kinds.Req");
    let call = resolve(&proto, KINDS, ALL_KINDS).unwrap();
    let t = call.template.as_ref().unwrap();
    let rows = all_kinds_data();
    let c = compile(t, Some(&rows)).unwrap();
    let frame = render(
        &c,
        Draw::new(12345, Some(rows.row(0))),
        &mut Generator::new(9, 0),
    );
    let got = decode(&desc, &frame);
    let want = encoded(&proto, KINDS, &desc, ALL_KINDS_RENDERED);
    assert_same(&got, &want, "");
    // A few by hand, in case both sides were wrong alike.
    let scalars = got.get_field_by_name("scalars").unwrap();
    let scalars = scalars.as_message().unwrap();
    let field = |name: &str| scalars.get_field_by_name(name).unwrap().into_owned();
    assert_eq!(field("i32"), Value::I32(-7));
    assert_eq!(field("u64"), Value::U64(u64::MAX));
    assert_eq!(field("si64"), Value::I64(-9_000_000_000));
    assert_eq!(field("f32"), Value::U32(u32::MAX));
    assert_eq!(field("b"), Value::Bool(true));
    assert_eq!(field("f"), Value::F32(-0.25));
    assert_eq!(field("colour"), Value::EnumNumber(2));
    assert_eq!(
        field("blob"),
        Value::Bytes(bytes::Bytes::from_static(&[0, 1]))
    );
    assert_eq!(
        got.get_field_by_name("far").unwrap().as_str(),
        Some("annann")
    );
    // Canonical JSON agrees as well.
    assert_eq!(
        serde_json::to_value(&got).unwrap(),
        serde_json::to_value(&want).unwrap()
    );

    // The call's frame is the message with every template at its zero value.
    let zero = decode(&desc, &call.frame);
    let zero_json = serde_json::to_value(&zero).unwrap();
    assert_eq!(zero_json["tags"], json!(["a", "", "c${x}"]));
    assert_eq!(zero_json["labels"], json!({"k": "v${"}));
    assert_eq!(zero_json["inner"]["label"], "fixed");
    assert!(zero_json.get("name").is_none(), "{zero_json}");
    assert!(zero_json["scalars"].get("i64").is_none(), "{zero_json}");
    assert_eq!(zero_json["scalars"]["blob"], "AAE=");
}

#[test]
fn the_template_keeps_fixed_fields_encoded_and_templated_ones_as_text() {
    let t = template_of(
        &kinds_proto(),
        KINDS,
        r#"{"name": "x", "inner": {"n": "${seq}", "label": "l"}, "far": "${seq}"}"#,
    );
    // `name` is encoded once: key 0x0a, length 1, "x".
    let Part::Fixed { bytes } = &t.parts[0] else {
        panic!("{t:?}");
    };
    assert_eq!(&bytes[..], b"\x0a\x01x");
    let inner = t
        .parts
        .iter()
        .find_map(|p| match p {
            Part::Message { key, field, parts } if field == "inner" => Some((key, parts)),
            _ => None,
        })
        .unwrap();
    assert_eq!(&inner.0[..], &[0x1a]);
    assert!(matches!(&inner.1[0], Part::Fixed { bytes } if &bytes[..] == b"\x12\x01l"));
    assert!(
        matches!(&inner.1[1], Part::Scalar(s) if s.kind == ScalarKind::Int64 && s.template == "${seq}" && s.key[..] == [0x08] && s.field == "inner.n")
    );
    // Field 100000: a 3-byte key (100000 << 3 | 2).
    assert!(t.parts.iter().any(
        |p| matches!(p, Part::Scalar(s) if s.field == "far" && s.key[..] == [0x82, 0xea, 0x30])
    ));
}

#[test]
fn random_values_vary_and_stay_in_their_fields() {
    let proto = kinds_proto();
    let desc = descriptor(&proto, "kinds.Req");
    let t = template_of(
        &proto,
        KINDS,
        r#"{"tags": ["${pick:a,b}", "${uuid}"], "ids": ["${rand:-5-5}"], "scalars": {"u64": "${now_ms}", "d": "${rand:1-3}"}}"#,
    );
    let c = compile(&t, None).unwrap();
    let mut gen = Generator::new(5, 2);
    let mut picks = std::collections::HashSet::new();
    let mut ids = std::collections::HashSet::new();
    let mut uuids = std::collections::HashSet::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for seq in 1..=200 {
        let m = decode(&desc, &render(&c, Draw::new(seq, None), &mut gen));
        let json = serde_json::to_value(&m).unwrap();
        let tags = json["tags"].as_array().unwrap();
        assert_eq!(tags.len(), 2, "{json}");
        picks.insert(tags[0].as_str().unwrap().to_owned());
        assert_eq!(tags[1].as_str().unwrap().len(), 36);
        uuids.insert(tags[1].as_str().unwrap().to_owned());
        let id = m.get_field_by_name("ids").unwrap().as_list().unwrap()[0]
            .as_i64()
            .unwrap();
        assert!((-5..=5).contains(&id), "{id}");
        ids.insert(id);
        let scalars = m.get_field_by_name("scalars").unwrap();
        let scalars = scalars.as_message().unwrap();
        let ms = scalars.get_field_by_name("u64").unwrap().as_u64().unwrap();
        assert!(ms >= before && ms < before + 60_000, "{ms}");
        let d = scalars.get_field_by_name("d").unwrap().as_f64().unwrap();
        assert!([1.0, 2.0, 3.0].contains(&d), "{d}");
    }
    assert_eq!(picks.len(), 2, "{picks:?}");
    assert_eq!(ids.len(), 11, "{ids:?}");
    assert_eq!(uuids.len(), 200);
}

#[test]
fn rows_follow_the_draw_and_frames_append() {
    let proto = kinds_proto();
    let desc = descriptor(&proto, "kinds.Req");
    let t = template_of(
        &proto,
        KINDS,
        r#"{"items": [{"n": "${id}", "label": "${who}"}], "scalars": {"b": "${ok}", "colour": "${c}"}}"#,
    );
    let rows = data(
        "users.jsonl",
        &["id", "who", "ok", "c"],
        &[
            &["-1", "a", "false", "0"],
            &["9223372036854775807", "", "true", "7"],
        ],
    );
    let c = compile(&t, Some(&rows)).unwrap();
    let mut gen = Generator::new(1, 0);
    let mut out = b"prev".to_vec();
    let mut scratch = Vec::new();
    let mut ends = vec![out.len()];
    for i in 0..2 {
        c.render_frame(
            &Draw::new(1, Some(rows.row(i))),
            &mut gen,
            &mut out,
            &mut scratch,
        );
        ends.push(out.len());
    }
    assert_eq!(&out[..4], b"prev");
    let first = decode(&desc, &out[ends[0]..ends[1]]);
    let second = decode(&desc, &out[ends[1]..ends[2]]);
    let want = |json: &str| encoded(&proto, KINDS, &desc, json);
    assert_same(
        &first,
        &want(r#"{"items": [{"n": "-1", "label": "a"}], "scalars": {"b": false, "colour": 0}}"#),
        "",
    );
    assert_same(
        &second,
        &want(
            r#"{"items": [{"n": "9223372036854775807", "label": ""}], "scalars": {"b": true, "colour": 7}}"#,
        ),
        "",
    );
}

#[test]
fn templates_survive_serde_and_render_the_same_after() {
    let proto = kinds_proto();
    let call = resolve(&proto, KINDS, ALL_KINDS).unwrap();
    let text = serde_json::to_string(&call).unwrap();
    let back: GrpcCall = serde_json::from_str(&text).unwrap();
    assert_eq!(back, call);
    let t = call.template.as_ref().unwrap();
    let json = serde_json::to_value(t).unwrap();
    assert_eq!(json["message_type"], "kinds.Req");
    assert!(text.contains(r#""template":"${seq}""#), "{text}");
    assert!(text.contains(r#""kind":"sfixed64""#), "{text}");
    assert_eq!(serde_json::from_value::<MessageTemplate>(json).unwrap(), *t);
    let rows = all_kinds_data();
    let draw = Draw::new(77, Some(rows.row(0)));
    let a = render(
        &compile(t, Some(&rows)).unwrap(),
        draw,
        &mut Generator::new(4, 4),
    );
    let b = render(
        &compile(back.template.as_ref().unwrap(), Some(&rows)).unwrap(),
        draw,
        &mut Generator::new(4, 4),
    );
    assert_eq!(a, b);
    // A key that is not a key of its kind is refused, not encoded.
    let mut bad = back.template.unwrap();
    if let Some(Part::Scalar(s)) = bad.parts.iter_mut().find(|p| matches!(p, Part::Scalar(_))) {
        s.key = bytes::Bytes::from_static(&[0x80]);
    }
    let e = compile(&bad, Some(&rows)).unwrap_err();
    assert!(e.message.contains("is not a field key"), "{e}");
}

#[test]
fn json_without_expressions_is_literal_and_untemplated() {
    let call = resolve(
        &repo_proto("helloworld.proto"),
        GREETER,
        r#"{"name": "$${seq}"}"#,
    )
    .unwrap();
    assert!(call.template.is_none());
    let request = helloworld::HelloRequest::decode(unframe(&call.frame)).unwrap();
    assert_eq!(request.name, "$${seq}");
}

/// The error of a call that must fail to resolve.
fn resolve_err(proto: &Path, call: &str, json: &str) -> GrpcError {
    match resolve(proto, call, json) {
        Ok(c) => panic!("resolved: {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn validation_errors_are_unchanged_with_templates_present() {
    let greeter = repo_proto("helloworld.proto");
    let plain = resolve_err(&greeter, GREETER, r#"{"nmae": "x"}"#).to_string();
    let templated = resolve_err(&greeter, GREETER, r#"{"nmae": "x-${seq}"}"#).to_string();
    assert_eq!(templated, plain);
    assert!(
        plain.contains(
            "field `nmae`: unknown field; the fields of `helloworld.HelloRequest` are: name"
        ),
        "{plain}"
    );

    let kinds = kinds_proto();
    for (with, without) in [
        (
            r#"{"scalars": {"i64": "${seq}", "i46": 1}}"#,
            r#"{"scalars": {"i64": "5", "i46": 1}}"#,
        ),
        (
            r#"{"name": 5, "tags": ["${seq}"]}"#,
            r#"{"name": 5, "tags": ["x"]}"#,
        ),
        (
            r#"{"items": [{"n": "${seq}"}, {"n": "many"}]}"#,
            r#"{"items": [{"n": "1"}, {"n": "many"}]}"#,
        ),
        (
            r#"{"scalars": {"colour": "BLUE", "s": "${seq}"}}"#,
            r#"{"scalars": {"colour": "BLUE", "s": "x"}}"#,
        ),
    ] {
        let a = resolve_err(&kinds, KINDS, with);
        let b = resolve_err(&kinds, KINDS, without);
        assert!(matches!(a, GrpcError::Data { .. }), "{a:?}");
        assert_eq!(a.to_string(), b.to_string());
    }
    // A template where a message goes is a misfit like any string.
    let e = resolve_err(&kinds, KINDS, r#"{"inner": "${seq}"}"#);
    assert!(
        e.to_string()
            .contains("field `inner`: expected message `kinds.Inner` (a JSON object), found string \"${seq}\""),
        "{e}"
    );
}

/// The field and message of a [`GrpcError::Data`].
fn refused(json: &str) -> (String, String) {
    match resolve_err(&kinds_proto(), KINDS, json) {
        GrpcError::Data { field, message, .. } => (field, message),
        other => panic!("{other:?}"),
    }
}

#[test]
fn templates_where_they_cannot_go_are_refused_by_field() {
    let (field, message) = refused(r#"{"labels": {"k${seq}": "v"}}"#);
    assert_eq!(field, r#"labels["k${seq}"]"#);
    assert!(message.contains("not supported in map keys"), "{message}");
    let (field, message) = refused(r#"{"labels": {"a": "b", "k": "${seq}"}}"#);
    assert_eq!(field, r#"labels["k"]"#);
    assert!(message.contains("not supported in map fields"), "{message}");
    let (field, message) = refused(r#"{"scalars": {"blob": "${hex:4}"}}"#);
    assert_eq!(field, "scalars.blob");
    assert!(
        message.contains("not supported in bytes fields"),
        "{message}"
    );
    let (field, message) = refused(r#"{"at": "${now}"}"#);
    assert_eq!(field, "at");
    assert!(message.contains("`google.protobuf.Timestamp`"), "{message}");
}

/// The error compiling `json`'s template (with `data`).
fn compile_err(json: &str, data: Option<&Data>) -> TemplateError {
    let t = template_of(&kinds_proto(), KINDS, json);
    match compile(&t, data) {
        Ok(c) => panic!("compiled: {c:?}"),
        Err(e) => e,
    }
}

/// The 1-based line and column of the first `needle` in `text` (ASCII).
fn position(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap();
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map_or(0, |nl| nl + 1) + 1;
    (line, col)
}

#[test]
fn template_errors_name_the_field_and_its_position() {
    // ${uuid} in an int64 field: the string's position in the JSON.
    let json = r#"{"name": "a", "scalars": {"i64": "${uuid}"}}"#;
    let e = compile_err(json, None);
    assert_eq!(
        (e.source.as_str(), e.line, e.col),
        ("-D", 1, position(json, "${uuid}").1)
    );
    assert!(
        e.message
            .starts_with("field `scalars.i64` (int64): `${uuid}` yields text;"),
        "{e}"
    );

    // An unterminated `${`, on the second line: the position of its `$`.
    let json = "{\"name\": \"x\",\n  \"inner\": {\"label\": \"ab ${seq\"}}";
    let e = compile_err(json, None);
    assert_eq!((e.line, e.col), position(json, "${seq"));
    assert_eq!(
        e.to_string(),
        format!(
            "-D:2:{}: field `inner.label`: unterminated `${{`: no `}}` closes the expression `${{seq`",
            position(json, "${seq").1
        )
    );

    // An unknown column.
    let ids = data("ids.csv", &["id"], &[&["1"]]);
    let json = r#"{"tags": ["x", "${usr}"]}"#;
    let e = compile_err(json, Some(&ids));
    assert_eq!((e.line, e.col), position(json, "${usr}"));
    assert!(
        e.message.starts_with(
            "field `tags[1]`: unknown name `${usr}`: the data file ids.csv has columns id;"
        ),
        "{e}"
    );
    // A column with no data file.
    let e = compile_err(r#"{"name": "${id}"}"#, None);
    assert!(e.message.contains("no data file given"), "{e}");
}

#[test]
fn a_data_value_that_is_no_number_names_its_line() {
    let ids = data(
        "ids.csv",
        &["id", "name"],
        &[&["1", "a"], &["2", "b"], &["x3", "c"]],
    );
    let json = r#"{"inner": {"n": "${id}"}}"#;
    let e = compile_err(json, Some(&ids));
    // Row 3 is line 4 of the file (after the header).
    assert_eq!((e.source.as_str(), e.line, e.col), ("ids.csv", 4, 1));
    assert_eq!(
        e.message,
        format!(
            "the value \"x3\" of column `id` is not an integer, which an int64 needs: field \
             `inner.n` (int64) uses `${{id}}` at -D:1:{}",
            position(json, "${id}").1
        )
    );
    let e = compile_err(
        r#"{"scalars": {"u32": "${id}"}}"#,
        Some(&data("n.csv", &["id"], &[&["-1"]])),
    );
    assert!(e.message.contains("out of range for uint32"), "{e}");
    let e = compile_err(
        r#"{"scalars": {"b": "${id}"}}"#,
        Some(&data("n.csv", &["id"], &[&["1"]])),
    );
    assert!(e.message.contains("neither `true` nor `false`"), "{e}");
    let e = compile_err(
        r#"{"scalars": {"f": "${id}"}}"#,
        Some(&data("n.csv", &["id"], &[&["1e39"]])),
    );
    assert!(e.message.contains("out of range for float"), "{e}");
    // The same column is fine in a string field.
    compile(
        &template_of(&kinds_proto(), KINDS, r#"{"name": "${id}"}"#),
        Some(&ids),
    )
    .unwrap();
}

#[test]
fn number_fields_take_one_expression_of_their_range() {
    for (json, needle) in [
        (
            r#"{"scalars": {"i64": "${seq}0"}}"#,
            "`${seq}0` is not a single expression",
        ),
        (
            r#"{"scalars": {"i64": "1${seq}"}}"#,
            "`1${seq}` is not a single expression",
        ),
        (
            r#"{"scalars": {"u32": "${rand:-1-5}"}}"#,
            "can yield values out of range for uint32 (0..=4294967295)",
        ),
        (
            r#"{"scalars": {"i32": "${now_ms}"}}"#,
            "is out of range for int32",
        ),
        (
            r#"{"scalars": {"b": "${seq}"}}"#,
            "`${seq}` yields a number; a bool field takes",
        ),
        (
            r#"{"scalars": {"d": "${pick:1,x}"}}"#,
            "the value \"x\" is not a number",
        ),
        (
            r#"{"scalars": {"colour": "${pick:RED}"}}"#,
            "an enum field takes one expression that yields the value's number",
        ),
        (
            r#"{"wrapped": "${randstr:3}"}"#,
            "field `wrapped` (int64): `${randstr:3}` yields text",
        ),
    ] {
        let e = compile_err(json, None);
        assert!(e.message.contains(needle), "{json}: {e}");
        assert_eq!(e.source, "-D");
    }
    // And what fits, fits.
    for json in [
        r#"{"scalars": {"i64": "${now_ms}", "u32": "${now}", "b": "${pick:true,false}"}}"#,
        r#"{"scalars": {"sf32": "${rand:-2147483648-2147483647}", "f": "${pick:NaN,inf,-1.5}"}}"#,
        r#"{"ids": ["${seq}", "${rand:-9223372036854775808-9223372036854775807}"]}"#,
    ] {
        compile(&template_of(&kinds_proto(), KINDS, json), None)
            .unwrap_or_else(|e| panic!("{json}: {e}"));
    }
}
