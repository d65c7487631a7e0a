//! [`Extract`]: a value taken from a response into a session variable (a token, a CSRF
//! field, the next page's URL), for later requests' `${NAME}` templates.
//!
//! # Syntax
//! One rule per table, `var` and exactly one source:
//! - `{ var = "token", json = "/token" }`: a JSON Pointer (RFC 6901) into the body.
//! - `{ var = "token", jsonpath = "$.data.token" }`: a JSONPath into the body, of the subset
//!   [`JsonPath`] describes (`$.a.b`, `$.a[0].b`, `$['a b']`, `$.a[-1]`).
//! - `{ var = "csrf", regex = 'name="csrf" value="([^"]+)"' }`: a regular expression
//!   (the `regex` crate's syntax) over the body; the first capture group's text, or the
//!   whole match when the pattern has no group; `group = N` picks another (0: the whole
//!   match).
//! - `{ var = "next", header = "Location" }`: the first value of a response header (name
//!   case-insensitive).
//!
//! A variable's name is a template NAME (`[A-Za-z_][A-Za-z0-9_.-]*`, as a data column's)
//! and not a template built-in's (`seq`, `uuid`, …: [`BUILTIN_NAMES`]).
//!
//! # Values
//! Values are text. A JSON string is taken as it is (unescaped); a number as JSON writes
//! it (`42`, `1.5`); a boolean as `true` or `false`; `null`, arrays and objects are a
//! failure ([`ExtractFailure::NotScalar`]). Regular-expression matches and header values
//! must be UTF-8.
//!
//! Everything that can be checked is checked when the rule is read: the variable name, the
//! pointer's syntax, the JSONPath (compiled once into segments), the regular expression
//! (compiled once) and its group number, the header name. What remains is per response,
//! and comes back as a cheap `Copy` [`ExtractFailure`].

use std::borrow::Cow;
use std::fmt;

use loadlab_template::names::BUILTIN_NAMES;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The forms of an extract rule, for error messages.
pub const EXTRACT_SYNTAX: &str = "json = \"/pointer\", jsonpath = \"$.a.b\", \
                                  regex = 'PATTERN' (with group = N) or header = \"Name\"";

/// The JSONPath subset, for error messages.
pub const JSONPATH_SYNTAX: &str = "$.a.b, $.a[0].b, $['a b'], $.a[-1]";

/// Whether `name` is a variable name: `[A-Za-z_][A-Za-z0-9_.-]*`, the template crate's
/// NAME (built-ins not excluded: see [`check_var_name`]).
pub fn is_var_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// Checks that `name` can be a variable: a NAME, and not a template built-in's.
pub fn check_var_name(name: &str) -> Result<(), ExtractError> {
    if let Some((_, syntax)) = BUILTIN_NAMES.iter().find(|(n, _)| *n == name) {
        return Err(ExtractError::VarBuiltin {
            var: name.to_string(),
            syntax,
        });
    }
    if !is_var_name(name) {
        return Err(ExtractError::VarSyntax(name.to_string()));
    }
    Ok(())
}

/// Why an extract rule is refused when it is read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The variable's name is not a NAME.
    #[error(
        "extract: var `{0}` is not a variable name ([A-Za-z_][A-Za-z0-9_.-]*): \
         e.g. var = \"token\""
    )]
    VarSyntax(String),
    /// The variable has a template built-in's name.
    #[error("extract: var `{var}` is the name of a template built-in ({syntax}): choose another")]
    VarBuiltin {
        /// The name.
        var: String,
        /// The built-in's syntax.
        syntax: &'static str,
    },
    /// No source given.
    #[error("extract `{var}`: say where its value comes from: {EXTRACT_SYNTAX}")]
    NoSource {
        /// The variable.
        var: String,
    },
    /// More than one source given.
    #[error("extract `{var}`: one source per rule, not {keys}: {EXTRACT_SYNTAX}")]
    SeveralSources {
        /// The variable.
        var: String,
        /// The sources given, `` `json` and `regex` ``.
        keys: String,
    },
    /// `group` without `regex`.
    #[error("extract `{var}`: `group` goes with `regex` only")]
    GroupWithoutRegex {
        /// The variable.
        var: String,
    },
    /// A malformed JSON Pointer.
    #[error(
        "extract: json pointer `{pointer}` {why} (RFC 6901: \"\" for the whole body, \
         \"/a/0/b\" for a path, ~0 for ~ and ~1 for /)"
    )]
    BadPointer {
        /// The pointer.
        pointer: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A JSONPath outside the supported subset.
    #[error("extract: jsonpath `{path}`: {why} (at character {at}); supported: {JSONPATH_SYNTAX}")]
    BadJsonPath {
        /// The path.
        path: String,
        /// The 1-based character where the problem is.
        at: usize,
        /// What is wrong.
        why: String,
    },
    /// A regular expression that does not compile.
    #[error("extract: regex `{pattern}` does not compile: {why}")]
    BadRegex {
        /// The pattern.
        pattern: String,
        /// The regex crate's message.
        why: String,
    },
    /// A capture group the pattern does not have.
    #[error(
        "extract: regex `{pattern}` has {groups} capture group(s): group = {group} does not \
         exist (0 is the whole match)"
    )]
    NoSuchGroup {
        /// The pattern.
        pattern: String,
        /// The group asked for.
        group: usize,
        /// How many capture groups the pattern has.
        groups: usize,
    },
    /// A header name that is not an HTTP token.
    #[error("extract: header `{0}` is not a header name (letters, digits and !#$%&'*+-.^_`|~)")]
    BadHeaderName(String),
}

