//! Request messages whose fields hold `${...}` templates: [`MessageTemplate`], built once
//! from the request JSON and the descriptors (by `GrpcCall::resolve`), travels with the
//! call (serializable, no descriptors); [`CompiledMessage`] renders one call's gRPC frame
//! from it, without allocating.
//!
//! # What a template looks like
//! A message is a list of [`Part`]s, written one after the other:
//! - [`Part::Fixed`]: fields encoded once (keys and values), written as they are;
//! - [`Part::Scalar`]: one templated field ([`ScalarField`]): its key, its kind and the
//!   template text as written in the JSON, rendered and encoded for each call;
//! - [`Part::Message`]: a nested message holding templates: its key, then its length
//!   (computed for each call), then its own parts.
//!
//! Protobuf decoders take fields in any order, and a repeated scalar's elements packed or
//! not, so a templated element of a repeated field is written on its own (unpacked), the
//! elements of one repeated field staying in their order.
//!
//! # Kinds of templated fields
//! `string` (the rendered text as it is), the integers `int32`, `int64`, `uint32`,
//! `uint64`, `sint32`, `sint64`, `fixed32`, `fixed64`, `sfixed32`, `sfixed64`, `bool`,
//! `double`, `float` and enums (by number): see [`ScalarKind`]. A number or bool field
//! takes one expression that yields a value of its type, checked by
//! [`CompiledMessage::compile`]: `${seq}`, `${rand:LO-HI}` (both ends in range), `${now}`,
//! `${now_ms}` (when the field can hold it), `${pick:…}` whose every value parses, or a
//! data column whose every row parses (`true`/`false` for a bool). `${seq}` past an
//! integer field's range wraps around as a cast does.

use bytes::Bytes;
use loadlab_template::{Data, Draw, Generator, Origin, Slot, Template, TemplateError};
use serde::{Deserialize, Serialize};

use crate::frame;

/// A request message with `${...}` templates in some of its fields, ready to compile
/// ([`CompiledMessage::compile`]) where the load is generated: fields without templates are
/// already encoded, the templated ones keep their template text as written.
///
/// Serializable (in JSON, encoded bytes are base64), so it travels with a
/// [`crate::GrpcCall`] to remote agents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageTemplate {
    /// The fully qualified message type, e.g. `helloworld.HelloRequest`.
    pub message_type: String,
    /// The message's parts, written in this order.
    pub parts: Vec<Part>,
}

/// A piece of a [`MessageTemplate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "part", rename_all = "snake_case")]
pub enum Part {
    /// Fields encoded once (keys and values), written as they are.
    Fixed {
        /// The encoded fields (base64 in JSON).
        #[serde(with = "crate::wire::base64_bytes")]
        bytes: Bytes,
    },
    /// A scalar field whose value is a template.
    Scalar(ScalarField),
    /// A nested message holding templates: its key, its length (computed for each call),
    /// then its parts.
    Message {
        /// The field's key: the varint of `number << 3 | 2` (base64 in JSON).
        #[serde(with = "crate::wire::base64_bytes")]
        key: Bytes,
        /// The field's path in the JSON, such as `inner` or `items[2]`, for messages.
        field: String,
        /// The nested message's parts.
        parts: Vec<Part>,
    },
}

/// A scalar field whose value is a template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalarField {
    /// The field's key: the varint of `number << 3 | wire type` (base64 in JSON).
    #[serde(with = "crate::wire::base64_bytes")]
    pub key: Bytes,
    /// How the rendered text is encoded.
    pub kind: ScalarKind,
    /// The field's path in the JSON, such as `inner.n` or `tags[1]`, for messages.
    pub field: String,
    /// The template text, as written in the JSON string (after JSON unescaping).
    pub template: String,
    /// The 1-based line in the JSON text where the string's content starts.
    pub line: usize,
    /// The 1-based column (in characters) where the string's content starts: the
    /// character after the opening quote.
    pub col: usize,
}

