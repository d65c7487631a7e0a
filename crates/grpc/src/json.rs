//! Checks request JSON against a message descriptor before `prost-reflect` converts it.
//!
//! `prost-reflect` implements the proto3 JSON mapping, but its errors come from serde and do
//! not say which field was wrong. This walk covers the common misfits (unknown field, wrong
//! JSON type, integer out of range, unknown enum value, bad base64) and reports the field
//! path and the expected type; whatever it lets through is still converted (and checked
//! once more) by `prost-reflect`. Well-known types (`google.protobuf.*`) have special JSON
//! forms: each such value is converted alone by `prost-reflect`, so its errors name the
//! field too.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

use crate::error::GrpcError;

/// Checks JSON `value` against `desc` and converts it into a message of that type.
pub(crate) fn message_from_value(
    desc: &MessageDescriptor,
    value: serde_json::Value,
) -> Result<DynamicMessage, GrpcError> {
    let misfit = |field: String, message: String| GrpcError::Data {
        message_type: desc.full_name().to_owned(),
        field,
        message,
    };
    check_message(desc, &value).map_err(|m| misfit(m.field, m.message))?;
    DynamicMessage::deserialize(desc.clone(), value)
        .map_err(|err| misfit(String::new(), err.to_string()))
}

/// A field that does not fit: where and why.
#[derive(Debug)]
pub(crate) struct Misfit {
    /// Path of the field, such as `items[2].id`; empty for the top-level value.
    pub field: String,
    /// What is wrong, with the expected type.
    pub message: String,
}

/// Checks that `value` is a JSON object that fits `desc`.
pub(crate) fn check_message(desc: &MessageDescriptor, value: &Value) -> Result<(), Misfit> {
    check_kind(&Kind::Message(desc.clone()), value, "")
}

fn check_object(
    desc: &MessageDescriptor,
    object: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<(), Misfit> {
    for (key, value) in object {
        if key.starts_with('[') {
            // An extension, `[package.name]`: left to prost-reflect.
            continue;
        }
        let field_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let Some(field) = desc
            .get_field_by_json_name(key)
            .or_else(|| desc.get_field_by_name(key))
        else {
            let known: Vec<String> = desc.fields().map(|f| f.json_name().to_owned()).collect();
            let known = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            return Err(Misfit {
                field: field_path,
                message: format!(
                    "unknown field; the fields of `{}` are: {known}",
                    desc.full_name()
                ),
            });
        };
        check_field(&field, value, &field_path)?;
    }
    Ok(())
}

fn check_field(field: &FieldDescriptor, value: &Value, path: &str) -> Result<(), Misfit> {
    if value.is_null() {
        // proto3 JSON: null is the field's default value.
        return Ok(());
    }
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Ok(());
        };
        let value_kind = entry.map_entry_value_field().kind();
        let Value::Object(object) = value else {
            return Err(mismatch(
                format!(
                    "map<{}, {}> (a JSON object)",
                    kind_name(&entry.map_entry_key_field().kind()),
                    kind_name(&value_kind)
                ),
                value,
                path,
            ));
        };
        for (key, item) in object {
            check_kind(&value_kind, item, &format!("{path}[{key:?}]"))?;
        }
        Ok(())
    } else if field.is_list() {
        let kind = field.kind();
        let Value::Array(items) = value else {
            return Err(mismatch(
                format!("repeated {} (a JSON array)", kind_name(&kind)),
                value,
                path,
            ));
        };
        for (i, item) in items.iter().enumerate() {
            check_kind(&kind, item, &format!("{path}[{i}]"))?;
        }
        Ok(())
    } else {
        check_kind(&field.kind(), value, path)
    }
}