/// What a JSON value is, when it cannot be text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`.
    Null,
    /// `[...]`.
    Array,
    /// `{...}`.
    Object,
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonKind::Null => "null",
            JsonKind::Array => "an array",
            JsonKind::Object => "an object",
        })
    }
}

/// Why a rule found no value in one response: cheap to return and count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExtractFailure {
    /// The body is not JSON (a `json` or `jsonpath` rule).
    #[error("the body is not JSON")]
    NotJson,
    /// The pointer or path leads nowhere in the body.
    #[error("not found in the body")]
    NotFound,
    /// The value found is not a string, number or boolean.
    #[error("the value is {0}, not a string, number or boolean")]
    NotScalar(JsonKind),
    /// The regular expression does not match the body.
    #[error("the regex does not match the body")]
    NoMatch,
    /// The regular expression matches, but its group took no part in the match (`(a)|b`).
    #[error("the regex matches, but its group is not part of the match")]
    GroupUnmatched,
    /// The response has no such header.
    #[error("the response has no such header")]
    HeaderAbsent,
    /// The matched text or header value is not UTF-8.
    #[error("the value is not UTF-8 text")]
    NotUtf8,
}

/// A response's headers, as the transport holds them.
pub trait Headers {
    /// The value of the first header named `name` (ASCII case-insensitive), if any.
    fn header(&self, name: &str) -> Option<&[u8]>;
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> Headers for [(N, V)] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_ref())
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>, const K: usize> Headers for [(N, V); K] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        Headers::header(self.as_slice(), name)
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> Headers for Vec<(N, V)> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        Headers::header(self.as_slice(), name)
    }
}

/// A JSONPath of the supported subset, compiled once into segments.
///
/// # Subset
/// `$` (the root) followed by any number of:
/// - `.name`: a member; `name` is letters, digits, `_`, `-` and non-ASCII characters.
/// - `['name']` or `["name"]`: a member of any name; inside, `\\` is a backslash and
///   `\'` / `\"` a quote.
/// - `[N]`: element N of an array (from 0); `[-N]`: N from the end (`[-1]`: the last).
///
/// Refused with an error that says which: `..` (recursive descent), `*` (wildcards),
/// `[?(...)]` (filters), `[a:b]` (slices), `[a,b]` (unions), `@` and `(...)`
/// (expressions). Each yields one value at most, so a rule always gives one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    segments: Vec<Segment>,
}

/// One step of a [`JsonPath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// An object's member.
    Key(String),
    /// An array's element: from the start if 0 or more, from the end if negative.
    Index(i64),
}

impl JsonPath {
    /// Compiles `text`, or says what is outside the subset and where.
    pub fn compile(text: &str) -> Result<JsonPath, ExtractError> {
        let chars: Vec<char> = text.chars().collect();
        let err = |at: usize, why: &str| ExtractError::BadJsonPath {
            path: text.to_string(),
            at: at + 1,
            why: why.to_string(),
        };
        if chars.first() != Some(&'$') {
            return Err(err(0, "a path starts with `$`, the root"));
        }
        let mut segments = Vec::new();
        let mut i = 1;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    if chars.get(i + 1) == Some(&'.') {
                        return Err(err(i, "recursive descent (`..`) is not supported"));
                    }
                    let start = i + 1;
                    let mut end = start;
                    while end < chars.len() && is_member_char(chars[end]) {
                        end += 1;
                    }
                    if end == start {
                        return Err(match chars.get(start) {
                            Some('*') => err(start, "wildcards (`*`) are not supported"),
                            None => err(start, "a name must follow `.`"),
                            Some(c) => err(
                                start,
                                &format!("`{c}` cannot start a name after `.`: write ['...']"),
                            ),
                        });
                    }
                    segments.push(Segment::Key(chars[start..end].iter().collect()));
                    i = end;
                }
                '[' => {
                    let (segment, next) = bracket(&chars, i).map_err(|(at, why)| err(at, &why))?;
                    segments.push(segment);
                    i = next;
                }
                '*' => return Err(err(i, "wildcards (`*`) are not supported")),
                '@' | '(' | '?' => return Err(err(i, "filters and expressions are not supported")),
                c => return Err(err(i, &format!("`{c}` where `.` or `[` was expected"))),
            }
        }
        Ok(JsonPath {
            text: text.to_string(),
            segments,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The compiled steps, from the root.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The value the path leads to in `root`, if any.
    pub fn find<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.segments
            .iter()
            .try_fold(root, |v, segment| match (segment, v) {
                (Segment::Key(k), Value::Object(m)) => m.get(k),
                (Segment::Index(i), Value::Array(a)) => {
                    let len = i64::try_from(a.len()).ok()?;
                    let at = if *i < 0 { len + i } else { *i };
                    usize::try_from(at).ok().and_then(|at| a.get(at))
                }
                _ => None,
            })
    }
}