/// The protobuf type of a templated scalar field, which decides how its rendered text is
/// encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarKind {
    /// `string`: the rendered bytes as they are (length-delimited).
    String,
    /// `int32`: varint (a negative value takes 10 bytes, sign-extended).
    Int32,
    /// `int64`: varint.
    Int64,
    /// `uint32`: varint.
    Uint32,
    /// `uint64`: varint.
    Uint64,
    /// `sint32`: zigzag varint.
    Sint32,
    /// `sint64`: zigzag varint.
    Sint64,
    /// `fixed32`: 4 bytes, little-endian.
    Fixed32,
    /// `fixed64`: 8 bytes, little-endian.
    Fixed64,
    /// `sfixed32`: 4 bytes, little-endian.
    Sfixed32,
    /// `sfixed64`: 8 bytes, little-endian.
    Sfixed64,
    /// `bool`: varint 0 or 1, from `false` or `true`.
    Bool,
    /// `double`: 8 bytes, little-endian IEEE 754.
    Double,
    /// `float`: 4 bytes, little-endian IEEE 754.
    Float,
    /// An enum, by number: varint like `int32`.
    Enum,
}

/// Protobuf wire types.
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

impl ScalarKind {
    /// The kind's name in messages: `int64`, `string`, `enum`…
    pub fn name(self) -> &'static str {
        match self {
            ScalarKind::String => "string",
            ScalarKind::Int32 => "int32",
            ScalarKind::Int64 => "int64",
            ScalarKind::Uint32 => "uint32",
            ScalarKind::Uint64 => "uint64",
            ScalarKind::Sint32 => "sint32",
            ScalarKind::Sint64 => "sint64",
            ScalarKind::Fixed32 => "fixed32",
            ScalarKind::Fixed64 => "fixed64",
            ScalarKind::Sfixed32 => "sfixed32",
            ScalarKind::Sfixed64 => "sfixed64",
            ScalarKind::Bool => "bool",
            ScalarKind::Double => "double",
            ScalarKind::Float => "float",
            ScalarKind::Enum => "enum",
        }
    }

    /// The wire type of the kind's encoding: 0 (varint), 1 (64-bit), 2
    /// (length-delimited) or 5 (32-bit).
    pub fn wire_type(self) -> u8 {
        match self {
            ScalarKind::String => LEN,
            ScalarKind::Fixed64 | ScalarKind::Sfixed64 | ScalarKind::Double => I64,
            ScalarKind::Fixed32 | ScalarKind::Sfixed32 | ScalarKind::Float => I32,
            _ => VARINT,
        }
    }

    /// The key of field `number` of this kind: the varint of `number << 3 | wire type`.
    pub fn key(self, number: u32) -> Bytes {
        field_key(number, self.wire_type())
    }

    /// The range of an integer kind's values.
    fn integer_range(self) -> Option<(i128, i128)> {
        Some(match self {
            ScalarKind::Int32 | ScalarKind::Sint32 | ScalarKind::Sfixed32 | ScalarKind::Enum => {
                (i32::MIN.into(), i32::MAX.into())
            }
            ScalarKind::Uint32 | ScalarKind::Fixed32 => (0, u32::MAX.into()),
            ScalarKind::Int64 | ScalarKind::Sint64 | ScalarKind::Sfixed64 => {
                (i64::MIN.into(), i64::MAX.into())
            }
            ScalarKind::Uint64 | ScalarKind::Fixed64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// Whether the value `text` fits this kind: `Err` says why not. Integers are decimal
    /// (an optional sign and digits) within the kind's range; floating-point values
    /// anything Rust parses (`1.5`, `-2e3`, `NaN`, `Infinity`), within `float`'s range for
    /// a `float`; bools `true` or `false`.
    fn check_value(self, text: &str) -> Result<(), String> {
        if let Some((min, max)) = self.integer_range() {
            return match text.parse::<i128>() {
                Ok(n) if (min..=max).contains(&n) => Ok(()),
                Ok(_) => Err(format!("out of range for {} ({min}..={max})", self.name())),
                Err(_) => Err(format!("not an integer, which {} needs", self.a_name())),
            };
        }
        match self {
            ScalarKind::Bool => match text {
                "true" | "false" => Ok(()),
                _ => Err("neither `true` nor `false`, which a bool needs".to_owned()),
            },
            ScalarKind::Double | ScalarKind::Float => match text.parse::<f64>() {
                Ok(v)
                    if self == ScalarKind::Float && v.is_finite() && v.abs() > f32::MAX.into() =>
                {
                    Err("out of range for float".to_owned())
                }
                Ok(_) => Ok(()),
                Err(_) => Err(format!("not a number, which {} needs", self.a_name())),
            },
            _ => Ok(()),
        }
    }

    /// The kind's name with its article: `an int64`, `a string`.
    fn a_name(self) -> String {
        match self {
            ScalarKind::Int32 | ScalarKind::Int64 | ScalarKind::Enum => {
                format!("an {}", self.name())
            }
            _ => format!("a {}", self.name()),
        }
    }

    /// What a number or bool field takes, for messages.
    fn takes(self) -> &'static str {
        match self {
            ScalarKind::Bool => {
                "a bool field takes one expression that yields `true` or `false`: \
                 `${pick:true,false}` or a data column of `true`/`false` values"
            }
            ScalarKind::Double | ScalarKind::Float => {
                "a number field takes one expression that yields a number: `${seq}`, \
                 `${rand:LO-HI}`, `${now}`, `${now_ms}`, `${pick:…}` of numbers or a data column \
                 of numbers"
            }
            ScalarKind::Enum => {
                "an enum field takes one expression that yields the value's number: `${seq}`, \
                 `${rand:LO-HI}`, `${pick:…}` of numbers or a data column of numbers"
            }
            _ => {
                "an integer field takes one expression that yields an integer: `${seq}`, \
                 `${rand:LO-HI}`, `${now}`, `${now_ms}`, `${pick:…}` of integers or a data \
                 column of integers"
            }
        }
    }
}

/// The key of field `number` with `wire_type`.
pub(crate) fn field_key(number: u32, wire_type: u8) -> Bytes {
    let mut key = Vec::with_capacity(5);
    put_varint((u64::from(number) << 3) | u64::from(wire_type), &mut key);
    Bytes::from(key)
}

impl MessageTemplate {
    /// Whether any part is templated (a template of only [`Part::Fixed`] parts is a
    /// message that never changes).
    pub fn is_templated(&self) -> bool {
        fn any(parts: &[Part]) -> bool {
            parts.iter().any(|p| match p {
                Part::Fixed { .. } => false,
                Part::Scalar(_) => true,
                Part::Message { parts, .. } => any(parts),
            })
        }
        any(&self.parts)
    }
}

/// A [`MessageTemplate`] compiled against a data file: every template parsed and checked,
/// ready to render one gRPC frame per call with [`CompiledMessage::render_frame`].
/// `Send + Sync`; compile once before the run and share it.
#[derive(Clone, Debug)]
pub struct CompiledMessage {
    parts: Box<[Compiled]>,
    uses_seq: bool,
    uses_data: bool,
}

#[derive(Clone, Debug)]
enum Compiled {
    Fixed(Box<[u8]>),
    Scalar {
        key: Box<[u8]>,
        kind: ScalarKind,
        template: Template,
    },
    Message {
        key: Box<[u8]>,
        parts: Box<[Compiled]>,
    },
}

impl CompiledMessage {
    /// Parses every template of `t` (as [`Slot::Body`] text, with `data`'s columns) and
    /// checks that each number or bool field's template yields values of its type (see
    /// the module doc); the values of a data column it uses are checked on every row.
    ///
    /// Errors say where: `origin` (the flag or plan key the JSON came from, e.g. `-D`)
    /// with the line and column in the JSON and the field's path (`field \`inner.n\`: …`),
    /// or, for a data value that does not fit, the data file and the value's line (column
    /// 1: the line's start) with the column's name and the field.
    pub fn compile(
        t: &MessageTemplate,
        data: Option<&Data>,
        origin: &str,
    ) -> Result<CompiledMessage, TemplateError> {
        let mut compiled = CompiledMessage {
            parts: Box::new([]),
            uses_seq: false,
            uses_data: false,
        };
        compiled.parts = compiled.compile_parts(&t.parts, data, origin)?;
        Ok(compiled)
    }

    fn compile_parts(
        &mut self,
        parts: &[Part],
        data: Option<&Data>,
        origin: &str,
    ) -> Result<Box<[Compiled]>, TemplateError> {
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            out.push(match part {
                Part::Fixed { bytes } => Compiled::Fixed(bytes.to_vec().into_boxed_slice()),
                Part::Message { key, field, parts } => {
                    check_key(key, LEN, field, origin)?;
                    Compiled::Message {
                        key: key.to_vec().into_boxed_slice(),
                        parts: self.compile_parts(parts, data, origin)?,
                    }
                }
                Part::Scalar(s) => self.compile_scalar(s, data, origin)?,
            });
        }
        Ok(out.into_boxed_slice())
    }

    fn compile_scalar(
        &mut self,
        s: &ScalarField,
        data: Option<&Data>,
        origin: &str,
    ) -> Result<Compiled, TemplateError> {
        check_key(&s.key, s.kind.wire_type(), &s.field, origin)?;
        let at = Origin::new(origin, s.line.max(1), s.col.max(1));
        let template = Template::compile(&s.template, Slot::Body, &at, data).map_err(|mut e| {
            e.message = format!("field `{}`: {}", s.field, e.message);
            e
        })?;
        if s.kind != ScalarKind::String {
            check_yields(s, &template, data, &at)?;
        }
        self.uses_seq |= template.uses_seq();
        self.uses_data |= template.columns().next().is_some();
        Ok(Compiled::Scalar {
            key: s.key.to_vec().into_boxed_slice(),
            kind: s.kind,
            template,
        })
    }

    /// Whether any template uses `${seq}`.
    pub fn uses_seq(&self) -> bool {
        self.uses_seq
    }

    /// Whether any template uses a data column (each call then needs its row in the
    /// [`Draw`]).
    pub fn uses_data(&self) -> bool {
        self.uses_data
    }

    /// The most bytes one [`CompiledMessage::render_frame`] appends to `out`, with
    /// `data`'s longest values: reserve this much and rendering never grows `out`.
    pub fn max_frame_len(&self, data: Option<&Data>) -> usize {
        frame::HEADER_LEN + max_parts_len(&self.parts, data)
    }

    /// The most bytes one template's rendering takes in `scratch`, with `data`'s longest
    /// values: reserve this much and rendering never grows `scratch`.
    pub fn max_scratch_len(&self, data: Option<&Data>) -> usize {
        fn widest(parts: &[Compiled], data: Option<&Data>) -> usize {
            parts
                .iter()
                .map(|p| match p {
                    Compiled::Fixed(_) => 0,
                    Compiled::Scalar { template, .. } => template.max_len(data),
                    Compiled::Message { parts, .. } => widest(parts, data),
                })
                .max()
                .unwrap_or(0)
        }
        widest(&self.parts, data)
    }

    /// Appends one call's complete gRPC frame to `out`: the compressed flag (0), the
    /// message's length (4 bytes, big-endian) and the message, with every template
    /// rendered from `draw` and `gen`. Each template is rendered into `scratch` (cleared
    /// first) and encoded from there; a nested message's length is written once its
    /// content is. No heap allocation once `out` and `scratch` have room (see
    /// [`CompiledMessage::max_frame_len`] and [`CompiledMessage::max_scratch_len`]).
    ///
    /// A number that does not parse (only possible with a row of other data than the
    /// one compiled against) is encoded as 0.
    ///
    /// # Panics
    ///
    /// If the message is longer than `u32::MAX` bytes, which a frame cannot express.
    pub fn render_frame(
        &self,
        draw: &Draw<'_>,
        gen: &mut Generator,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) {
        let start = out.len();
        out.extend_from_slice(&[0; frame::HEADER_LEN]);
        render_parts(&self.parts, draw, gen, out, scratch);
        let len = out.len() - start - frame::HEADER_LEN;
        let len = u32::try_from(len).expect("gRPC message longer than 4 GiB");
        out[start + 1..start + frame::HEADER_LEN].copy_from_slice(&len.to_be_bytes());
    }
}

