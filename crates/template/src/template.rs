//! `${...}` templates: parsed and checked once, rendered per request without allocating.
//!
//! # Syntax
//! - `${seq}`: the request's number in the run, 1, 2, 3, …: one value per request (every
//!   `${seq}` in one request's URL, headers and body is the same number), distinct across
//!   all requests of a run.
//! - `${rand:LO-HI}`: a uniform random integer in [LO, HI], both ends included; 64-bit
//!   signed, LO ≤ HI, negative bounds allowed (`${rand:-5-5}`, `${rand:-10--1}`); a new
//!   value at each occurrence.
//! - `${uuid}`: a random version-4 UUID, lowercase hex with hyphens; new at each
//!   occurrence.
//! - `${pick:a,b,c}`: one of the comma-separated values, uniformly; inside, `\,` is a
//!   literal comma, `\}` a literal `}` and `\\` a backslash; at least one value (a value
//!   may be empty: `${pick:a,}`); new at each occurrence.
//! - `${randstr:N}`: N random ASCII letters and digits, 1 ≤ N ≤ 65536.
//! - `${hex:N}`: N random lowercase hex digits, 1 ≤ N ≤ 65536.
//! - `${now}`: the Unix time in whole seconds when the request is rendered; `${now_ms}`:
//!   the same in milliseconds.
//! - `${NAME}`: column NAME of the data row this request drew: one row per request, so
//!   every column reference in one request comes from the same row. NAME is
//!   `[A-Za-z_][A-Za-z0-9_.-]*`.
//! - In a session's request ([`Template::compile_session`]), `${NAME}` may also name a
//!   session variable: a value an earlier request of the session took from its response.
//!   It renders as the value (percent-encoded in a URL, as a column's; in a header with
//!   any CR, LF or NUL left out), or as nothing before it is set.
//! - `$${` is a literal `${` (nothing after it is read as an expression: `$${seq}` is the
//!   text `${seq}`). A `$` not followed by `{` is literal.
//! - No whitespace inside `${…}` (not around the name, not in an argument, not in a
//!   `pick` value); names are case-sensitive.
//!
//! Errors name the position of the `$` that starts the expression: an unterminated `${`,
//! an empty `${}`, an unknown name (with the data file's columns, or "no data file
//! given", and the built-ins), a malformed argument (`${rand:9-1}`, `${rand:x-2}`,
//! `${randstr:0}`, `${pick:}`), an argument given to a built-in that takes none, a
//! built-in that needs one used without it, a column reference with no data file.
//!
//! # Slots
//! Where the text goes ([`Slot`]) decides what a substituted value may contain:
//! - [`Slot::Url`]: column and `pick` values are percent-encoded (uppercase hex) for every
//!   byte other than ASCII letters, digits and ``-._~!$&'()*+,;=:@/?%``; the template's
//!   own text is not re-encoded; generated values (seq, rand, uuid, randstr, hex, now)
//!   never need encoding.
//! - [`Slot::Header`]: no CR, LF or NUL, checked before the run: in the template's text
//!   and `pick` values when it is parsed, in the data columns it uses over every row by
//!   [`Template::check_data`] (or [`Template::compile`]).
//! - [`Slot::Body`]: bytes inserted as they are.
//!
//! # Rendering
//! [`Template::render`] appends one request's bytes to a caller's buffer. It allocates
//! nothing when the buffer has room ([`Template::max_len`] says how much is enough):
//! integers are written with `itoa`, UUIDs and random strings by hand. A request's
//! shared values, its `${seq}` and its data row, travel in a [`Draw`]; random values come
//! from the worker thread's [`Generator`].

use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;

use crate::data::Data;
use crate::error::{Origin, TemplateError};
use crate::generator::{Generator, HEX_LOWER};
use crate::names::{is_name_byte, is_name_start, BUILTIN_NAMES};

/// The built-ins as listed in error messages.
pub const BUILTINS: &str = "seq, rand:LO-HI, uuid, pick:A,B,…, randstr:N, hex:N, now, now_ms";

/// The longest `${randstr:N}` and `${hex:N}`.
pub const MAX_RANDOM_LEN: usize = 65536;

/// Where a template's text goes, which decides what a substituted value may contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// A URL or a path-and-query: substituted column and `pick` values are
    /// percent-encoded.
    Url,
    /// A header value: no CR, LF or NUL anywhere (checked before the run).
    Header,
    /// A request body: anything goes.
    Body,
}

impl Slot {
    /// The slot's name in messages: `URL`, `header`, `body`.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Url => "URL",
            Slot::Header => "header",
            Slot::Body => "body",
        }
    }
}

/// One piece of a compiled template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    /// `Template::bytes[start..end]`.
    Literal {
        start: usize,
        end: usize,
    },
    Seq,
    Rand {
        lo: i64,
        hi: i64,
    },
    Uuid,
    /// The values, already percent-encoded in a URL.
    Pick(Box<[Box<[u8]>]>),
    RandStr(usize),
    Hex(usize),
    Now,
    NowMs,
    Column(usize),
    /// A session variable, by its index in the variables the template was parsed with.
    Var(usize),
}

/// A compiled template: literal bytes and expressions. Cheap to render, `Send + Sync`;
/// compile once before the run and share it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The literal text of every [`Part::Literal`].
    bytes: Box<[u8]>,
    parts: Box<[Part]>,
    slot: Slot,
    /// The column indices referenced, sorted, once each.
    columns: Box<[usize]>,
    /// Where each referenced column is first used, parallel to `columns`.
    column_at: Box<[Origin]>,
    seq: bool,
    /// Whether the template uses a session variable.
    vars: bool,
    /// Where the text came from (none for [`Template::literal`]).
    origin: Option<Origin>,
}