fn is_member_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || !c.is_ascii()
}

/// Reads the `[...]` at `chars[open]`: its segment and the index just past `]`; or the
/// position and reason it is refused.
fn bracket(chars: &[char], open: usize) -> Result<(Segment, usize), (usize, String)> {
    let i = open + 1;
    match chars.get(i) {
        Some(&q @ ('\'' | '"')) => {
            let mut name = String::new();
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err((open, "unterminated `[`: a quote is not closed".into())),
                    Some('\\') => match chars.get(j + 1) {
                        Some(&e @ ('\\' | '\'' | '"')) => {
                            name.push(e);
                            j += 2;
                        }
                        _ => {
                            return Err((
                                j,
                                "in a quoted name, `\\` escapes only \\, ' and \"".into(),
                            ))
                        }
                    },
                    Some(&c) if c == q => break,
                    Some(&c) => {
                        name.push(c);
                        j += 1;
                    }
                }
            }
            match chars.get(j + 1) {
                Some(']') => Ok((Segment::Key(name), j + 2)),
                Some(',') => Err((j + 1, "unions (`[a,b]`) are not supported".into())),
                _ => Err((j + 1, "`]` expected after the quoted name".into())),
            }
        }
        Some('*') => Err((i, "wildcards (`*`) are not supported".into())),
        Some('?' | '(' | '@') => Err((i, "filters and expressions are not supported".into())),
        Some(c) if c.is_ascii_digit() || *c == '-' || *c == ':' => {
            let mut j = i;
            while j < chars.len() && (chars[j].is_ascii_digit() || (j == i && chars[j] == '-')) {
                j += 1;
            }
            match chars.get(j) {
                Some(']') => {}
                Some(':') => return Err((j, "slices (`[a:b]`) are not supported".into())),
                Some(',') => return Err((j, "unions (`[a,b]`) are not supported".into())),
                None => return Err((open, "unterminated `[`".into())),
                Some(c) => return Err((j, format!("`{c}` in an index: write [N] or [-N]"))),
            }
            let digits: String = chars[i..j].iter().collect();
            let index = digits
                .parse::<i64>()
                .map_err(|_| (i, format!("`{digits}` is not an index: write [N] or [-N]")))?;
            Ok((Segment::Index(index), j + 1))
        }
        None => Err((open, "unterminated `[`".into())),
        Some(c) => Err((i, format!("`{c}` after `[`: write [N], [-N] or ['name']"))),
    }
}

/// Checks a JSON Pointer's syntax (RFC 6901): empty, or `/` then reference tokens where
/// `~` is followed by `0` or `1`.
fn check_pointer(pointer: &str) -> Result<(), ExtractError> {
    let err = |why| ExtractError::BadPointer {
        pointer: pointer.to_string(),
        why,
    };
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(err("does not start with `/`"));
    }
    let b = pointer.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'~' && !matches!(b.get(i + 1), Some(b'0' | b'1')) {
            return Err(err("has a `~` not followed by 0 or 1"));
        }
    }
    Ok(())
}

/// Whether `name` is an HTTP token (RFC 9110 §5.6.2), as a header name is.
pub(crate) fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// A compiled regular expression over the body, and the group whose text is the value.
#[derive(Clone, Debug)]
pub struct RegexRule {
    regex: regex::bytes::Regex,
    group: usize,
}

impl RegexRule {
    /// Compiles `pattern`; `group` defaults to 1 when the pattern has a capture group, 0
    /// (the whole match) when it has none; a group it does not have is refused.
    pub fn compile(pattern: &str, group: Option<usize>) -> Result<RegexRule, ExtractError> {
        let regex = regex::bytes::Regex::new(pattern).map_err(|e| ExtractError::BadRegex {
            pattern: pattern.to_string(),
            why: e.to_string(),
        })?;
        let groups = regex.captures_len() - 1;
        let group = group.unwrap_or(usize::from(groups > 0));
        if group > groups {
            return Err(ExtractError::NoSuchGroup {
                pattern: pattern.to_string(),
                group,
                groups,
            });
        }
        Ok(RegexRule { regex, group })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        self.regex.as_str()
    }

    /// The group whose text is the value (0: the whole match).
    pub fn group(&self) -> usize {
        self.group
    }

    /// The group [`RegexRule::compile`] takes when none is given.
    fn default_group(&self) -> usize {
        usize::from(self.regex.captures_len() > 1)
    }

    /// The value's bytes in `body`.
    fn find<'a>(&self, body: &'a [u8]) -> Result<&'a [u8], ExtractFailure> {
        if self.group == 0 {
            return self
                .regex
                .find(body)
                .map(|m| m.as_bytes())
                .ok_or(ExtractFailure::NoMatch);
        }
        let caps = self.regex.captures(body).ok_or(ExtractFailure::NoMatch)?;
        caps.get(self.group)
            .map(|m| m.as_bytes())
            .ok_or(ExtractFailure::GroupUnmatched)
    }
}

impl PartialEq for RegexRule {
    fn eq(&self, other: &RegexRule) -> bool {
        self.pattern() == other.pattern() && self.group == other.group
    }
}

impl Eq for RegexRule {}