/// Checks that `key` is a field key (a varint of at most 5 bytes, a field number from 1
/// to 2^29 - 1) of `wire_type`: a template that came over the wire is checked before
/// it is used.
fn check_key(key: &[u8], wire_type: u8, field: &str, origin: &str) -> Result<(), TemplateError> {
    let mut value: u64 = 0;
    let mut end = None;
    for (i, &b) in key.iter().enumerate().take(5) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            end = Some(i + 1);
            break;
        }
    }
    let number = value >> 3;
    if end == Some(key.len()) && value & 7 == u64::from(wire_type) && (1..1 << 29).contains(&number)
    {
        Ok(())
    } else {
        Err(Origin::flag(origin).error(format!(
            "field `{field}`: the template's key {key:02x?} is not a field key of wire type \
             {wire_type}"
        )))
    }
}

/// Checks that the template of number or bool field `s` yields values of its kind.
fn check_yields(
    s: &ScalarField,
    template: &Template,
    data: Option<&Data>,
    at: &Origin,
) -> Result<(), TemplateError> {
    let kind = s.kind;
    let bad = |why: String| {
        at.error(format!(
            "field `{}` ({}): {why}; {}",
            s.field,
            kind.name(),
            kind.takes()
        ))
    };
    let text = s.template.as_str();
    let Some((name, arg)) = single_expression(text) else {
        return Err(bad(format!(
            "`{}` is not a single expression",
            shorten(text)
        )));
    };
    let is_bool = kind == ScalarKind::Bool;
    let range = kind.integer_range();
    let in_range = |lo: i128, hi: i128| range.is_none_or(|(min, max)| min <= lo && hi <= max);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    match (name, arg) {
        ("seq", None) if !is_bool => Ok(()),
        ("now", None) if !is_bool && kind != ScalarKind::Enum => {
            if in_range(0, now.as_secs().into()) {
                Ok(())
            } else {
                Err(bad(format!(
                    "`${{now}}` ({}) is out of range for {}",
                    now.as_secs(),
                    kind.name()
                )))
            }
        }
        ("now_ms", None) if !is_bool && kind != ScalarKind::Enum => {
            if in_range(0, now.as_millis().try_into().unwrap_or(i128::MAX)) {
                Ok(())
            } else {
                Err(bad(format!(
                    "`${{now_ms}}` ({}) is out of range for {}",
                    now.as_millis(),
                    kind.name()
                )))
            }
        }
        ("rand", Some(arg)) if !is_bool => {
            let (lo, hi) = rand_bounds(arg).ok_or_else(|| bad(format!("`{text}`: bad range")))?;
            if in_range(lo.into(), hi.into()) {
                Ok(())
            } else {
                let (min, max) = range.unwrap_or_default();
                Err(bad(format!(
                    "`{text}` can yield values out of range for {} ({min}..={max})",
                    kind.name()
                )))
            }
        }
        ("pick", Some(arg)) => {
            for value in pick_values(arg) {
                kind.check_value(&value).map_err(|why| {
                    bad(format!("`{}`: the value {value:?} is {why}", shorten(text)))
                })?;
            }
            Ok(())
        }
        ("seq" | "now" | "now_ms" | "rand", _) => Err(bad(format!("`{text}` yields a number"))),
        ("uuid" | "randstr" | "hex", _) => Err(bad(format!("`{}` yields text", shorten(text)))),
        (column, None) => {
            let (Some(data), Some(index)) = (data, template.columns().next()) else {
                return Err(bad(format!("`{text}` names no data column")));
            };
            for row in 0..data.len() {
                let value = data.row(row).get(index).map_or("", |v| &**v);
                if let Err(why) = kind.check_value(value) {
                    return Err(TemplateError {
                        source: data.file().to_owned(),
                        line: data.line(row),
                        col: 1,
                        message: format!(
                            "the value {value:?} of column `{column}` is {why}: field `{}` ({}) \
                             uses `${{{column}}}` at {at}",
                            s.field,
                            kind.name()
                        ),
                    });
                }
            }
            Ok(())
        }
        _ => Err(bad(format!(
            "`{}` is not a single expression",
            shorten(text)
        ))),
    }
}