impl Template {
    /// Parses `text` for `slot`; `columns` are the data file's column names (an empty
    /// slice: no data file). Errors carry the position in `origin`'s source.
    pub fn parse(
        text: &str,
        slot: Slot,
        origin: &Origin,
        columns: &[String],
    ) -> Result<Template, TemplateError> {
        Parser {
            text,
            slot,
            origin,
            columns,
            vars: &[],
            data_file: None,
        }
        .run()
    }

    /// Parses `text` as [`Template::compile`] does, where `${NAME}` may also name one of
    /// `vars`: a session's variables (values a flow takes from earlier responses), which
    /// [`Template::render`] reads from [`Draw::vars`]. A name that is both a variable and
    /// a column is the variable (a flow's validation refuses the clash before this).
    pub fn compile_session(
        text: &str,
        slot: Slot,
        origin: &Origin,
        data: Option<&Data>,
        vars: &[String],
    ) -> Result<Template, TemplateError> {
        let template = Parser {
            text,
            slot,
            origin,
            columns: data.map_or(&[], Data::columns),
            vars,
            data_file: data.map(Data::file),
        }
        .run()?;
        if let Some(data) = data {
            template.check_data(data)?;
        }
        Ok(template)
    }

    /// Parses `text` against `data` (its columns, and its file name in messages) and
    /// checks the data's values for the slot ([`Template::check_data`]): what a caller
    /// with a data file does before the run.
    pub fn compile(
        text: &str,
        slot: Slot,
        origin: &Origin,
        data: Option<&Data>,
    ) -> Result<Template, TemplateError> {
        Template::compile_session(text, slot, origin, data, &[])
    }

    /// A template of fixed bytes (no parsing).
    pub fn literal(bytes: impl Into<Vec<u8>>) -> Template {
        let bytes: Box<[u8]> = bytes.into().into_boxed_slice();
        let parts: Box<[Part]> = if bytes.is_empty() {
            Box::new([])
        } else {
            Box::new([Part::Literal {
                start: 0,
                end: bytes.len(),
            }])
        };
        Template {
            bytes,
            parts,
            slot: Slot::Body,
            columns: Box::new([]),
            column_at: Box::new([]),
            seq: false,
            vars: false,
            origin: None,
        }
    }

    /// The bytes, when the template has no expressions (after `$${` unescaping).
    pub fn as_literal(&self) -> Option<&[u8]> {
        match &*self.parts {
            [] => Some(&[]),
            [Part::Literal { start, end }] => Some(&self.bytes[*start..*end]),
            _ => None,
        }
    }