/// Where in a response a value is taken from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A JSON Pointer (RFC 6901) into the body (`""`: the whole body).
    JsonPointer(String),
    /// A JSONPath of the supported subset into the body.
    JsonPath(JsonPath),
    /// A regular expression over the body.
    Regex(RegexRule),
    /// The first value of a header, by name (ASCII case-insensitive).
    Header(String),
}

impl Source {
    /// A JSON Pointer, its syntax checked.
    pub fn json_pointer(pointer: &str) -> Result<Source, ExtractError> {
        check_pointer(pointer)?;
        Ok(Source::JsonPointer(pointer.to_string()))
    }

    /// A JSONPath, compiled.
    pub fn json_path(path: &str) -> Result<Source, ExtractError> {
        JsonPath::compile(path).map(Source::JsonPath)
    }

    /// A regular expression, compiled (see [`RegexRule::compile`] for `group`).
    pub fn regex(pattern: &str, group: Option<usize>) -> Result<Source, ExtractError> {
        RegexRule::compile(pattern, group).map(Source::Regex)
    }

    /// A header, its name checked.
    pub fn header(name: &str) -> Result<Source, ExtractError> {
        if !is_token(name) {
            return Err(ExtractError::BadHeaderName(name.to_string()));
        }
        Ok(Source::Header(name.to_string()))
    }

    /// Whether the body must be parsed as JSON.
    pub fn needs_json(&self) -> bool {
        matches!(self, Source::JsonPointer(_) | Source::JsonPath(_))
    }

    /// The value in a response, whose body was parsed once as JSON into `json` when some
    /// rule needs it (`None`: not parsed, or not JSON).
    fn value<'a, H: Headers + ?Sized>(
        &self,
        headers: &'a H,
        body: &'a [u8],
        json: Option<&'a Value>,
    ) -> Result<Cow<'a, str>, ExtractFailure> {
        let utf8 = |b: &'a [u8]| std::str::from_utf8(b).map_err(|_| ExtractFailure::NotUtf8);
        match self {
            Source::JsonPointer(p) => scalar(json.ok_or(ExtractFailure::NotJson)?.pointer(p)),
            Source::JsonPath(p) => scalar(p.find(json.ok_or(ExtractFailure::NotJson)?)),
            Source::Regex(r) => r.find(body).and_then(utf8).map(Cow::Borrowed),
            Source::Header(name) => {
                let v = headers.header(name).ok_or(ExtractFailure::HeaderAbsent)?;
                utf8(v.trim_ascii()).map(Cow::Borrowed)
            }
        }
    }
}

/// A JSON value found (or not) as text.
fn scalar(v: Option<&Value>) -> Result<Cow<'_, str>, ExtractFailure> {
    match v.ok_or(ExtractFailure::NotFound)? {
        Value::String(s) => Ok(Cow::Borrowed(s)),
        Value::Number(n) => Ok(Cow::Owned(n.to_string())),
        Value::Bool(b) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Null => Err(ExtractFailure::NotScalar(JsonKind::Null)),
        Value::Array(_) => Err(ExtractFailure::NotScalar(JsonKind::Array)),
        Value::Object(_) => Err(ExtractFailure::NotScalar(JsonKind::Object)),
    }
}

impl fmt::Display for Source {
    /// As written in a plan: `json "/token"`, `jsonpath "$.a"`, `regex "..."`,
    /// `header "Location"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::JsonPointer(p) => write!(f, "json {p:?}"),
            Source::JsonPath(p) => write!(f, "jsonpath {:?}", p.as_str()),
            Source::Regex(r) if r.group != r.default_group() => {
                write!(f, "regex {:?} group {}", r.pattern(), r.group)
            }
            Source::Regex(r) => write!(f, "regex {:?}", r.pattern()),
            Source::Header(h) => write!(f, "header {h:?}"),
        }
    }
}

/// One rule: a variable and where its value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawExtract", into = "RawExtract")]
pub struct Extract {
    /// The variable set (a NAME, not a built-in's).
    pub var: String,
    /// Where its value comes from.
    pub from: Source,
}

impl Extract {
    /// A rule, its variable's name checked.
    pub fn new(var: &str, from: Source) -> Result<Extract, ExtractError> {
        check_var_name(var)?;
        Ok(Extract {
            var: var.to_string(),
            from,
        })
    }

    /// The value in one response (parsing the body as JSON if the rule needs it: to apply
    /// several rules to one response, [`apply_all`] parses it once).
    pub fn apply<H: Headers + ?Sized>(
        &self,
        headers: &H,
        body: &[u8],
    ) -> Result<String, ExtractFailure> {
        let json = parse_json(self.from.needs_json(), body);
        self.from
            .value(headers, body, json.as_ref())
            .map(Cow::into_owned)
    }

    /// A failure of this rule as a sentence: `` extract `token` (json "/token"): not found
    /// in the body ``.
    pub fn explain(&self, failure: ExtractFailure) -> String {
        format!("extract `{}` ({}): {failure}", self.var, self.from)
    }
}

fn parse_json(needed: bool, body: &[u8]) -> Option<Value> {
    if needed {
        serde_json::from_slice(body).ok()
    } else {
        None
    }
}