/// The name and argument of `text` when it is exactly one `${NAME}` or `${NAME:ARG}`
/// expression (`text` already parsed as a template).
fn single_expression(text: &str) -> Option<(&str, Option<&str>)> {
    let rest = text.strip_prefix("${")?;
    let name_end = rest.find(['}', ':'])?;
    let name = &rest[..name_end];
    if rest.as_bytes()[name_end] == b'}' {
        return (name_end + 1 == rest.len()).then_some((name, None));
    }
    let arg_start = name_end + 1;
    let b = rest.as_bytes();
    let close = if name == "pick" {
        // `\}` does not close a pick.
        let mut j = arg_start;
        loop {
            match b.get(j) {
                None => return None,
                Some(b'\\') => j += 2,
                Some(b'}') => break j,
                Some(_) => j += 1,
            }
        }
    } else {
        arg_start + rest[arg_start..].find('}')?
    };
    (close + 1 == rest.len()).then(|| (name, Some(&rest[arg_start..close])))
}

/// The values of a `${pick:…}` argument, with `\,`, `\}` and `\\` unescaped.
fn pick_values(arg: &str) -> Vec<String> {
    let mut values = Vec::new();
    let mut value = String::new();
    let mut chars = arg.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.extend(chars.next()),
            ',' => values.push(std::mem::take(&mut value)),
            c => value.push(c),
        }
    }
    values.push(value);
    values
}

