//! Request JSON holding `${...}` templates, turned into a [`MessageTemplate`] with the
//! message descriptor.
//!
//! In a templated message every JSON string is template text: a string with expressions
//! is a templated field, any other has its `$${` unescaped to `${` (as in a templated HTTP
//! body). Three steps:
//! 1. Each templated string is replaced by its field's zero value (`""`, `0`, `false`; a
//!    well-known type's default), and the result checked and converted as an untemplated
//!    request is ([`crate::call`]): every other mistake gets the same error as without
//!    templates, and the encoding is [`crate::GrpcCall::frame`].
//! 2. Where the templates are in the JSON text (line and column), by field path.
//! 3. The message is walked with its descriptor: at each level, the fields without
//!    templates are encoded together by `prost-reflect` ([`Part::Fixed`]); a templated
//!    scalar becomes a [`Part::Scalar`], a nested message holding templates a
//!    [`Part::Message`]; a repeated field holding a template has each element on its own,
//!    in order. Templates in map fields, `bytes` fields, extensions, groups and well-known
//!    types other than the scalar wrappers are refused, naming the field.

use std::collections::HashMap;

use bytes::Bytes;
use loadlab_template::{Origin, Slot, Template};
use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use crate::json::{is_well_known, Misfit};
use crate::message::{field_key, MessageTemplate, Part, ScalarField, ScalarKind};
use crate::GrpcError;

/// The request of templated JSON `data` of type `desc`, with every template at its zero
/// value, and the message's template (`None` when no string holds an expression after
/// all).
pub(crate) fn resolve(
    desc: &MessageDescriptor,
    data: &str,
) -> Result<(DynamicMessage, Option<MessageTemplate>), GrpcError> {
    let value: Value = serde_json::from_str(data).map_err(|err| GrpcError::DataSyntax {
        message: err.to_string(),
    })?;
    let zeroed = placeholder(&Kind::Message(desc.clone()), &value);
    let request = crate::json::message_from_value(desc, zeroed)?;
    let misfit = |m: Misfit| GrpcError::Data {
        message_type: desc.full_name().to_owned(),
        field: m.field,
        message: m.message,
    };
    if !holds_template(&value) {
        return Ok((request, None));
    }
    if is_well_known(desc.full_name()) {
        return Err(misfit(Misfit {
            field: String::new(),
            message: format!(
                "templates are not supported in a `{}` request",
                desc.full_name()
            ),
        }));
    }
    let Value::Object(object) = &value else {
        // Not an object: the check above has refused it.
        return Ok((request, None));
    };
    let builder = Builder {
        positions: string_positions(data),
    };
    let parts = builder.level(desc, object, "").map_err(misfit)?;
    let template = MessageTemplate {
        message_type: desc.full_name().to_owned(),
        parts,
    };
    Ok((request, template.is_templated().then_some(template)))
}

/// Whether `value` holds a string (or an object key) with a `${` expression.
fn holds_template(value: &Value) -> bool {
    match value {
        Value::String(s) => Template::has_expressions(s),
        Value::Array(items) => items.iter().any(holds_template),
        Value::Object(object) => object
            .iter()
            .any(|(k, v)| Template::has_expressions(k) || holds_template(v)),
        _ => false,
    }
}

/// `text` with `$${` unescaped to `${` (for text without expressions).
fn unescape_str(text: &str) -> String {
    if !text.contains("$${") {
        return text.to_owned();
    }
    Template::parse(text, Slot::Body, &Origin::flag("JSON"), &[])
        .ok()
        .and_then(|t| {
            t.as_literal()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        })
        .unwrap_or_else(|| text.to_owned())
}