/// Applies a request's `rules` in order to its response, setting each variable in `out`;
/// the body is parsed as JSON once, if any rule needs it.
///
/// Stops at the first rule that finds nothing, and returns its index and why; the rules
/// before it have set their variables, the failing rule and those after it have changed
/// nothing.
pub fn apply_all<H: Headers + ?Sized>(
    rules: &[Extract],
    headers: &H,
    body: &[u8],
    out: &mut Vars,
) -> Result<(), (usize, ExtractFailure)> {
    let json = parse_json(rules.iter().any(|r| r.from.needs_json()), body);
    for (i, rule) in rules.iter().enumerate() {
        let value = rule
            .from
            .value(headers, body, json.as_ref())
            .map_err(|f| (i, f))?;
        out.set(&rule.var, &value);
    }
    Ok(())
}

/// A session's variables: name → text, in slots.
///
/// Slot `i` holds the value of the `i`-th name, so [`Vars::values`] is what a template
/// compiled with the same names reads (`loadlab_template::Draw::with_vars`, with
/// `Template::compile_session(…, &flow.variables())`): build it with
/// [`Vars::with_names`] from [`crate::Flow::variables`]. A variable not yet set has the
/// empty text there (a template renders it as nothing) and is `None` to [`Vars::get`].
/// [`Vars::set`] of a name not declared adds a slot at the end. Few per session, so names
/// are found by a search in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vars {
    names: Vec<String>,
    values: Vec<Box<str>>,
    set: Vec<bool>,
}

impl Vars {
    /// No variables.
    pub fn new() -> Vars {
        Vars::default()
    }

    /// The variables `names`, in that order, none set yet.
    pub fn with_names(names: &[String]) -> Vars {
        Vars {
            names: names.to_vec(),
            values: vec![Box::from(""); names.len()],
            set: vec![false; names.len()],
        }
    }

    fn slot(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.slot(name)
            .filter(|&i| self.set[i])
            .map(|i| &*self.values[i])
    }

    /// Sets `name` to `value` (adding a slot if `name` is not one of the names).
    pub fn set(&mut self, name: &str, value: &str) {
        let i = self.slot(name).unwrap_or_else(|| {
            self.names.push(name.to_string());
            self.values.push(Box::from(""));
            self.set.push(false);
            self.names.len() - 1
        });
        if &*self.values[i] != value {
            self.values[i] = Box::from(value);
        }
        self.set[i] = true;
    }

    /// Unsets `name`; whether it was set.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(i) = self.slot(name) else {
            return false;
        };
        self.values[i] = Box::from("");
        std::mem::replace(&mut self.set[i], false)
    }

    /// How many variables are set.
    pub fn len(&self) -> usize {
        self.set.iter().filter(|&&s| s).count()
    }

    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        !self.set.contains(&true)
    }

    /// Unsets all (a new session); the names and their slots stay.
    pub fn clear(&mut self) {
        for (v, s) in self.values.iter_mut().zip(&mut self.set) {
            if *s {
                *v = Box::from("");
                *s = false;
            }
        }
    }

    /// The names, in slot order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The values, in slot order (empty where not set): a template's variables.
    pub fn values(&self) -> &[Box<str>] {
        &self.values
    }

    /// The variables set, (name, value), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.names
            .iter()
            .zip(&self.values)
            .zip(&self.set)
            .filter(|(_, &s)| s)
            .map(|((n, v), _)| (n.as_str(), &**v))
    }
}

/// An extract rule as written: `var` and one source.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExtract {
    var: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jsonpath: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    header: Option<String>,
}

impl TryFrom<RawExtract> for Extract {
    type Error = ExtractError;