/// `LO` and `HI` of a `${rand:LO-HI}` argument.
fn rand_bounds(arg: &str) -> Option<(i64, i64)> {
    let digits = usize::from(arg.starts_with('-'));
    let lo_end = digits + arg[digits..].bytes().take_while(u8::is_ascii_digit).count();
    let lo = arg[..lo_end].parse().ok()?;
    let hi = arg.get(lo_end + 1..)?.parse().ok()?;
    Some((lo, hi))
}

/// At most 40 characters of `text` and an ellipsis, for messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

fn max_parts_len(parts: &[Compiled], data: Option<&Data>) -> usize {
    const VARINT_MAX: usize = 10;
    parts
        .iter()
        .map(|p| match p {
            Compiled::Fixed(bytes) => bytes.len(),
            Compiled::Scalar {
                key,
                kind,
                template,
            } => {
                key.len()
                    + match kind.wire_type() {
                        LEN => VARINT_MAX + template.max_len(data),
                        I64 => 8,
                        I32 => 4,
                        _ => VARINT_MAX,
                    }
            }
            Compiled::Message { key, parts } => key.len() + VARINT_MAX + max_parts_len(parts, data),
        })
        .sum()
}

fn render_parts(
    parts: &[Compiled],
    draw: &Draw<'_>,
    gen: &mut Generator,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    for part in parts {
        match part {
            Compiled::Fixed(bytes) => out.extend_from_slice(bytes),
            Compiled::Scalar {
                key,
                kind,
                template,
            } => {
                scratch.clear();
                template.render(draw, gen, scratch);
                out.extend_from_slice(key);
                encode_value(*kind, scratch, out);
            }
            Compiled::Message { key, parts } => {
                let start = out.len();
                render_parts(parts, draw, gen, out, scratch);
                let len = out.len() - start;
                // The key and the length go before the content: move it up.
                let mut head = [0u8; 16];
                // At most 5 bytes of key (checked by `compile`) and 10 of length.
                let mut n = key.len();
                head[..n].copy_from_slice(key);
                n += varint_into(len as u64, &mut head[n..]);
                out.resize(out.len() + n, 0);
                out.copy_within(start..start + len, start + n);
                out[start..start + n].copy_from_slice(&head[..n]);
            }
        }
    }
}