    /// True if `text` holds any `${` expression (not counting `$${`): a cheap check
    /// callers use to decide whether a value is templated at all.
    pub fn has_expressions(text: &str) -> bool {
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                match (b.get(i + 1), b.get(i + 2)) {
                    (Some(b'{'), _) => return true,
                    (Some(b'$'), Some(b'{')) => {
                        i += 3;
                        continue;
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        false
    }

    /// `text` with every `${` written `$${`, so that it parses to itself.
    pub fn escape(text: &str) -> String {
        text.replace("${", "$${")
    }

    /// The slot the template was parsed for ([`Slot::Body`] for [`Template::literal`]).
    pub fn slot(&self) -> Slot {
        self.slot
    }

    /// Where the template's text came from (none for [`Template::literal`]).
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// Column indices this template references, ascending, each once.
    pub fn columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().copied()
    }

    /// Whether the template uses `${seq}`.
    pub fn uses_seq(&self) -> bool {
        self.seq
    }

    /// Whether the template uses a session variable ([`Template::compile_session`]).
    pub fn uses_vars(&self) -> bool {
        self.vars
    }

    /// Checks every row's values for the columns this template uses against its slot: in
    /// a [`Slot::Header`], no CR, LF or NUL. Errors name the data file, the line and
    /// column of the bad value, and where the header uses it. Also fails if the template
    /// references a column `data` does not have (it was parsed against other columns).
    pub fn check_data(&self, data: &Data) -> Result<(), TemplateError> {
        for (&col, at) in self.columns.iter().zip(self.column_at.iter()) {
            let Some(name) = data.columns().get(col) else {
                return Err(at.error(format!(
                    "column {} is referenced, but the data file {} has {} columns ({})",
                    col + 1,
                    data.file(),
                    data.columns().len(),
                    data.columns().join(", ")
                )));
            };
            if self.slot != Slot::Header {
                continue;
            }
            if let Some(bad) = data.control_values().iter().find(|v| v.column == col) {
                let what = match bad.byte {
                    b'\r' => "a carriage return (CR)",
                    b'\n' => "a line feed (LF)",
                    _ => "a NUL byte",
                };
                return Err(TemplateError {
                    source: data.file().to_owned(),
                    line: bad.line,
                    col: bad.col,
                    message: format!(
                        "the value of column `{name}` holds {what}, which a header cannot \
                         carry; the header at {at} uses `${{{name}}}`"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The most bytes one [`Template::render`] can append, with `data`'s longest values
    /// (percent-encoded in a URL): reserve this much in the output buffer and rendering
    /// never allocates.
    pub fn max_len(&self, data: Option<&Data>) -> usize {
        const INT: usize = 20; // u64::MAX has 20 digits; i64::MIN has 19 and a sign.
        self.parts
            .iter()
            .map(|part| match part {
                Part::Literal { start, end } => end - start,
                Part::Seq | Part::Rand { .. } | Part::Now | Part::NowMs => INT,
                Part::Uuid => 36,
                Part::Pick(values) => values.iter().map(|v| v.len()).max().unwrap_or(0),
                Part::RandStr(n) | Part::Hex(n) => *n,
                // A variable's value is known only during the run: rendering may allocate.
                Part::Var(_) => 0,
                Part::Column(i) => {
                    let widest = data.map_or(0, |d| d.max_value_len(*i));
                    if self.slot == Slot::Url {
                        widest * 3
                    } else {
                        widest
                    }
                }
            })
            .sum()
    }

    /// Appends one request's rendering to `out`. No heap allocation when `out` has
    /// room. A column reference renders as nothing when `draw.row` is `None` or too
    /// short (callers pass the drawn row whenever [`Template::columns`] is not empty).
    pub fn render(&self, draw: &Draw<'_>, gen: &mut Generator, out: &mut Vec<u8>) {
        for part in self.parts.iter() {
            match part {
                Part::Literal { start, end } => out.extend_from_slice(&self.bytes[*start..*end]),
                Part::Seq => write_int(draw.seq, out),
                Part::Rand { lo, hi } => write_int(gen.rng().gen_range(*lo..=*hi), out),
                Part::Uuid => write_uuid(gen.rng().gen::<u128>(), out),
                Part::Pick(values) => {
                    let i = if values.len() == 1 {
                        0
                    } else {
                        gen.rng().gen_range(0..values.len())
                    };
                    out.extend_from_slice(&values[i]);
                }
                Part::RandStr(n) => gen.randstr(*n, out),
                Part::Hex(n) => gen.hex(*n, out),
                Part::Now => write_int(since_epoch().as_secs(), out),
                Part::NowMs => write_int(since_epoch().as_millis(), out),
                Part::Var(i) => {
                    if let Some(value) = draw.vars.and_then(|vars| vars.get(*i)) {
                        match self.slot {
                            Slot::Url => percent_encode(value.as_bytes(), out),
                            // A value taken from a response is checked when it is taken;
                            // a header never carries a line break or a NUL all the same.
                            Slot::Header => {
                                out.extend(value.bytes().filter(|b| header_forbidden(*b).is_none()))
                            }
                            Slot::Body => out.extend_from_slice(value.as_bytes()),
                        }
                    }
                }
                Part::Column(i) => {
                    debug_assert!(
                        draw.row.is_some_and(|r| *i < r.len()),
                        "a template with columns rendered without its row"
                    );
                    if let Some(value) = draw.row.and_then(|row| row.get(*i)) {
                        if self.slot == Slot::Url {
                            percent_encode(value.as_bytes(), out);
                        } else {
                            out.extend_from_slice(value.as_bytes());
                        }
                    }
                }
            }
        }
    }
}

/// What one request shares across its templates: its `${seq}`, its data row, and in a
/// session, the session's variables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Draw<'a> {
    /// The request's `${seq}`.
    pub seq: u64,
    /// The data row the request drew (`None` without a data file).
    pub row: Option<&'a [Box<str>]>,
    /// The session's variables, in the order the templates were compiled with (`None`
    /// outside a session; a variable not yet set renders as nothing).
    pub vars: Option<&'a [Box<str>]>,
}

impl<'a> Draw<'a> {
    /// A draw of `seq` and `row`.
    pub fn new(seq: u64, row: Option<&'a [Box<str>]>) -> Draw<'a> {
        Draw {
            seq,
            row,
            vars: None,
        }
    }

    /// The same draw with a session's variables.
    #[must_use]
    pub fn with_vars(self, vars: &'a [Box<str>]) -> Draw<'a> {
        Draw {
            vars: Some(vars),
            ..self
        }
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn since_epoch() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn write_int<I: itoa::Integer>(value: I, out: &mut Vec<u8>) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(value).as_bytes());
}

/// A version-4 (random) UUID from 128 random bits: lowercase, hyphenated.
fn write_uuid(random: u128, out: &mut Vec<u8>) {
    let mut bytes = random.to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // variant 10xx (RFC 9562)
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(HEX_LOWER[usize::from(b >> 4)]);
        out.push(HEX_LOWER[usize::from(b & 15)]);
    }
}

/// Whether `b` may appear as is in a request-target.
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b)
}

/// Appends `value` with every byte that cannot appear in a request-target
/// percent-encoded.
fn percent_encode(value: &[u8], out: &mut Vec<u8>) {
    let mut rest = value;
    while !rest.is_empty() {
        let safe = rest
            .iter()
            .position(|&b| !url_safe(b))
            .unwrap_or(rest.len());
        out.extend_from_slice(&rest[..safe]);
        if let Some(&b) = rest.get(safe) {
            out.extend_from_slice(&[
                b'%',
                HEX_UPPER[usize::from(b >> 4)],
                HEX_UPPER[usize::from(b & 15)],
            ]);
            rest = &rest[safe + 1..];
        } else {
            rest = &[];
        }
    }
}

/// The control character a header cannot carry, if `b` is one, for messages.
fn header_forbidden(b: u8) -> Option<&'static str> {
    match b {
        b'\r' => Some("a carriage return (CR)"),
        b'\n' => Some("a line feed (LF)"),
        0 => Some("a NUL byte"),
        _ => None,
    }
}

struct Parser<'a> {
    text: &'a str,
    slot: Slot,
    origin: &'a Origin,
    columns: &'a [String],
    /// A session's variables ([`Template::compile_session`]; empty otherwise).
    vars: &'a [String],
    data_file: Option<&'a str>,
}

/// An expression's position, turned into an [`Origin`] only for an error (counting lines
/// and characters up to it is linear in the text).
struct At<'p> {
    parser: &'p Parser<'p>,
    offset: usize,
}

impl At<'_> {
    fn error(&self, message: impl Into<String>) -> TemplateError {
        self.parser.at(self.offset).error(message)
    }
}

/// What [`Parser::expression`] found.
struct Expr {
    part: Part,
    /// The byte after the closing `}`.
    end: usize,
}

impl<'a> Parser<'a> {
    fn at(&self, offset: usize) -> Origin {
        self.origin.at(self.text, offset)
    }