fn check_kind(kind: &Kind, value: &Value, path: &str) -> Result<(), Misfit> {
    let fits = match (kind, value) {
        (Kind::Message(desc), _) if is_well_known(desc.full_name()) => {
            // Special JSON forms (timestamps as strings, wrappers as scalars…): convert this
            // value alone, so that a misfit still names the field.
            return match DynamicMessage::deserialize(desc.clone(), value) {
                Ok(_) => Ok(()),
                Err(err) => Err(Misfit {
                    field: path.to_owned(),
                    message: format!("invalid {}: {err}", kind_name(kind)),
                }),
            };
        }
        (Kind::Enum(desc), _) if is_well_known(desc.full_name()) => true,
        (_, Value::Null) => true,
        (Kind::Message(desc), Value::Object(object)) => return check_object(desc, object, path),
        (Kind::Enum(desc), Value::String(name)) => {
            if desc.get_value_by_name(name).is_some() {
                true
            } else {
                let names: Vec<String> = desc.values().map(|v| v.name().to_owned()).collect();
                return Err(Misfit {
                    field: path.to_owned(),
                    message: format!(
                        "unknown value {name:?} of enum `{}`; its values: {}",
                        desc.full_name(),
                        names.join(", ")
                    ),
                });
            }
        }
        (Kind::Enum(_), Value::Number(_)) => return check_integer(kind, value, path),
        (Kind::String, Value::String(_)) | (Kind::Bool, Value::Bool(_)) => true,
        (Kind::Bytes, Value::String(text)) => {
            if is_base64(text) {
                true
            } else {
                return Err(Misfit {
                    field: path.to_owned(),
                    message: "expected bytes (a base64 string), found a string that is not base64"
                        .to_owned(),
                });
            }
        }
        (Kind::Float | Kind::Double, Value::Number(_)) => true,
        (Kind::Float | Kind::Double, Value::String(text)) => {
            matches!(text.as_str(), "NaN" | "Infinity" | "-Infinity")
                || text.trim().parse::<f64>().is_ok()
        }
        (k, Value::Number(_) | Value::String(_)) if integer_range(k).is_some() => {
            return check_integer(kind, value, path)
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(mismatch(expected(kind), value, path))
    }
}

/// Checks an integer given as a JSON number or string against the range of `kind`.
fn check_integer(kind: &Kind, value: &Value, path: &str) -> Result<(), Misfit> {
    let (min, max) = integer_range(kind).unwrap_or((i32::MIN.into(), i32::MAX.into()));
    let parsed: Option<i128> = match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| n.as_f64().and_then(integral)),
        Value::String(text) => text
            .parse::<i128>()
            .ok()
            .or_else(|| text.parse::<f64>().ok().and_then(integral)),
        _ => None,
    };
    match parsed {
        Some(n) if (min..=max).contains(&n) => Ok(()),
        Some(_) => Err(Misfit {
            field: path.to_owned(),
            message: format!(
                "{} out of range for {} ({min}..={max})",
                describe(value),
                kind_name(kind)
            ),
        }),
        None => Err(mismatch(expected(kind), value, path)),
    }
}

/// The integer value of a float with no fractional part, within i128.
fn integral(f: f64) -> Option<i128> {
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38).then_some(f as i128)
}

fn integer_range(kind: &Kind) -> Option<(i128, i128)> {
    Some(match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Enum(_) => {
            (i32::MIN.into(), i32::MAX.into())
        }
        Kind::Uint32 | Kind::Fixed32 => (0, u32::MAX.into()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => (i64::MIN.into(), i64::MAX.into()),
        Kind::Uint64 | Kind::Fixed64 => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// Whether `full_name` is a well-known type (`google.protobuf.*`), with a JSON form of its own.
pub(crate) fn is_well_known(full_name: &str) -> bool {
    full_name.starts_with("google.protobuf.")
}

/// proto3 JSON accepts standard or URL-safe base64, padded or not.
fn is_base64(text: &str) -> bool {
    const CONFIG: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, CONFIG);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, CONFIG);
    STANDARD.decode(text).is_ok() || URL_SAFE.decode(text).is_ok()
}

fn mismatch(expected: String, value: &Value, path: &str) -> Misfit {
    Misfit {
        field: path.to_owned(),
        message: format!("expected {expected}, found {}", describe(value)),
    }
}

/// The expected JSON for a value of `kind`.
fn expected(kind: &Kind) -> String {
    let name = kind_name(kind);
    match kind {
        Kind::String | Kind::Bool => name,
        Kind::Bytes => format!("{name} (a base64 string)"),
        Kind::Float | Kind::Double => format!("{name} (a JSON number or numeric string)"),
        Kind::Message(_) => format!("{name} (a JSON object)"),
        Kind::Enum(_) => format!("{name} (a value name or number)"),
        _ => format!("{name} (a JSON integer or integer string)"),
    }
}

/// The protobuf name of a type: `int32`, `message pkg.Msg`, `enum pkg.E`…
fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Double => "double".to_owned(),
        Kind::Float => "float".to_owned(),
        Kind::Int32 => "int32".to_owned(),
        Kind::Int64 => "int64".to_owned(),
        Kind::Uint32 => "uint32".to_owned(),
        Kind::Uint64 => "uint64".to_owned(),
        Kind::Sint32 => "sint32".to_owned(),
        Kind::Sint64 => "sint64".to_owned(),
        Kind::Fixed32 => "fixed32".to_owned(),
        Kind::Fixed64 => "fixed64".to_owned(),
        Kind::Sfixed32 => "sfixed32".to_owned(),
        Kind::Sfixed64 => "sfixed64".to_owned(),
        Kind::Bool => "bool".to_owned(),
        Kind::String => "string".to_owned(),
        Kind::Bytes => "bytes".to_owned(),
        Kind::Message(desc) => format!("message `{}`", desc.full_name()),
        Kind::Enum(desc) => format!("enum `{}`", desc.full_name()),
    }
}

/// A short description of a JSON value for error messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("bool {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) if s.chars().count() > 40 => {
            let head: String = s.chars().take(40).collect();
            format!("string {head:?}…")
        }
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}