/// Appends the encoding of the rendered `text` as a value of `kind` (the key is written).
fn encode_value(kind: ScalarKind, text: &[u8], out: &mut Vec<u8>) {
    if kind == ScalarKind::String {
        put_varint(text.len() as u64, out);
        out.extend_from_slice(text);
        return;
    }
    let text = std::str::from_utf8(text).unwrap_or("");
    let int = || text.parse::<i128>().unwrap_or(0);
    let float = || text.parse::<f64>().unwrap_or(0.0);
    // Casts wrap a value out of the field's range, as the module doc says.
    match kind {
        ScalarKind::String => {}
        ScalarKind::Int32 | ScalarKind::Enum => put_varint(int() as i32 as i64 as u64, out),
        ScalarKind::Int64 => put_varint(int() as i64 as u64, out),
        ScalarKind::Uint32 => put_varint(u64::from(int() as u32), out),
        ScalarKind::Uint64 => put_varint(int() as u64, out),
        ScalarKind::Sint32 => {
            let n = int() as i32;
            put_varint(u64::from(((n << 1) ^ (n >> 31)) as u32), out);
        }
        ScalarKind::Sint64 => {
            let n = int() as i64;
            put_varint(((n << 1) ^ (n >> 63)) as u64, out);
        }
        ScalarKind::Fixed32 => out.extend_from_slice(&(int() as u32).to_le_bytes()),
        ScalarKind::Sfixed32 => out.extend_from_slice(&(int() as i32).to_le_bytes()),
        ScalarKind::Fixed64 => out.extend_from_slice(&(int() as u64).to_le_bytes()),
        ScalarKind::Sfixed64 => out.extend_from_slice(&(int() as i64).to_le_bytes()),
        ScalarKind::Bool => out.push(u8::from(text == "true")),
        ScalarKind::Double => out.extend_from_slice(&float().to_le_bytes()),
        ScalarKind::Float => out.extend_from_slice(&(float() as f32).to_le_bytes()),
    }
}