    /// The origins of `offsets` (in any order), in one pass over the text.
    fn origins(&self, offsets: &[usize]) -> Vec<Origin> {
        let mut order: Vec<usize> = (0..offsets.len()).collect();
        order.sort_by_key(|&k| offsets[k]);
        let mut origins = vec![self.origin.clone(); offsets.len()];
        let (mut pos, mut line, mut col) = (0, self.origin.line, self.origin.col);
        for k in order {
            let part = &self.text[pos..offsets[k]];
            match part.rfind('\n') {
                None => col += part.chars().count(),
                Some(nl) => {
                    line += part.bytes().filter(|&b| b == b'\n').count();
                    col = 1 + part[nl + 1..].chars().count();
                }
            }
            pos = offsets[k];
            origins[k] = Origin::new(self.origin.source.clone(), line, col);
        }
        origins
    }

    fn run(&self) -> Result<Template, TemplateError> {
        let b = self.text.as_bytes();
        let mut bytes = Vec::with_capacity(b.len());
        let mut parts = Vec::new();
        // Each referenced column and the offset of its first use.
        let mut columns: Vec<(usize, usize)> = Vec::new();
        let mut seq = false;
        let mut vars = false;
        let mut lit_start = 0;
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                match (b.get(i + 1), b.get(i + 2)) {
                    (Some(b'{'), _) => {
                        if bytes.len() > lit_start {
                            parts.push(Part::Literal {
                                start: lit_start,
                                end: bytes.len(),
                            });
                        }
                        let expr = self.expression(i)?;
                        match expr.part {
                            Part::Seq => seq = true,
                            Part::Var(_) => vars = true,
                            Part::Column(c) if !columns.iter().any(|(k, _)| *k == c) => {
                                columns.push((c, i));
                            }
                            _ => {}
                        }
                        parts.push(expr.part);
                        i = expr.end;
                        lit_start = bytes.len();
                        continue;
                    }
                    (Some(b'$'), Some(b'{')) => {
                        bytes.extend_from_slice(b"${");
                        i += 3;
                        continue;
                    }
                    _ => {}
                }
            }
            if self.slot == Slot::Header {
                if let Some(what) = header_forbidden(b[i]) {
                    return Err(self.at(i).error(format!("a header cannot hold {what}")));
                }
            }
            bytes.push(b[i]);
            i += 1;
        }
        if bytes.len() > lit_start {
            parts.push(Part::Literal {
                start: lit_start,
                end: bytes.len(),
            });
        }
        columns.sort_by_key(|(c, _)| *c);
        let (columns, offsets): (Vec<usize>, Vec<usize>) = columns.into_iter().unzip();
        let column_at = self.origins(&offsets);
        Ok(Template {
            bytes: bytes.into_boxed_slice(),
            parts: parts.into_boxed_slice(),
            slot: self.slot,
            columns: columns.into_boxed_slice(),
            column_at: column_at.into_boxed_slice(),
            seq,
            vars,
            origin: Some(self.origin.clone()),
        })
    }

    /// Parses the expression whose `${` starts at `start`.
    fn expression(&self, start: usize) -> Result<Expr, TemplateError> {
        let b = self.text.as_bytes();
        let at = At {
            parser: self,
            offset: start,
        };
        let unterminated = || {
            at.error(format!(
                "unterminated `${{`: no `}}` closes the expression `{}`",
                shorten(&self.text[start..])
            ))
        };
        let whitespace = |end: usize| {
            at.error(format!(
                "whitespace inside `{}`: write expressions without spaces, like `${{seq}}`",
                shorten(&self.text[start..end])
            ))
        };
        let closing = |from: usize| b[from..].iter().position(|&c| c == b'}').map(|p| from + p);

        let name_start = start + 2;
        let mut k = name_start;
        if k < b.len() && is_name_start(b[k]) {
            k += 1;
            while k < b.len() && is_name_byte(b[k]) {
                k += 1;
            }
        }
        let name = &self.text[name_start..k];
        let Some(&next) = b.get(k) else {
            return Err(unterminated());
        };
        if name.is_empty() {
            if next == b'}' {
                return Err(at.error(
                    "empty `${}`: write a name inside, like `${seq}` or a data column's `${id}`",
                ));
            }
            let Some(close) = closing(k) else {
                return Err(unterminated());
            };
            if next.is_ascii_whitespace() {
                return Err(whitespace(close + 1));
            }
            return Err(at.error(format!(
                "`{}`: a name starts with a letter or `_` (NAME is [A-Za-z_][A-Za-z0-9_.-]*)",
                &self.text[start..close + 1]
            )));
        }
        match next {
            b'}' => Ok(Expr {
                part: self.resolve(name, None, start, k + 1)?,
                end: k + 1,
            }),
            b':' => {
                let arg_start = k + 1;
                let close = if name == "pick" {
                    // `\}` does not close a pick.
                    let mut j = arg_start;
                    loop {
                        match b.get(j) {
                            None => break None,
                            Some(b'\\') => j += 2,
                            Some(b'}') => break Some(j),
                            Some(_) => j += 1,
                        }
                    }
                } else {
                    closing(arg_start)
                };
                let Some(close) = close else {
                    return Err(unterminated());
                };
                let arg = &self.text[arg_start..close];
                if arg.bytes().any(|c| c.is_ascii_whitespace()) {
                    return Err(whitespace(close + 1));
                }
                Ok(Expr {
                    part: self.resolve(name, Some(arg), start, close + 1)?,
                    end: close + 1,
                })
            }
            _ => {
                let Some(close) = closing(k) else {
                    return Err(unterminated());
                };
                if next.is_ascii_whitespace() {
                    return Err(whitespace(close + 1));
                }
                let found = self.text[k..].chars().next().unwrap_or('?');
                Err(at.error(format!(
                    "`{}`: unexpected `{found}` after the name `{name}`: expected `}}` or `:` \
                     (NAME is [A-Za-z_][A-Za-z0-9_.-]*)",
                    &self.text[start..close + 1]
                )))
            }
        }
    }

    /// The part `name` (with its argument) stands for; the expression is
    /// `text[start..end]`.
    fn resolve(
        &self,
        name: &str,
        arg: Option<&str>,
        start: usize,
        end: usize,
    ) -> Result<Part, TemplateError> {
        let at = At {
            parser: self,
            offset: start,
        };
        let expr = &self.text[start..end];
        let builtin = BUILTIN_NAMES.iter().find(|(n, _)| *n == name);
        match (name, arg) {
            ("seq", None) => Ok(Part::Seq),
            ("uuid", None) => Ok(Part::Uuid),
            ("now", None) => Ok(Part::Now),
            ("now_ms", None) => Ok(Part::NowMs),
            ("seq" | "uuid" | "now" | "now_ms", Some(_)) => Err(at.error(format!(
                "`{expr}`: `{name}` takes no argument: write `${{{name}}}`"
            ))),
            ("rand", Some(arg)) => parse_range(arg)
                .map(|(lo, hi)| Part::Rand { lo, hi })
                .map_err(|why| at.error(format!("`{expr}`: {why}"))),
            ("randstr", Some(arg)) => parse_len(arg)
                .map(Part::RandStr)
                .map_err(|why| at.error(format!("`{expr}`: {why}"))),
            ("hex", Some(arg)) => parse_len(arg)
                .map(Part::Hex)
                .map_err(|why| at.error(format!("`{expr}`: {why}"))),
            ("pick", Some(arg)) => self.pick(arg, expr, &at),
            (_, None) if builtin.is_some() => {
                let syntax = builtin.map_or("", |(_, s)| s);
                Err(at.error(format!("`{expr}` needs an argument: write `{syntax}`")))
            }
            _ if self.vars.iter().any(|v| v == name) => match arg {
                None => Ok(Part::Var(
                    self.vars.iter().position(|v| v == name).unwrap_or(0),
                )),
                Some(_) => Err(at.error(format!(
                    "`{expr}`: the session variable `{name}` takes no argument: write `${{{name}}}`"
                ))),
            },
            _ => match self.columns.iter().position(|c| c == name) {
                Some(i) if arg.is_none() => Ok(Part::Column(i)),
                Some(_) => Err(at.error(format!(
                    "`{expr}`: the data column `{name}` takes no argument: write `${{{name}}}`"
                ))),
                None => Err(at.error(format!(
                    "unknown name `{expr}`: {}{}; built-ins: {BUILTINS}",
                    self.known_columns(),
                    self.known_vars()
                ))),
            },
        }
    }

    /// What an unknown name's message says about the data file.
    fn known_vars(&self) -> String {
        if self.vars.is_empty() {
            return String::new();
        }
        format!(
            "; the session's variables (taken by earlier requests) are {}",
            self.vars.join(", ")
        )
    }

    fn known_columns(&self) -> String {
        if self.columns.is_empty() {
            return "no data file given (--data FILE)".to_owned();
        }
        let file = match self.data_file {
            Some(file) => format!("the data file {file}"),
            None => "the data file".to_owned(),
        };
        format!("{file} has columns {}", self.columns.join(", "))
    }

    fn pick(&self, arg: &str, expr: &str, at: &At<'_>) -> Result<Part, TemplateError> {
        if arg.is_empty() {
            return Err(at.error(format!(
                "`{expr}` has no values: write `${{pick:A,B,C}}` (at least one value)"
            )));
        }
        let mut values = Vec::new();
        let mut value = Vec::new();
        let mut chars = arg.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ (',' | '}' | '\\')) => value.push(e as u8),
                    other => {
                        let shown = other.map_or(String::new(), String::from);
                        return Err(at.error(format!(
                            "`{expr}`: unknown escape `\\{shown}`: inside pick write `\\,` for \
                             a comma, `\\}}` for a brace, `\\\\` for a backslash"
                        )));
                    }
                },
                ',' => values.push(std::mem::take(&mut value)),
                c => {
                    let mut buf = [0; 4];
                    value.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        values.push(value);
        let values = values
            .into_iter()
            .map(|v| {
                if self.slot == Slot::Header {
                    if let Some(what) = v.iter().find_map(|&b| header_forbidden(b)) {
                        return Err(at.error(format!(
                            "`{expr}`: a pick value holds {what}, which a header cannot carry"
                        )));
                    }
                }
                Ok(if self.slot == Slot::Url {
                    let mut encoded = Vec::with_capacity(v.len());
                    percent_encode(&v, &mut encoded);
                    encoded.into_boxed_slice()
                } else {
                    v.into_boxed_slice()
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Part::Pick(values.into_boxed_slice()))
    }
}

/// At most 40 characters of `text`'s first line and an ellipsis, for messages.
fn shorten(text: &str) -> String {
    let text = text.split('\n').next().unwrap_or(text);
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// `LO-HI` of `${rand:LO-HI}`.
fn parse_range(arg: &str) -> Result<(i64, i64), String> {
    let malformed = || {
        format!(
            "malformed range `{arg}`: write `${{rand:LO-HI}}` with integers LO ≤ HI, like \
             `${{rand:1-100}}` or `${{rand:-5-5}}`"
        )
    };
    let b = arg.as_bytes();
    let number_end = |from: usize| {
        let digits = from + usize::from(b.get(from) == Some(&b'-'));
        let end = digits
            + b[digits.min(b.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
        (end > digits).then_some(end)
    };
    let lo_end = number_end(0).ok_or_else(malformed)?;
    if b.get(lo_end) != Some(&b'-') {
        return Err(malformed());
    }
    let hi_end = number_end(lo_end + 1).ok_or_else(malformed)?;
    if hi_end != b.len() {
        return Err(malformed());
    }
    let int = |s: &str| {
        s.parse::<i64>()
            .map_err(|_| format!("{s} is out of range for a 64-bit integer"))
    };
    let (lo, hi) = (int(&arg[..lo_end])?, int(&arg[lo_end + 1..])?);
    if lo > hi {
        return Err(format!(
            "LO ({lo}) is greater than HI ({hi}): write `${{rand:{hi}-{lo}}}`"
        ));
    }
    Ok((lo, hi))
}

/// `N` of `${randstr:N}` and `${hex:N}`.
fn parse_len(arg: &str) -> Result<usize, String> {
    let bad =
        || format!("the length must be a whole number from 1 to {MAX_RANDOM_LEN}, not `{arg}`");
    if arg.is_empty() || !arg.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    match arg.parse::<usize>() {
        Ok(n) if (1..=MAX_RANDOM_LEN).contains(&n) => Ok(n),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn parse(text: &str) -> Result<Template, TemplateError> {
        Template::parse(
            text,
            Slot::Body,
            &Origin::flag("-d"),
            &cols(&["id", "name"]),
        )
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    fn render(t: &Template, draw: Draw<'_>, gen: &mut Generator) -> String {
        let mut out = Vec::new();
        t.render(&draw, gen, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shared_types_are_send_and_sync() {
        fn shared<T: Send + Sync + Clone + std::fmt::Debug>() {}
        shared::<Template>();
        shared::<Data>();
        shared::<crate::TargetSpec>();
        fn sendable<T: Send + Sync + std::fmt::Debug + Default>() {}
        sendable::<crate::Cursor>();
        fn per_thread<T: Send + Clone>() {}
        per_thread::<Generator>();
    }

    #[test]
    fn literal_text_and_escapes() {
        let t = parse("a $ b $x $${seq} $$ end").unwrap();
        assert_eq!(t.as_literal(), Some(&b"a $ b $x ${seq} $$ end"[..]));
        assert!(!Template::has_expressions("a $${seq} $x"));
        assert!(Template::has_expressions("a ${seq}"));
        assert!(!Template::has_expressions("$$${x}"));
        assert_eq!(parse("").unwrap().as_literal(), Some(&b""[..]));
        assert_eq!(
            Template::literal("x${seq}").as_literal(),
            Some(&b"x${seq}"[..])
        );
        assert_eq!(parse("${seq}").unwrap().as_literal(), None);
    }

    #[test]
    fn seq_is_the_draws_and_columns_its_row() {
        let t = parse("${seq}-${name}-${seq}-${id}").unwrap();
        assert!(t.uses_seq());
        assert_eq!(t.columns().collect::<Vec<_>>(), vec![0, 1]);
        let row: Vec<Box<str>> = vec!["7".into(), "ann".into()];
        let mut gen = Generator::new(1, 0);
        assert_eq!(
            render(&t, Draw::new(42, Some(&row)), &mut gen),
            "42-ann-42-7"
        );
        assert!(!parse("${uuid}").unwrap().uses_seq());
    }

    #[test]
    fn rand_bounds_are_inclusive_with_negatives() {
        let mut gen = Generator::new(7, 3);
        for (text, lo, hi) in [
            ("${rand:1-6}", 1, 6),
            ("${rand:-5-5}", -5, 5),
            ("${rand:-10--1}", -10, -1),
            ("${rand:3-3}", 3, 3),
        ] {
            let t = parse(text).unwrap();
            let (mut seen_lo, mut seen_hi) = (false, false);
            for _ in 0..2000 {
                let v: i64 = render(&t, Draw::default(), &mut gen).parse().unwrap();
                assert!((lo..=hi).contains(&v), "{text} gave {v}");
                seen_lo |= v == lo;
                seen_hi |= v == hi;
            }
            assert!(seen_lo && seen_hi, "{text} never hit both ends");
        }
        let full = parse("${rand:-9223372036854775808-9223372036854775807}").unwrap();
        render(&full, Draw::default(), &mut gen)
            .parse::<i64>()
            .unwrap();
    }

    #[test]
    fn uuid_is_version_4() {
        let t = parse("${uuid}").unwrap();
        let mut gen = Generator::new(1, 1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let u = render(&t, Draw::default(), &mut gen);
            let b = u.as_bytes();
            assert_eq!(b.len(), 36, "{u}");
            for (i, &c) in b.iter().enumerate() {
                if matches!(i, 8 | 13 | 18 | 23) {
                    assert_eq!(c, b'-', "{u}");
                } else {
                    assert!(matches!(c, b'0'..=b'9' | b'a'..=b'f'), "{u}");
                }
            }
            assert_eq!(b[14], b'4', "version nibble of {u}");
            assert!(matches!(b[19], b'8' | b'9' | b'a' | b'b'), "variant of {u}");
            assert!(seen.insert(u));
        }
    }

    #[test]
    fn pick_covers_every_value_with_escapes() {
        let t = parse(r"${pick:a,b\,c,d\}e,f\\g}").unwrap();
        let mut gen = Generator::new(1, 2);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            seen.insert(render(&t, Draw::default(), &mut gen));
        }
        let want: std::collections::HashSet<String> = ["a", "b,c", "d}e", r"f\g"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(seen, want);
        let one = parse("${pick:only}").unwrap();
        assert_eq!(render(&one, Draw::default(), &mut gen), "only");
        let empty = parse("<${pick:a,}>").unwrap();
        for _ in 0..100 {
            let r = render(&empty, Draw::default(), &mut gen);
            assert!(r == "<a>" || r == "<>", "{r}");
        }
    }

    #[test]
    fn randstr_and_hex_have_their_length_and_alphabet() {
        let mut gen = Generator::new(5, 0);
        for n in [1, 7, 16, 17, 100, 65536] {
            let s = render(
                &parse(&format!("${{randstr:{n}}}")).unwrap(),
                Draw::default(),
                &mut gen,
            );
            assert_eq!(s.len(), n);
            assert!(s.bytes().all(|c| c.is_ascii_alphanumeric()), "{s}");
            let h = render(
                &parse(&format!("${{hex:{n}}}")).unwrap(),
                Draw::default(),
                &mut gen,
            );
            assert_eq!(h.len(), n);
            assert!(
                h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{h}"
            );
        }
        // Every letter and digit shows up.
        let s = render(
            &parse("${randstr:20000}").unwrap(),
            Draw::default(),
            &mut gen,
        );
        let distinct: std::collections::HashSet<u8> = s.bytes().collect();
        assert_eq!(distinct.len(), 62);
        let h = render(&parse("${hex:2000}").unwrap(), Draw::default(), &mut gen);
        assert_eq!(
            h.bytes().collect::<std::collections::HashSet<u8>>().len(),
            16
        );
    }

    #[test]
    fn now_is_the_clock() {
        let mut gen = Generator::new(0, 0);
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let s: u64 = render(&parse("${now}").unwrap(), Draw::default(), &mut gen)
            .parse()
            .unwrap();
        let ms: u128 = render(&parse("${now_ms}").unwrap(), Draw::default(), &mut gen)
            .parse()
            .unwrap();
        assert!(s.abs_diff(wall.as_secs()) <= 1, "{s} vs {wall:?}");
        assert!(ms.abs_diff(wall.as_millis()) <= 1000, "{ms} vs {wall:?}");
    }

    #[test]
    fn generators_differ_by_worker_and_repeat_by_seed() {
        let t = parse("${hex:32}").unwrap();
        let draw = |seed, worker| render(&t, Draw::default(), &mut Generator::new(seed, worker));
        assert_eq!(draw(1, 0), draw(1, 0));
        assert_ne!(draw(1, 0), draw(1, 1));
        assert_ne!(draw(1, 0), draw(2, 0));
    }

    #[test]
    fn url_slot_percent_encodes_values_not_text() {
        let t = Template::parse(
            "/a b/${name}?q=${pick:x\"y,é}",
            Slot::Url,
            &Origin::flag("URL"),
            &cols(&["name"]),
        )
        .unwrap();
        let row: Vec<Box<str>> = vec!["a \"é\"#/?%~".into()];
        let mut gen = Generator::new(0, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(render(&t, Draw::new(1, Some(&row)), &mut gen));
        }
        let mut seen: Vec<String> = seen.into_iter().collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                "/a b/a%20%22%C3%A9%22%23/?%~?q=%C3%A9",
                "/a b/a%20%22%C3%A9%22%23/?%~?q=x%22y",
            ]
        );
        // A body takes the value as it is.
        let body = parse("${name}").unwrap();
        let row: Vec<Box<str>> = vec!["1".into(), "a \"é\"#".into()];
        assert_eq!(
            render(&body, Draw::new(1, Some(&row)), &mut gen),
            "a \"é\"#"
        );
    }

    #[test]
    fn header_slot_refuses_control_characters_in_text_and_picks() {
        let o = Origin::new("--header 2", 1, 9);
        let e = Template::parse("a\r\nb", Slot::Header, &o, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--header 2:1:10: a header cannot hold a carriage return (CR)"
        );
        let e = Template::parse("${pick:a,b\0}", Slot::Header, &o, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--header 2:1:9: `${pick:a,b\0}`: a pick value holds a NUL byte, which a header \
             cannot carry"
        );
        Template::parse("${pick:a,b\0}", Slot::Body, &o, &[]).unwrap();
    }

    #[test]
    fn errors_have_positions_and_say_what_is_wrong() {
        let builtins =
            "built-ins: seq, rand:LO-HI, uuid, pick:A,B,…, randstr:N, hex:N, now, now_ms";
        assert_eq!(
            err("ab${seq"),
            "-d:1:3: unterminated `${`: no `}` closes the expression `${seq`"
        );
        assert_eq!(
            err("${"),
            "-d:1:1: unterminated `${`: no `}` closes the expression `${`"
        );
        assert_eq!(
            err("x${pick:a\\}"),
            "-d:1:2: unterminated `${`: no `}` closes the expression `${pick:a\\}`"
        );
        assert_eq!(
            err("${}"),
            "-d:1:1: empty `${}`: write a name inside, like `${seq}` or a data column's `${id}`"
        );
        assert_eq!(
            err("é ${usr}"),
            format!(
                "-d:1:3: unknown name `${{usr}}`: the data file has columns id, name; {builtins}"
            )
        );
        assert_eq!(
            Template::parse("${ID}", Slot::Body, &Origin::flag("-d"), &[])
                .unwrap_err()
                .to_string(),
            format!("-d:1:1: unknown name `${{ID}}`: no data file given (--data FILE); {builtins}")
        );
        assert_eq!(
            err("${rand:9-1}"),
            "-d:1:1: `${rand:9-1}`: LO (9) is greater than HI (1): write `${rand:1-9}`"
        );
        assert_eq!(
            err("${rand:x-2}"),
            "-d:1:1: `${rand:x-2}`: malformed range `x-2`: write `${rand:LO-HI}` with integers \
             LO ≤ HI, like `${rand:1-100}` or `${rand:-5-5}`"
        );
        for bad in [
            "${rand:1}",
            "${rand:1-}",
            "${rand:-1}",
            "${rand:1-2-3}",
            "${rand:+1-2}",
            "${rand:}",
        ] {
            assert!(err(bad).contains("malformed range"), "{bad}: {}", err(bad));
        }
        assert_eq!(
            err("${rand:1-99999999999999999999}"),
            "-d:1:1: `${rand:1-99999999999999999999}`: 99999999999999999999 is out of range for \
             a 64-bit integer"
        );
        assert_eq!(
            err("${randstr:0}"),
            "-d:1:1: `${randstr:0}`: the length must be a whole number from 1 to 65536, not `0`"
        );
        assert!(err("${hex:65537}").contains("from 1 to 65536"));
        assert!(err("${hex:-1}").contains("from 1 to 65536"));
        assert_eq!(
            err("${pick:}"),
            "-d:1:1: `${pick:}` has no values: write `${pick:A,B,C}` (at least one value)"
        );
        assert!(err(r"${pick:a\n}").contains("unknown escape `\\n`"));
        assert_eq!(
            err("${seq:1}"),
            "-d:1:1: `${seq:1}`: `seq` takes no argument: write `${seq}`"
        );
        assert_eq!(
            err("${now_ms:x}"),
            "-d:1:1: `${now_ms:x}`: `now_ms` takes no argument: write `${now_ms}`"
        );
        assert_eq!(
            err("${rand}"),
            "-d:1:1: `${rand}` needs an argument: write `${rand:LO-HI}`"
        );
        assert_eq!(
            err("${hex}"),
            "-d:1:1: `${hex}` needs an argument: write `${hex:N}`"
        );
        assert_eq!(
            err("${id:1}"),
            "-d:1:1: `${id:1}`: the data column `id` takes no argument: write `${id}`"
        );
        assert_eq!(
            err("${ seq}"),
            "-d:1:1: whitespace inside `${ seq}`: write expressions without spaces, like `${seq}`"
        );
        assert!(err("${seq }").starts_with("-d:1:1: whitespace inside `${seq }`"));
        assert!(err("${pick:a, b}").starts_with("-d:1:1: whitespace inside `${pick:a, b}`"));
        assert!(err("${1x}").contains("a name starts with a letter or `_`"));
        assert!(err("${a+b}").contains("unexpected `+` after the name `a`"));
        // Names are case-sensitive.
        assert!(err("${SEQ}").contains("unknown name `${SEQ}`"));
    }

    #[test]
    fn error_positions_count_lines_in_multiline_text() {
        let o = Origin::new("plan.toml scenario api request checkout body", 12, 8);
        let text = "{\n  \"id\": ${seq},\n  \"x\": \"${nope}\"\n}";
        let e = Template::parse(text, Slot::Body, &o, &[]).unwrap_err();
        assert_eq!((e.line, e.col), (14, 9));
        assert!(e.to_string().starts_with(
            "plan.toml scenario api request checkout body:14:9: unknown name `${nope}`"
        ));
    }

    #[test]
    fn compile_names_the_data_file_and_checks_headers() {
        let data = Data::from_rows(
            "ids.csv",
            cols(&["id", "name"]),
            vec![
                vec!["1".into(), "ann".into()],
                vec!["2".into(), "bo\nb".into()],
            ],
        )
        .unwrap();
        let e = Template::compile(
            "${usr}",
            Slot::Url,
            &Origin::new("targets.txt", 5, 12),
            Some(&data),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "targets.txt:5:12: unknown name `${usr}`: the data file ids.csv has columns id, name; \
             built-ins: seq, rand:LO-HI, uuid, pick:A,B,…, randstr:N, hex:N, now, now_ms"
        );
        let o = Origin::new("--header 2", 1, 9);
        Template::compile("x ${id}", Slot::Header, &o, Some(&data)).unwrap();
        Template::compile("x ${name}", Slot::Body, &o, Some(&data)).unwrap();
        let e = Template::compile("x ${name}", Slot::Header, &o, Some(&data)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ids.csv:3:1: the value of column `name` holds a line feed (LF), which a header \
             cannot carry; the header at --header 2:1:11 uses `${name}`"
        );
        // Parsed against other columns.
        let t = Template::parse(
            "${a}\n é ${c}${b}\n${c}",
            Slot::Body,
            &Origin::new("body.json", 1, 1),
            &cols(&["a", "b", "c"]),
        )
        .unwrap();
        assert_eq!(
            t.check_data(&data).unwrap_err().to_string(),
            "body.json:2:4: column 3 is referenced, but the data file ids.csv has 2 columns (id, name)"
        );
    }

    #[test]
    fn parsing_is_linear_in_the_text() {
        // 200,000 expressions over 50 columns in a 3 MB multi-line body.
        let names: Vec<String> = (0..50).map(|i| format!("c{i}")).collect();
        let text: String = (0..200_000)
            .map(|i| format!("{}${{c{}}}${{seq}}\n", "x".repeat(i % 7), i % 50))
            .collect();
        let start = std::time::Instant::now();
        let t = Template::parse(&text, Slot::Body, &Origin::flag("big"), &names).unwrap();
        assert_eq!(t.columns().count(), 50);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(t.column_at[48], Origin::new("big", 49, 7));
    }

    #[test]
    fn max_len_bounds_every_rendering() {
        let data = Data::from_rows(
            "d",
            cols(&["v"]),
            vec![vec!["é é".into()], vec!["x".into()]],
        )
        .unwrap();
        let t = Template::compile(
            "/${v}/${seq}/${rand:-9223372036854775808--1}/${uuid}/${pick:a,bbb}/${hex:5}/${randstr:3}/${now_ms}",
            Slot::Url,
            &Origin::flag("URL"),
            Some(&data),
        )
        .unwrap();
        let mut gen = Generator::new(0, 0);
        let max = t.max_len(Some(&data));
        for i in 0..100 {
            let mut out = Vec::new();
            t.render(
                &Draw::new(u64::MAX, Some(data.row(i % 2))),
                &mut gen,
                &mut out,
            );
            assert!(out.len() <= max, "{} > {max}", out.len());
        }
    }
}