/// `value` with `$${` unescaped in every string and object key.
fn unescape(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(unescape_str(s)),
        Value::Array(items) => Value::Array(items.iter().map(unescape).collect()),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(k, v)| (unescape_str(k), unescape(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `value` (of `kind`) with each templated string replaced by the zero value of its
/// field, and the other strings unescaped. What does not fit is left for the check to
/// report.
fn placeholder(kind: &Kind, value: &Value) -> Value {
    match (kind, value) {
        (Kind::Message(desc), _) if is_well_known(desc.full_name()) => {
            if holds_template(value) {
                serde_json::to_value(DynamicMessage::new(desc.clone())).unwrap_or(Value::Null)
            } else {
                unescape(value)
            }
        }
        (Kind::Message(desc), Value::Object(object)) => Value::Object(
            object
                .iter()
                .map(|(key, v)| {
                    let field = desc
                        .get_field_by_json_name(key)
                        .or_else(|| desc.get_field_by_name(key));
                    let v = match field {
                        Some(field) if !key.starts_with('[') => placeholder_field(&field, v),
                        _ => unescape(v),
                    };
                    (key.clone(), v)
                })
                .collect(),
        ),
        // A message given as a string: left for the check to report.
        (Kind::Message(_), Value::String(_)) => value.clone(),
        (_, Value::String(text)) if Template::has_expressions(text) => match kind {
            Kind::String | Kind::Bytes => Value::from(""),
            Kind::Bool => Value::Bool(false),
            _ => Value::from(0),
        },
        _ => unescape(value),
    }
}

fn placeholder_field(field: &FieldDescriptor, value: &Value) -> Value {
    match (field.kind(), value) {
        (Kind::Message(entry), Value::Object(object)) if field.is_map() => {
            let key_kind = entry.map_entry_key_field().kind();
            let value_kind = entry.map_entry_value_field().kind();
            Value::Object(
                object
                    .iter()
                    .map(|(k, v)| {
                        let k = if Template::has_expressions(k) {
                            match key_kind {
                                Kind::String => String::new(),
                                Kind::Bool => "false".to_owned(),
                                _ => "0".to_owned(),
                            }
                        } else {
                            unescape_str(k)
                        };
                        (k, placeholder(&value_kind, v))
                    })
                    .collect(),
            )
        }
        (kind, Value::Array(items)) if field.is_list() => {
            Value::Array(items.iter().map(|item| placeholder(&kind, item)).collect())
        }
        (kind, _) => placeholder(&kind, value),
    }
}

/// The path of `key` inside `path` (as [`crate::json`] writes them).
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn refuse(field: &str, message: impl Into<String>) -> Misfit {
    Misfit {
        field: field.to_owned(),
        message: message.into(),
    }
}

struct Builder {
    /// Where each templated string's content starts in the JSON text, by field path.
    positions: HashMap<String, (usize, usize)>,
}

impl Builder {
    /// The parts of a message of type `desc` given as `object` (checked already), at
    /// `path`.
    fn level(
        &self,
        desc: &MessageDescriptor,
        object: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<Part>, Misfit> {
        let mut fixed = Map::new();
        let mut parts = Vec::new();
        for (key, value) in object {
            if !holds_template(value) {
                fixed.insert(key.clone(), unescape(value));
                continue;
            }
            let field_path = join(path, key);
            if key.starts_with('[') {
                return Err(refuse(
                    &field_path,
                    "templates are not supported in extension fields",
                ));
            }
            let Some(field) = desc
                .get_field_by_json_name(key)
                .or_else(|| desc.get_field_by_name(key))
            else {
                return Err(refuse(&field_path, "unknown field"));
            };
            if field.is_map() {
                return Err(map_refusal(value, &field_path));
            }
            if field.is_list() {
                let Value::Array(items) = value else {
                    return Err(refuse(&field_path, "expected a JSON array"));
                };
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{field_path}[{i}]");
                    if holds_template(item) {
                        parts.push(self.element(&field, item, &item_path)?);
                    } else {
                        // On its own, so that the elements stay in order.
                        let mut one = Map::new();
                        one.insert(key.clone(), Value::Array(vec![unescape(item)]));
                        parts.push(Part::Fixed {
                            bytes: encode(desc, one, &item_path)?,
                        });
                    }
                }
            } else {
                parts.push(self.element(&field, value, &field_path)?);
            }
        }
        if !fixed.is_empty() {
            let bytes = encode(desc, fixed, path)?;
            if !bytes.is_empty() {
                parts.insert(0, Part::Fixed { bytes });
            }
        }
        Ok(merge_fixed(parts))
    }

    /// The part of one templated value of `field` (an element, for a repeated field).
    fn element(&self, field: &FieldDescriptor, value: &Value, path: &str) -> Result<Part, Misfit> {
        if field.is_group() {
            return Err(refuse(path, "templates are not supported in groups"));
        }
        let key = |kind: ScalarKind| kind.key(field.number());
        match (field.kind(), value) {
            (Kind::Message(desc), Value::String(text)) if is_wrapper(desc.full_name()) => {
                let inner = desc
                    .get_field(1)
                    .ok_or_else(|| refuse(path, "a wrapper without its value field"))?;
                let Some(kind) = scalar_kind(&inner.kind()) else {
                    return Err(refuse(
                        path,
                        format!(
                            "templates are not supported in `{}` fields: write the value as \
                             base64 without `${{`",
                            desc.full_name()
                        ),
                    ));
                };
                Ok(Part::Message {
                    key: field_key(field.number(), 2),
                    field: path.to_owned(),
                    parts: vec![self.scalar(kind.key(1), kind, text, path)],
                })
            }
            (Kind::Message(desc), _) if is_well_known(desc.full_name()) => Err(refuse(
                path,
                format!(
                    "templates are not supported in `{}` fields",
                    desc.full_name()
                ),
            )),
            (Kind::Message(desc), Value::Object(object)) => Ok(Part::Message {
                key: field_key(field.number(), 2),
                field: path.to_owned(),
                parts: self.level(&desc, object, path)?,
            }),
            (Kind::Bytes, _) => Err(refuse(
                path,
                "templates are not supported in bytes fields: write the value as base64 \
                 without `${`",
            )),
            (kind, Value::String(text)) => match scalar_kind(&kind) {
                Some(scalar) => Ok(self.scalar(key(scalar), scalar, text, path)),
                None => Err(refuse(path, "templates are not supported in this field")),
            },
            _ => Err(refuse(path, "a template where the field takes no string")),
        }
    }

    fn scalar(&self, key: Bytes, kind: ScalarKind, text: &str, path: &str) -> Part {
        let (line, col) = self.positions.get(path).copied().unwrap_or((1, 1));
        Part::Scalar(ScalarField {
            key,
            kind,
            field: path.to_owned(),
            template: text.to_owned(),
            line,
            col,
        })
    }
}

/// The error for a map field holding a template: in a key or in a value.
fn map_refusal(value: &Value, path: &str) -> Misfit {
    if let Value::Object(object) = value {
        for (k, v) in object {
            let entry = format!("{path}[{k:?}]");
            if Template::has_expressions(k) {
                return refuse(
                    &entry,
                    "templates are not supported in map keys (nor in map fields at all): \
                     write the key without `${`",
                );
            }
            if holds_template(v) {
                return refuse(
                    &entry,
                    "templates are not supported in map fields: write the map's values \
                     without `${`",
                );
            }
        }
    }
    refuse(path, "templates are not supported in map fields")
}

/// Encodes the fields `object` of a message of type `desc`.
fn encode(
    desc: &MessageDescriptor,
    object: Map<String, Value>,
    path: &str,
) -> Result<Bytes, Misfit> {
    DynamicMessage::deserialize(desc.clone(), Value::Object(object))
        .map(|m| Bytes::from(m.encode_to_vec()))
        .map_err(|err| refuse(path, err.to_string()))
}

/// Adjacent fixed parts as one.
fn merge_fixed(parts: Vec<Part>) -> Vec<Part> {
    let mut merged: Vec<Part> = Vec::with_capacity(parts.len());
    for part in parts {
        if let (Some(Part::Fixed { bytes: last }), Part::Fixed { bytes }) =
            (merged.last_mut(), &part)
        {
            let mut joined = last.to_vec();
            joined.extend_from_slice(bytes);
            *last = Bytes::from(joined);
            continue;
        }
        merged.push(part);
    }
    merged
}

fn scalar_kind(kind: &Kind) -> Option<ScalarKind> {
    Some(match kind {
        Kind::String => ScalarKind::String,
        Kind::Int32 => ScalarKind::Int32,
        Kind::Int64 => ScalarKind::Int64,
        Kind::Uint32 => ScalarKind::Uint32,
        Kind::Uint64 => ScalarKind::Uint64,
        Kind::Sint32 => ScalarKind::Sint32,
        Kind::Sint64 => ScalarKind::Sint64,
        Kind::Fixed32 => ScalarKind::Fixed32,
        Kind::Fixed64 => ScalarKind::Fixed64,
        Kind::Sfixed32 => ScalarKind::Sfixed32,
        Kind::Sfixed64 => ScalarKind::Sfixed64,
        Kind::Bool => ScalarKind::Bool,
        Kind::Double => ScalarKind::Double,
        Kind::Float => ScalarKind::Float,
        Kind::Enum(_) => ScalarKind::Enum,
        Kind::Bytes | Kind::Message(_) => return None,
    })
}

/// The scalar wrappers (`google.protobuf.Int64Value`…), whose JSON is their value.
fn is_wrapper(full_name: &str) -> bool {
    matches!(
        full_name,
        "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int64Value"
            | "google.protobuf.UInt64Value"
            | "google.protobuf.Int32Value"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.BoolValue"
            | "google.protobuf.StringValue"
            | "google.protobuf.BytesValue"
    )
}

/// Where each string value holding `${` starts in the JSON `text` (the character after
/// its opening quote: 1-based line and column in characters), by field path (`a.b`,
/// `items[2].id`). `text` is valid JSON (parsed already).
fn string_positions(text: &str) -> HashMap<String, (usize, usize)> {
    let mut scan = Scan {
        text,
        i: 0,
        found: Vec::new(),
    };
    scan.value("");
    let mut found = scan.found;
    found.sort_by_key(|(_, offset)| *offset);
    let mut positions = HashMap::with_capacity(found.len());
    let (mut pos, mut line, mut col) = (0, 1, 1);
    for (path, offset) in found {
        let part = &text[pos..offset];
        match part.rfind('\n') {
            None => col += part.chars().count(),
            Some(nl) => {
                line += part.bytes().filter(|&b| b == b'\n').count();
                col = 1 + part[nl + 1..].chars().count();
            }
        }
        pos = offset;
        positions.insert(path, (line, col));
    }
    positions
}

/// A JSON scanner that follows field paths.
struct Scan<'a> {
    text: &'a str,
    i: usize,
    /// Field paths and the byte offsets of their strings' content.
    found: Vec<(String, usize)>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// Scans the value at the cursor; `None` on anything unexpected.
    fn value(&mut self, path: &str) -> Option<()> {
        self.skip_whitespace();
        match self.peek()? {
            b'{' => {
                self.i += 1;
                loop {
                    self.skip_whitespace();
                    match self.peek()? {
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => {
                            self.i += 1;
                            continue;
                        }
                        b'"' => {}
                        _ => return None,
                    }
                    let (start, end) = self.string()?;
                    let raw = &self.text[start..end];
                    let key = if raw.contains('\\') {
                        serde_json::from_str::<String>(&self.text[start - 1..=end]).ok()?
                    } else {
                        raw.to_owned()
                    };
                    self.skip_whitespace();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.i += 1;
                    self.value(&join(path, &key))?;
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 0;
                loop {
                    self.skip_whitespace();
                    match self.peek()? {
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => {
                            self.i += 1;
                            continue;
                        }
                        _ => {}
                    }
                    self.value(&format!("{path}[{n}]"))?;
                    n += 1;
                }
            }
            b'"' => {
                let (start, end) = self.string()?;
                if self.text[start..end].contains("${") {
                    self.found.push((path.to_owned(), start));
                }
                Some(())
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }

    /// Scans the string whose opening quote is at the cursor: its content's byte range.
    fn string(&mut self) -> Option<(usize, usize)> {
        let b = self.text.as_bytes();
        let start = self.i + 1;
        let mut j = start;
        loop {
            match *b.get(j)? {
                b'\\' => j += 2,
                b'"' => break,
                _ => j += 1,
            }
        }
        self.i = j + 1;
        Some((start, j))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_paths_lines_and_characters() {
        let text = "{\"a\": \"x${seq}\", \"é\": {\"b\": [1, \"${uuid}\", {\"c\": \"${n}\"}]},\n  \"d\": \"$${x}\", \"k\\\"q\": \"${seq}\"}";
        let p = string_positions(text);
        assert_eq!(p["a"], (1, 8));
        assert_eq!(p["é.b[1]"], (1, 34));
        assert_eq!(p["é.b[2].c"], (1, 51));
        assert_eq!(p["d"], (2, 9));
        assert_eq!(p["k\"q"], (2, 26));
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn unescaping_keeps_other_text() {
        assert_eq!(unescape_str("a $${b} $c $$"), "a ${b} $c $$");
        assert_eq!(unescape_str("plain"), "plain");
        let v = serde_json::json!({"k$${": ["$${x}", 1, null]});
        assert_eq!(unescape(&v), serde_json::json!({"k${": ["${x}", 1, null]}));
    }
}