/// Appends `v` as a protobuf varint.
fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint at the start of `buf` (at least 10 bytes); returns its length.
fn varint_into(mut v: u64, buf: &mut [u8]) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        buf[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    buf[i] = v as u8;
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_expressions_are_whole_texts() {
        assert_eq!(single_expression("${seq}"), Some(("seq", None)));
        assert_eq!(
            single_expression("${rand:-5-5}"),
            Some(("rand", Some("-5-5")))
        );
        assert_eq!(
            single_expression(r"${pick:1,2\}3,4}"),
            Some(("pick", Some(r"1,2\}3,4")))
        );
        assert_eq!(single_expression("${id}"), Some(("id", None)));
        for not_one in [
            "${seq}0",
            "0${seq}",
            "${seq}${seq}",
            "seq",
            "${pick:1}}",
            "",
        ] {
            assert_eq!(single_expression(not_one), None, "{not_one}");
        }
        assert_eq!(pick_values(r"1,2\,3,\\,"), vec!["1", "2,3", "\\", ""]);
        assert_eq!(rand_bounds("-10--1"), Some((-10, -1)));
        assert_eq!(rand_bounds("1-9"), Some((1, 9)));
    }

    /// One scalar field's encoding, key included.
    fn encoded(kind: ScalarKind, number: u32, text: &str) -> Vec<u8> {
        let mut out = kind.key(number).to_vec();
        encode_value(kind, text.as_bytes(), &mut out);
        out
    }

    #[test]
    fn values_are_encoded_as_protobuf_does() {
        use prost::encoding;
        let prost = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            f(&mut out);
            out
        };
        assert_eq!(
            encoded(ScalarKind::Int32, 1, "-2"),
            prost(&|b| encoding::int32::encode(1, &-2, b))
        );
        assert_eq!(
            encoded(ScalarKind::Sint32, 2, "-2147483648"),
            prost(&|b| encoding::sint32::encode(2, &i32::MIN, b))
        );
        assert_eq!(
            encoded(ScalarKind::Sint64, 3, "-9000000000"),
            prost(&|b| encoding::sint64::encode(3, &-9_000_000_000, b))
        );
        assert_eq!(
            encoded(ScalarKind::Uint64, 4, "18446744073709551615"),
            prost(&|b| encoding::uint64::encode(4, &u64::MAX, b))
        );
        assert_eq!(
            encoded(ScalarKind::Sfixed64, 5, "-3"),
            prost(&|b| encoding::sfixed64::encode(5, &-3, b))
        );
        assert_eq!(
            encoded(ScalarKind::Fixed32, 6, "4294967295"),
            prost(&|b| encoding::fixed32::encode(6, &u32::MAX, b))
        );
        assert_eq!(
            encoded(ScalarKind::Float, 7, "-0.25"),
            prost(&|b| encoding::float::encode(7, &-0.25, b))
        );
        assert_eq!(
            encoded(ScalarKind::Double, 8, "1e300"),
            prost(&|b| encoding::double::encode(8, &1e300, b))
        );
        assert_eq!(
            encoded(ScalarKind::Bool, 9, "true"),
            prost(&|b| encoding::bool::encode(9, &true, b))
        );
        assert_eq!(
            encoded(ScalarKind::String, 100_000, "é"),
            prost(&|b| encoding::string::encode(100_000, &"é".to_owned(), b))
        );
        // `${seq}` past an int32 wraps as a cast does.
        assert_eq!(
            encoded(ScalarKind::Int32, 1, "2147483648"),
            prost(&|b| encoding::int32::encode(1, &i32::MIN, b))
        );
    }

    #[test]
    fn keys_are_checked() {
        let ok = |key: &[u8], wt| check_key(key, wt, "f", "-D").is_ok();
        assert!(ok(&[0x08], VARINT));
        assert!(ok(&[0x82, 0xea, 0x30], LEN));
        assert!(!ok(&[0x08], LEN));
        assert!(!ok(&[], VARINT));
        assert!(!ok(&[0x80], VARINT));
        assert!(!ok(&[0x00], VARINT)); // field 0
        assert!(!ok(&[0x08, 0x08], VARINT));
        assert!(!ok(&[0xf8, 0xff, 0xff, 0xff, 0x7f], VARINT)); // field 2^32 - 1
    }
}