    fn try_from(raw: RawExtract) -> Result<Extract, ExtractError> {
        check_var_name(&raw.var)?;
        let given: Vec<&str> = [
            ("json", raw.json.is_some()),
            ("jsonpath", raw.jsonpath.is_some()),
            ("regex", raw.regex.is_some()),
            ("header", raw.header.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect();
        if given.len() > 1 {
            return Err(ExtractError::SeveralSources {
                var: raw.var,
                keys: given
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
            });
        }
        if raw.group.is_some() && raw.regex.is_none() {
            return Err(ExtractError::GroupWithoutRegex { var: raw.var });
        }
        let from = if let Some(p) = &raw.json {
            Source::json_pointer(p)?
        } else if let Some(p) = &raw.jsonpath {
            Source::json_path(p)?
        } else if let Some(p) = &raw.regex {
            Source::regex(p, raw.group)?
        } else if let Some(h) = &raw.header {
            Source::header(h)?
        } else {
            return Err(ExtractError::NoSource { var: raw.var });
        };
        Ok(Extract { var: raw.var, from })
    }
}

impl From<Extract> for RawExtract {
    fn from(e: Extract) -> RawExtract {
        let mut raw = RawExtract {
            var: e.var,
            ..RawExtract::default()
        };
        match e.from {
            Source::JsonPointer(p) => raw.json = Some(p),
            Source::JsonPath(p) => raw.jsonpath = Some(p.text),
            Source::Regex(r) => {
                raw.group = (r.group != r.default_group()).then_some(r.group);
                raw.regex = Some(r.pattern().to_string());
            }
            Source::Header(h) => raw.header = Some(h),
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Doc {
        extract: Vec<Extract>,
    }

    fn rules(toml_text: &str) -> Result<Vec<Extract>, String> {
        toml::from_str::<Doc>(toml_text)
            .map(|d| d.extract)
            .map_err(|e| e.message().to_string())
    }

    fn rule(toml_inline: &str) -> Result<Extract, String> {
        rules(&format!("extract = [{toml_inline}]")).map(|mut r| r.remove(0))
    }

    const NO_HEADERS: [(&str, &str); 0] = [];

    fn body_value(r: &str, body: &str) -> Result<String, ExtractFailure> {
        rule(r).unwrap().apply(&NO_HEADERS, body.as_bytes())
    }

    #[test]
    fn the_four_forms_parse() {
        let r = rule(r#"{ var = "token", json = "/token" }"#).unwrap();
        assert_eq!(r.var, "token");
        assert_eq!(r.from, Source::JsonPointer("/token".into()));
        let r = rule(r#"{ var = "token", jsonpath = "$.data.token" }"#).unwrap();
        assert_eq!(
            r.from,
            Source::JsonPath(JsonPath {
                text: "$.data.token".into(),
                segments: vec![Segment::Key("data".into()), Segment::Key("token".into())],
            })
        );
        let r = rule(r#"{ var = "csrf", regex = 'name="csrf" value="([^"]+)"' }"#).unwrap();
        let Source::Regex(re) = &r.from else {
            panic!("{r:?}")
        };
        assert_eq!(re.pattern(), r#"name="csrf" value="([^"]+)""#);
        assert_eq!(re.group(), 1);
        let r = rule(r#"{ var = "next", header = "Location" }"#).unwrap();
        assert_eq!(r.from, Source::Header("Location".into()));
    }

    #[test]
    fn rules_round_trip_through_json_and_toml() {
        let text = r#"extract = [
            { var = "a", json = "/a/0" },
            { var = "b", jsonpath = "$['x y'][-1]" },
            { var = "c", regex = 'id=(\d+)' },
            { var = "d", regex = 'id=(\d+)', group = 0 },
            { var = "e", regex = 'id=\d+' },
            { var = "f", header = "Location" },
        ]"#;
        let parsed = rules(text).unwrap();
        let json = serde_json::to_string(&parsed).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Extract>>(&json).unwrap(), parsed);
        assert!(json.contains(r#""group":0"#), "{json}");
        assert_eq!(json.matches("group").count(), 1, "{json}");
    }

    #[test]
    fn json_pointer_values_are_text() {
        let body = r#"{"token":"abc","n":42,"f":1.5,"ok":true,"nil":null,"a":[1,{"b":"c"}],
                      "o":{},"esc":"x\"y","a/b":{"m~n":"slash"}}"#;
        let v = |p: &str| body_value(&format!(r#"{{ var = "v", json = "{p}" }}"#), body);
        assert_eq!(v("/token").unwrap(), "abc");
        assert_eq!(v("/n").unwrap(), "42");
        assert_eq!(v("/f").unwrap(), "1.5");
        assert_eq!(v("/ok").unwrap(), "true");
        assert_eq!(v("/a/0").unwrap(), "1");
        assert_eq!(v("/a/1/b").unwrap(), "c");
        assert_eq!(v("/esc").unwrap(), "x\"y");
        assert_eq!(v("/a~1b/m~0n").unwrap(), "slash");
        assert_eq!(v("/nil"), Err(ExtractFailure::NotScalar(JsonKind::Null)));
        assert_eq!(v("/a"), Err(ExtractFailure::NotScalar(JsonKind::Array)));
        assert_eq!(v("/o"), Err(ExtractFailure::NotScalar(JsonKind::Object)));
        assert_eq!(v("/missing"), Err(ExtractFailure::NotFound));
        assert_eq!(v("/a/9"), Err(ExtractFailure::NotFound));
        assert_eq!(
            body_value(r#"{ var = "v", json = "/a" }"#, "<html>"),
            Err(ExtractFailure::NotJson)
        );
        assert_eq!(
            body_value(r#"{ var = "v", json = "" }"#, "\"whole\""),
            Ok("whole".into())
        );
    }

    #[test]
    fn bad_pointers_are_refused() {
        let e = rule(r#"{ var = "v", json = "token" }"#).unwrap_err();
        assert!(e.contains("`token` does not start with `/`"), "{e}");
        let e = rule(r#"{ var = "v", json = "/a~2" }"#).unwrap_err();
        assert!(e.contains("`~` not followed by 0 or 1"), "{e}");
    }

    #[test]
    fn jsonpath_subset_compiles_into_segments() {
        let segs = |p: &str| JsonPath::compile(p).unwrap().segments;
        use Segment::{Index, Key};
        assert_eq!(segs("$"), vec![]);
        assert_eq!(segs("$.a.b"), vec![Key("a".into()), Key("b".into())]);
        assert_eq!(
            segs("$.a[0].b"),
            vec![Key("a".into()), Index(0), Key("b".into())]
        );
        assert_eq!(segs("$['a b']"), vec![Key("a b".into())]);
        assert_eq!(segs(r#"$["a'b"]"#), vec![Key("a'b".into())]);
        assert_eq!(segs(r"$['it\'s\\']"), vec![Key("it's\\".into())]);
        assert_eq!(segs("$.a[-1]"), vec![Key("a".into()), Index(-1)]);
        assert_eq!(
            segs("$.user-id.été"),
            vec![Key("user-id".into()), Key("été".into())]
        );
    }

    #[test]
    fn jsonpath_finds_values() {
        let body = r#"{"data":{"token":"t","items":[{"id":1},{"id":2},{"id":3}]},"a b":"sp"}"#;
        let v = |p: &str| body_value(&format!(r#"{{ var = "v", jsonpath = "{p}" }}"#), body);
        assert_eq!(v("$.data.token").unwrap(), "t");
        assert_eq!(v("$.data.items[0].id").unwrap(), "1");
        assert_eq!(v("$.data.items[-1].id").unwrap(), "3");
        assert_eq!(v("$.data.items[-3].id").unwrap(), "1");
        assert_eq!(v("$['a b']").unwrap(), "sp");
        assert_eq!(v("$.data.items[3].id"), Err(ExtractFailure::NotFound));
        assert_eq!(v("$.data.items[-4].id"), Err(ExtractFailure::NotFound));
        assert_eq!(v("$.data.token.x"), Err(ExtractFailure::NotFound));
        assert_eq!(v("$.data[0]"), Err(ExtractFailure::NotFound));
        assert_eq!(v("$"), Err(ExtractFailure::NotScalar(JsonKind::Object)));
    }

    #[test]
    fn unsupported_jsonpath_is_refused_with_the_subset() {
        for (path, why, at) in [
            ("a.b", "starts with `$`", 1),
            ("$..a", "recursive descent", 2),
            ("$.a.*", "wildcards", 5),
            ("$.a[*]", "wildcards", 5),
            ("$.a[?(@.b)]", "filters", 5),
            ("$.a[0:2]", "slices", 6),
            ("$.a[0,1]", "unions", 6),
            ("$['a','b']", "unions", 6),
            ("$.a[", "unterminated", 4),
            ("$['a]", "not closed", 2),
            ("$.", "a name must follow", 3),
            ("$.a b", "where `.` or `[` was expected", 4),
            ("$[x]", "write [N], [-N] or ['name']", 3),
        ] {
            let e = JsonPath::compile(path).unwrap_err();
            let ExtractError::BadJsonPath { at: got_at, .. } = &e else {
                panic!("{e:?}")
            };
            let msg = e.to_string();
            assert!(msg.contains(why), "{path}: {msg}");
            assert!(msg.contains(JSONPATH_SYNTAX), "{path}: {msg}");
            assert_eq!(*got_at, at, "{path}: {msg}");
        }
    }

    #[test]
    fn regex_takes_the_first_group_or_the_whole_match() {
        let html = r#"<input name="csrf" value="s3cr3t"><a href="/p/7">"#;
        assert_eq!(
            body_value(
                r#"{ var = "v", regex = 'name="csrf" value="([^"]+)"' }"#,
                html
            )
            .unwrap(),
            "s3cr3t"
        );
        assert_eq!(
            body_value(r#"{ var = "v", regex = '/p/\d+' }"#, html).unwrap(),
            "/p/7"
        );
        assert_eq!(
            body_value(
                r#"{ var = "v", regex = 'href="(/p/(\d+))"', group = 2 }"#,
                html
            )
            .unwrap(),
            "7"
        );
        assert_eq!(
            body_value(
                r#"{ var = "v", regex = 'href="(/p/\d+)"', group = 0 }"#,
                html
            )
            .unwrap(),
            r#"href="/p/7""#
        );
        assert_eq!(
            body_value(r#"{ var = "v", regex = 'nothing(here)' }"#, html),
            Err(ExtractFailure::NoMatch)
        );
        assert_eq!(
            body_value(r#"{ var = "v", regex = '(zzz)|csrf' }"#, html),
            Err(ExtractFailure::GroupUnmatched)
        );
        let bytes = rule(r#"{ var = "v", regex = '(?-u)x(.)' }"#).unwrap();
        assert_eq!(
            bytes.apply(&NO_HEADERS, b"x\xff"),
            Err(ExtractFailure::NotUtf8)
        );
    }

    #[test]
    fn regex_errors_at_compile_time() {
        let e = rule(r#"{ var = "v", regex = 'a(b' }"#).unwrap_err();
        assert!(e.contains("regex `a(b` does not compile"), "{e}");
        let e = rule(r#"{ var = "v", regex = 'a(b)', group = 2 }"#).unwrap_err();
        assert!(
            e.contains("has 1 capture group(s): group = 2 does not exist"),
            "{e}"
        );
        let e = rule(r#"{ var = "v", regex = 'ab', group = 1 }"#).unwrap_err();
        assert!(e.contains("has 0 capture group(s)"), "{e}");
        let e = rule(r#"{ var = "v", json = "/a", group = 1 }"#).unwrap_err();
        assert!(e.contains("`group` goes with `regex` only"), "{e}");
    }

    #[test]
    fn header_is_case_insensitive_and_first_wins() {
        let r = rule(r#"{ var = "next", header = "location" }"#).unwrap();
        let headers: [(&[u8], &[u8]); 3] = [
            (b"Content-Type", b"text/html"),
            (b"LOCATION", b" /next?page=2 "),
            (b"Location", b"/second"),
        ];
        assert_eq!(r.apply(&headers, b"").unwrap(), "/next?page=2");
        assert_eq!(
            r.apply(&headers[..1], b""),
            Err(ExtractFailure::HeaderAbsent)
        );
        let owned = vec![("location".to_string(), vec![0xffu8])];
        assert_eq!(r.apply(&owned, b""), Err(ExtractFailure::NotUtf8));
        let e = rule(r#"{ var = "v", header = "Bad Name" }"#).unwrap_err();
        assert!(e.contains("`Bad Name` is not a header name"), "{e}");
    }

    #[test]
    fn var_names_follow_the_template_syntax_and_avoid_built_ins() {
        assert!(rule(r#"{ var = "_a.b-1", header = "X" }"#).is_ok());
        let e = rule(r#"{ var = "1a", header = "X" }"#).unwrap_err();
        assert!(
            e.contains("`1a` is not a variable name ([A-Za-z_][A-Za-z0-9_.-]*)"),
            "{e}"
        );
        let e = rule(r#"{ var = "", header = "X" }"#).unwrap_err();
        assert!(e.contains("`` is not a variable name"), "{e}");
        let e = rule(r#"{ var = "seq", header = "X" }"#).unwrap_err();
        assert!(
            e.contains("`seq` is the name of a template built-in (${seq})"),
            "{e}"
        );
        let e = rule(r#"{ var = "rand", header = "X" }"#).unwrap_err();
        assert!(e.contains("${rand:LO-HI}"), "{e}");
        assert!(Extract::new("uuid", Source::Header("X".into())).is_err());
    }

    #[test]
    fn sources_must_be_one() {
        let e = rule(r#"{ var = "v" }"#).unwrap_err();
        assert!(e.contains("say where its value comes from"), "{e}");
        assert!(e.contains(EXTRACT_SYNTAX), "{e}");
        let e = rule(r#"{ var = "v", json = "/a", regex = "b" }"#).unwrap_err();
        assert!(e.contains("not `json` and `regex`"), "{e}");
        let e = rule(r#"{ var = "v", xpath = "//a" }"#).unwrap_err();
        assert!(e.contains("unknown field `xpath`"), "{e}");
        for allowed in ["var", "json", "jsonpath", "regex", "group", "header"] {
            assert!(e.contains(&format!("`{allowed}`")), "{e}");
        }
    }

    #[test]
    fn apply_all_parses_once_and_reports_the_failing_rule() {
        let set = rules(
            r#"extract = [
                { var = "token", json = "/token" },
                { var = "user", jsonpath = "$.user.id" },
                { var = "next", header = "Location" },
                { var = "n", regex = '"n":(\d+)' },
            ]"#,
        )
        .unwrap();
        let headers = [("location", "/home")];
        let body = br#"{"token":"t1","user":{"id":7},"n":3}"#;
        let mut vars = Vars::new();
        apply_all(&set, &headers, body, &mut vars).unwrap();
        let got: Vec<_> = vars.iter().collect();
        assert_eq!(
            got,
            [
                ("token", "t1"),
                ("user", "7"),
                ("next", "/home"),
                ("n", "3")
            ]
        );
        // A second response overwrites; the first failure stops the rest.
        let body = br#"{"token":"t2"}"#;
        assert_eq!(
            apply_all(&set, &headers, body, &mut vars),
            Err((1, ExtractFailure::NotFound))
        );
        assert_eq!(vars.get("token"), Some("t2"));
        assert_eq!(vars.get("user"), Some("7"));
        assert_eq!(
            set[1].explain(ExtractFailure::NotFound),
            "extract `user` (jsonpath \"$.user.id\"): not found in the body"
        );
        assert_eq!(
            apply_all(&set[2..], &NO_HEADERS, b"", &mut vars),
            Err((0, ExtractFailure::HeaderAbsent))
        );
    }

    #[test]
    fn vars_set_get_remove() {
        let mut v = Vars::new();
        assert!(v.is_empty());
        v.set("a", "1");
        v.set("b", "2");
        v.set("a", "3");
        assert_eq!(v.get("a"), Some("3"));
        assert_eq!(v.len(), 2);
        assert!(v.remove("a"));
        assert!(!v.remove("a"));
        assert_eq!(v.get("a"), None);
        v.clear();
        assert!(v.is_empty());
        // Unset or empty: None or Some("").
        v.set("e", "");
        assert_eq!(v.get("e"), Some(""));
        assert_eq!(v.get("b"), None);
    }

    #[test]
    fn vars_slots_follow_the_declared_names() {
        let names = vec!["token".to_string(), "next".to_string()];
        let mut v = Vars::with_names(&names);
        assert_eq!(v.names(), names);
        assert_eq!(v.values(), [Box::from(""), Box::from("")]);
        assert_eq!(v.get("token"), None);
        v.set("next", "/p/2");
        v.set("extra", "x");
        assert_eq!(
            v.values(),
            [Box::from(""), Box::from("/p/2"), Box::from("x")]
        );
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            [("next", "/p/2"), ("extra", "x")]
        );
        v.clear();
        assert_eq!(v.names().len(), 3);
        assert!(v.values().iter().all(|x| x.is_empty()));
    }
}
