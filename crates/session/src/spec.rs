//! [`Flow`]: what one user of a session does, as a plan or flow file writes it: request
//! steps in order, loops of steps, think times and extract rules, checked when read.
//!
//! # Syntax
//! ```toml
//! think = "1s"                      # the default pause after each step (default: none)
//! connection = "per-session"        # or "reuse": the request loop's connection, kept across sessions
//!
//! [[steps]]
//! name = "login"                    # required, unique: results are counted per step
//! method = "POST"                   # default GET
//! path = "/login"                   # required
//! headers = { Content-Type = "application/json" }
//! body = '{"user": "${user}"}'
//! think = { uniform = ["500ms", "1.5s"] }   # this step's pause, instead of the default
//! extract = [{ var = "token", json = "/token" }]
//!
//! [[steps]]
//! name = "join"
//! websocket = true                  # a message on the session's WebSocket at `path`
//! path = "/chat?token=${token}"     # opened (GET, Upgrade) by the first step that names it
//! body = '{"join": "${room}"}'      # the message (empty: none, the server's next one is waited for)
//! reply_contains = '"joined"'       # the reply: the next data message holding this text
//! extract = [{ var = "id", json = "/id" }]
//!
//! [[steps]]
//! name = "answer"
//! sse = true                        # an event of the session's event stream at `path`
//! method = "POST"                   # the request that opens it (the first step naming it)
//! path = "/v1/chat"
//! body = '{"prompt": "${prompt}"}'
//! reply_contains = "[DONE]"         # the reply: the next event whose data holds this text
//!
//! [[steps]]
//! loop = 3                          # 1 to MAX_LOOP times
//! steps = [
//!     { name = "browse", path = "/items/${id}", headers = { Authorization = "Bearer ${token}" } },
//!     { name = "cart", method = "POST", path = "/cart", think = "2s" },
//! ]
//! ```
//! Method, path, header values and body may hold `${...}` templates, kept here as text:
//! the engine compiles them. Header names are literal HTTP tokens. A loop holds request
//! steps only (loops do not nest). Every table refuses unknown keys, naming the key and
//! listing the allowed ones.
//!
//! What is checked when read: at least one step, a name and a path for each, unique names,
//! header names, loop counts, no nested loops, a WebSocket step's method (GET, the
//! upgrade's) and `reply_contains` on WebSocket steps only, and each extract rule
//! ([`crate::extract`]). What needs the data file is checked by
//! [`Flow::variables_used_before_set`] (each `${NAME}` must be a data column or a
//! variable extracted by an earlier step) and [`Flow::variables_named_like_columns`] (a
//! variable cannot take a column's name). [`Flow::variables`] lists the variables, the
//! names a step's templates are compiled with.
//!
//! # Walking
//! A session walks the steps in order, a loop's steps `loop` times over, by position
//! ([`Position`], [`Flow::at`], [`Flow::advance`]) or by iterator ([`Flow::walk`]); the
//! steps are never copied.

use std::fmt;

use loadlab_template::names::BUILTIN_NAMES;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::extract::{is_token, is_var_name, Extract};
use crate::think::Think;

/// The most times a loop may run.
pub const MAX_LOOP: u32 = 1_000_000;

/// Why a flow is refused when it is read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// No step at all.
    #[error("a flow needs at least one step: [[steps]] with name = \"...\" and path = \"/...\"")]
    NoSteps,
    /// A request step without a name.
    #[error(
        "{at}: a request step needs a `name` (its results are counted under it), \
         e.g. name = \"login\""
    )]
    MissingName {
        /// Where: `item 3`, `step 2 of the loop at item 3`.
        at: String,
    },
    /// A request step without a path.
    #[error("step `{name}`: a request step needs a `path`, e.g. path = \"/users/${{id}}\"")]
    MissingPath {
        /// The step.
        name: String,
    },
    /// Two steps with one name.
    #[error(
        "step name `{name}` is used twice ({first} and {second}): results are counted per \
         step, so names must be unique"
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// Where it is first.
        first: String,
        /// Where it is again.
        second: String,
    },
    /// `steps` without `loop`.
    #[error(
        "{at}: `steps` goes with `loop = N` (a loop); a request step has name, method, path, \
         headers, body, think, extract, websocket, sse and reply_contains"
    )]
    StepsWithoutLoop {
        /// Where.
        at: String,
    },
    /// A loop with a request step's field.
    #[error(
        "{at}: a loop takes `loop` and `steps` only, not `{field}`: put requests in its steps"
    )]
    LoopField {
        /// Where.
        at: String,
        /// The field.
        field: &'static str,
    },
    /// A loop count out of range.
    #[error("{at}: loop = {count}: a loop runs 1 to {MAX_LOOP} times")]
    LoopCount {
        /// Where.
        at: String,
        /// The count as written.
        count: i64,
    },
    /// A loop without steps.
    #[error("{at}: a loop needs steps: steps = [{{ name = \"...\", path = \"/...\" }}]")]
    EmptyLoop {
        /// Where.
        at: String,
    },
    /// A loop inside a loop.
    #[error(
        "{at}: loops do not nest: a loop's steps are request steps; write the inner loop's \
         steps out in the outer loop"
    )]
    NestedLoop {
        /// Where.
        at: String,
    },
    /// A header name that is not an HTTP token.
    #[error(
        "step `{step}`: header `{header}` is not a header name (letters, digits and \
         !#$%&'*+-.^_`|~)"
    )]
    BadHeaderName {
        /// The step.
        step: String,
        /// The name.
        header: String,
    },
    /// An empty method.
    #[error("step `{step}`: method is empty (e.g. method = \"POST\"; default GET)")]
    EmptyMethod {
        /// The step.
        step: String,
    },
    /// A WebSocket step with a method other than the upgrade's GET.
    #[error(
        "step `{step}`: a WebSocket step (websocket = true) sends a message on a connection \
         opened by a GET upgrade, so it takes no method (here `{method}`); the message is its body"
    )]
    WebSocketMethod {
        /// The step.
        step: String,
        /// The method written.
        method: String,
    },
    /// A step that is both a WebSocket's and an event stream's.
    #[error("step `{step}`: websocket = true or sse = true, not both")]
    BothStreams {
        /// The step.
        step: String,
    },
    /// `reply_contains` on a request step.
    #[error(
        "step `{step}`: reply_contains picks a reply among the messages or events a server \
         sends: add websocket = true or sse = true, or check a response with an extract rule"
    )]
    ReplyWithoutWebSocket {
        /// The step.
        step: String,
    },
}

/// One request of a flow, as written (templates not yet compiled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The name its results are counted under (unique in the flow).
    pub name: String,
    /// HTTP method (default `GET`).
    pub method: String,
    /// Path from `/` on the target (query included).
    pub path: String,
    /// Headers, (name, value), in the order written.
    pub headers: Vec<(String, String)>,
    /// Body (empty: none).
    pub body: String,
    /// The pause after its response; `None`: the flow's default.
    pub think: Option<Think>,
    /// Values taken from its response, applied in order.
    pub extract: Vec<Extract>,
    /// A message on the session's WebSocket at `path` (opened by the first such step, kept
    /// for the next ones at the same path, closed when the session ends) instead of an
    /// HTTP request: the body is the message (empty: none sent), the reply the next data
    /// message the server sends (containing `reply_contains`, if given), the extract rules
    /// read from it.
    pub websocket: bool,
    /// An event of the session's event stream (`text/event-stream`) at `path` instead of
    /// a response: the first such step opens the stream with its request (method, headers,
    /// body), and it and the next ones at that path each wait for the stream's next event
    /// (holding `reply_contains`, if given), the extract rules reading its data.
    pub sse: bool,
    /// A WebSocket or event-stream step: what its reply must contain (a template, rendered
    /// as the body is).
    pub reply_contains: Option<String>,
}

impl Step {
    /// A `GET` of `path` named `name`, with nothing else.
    pub fn get(name: &str, path: &str) -> Step {
        Step {
            name: name.to_string(),
            method: "GET".into(),
            path: path.to_string(),
            headers: Vec::new(),
            body: String::new(),
            think: None,
            extract: Vec::new(),
            websocket: false,
            sse: false,
            reply_contains: None,
        }
    }

    /// Its text that may hold templates: (which field, text).
    fn template_texts(&self) -> impl Iterator<Item = (String, &str)> + '_ {
        [("method".to_string(), self.method.as_str())]
            .into_iter()
            .chain([("path".to_string(), self.path.as_str())])
            .chain(
                self.headers
                    .iter()
                    .map(|(n, v)| (format!("header `{n}`"), v.as_str())),
            )
            .chain([("body".to_string(), self.body.as_str())])
            .chain(
                self.reply_contains
                    .iter()
                    .map(|r| ("reply_contains".to_string(), r.as_str())),
            )
    }
}

/// A loop: its steps, `count` times over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// How many times (1 to [`MAX_LOOP`]).
    pub count: u32,
    /// The steps of one turn (at least one).
    pub steps: Vec<Step>,
}

/// One item of a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A request.
    Step(Step),
    /// Requests repeated.
    Loop(Loop),
}

impl Item {
    fn steps(&self) -> &[Step] {
        match self {
            Item::Step(s) => std::slice::from_ref(s),
            Item::Loop(l) => &l.steps,
        }
    }

    fn count(&self) -> u32 {
        match self {
            Item::Step(_) => 1,
            Item::Loop(l) => l.count,
        }
    }
}

/// What one user does: items in order and the default think time. Always valid: built by
/// [`Flow::new`] or read from TOML/JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawFlow", into = "RawFlow")]
pub struct Flow {
    think: Think,
    connection: Connection,
    items: Vec<Item>,
    /// The [`StepRef::id`] of each item's first step.
    first_id: Vec<usize>,
}

/// Where a session is in its flow: copyable, and borrows nothing. The default is the
/// flow's first step; [`Flow::advance`] moves on, [`Flow::at`] reads the step there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Position {
    item: usize,
    inner: usize,
    iteration: u32,
}

/// One step as a session walks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRef<'a> {
    /// The step.
    pub step: &'a Step,
    /// Its number among the flow's steps as written, from 0 (the same at every turn of a
    /// loop): an index for per-step results, below [`Flow::step_count`].
    pub id: usize,
    /// The item it belongs to, from 0.
    pub item: usize,
    /// The turn of its loop, from 0 (0 outside loops).
    pub iteration: u32,
    /// Where it is, to [`Flow::advance`] from.
    pub position: Position,
}

/// An unset variable used by a step, found by [`Flow::variables_used_before_set`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsetVariable {
    /// The step that uses it.
    pub step: String,
    /// Where in the step: `path`, `body`, `method`, ``header `X-Token` ``.
    pub field: String,
    /// The variable's name.
    pub var: String,
    /// The step that extracts it, after (or at) the step that uses it, if one does.
    pub set_later_by: Option<String>,
}

impl fmt::Display for UnsetVariable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step `{}` uses `${{{}}}` in its {}, but no earlier step extracts `{}` and no data \
             column has that name",
            self.step, self.var, self.field, self.var
        )?;
        match &self.set_later_by {
            Some(s) if *s == self.step => write!(
                f,
                " (it extracts `{}` itself, from its own response: too late for its request)",
                self.var
            ),
            Some(s) => write!(f, " (step `{s}` extracts it, later: move that step first)"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for UnsetVariable {}

/// A variable with a data column's name, found by [`Flow::variables_named_like_columns`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnClash {
    /// The first step that extracts it.
    pub step: String,
    /// The name.
    pub var: String,
}

impl fmt::Display for ColumnClash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step `{}` extracts `{}`, which is also a column of the data file: `${{{}}}` would \
             be ambiguous; rename the variable (var = \"...\") or the column",
            self.step, self.var, self.var
        )
    }
}

impl std::error::Error for ColumnClash {}

/// The `${NAME}` references in template text, in order: NAME is a variable name followed
/// by `}` (`${rand:1-5}` and other built-ins with arguments are skipped); `$${` is a literal
/// `${` and starts nothing. Built-ins without arguments (`${seq}`) are included.
pub fn template_names(text: &str) -> impl Iterator<Item = &str> + '_ {
    let b = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            if b[i..].starts_with(b"$${") {
                i += 3;
            } else if b[i..].starts_with(b"${") {
                let start = i + 2;
                let end = start
                    + b[start..]
                        .iter()
                        .take_while(|&&c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
                        .count();
                i = start;
                let name = &text[start..end];
                if b.get(end) == Some(&b'}') && is_var_name(name) {
                    i = end + 1;
                    return Some(name);
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

impl Flow {
    /// A flow of `items` with a default `think`, checked as when read.
    pub fn new(think: Think, items: Vec<Item>) -> Result<Flow, SpecError> {
        if items.is_empty() {
            return Err(SpecError::NoSteps);
        }
        let mut first_id = Vec::with_capacity(items.len());
        let mut seen: Vec<(&str, String)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            first_id.push(seen.len());
            if let Item::Loop(l) = item {
                if l.steps.is_empty() {
                    return Err(SpecError::EmptyLoop { at: item_at(i) });
                }
                if l.count == 0 || l.count > MAX_LOOP {
                    return Err(SpecError::LoopCount {
                        at: item_at(i),
                        count: i64::from(l.count),
                    });
                }
            }
            for (j, step) in item.steps().iter().enumerate() {
                let at = match item {
                    Item::Step(_) => item_at(i),
                    Item::Loop(_) => inner_at(i, j),
                };
                check_step(step, &at)?;
                if let Some((_, first)) = seen.iter().find(|(n, _)| *n == step.name) {
                    return Err(SpecError::DuplicateName {
                        name: step.name.clone(),
                        first: first.clone(),
                        second: at,
                    });
                }
                seen.push((&step.name, at));
            }
        }
        Ok(Flow {
            think,
            connection: Connection::default(),
            items,
            first_id,
        })
    }

    /// The same flow, its sessions sending on `connection`.
    #[must_use]
    pub fn with_connection(self, connection: Connection) -> Flow {
        Flow { connection, ..self }
    }

    /// Which connection its sessions send on.
    pub fn connection(&self) -> Connection {
        self.connection
    }

    /// The default pause after each step.
    pub fn think(&self) -> Think {
        self.think
    }

    /// The pause after `step`: its own, or the flow's default.
    pub fn think_after(&self, step: &Step) -> Think {
        step.think.unwrap_or(self.think)
    }

    /// The items, in order.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The steps as written (each once, loops not repeated), in order: [`StepRef::id`]
    /// indexes this sequence.
    pub fn steps(&self) -> impl Iterator<Item = &Step> + '_ {
        self.items.iter().flat_map(Item::steps)
    }

    /// How many steps are written (loops not repeated).
    pub fn step_count(&self) -> usize {
        self.items.iter().map(|i| i.steps().len()).sum()
    }

    /// How many requests one walk of the flow sends (loops repeated).
    pub fn walk_len(&self) -> u64 {
        self.items
            .iter()
            .map(|i| i.steps().len() as u64 * u64::from(i.count()))
            .sum()
    }

    /// The step at `position`, or `None` past the end.
    pub fn at(&self, position: Position) -> Option<StepRef<'_>> {
        let item = self.items.get(position.item)?;
        let step = item.steps().get(position.inner)?;
        Some(StepRef {
            step,
            id: self.first_id[position.item] + position.inner,
            item: position.item,
            iteration: position.iteration,
            position,
        })
    }

    /// The position after `position` (past the end stays past the end).
    pub fn advance(&self, mut position: Position) -> Position {
        let Some(item) = self.items.get(position.item) else {
            return position;
        };
        position.inner += 1;
        if position.inner == item.steps().len() {
            position.inner = 0;
            position.iteration += 1;
            if position.iteration == item.count() {
                position.iteration = 0;
                position.item += 1;
            }
        }
        position
    }

    /// The steps one session walks, in order, loops repeated; nothing is copied.
    pub fn walk(&self) -> impl Iterator<Item = StepRef<'_>> + '_ {
        let mut position = Position::default();
        std::iter::from_fn(move || {
            let step = self.at(position)?;
            position = self.advance(position);
            Some(step)
        })
    }

    /// [`Flow::walk`] collected: one entry per request of a walk (a loop of many turns
    /// makes a long list: prefer `walk`).
    pub fn expand(&self) -> Vec<StepRef<'_>> {
        self.walk().collect()
    }

    /// The variables the flow's steps extract, each once, in the order first extracted:
    /// the names to compile its templates with (`Template::compile_session`) and to give
    /// each session's [`crate::Vars::with_names`], so that slots agree.
    pub fn variables(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for rule in self.steps().flat_map(|s| &s.extract) {
            if !names.contains(&rule.var) {
                names.push(rule.var.clone());
            }
        }
        names
    }

    /// Each variable that has the name of one of the data file's `columns`, with the first
    /// step that extracts it: `${NAME}` would be ambiguous, so a plan must rename one. Check
    /// with [`Flow::variables_used_before_set`] before a run.
    pub fn variables_named_like_columns(&self, columns: &[String]) -> Vec<ColumnClash> {
        let mut clashes: Vec<ColumnClash> = Vec::new();
        for step in self.steps() {
            for rule in &step.extract {
                if columns.contains(&rule.var) && !clashes.iter().any(|c| c.var == rule.var) {
                    clashes.push(ColumnClash {
                        step: step.name.clone(),
                        var: rule.var.clone(),
                    });
                }
            }
        }
        clashes
    }

    /// Each `${NAME}` (not a built-in) used by a step before any step has extracted it,
    /// that is not one of the data file's `columns`: a loop's steps are checked as on its
    /// first turn. One entry per step, field and name, in order.
    pub fn variables_used_before_set(&self, columns: &[String]) -> Vec<UnsetVariable> {
        let mut set: Vec<&str> = Vec::new();
        let mut unset = Vec::new();
        let steps: Vec<&Step> = self.steps().collect();
        for (k, step) in steps.iter().enumerate() {
            for (field, text) in step.template_texts() {
                for var in template_names(text) {
                    let known = set.contains(&var)
                        || columns.iter().any(|c| c == var)
                        || BUILTIN_NAMES.iter().any(|(n, _)| *n == var);
                    let reported = unset.iter().any(|u: &UnsetVariable| {
                        u.step == step.name && u.field == field && u.var == var
                    });
                    if known || reported {
                        continue;
                    }
                    let set_later_by = steps[k..]
                        .iter()
                        .find(|s| s.extract.iter().any(|e| e.var == var))
                        .map(|s| s.name.clone());
                    unset.push(UnsetVariable {
                        step: step.name.clone(),
                        field: field.clone(),
                        var: var.to_string(),
                        set_later_by,
                    });
                }
            }
            set.extend(step.extract.iter().map(|e| e.var.as_str()));
        }
        unset
    }
}

fn item_at(i: usize) -> String {
    format!("item {}", i + 1)
}

fn inner_at(i: usize, j: usize) -> String {
    format!("step {} of the loop at item {}", j + 1, i + 1)
}

fn check_step(step: &Step, at: &str) -> Result<(), SpecError> {
    if step.name.is_empty() {
        return Err(SpecError::MissingName { at: at.to_string() });
    }
    if step.path.is_empty() {
        return Err(SpecError::MissingPath {
            name: step.name.clone(),
        });
    }
    if step.method.is_empty() {
        return Err(SpecError::EmptyMethod {
            step: step.name.clone(),
        });
    }
    if let Some((h, _)) = step.headers.iter().find(|(h, _)| !is_token(h)) {
        return Err(SpecError::BadHeaderName {
            step: step.name.clone(),
            header: h.clone(),
        });
    }
    if step.websocket && !step.method.eq_ignore_ascii_case("GET") {
        return Err(SpecError::WebSocketMethod {
            step: step.name.clone(),
            method: step.method.clone(),
        });
    }
    if step.websocket && step.sse {
        return Err(SpecError::BothStreams {
            step: step.name.clone(),
        });
    }
    if !step.websocket && !step.sse && step.reply_contains.is_some() {
        return Err(SpecError::ReplyWithoutWebSocket {
            step: step.name.clone(),
        });
    }
    Ok(())
}

/// Which connection a session sends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Connection {
    /// Its own, opened by its first request and closed when it ends: each session is a new
    /// client (tsung's and Gatling's users).
    #[default]
    PerSession,
    /// The connection of the request loop it runs on, kept from one session to the next:
    /// a client that reuses its connection for each new user (JMeter's thread keeping its
    /// connections across iterations). Cookies and variables are still per session.
    Reuse,
}

/// A flow as written.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    #[serde(default, skip_serializing_if = "is_per_session")]
    connection: Connection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    think: Option<Think>,
    #[serde(default)]
    steps: Vec<RawItem>,
}

/// An item as written: a request step's fields, or `loop` and `steps`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, with = "header_map", skip_serializing_if = "Vec::is_empty")]
    headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    think: Option<Think>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extract: Option<Vec<Extract>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    websocket: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sse: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply_contains: Option<String>,
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    steps: Option<Vec<RawItem>>,
}

impl RawItem {
    /// The first request-step field set, for a loop's error.
    fn step_field(&self) -> Option<&'static str> {
        [
            ("name", self.name.is_some()),
            ("method", self.method.is_some()),
            ("path", self.path.is_some()),
            ("headers", !self.headers.is_empty()),
            ("body", self.body.is_some()),
            ("think", self.think.is_some()),
            ("extract", self.extract.is_some()),
            ("websocket", self.websocket.is_some()),
            ("sse", self.sse.is_some()),
            ("reply_contains", self.reply_contains.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(f, _)| f)
    }

    fn into_step(self, at: &str) -> Result<Step, SpecError> {
        if self.steps.is_some() {
            return Err(SpecError::StepsWithoutLoop { at: at.to_string() });
        }
        let name = self
            .name
            .ok_or_else(|| SpecError::MissingName { at: at.to_string() })?;
        let path = self
            .path
            .ok_or_else(|| SpecError::MissingPath { name: name.clone() })?;
        Ok(Step {
            name,
            method: self.method.unwrap_or_else(|| "GET".into()),
            path,
            headers: self.headers,
            body: self.body.unwrap_or_default(),
            think: self.think,
            extract: self.extract.unwrap_or_default(),
            websocket: self.websocket.unwrap_or(false),
            sse: self.sse.unwrap_or(false),
            reply_contains: self.reply_contains,
        })
    }
}

impl From<Step> for RawItem {
    fn from(s: Step) -> RawItem {
        RawItem {
            name: Some(s.name),
            method: (s.method != "GET").then_some(s.method),
            path: Some(s.path),
            headers: s.headers,
            body: (!s.body.is_empty()).then_some(s.body),
            think: s.think,
            extract: (!s.extract.is_empty()).then_some(s.extract),
            websocket: s.websocket.then_some(true),
            sse: s.sse.then_some(true),
            reply_contains: s.reply_contains,
            ..RawItem::default()
        }
    }
}

impl TryFrom<RawFlow> for Flow {
    type Error = SpecError;

    fn try_from(raw: RawFlow) -> Result<Flow, SpecError> {
        let mut items = Vec::with_capacity(raw.steps.len());
        for (i, item) in raw.steps.into_iter().enumerate() {
            let at = item_at(i);
            let Some(count) = item.count else {
                items.push(Item::Step(item.into_step(&at)?));
                continue;
            };
            if let Some(field) = item.step_field() {
                return Err(SpecError::LoopField { at, field });
            }
            let count = u32::try_from(count)
                .ok()
                .filter(|c| (1..=MAX_LOOP).contains(c))
                .ok_or(SpecError::LoopCount {
                    at: at.clone(),
                    count,
                })?;
            let mut steps = Vec::new();
            for (j, inner) in item.steps.unwrap_or_default().into_iter().enumerate() {
                let at = inner_at(i, j);
                if inner.count.is_some() {
                    return Err(SpecError::NestedLoop { at });
                }
                steps.push(inner.into_step(&at)?);
            }
            items.push(Item::Loop(Loop { count, steps }));
        }
        Ok(Flow::new(raw.think.unwrap_or_default(), items)?.with_connection(raw.connection))
    }
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_per_session(c: &Connection) -> bool {
    *c == Connection::PerSession
}

impl From<Flow> for RawFlow {
    fn from(f: Flow) -> RawFlow {
        RawFlow {
            connection: f.connection,
            think: (f.think != Think::None).then_some(f.think),
            steps: f
                .items
                .into_iter()
                .map(|item| match item {
                    Item::Step(s) => RawItem::from(s),
                    Item::Loop(l) => RawItem {
                        count: Some(i64::from(l.count)),
                        steps: Some(l.steps.into_iter().map(RawItem::from).collect()),
                        ..RawItem::default()
                    },
                })
                .collect(),
        }
    }
}

/// Serde for headers as a table, `{ Name = "value" }`, kept in the order written.
mod header_map {
    use super::{fmt, Deserializer, MapAccess, Serializer, Visitor};

    /// Writes the headers as a map.
    pub fn serialize<S: Serializer>(h: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(h.iter().map(|(k, v)| (k, v)))
    }

    /// Reads a map of header names to values.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        d.deserialize_map(HeaderVisitor)
    }

    struct HeaderVisitor;

    impl<'de> Visitor<'de> for HeaderVisitor {
        type Value = Vec<(String, String)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of header names to values, e.g. { Accept = \"text/html\" }")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some(entry) = map.next_entry::<String, String>()? {
                out.push(entry);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::Source;
    use std::time::Duration;

    fn flow(text: &str) -> Result<Flow, String> {
        toml::from_str::<Flow>(text).map_err(|e| e.message().to_string())
    }

    const SHOP: &str = r#"
        think = "1s"

        [[steps]]
        name = "login"
        method = "POST"
        path = "/login"
        headers = { Content-Type = "application/json", Accept = "*/*" }
        body = '{"user": "${user}"}'
        think = { uniform = ["500ms", "1.5s"] }
        extract = [{ var = "token", json = "/token" }]

        [[steps]]
        loop = 3
        steps = [
            { name = "browse", path = "/items/${id}", headers = { Authorization = "Bearer ${token}" } },
            { name = "cart", method = "POST", path = "/cart", think = "2s" },
        ]

        [[steps]]
        name = "logout"
        path = "/logout"
    "#;

    #[test]
    fn reads_a_flow() {
        let f = flow(SHOP).unwrap();
        assert_eq!(f.think(), Think::Fixed(Duration::from_secs(1)));
        assert_eq!(f.items().len(), 3);
        let Item::Step(login) = &f.items()[0] else {
            panic!()
        };
        assert_eq!(login.method, "POST");
        assert_eq!(
            login.headers,
            [
                ("Content-Type".to_string(), "application/json".to_string()),
                ("Accept".to_string(), "*/*".to_string())
            ]
        );
        assert_eq!(login.body, r#"{"user": "${user}"}"#);
        assert_eq!(login.extract[0].var, "token");
        assert_eq!(login.extract[0].from, Source::JsonPointer("/token".into()));
        let Item::Loop(l) = &f.items()[1] else {
            panic!()
        };
        assert_eq!(l.count, 3);
        assert_eq!(l.steps[0].method, "GET");
        assert_eq!(l.steps[0].think, None);
        assert_eq!(f.think_after(&l.steps[0]), f.think());
        assert_eq!(
            f.think_after(&l.steps[1]),
            Think::Fixed(Duration::from_secs(2))
        );
        assert_eq!(f.step_count(), 4);
        assert_eq!(f.walk_len(), 1 + 6 + 1);
    }

    #[test]
    fn round_trips_through_json_and_toml() {
        let f = flow(SHOP).unwrap();
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<Flow>(&json).unwrap(), f, "{json}");
        let text = toml::to_string(&f).unwrap();
        assert_eq!(flow(&text).unwrap(), f, "{text}");
    }

    /// A WebSocket step: read with its reply's text, its template names checked as a
    /// request step's are, written back as read; a method other than the upgrade's GET or
    /// a `reply_contains` on a request step is refused, naming the step.
    #[test]
    fn websocket_steps() {
        let chat = r#"
            [[steps]]
            name = "login"
            method = "POST"
            path = "/login"
            extract = [{ var = "token", json = "/token" }]

            [[steps]]
            name = "join"
            websocket = true
            path = "/chat?token=${token}"
            body = '{"join": "${room}"}'
            reply_contains = '"joined": "${room}"'
            extract = [{ var = "id", json = "/id" }]
        "#;
        let f = flow(chat).unwrap();
        let Item::Step(join) = &f.items()[1] else {
            panic!()
        };
        assert!(join.websocket);
        assert_eq!(join.method, "GET");
        assert_eq!(
            join.reply_contains.as_deref(),
            Some(r#""joined": "${room}""#)
        );
        let Item::Step(login) = &f.items()[0] else {
            panic!()
        };
        assert!(!login.websocket && login.reply_contains.is_none());
        let unset = f.variables_used_before_set(&[]);
        let fields: Vec<(&str, &str)> = unset
            .iter()
            .map(|u| (u.field.as_str(), u.var.as_str()))
            .collect();
        assert_eq!(fields, [("body", "room"), ("reply_contains", "room")]);
        assert!(f.variables_used_before_set(&["room".into()]).is_empty());
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains(r#""websocket":true"#), "{json}");
        assert_eq!(serde_json::from_str::<Flow>(&json).unwrap(), f);
        let text = toml::to_string(&f).unwrap();
        assert_eq!(flow(&text).unwrap(), f, "{text}");

        let e =
            flow("[[steps]]\nname = \"a\"\nwebsocket = true\nmethod = \"POST\"\npath = \"/ws\"")
                .unwrap_err();
        assert!(
            e.contains("step `a`: a WebSocket step") && e.contains("`POST`"),
            "{e}"
        );
        let e =
            flow("[[steps]]\nname = \"a\"\npath = \"/x\"\nreply_contains = \"ok\"").unwrap_err();
        assert!(
            e.contains("step `a`: reply_contains") && e.contains("websocket = true"),
            "{e}"
        );
        let e =
            flow("[[steps]]\nloop = 2\nwebsocket = true\nsteps = [{ name = \"a\", path = \"/\" }]")
                .unwrap_err();
        assert!(e.contains("not `websocket`"), "{e}");
        // An event-stream step: any method opens it; not both kinds at once.
        let f = flow(
            "[[steps]]\nname = \"a\"\nsse = true\nmethod = \"POST\"\npath = \"/v1/chat\"\nreply_contains = \"[DONE]\"",
        )
        .unwrap();
        let Item::Step(a) = &f.items()[0] else {
            panic!()
        };
        assert!(a.sse && !a.websocket && a.method == "POST");
        let text = toml::to_string(&f).unwrap();
        assert_eq!(flow(&text).unwrap(), f, "{text}");
        let e = flow("[[steps]]\nname = \"a\"\nsse = true\nwebsocket = true\npath = \"/x\"")
            .unwrap_err();
        assert!(
            e.contains("step `a`: websocket = true or sse = true, not both"),
            "{e}"
        );
    }

    #[test]
    fn walk_unrolls_loops_by_position() {
        let f = flow(SHOP).unwrap();
        let walked: Vec<_> = f
            .walk()
            .map(|s| (s.step.name.as_str(), s.id, s.item, s.iteration))
            .collect();
        assert_eq!(
            walked,
            [
                ("login", 0, 0, 0),
                ("browse", 1, 1, 0),
                ("cart", 2, 1, 0),
                ("browse", 1, 1, 1),
                ("cart", 2, 1, 1),
                ("browse", 1, 1, 2),
                ("cart", 2, 1, 2),
                ("logout", 3, 2, 0),
            ]
        );
        let expanded = f.expand();
        assert_eq!(expanded.len() as u64, f.walk_len());
        // References into the flow, not copies.
        assert!(std::ptr::eq(expanded[1].step, expanded[3].step));
        // Positions resume a walk; past the end stays there.
        let mut p = expanded[4].position;
        p = f.advance(p);
        assert_eq!(f.at(p).unwrap().step.name, "browse");
        let end = f.advance(expanded[7].position);
        assert_eq!(f.at(end), None);
        assert_eq!(f.advance(end), end);
        let names: Vec<_> = f.steps().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["login", "browse", "cart", "logout"]);
    }

    #[test]
    fn needs_a_step_and_unique_names() {
        assert!(flow("").unwrap_err().contains("at least one step"));
        assert!(flow(r#"think = "1s""#)
            .unwrap_err()
            .contains("at least one step"));
        let e = flow(
            r#"
            [[steps]]
            name = "a"
            path = "/"
            [[steps]]
            loop = 2
            steps = [{ name = "a", path = "/x" }]
            "#,
        )
        .unwrap_err();
        assert!(
            e.contains("step name `a` is used twice (item 1 and step 1 of the loop at item 2)"),
            "{e}"
        );
    }

    #[test]
    fn steps_need_name_and_path() {
        let e = flow("[[steps]]\npath = \"/\"").unwrap_err();
        assert!(e.contains("item 1: a request step needs a `name`"), "{e}");
        let e = flow("[[steps]]\nname = \"a\"").unwrap_err();
        assert!(e.contains("step `a`: a request step needs a `path`"), "{e}");
        let e = flow("[[steps]]\nname = \"\"\npath = \"/\"").unwrap_err();
        assert!(e.contains("needs a `name`"), "{e}");
        let e = flow("[[steps]]\nname = \"a\"\npath = \"/\"\nmethod = \"\"").unwrap_err();
        assert!(e.contains("method is empty"), "{e}");
        let e = flow("[[steps]]\nname = \"a\"\npath = \"/\"\nheaders = { \"X Y\" = \"1\" }")
            .unwrap_err();
        assert!(e.contains("header `X Y` is not a header name"), "{e}");
    }

    #[test]
    fn unknown_fields_are_named_with_the_allowed_ones() {
        let e = flow("[[steps]]\nname = \"a\"\npath = \"/\"\nmethd = \"POST\"").unwrap_err();
        assert!(e.contains("unknown field `methd`"), "{e}");
        for allowed in [
            "name", "method", "path", "headers", "body", "think", "extract", "loop",
        ] {
            assert!(e.contains(&format!("`{allowed}`")), "{e}");
        }
        let e = flow("thinks = \"1s\"\n[[steps]]\nname = \"a\"\npath = \"/\"").unwrap_err();
        assert!(
            e.contains("unknown field `thinks`, expected one of `connection`, `think`, `steps`"),
            "{e}"
        );
        let e =
            flow("[[steps]]\nname = \"a\"\npath = \"/\"\nextract = [{ var = \"v\", jsn = \"/\" }]")
                .unwrap_err();
        assert!(e.contains("unknown field `jsn`"), "{e}");
    }

    #[test]
    fn loops_are_checked() {
        let e = flow("[[steps]]\nloop = 0\nsteps = [{ name = \"a\", path = \"/\" }]").unwrap_err();
        assert!(
            e.contains("item 1: loop = 0: a loop runs 1 to 1000000 times"),
            "{e}"
        );
        let e = flow("[[steps]]\nloop = -2\nsteps = [{ name = \"a\", path = \"/\" }]").unwrap_err();
        assert!(e.contains("loop = -2"), "{e}");
        let e = flow("[[steps]]\nloop = 2").unwrap_err();
        assert!(e.contains("item 1: a loop needs steps"), "{e}");
        let e = flow("[[steps]]\nloop = 2\nsteps = []").unwrap_err();
        assert!(e.contains("a loop needs steps"), "{e}");
        let e = flow("[[steps]]\nloop = 2\npath = \"/\"\nsteps = [{ name = \"a\", path = \"/\" }]")
            .unwrap_err();
        assert!(
            e.contains("a loop takes `loop` and `steps` only, not `path`"),
            "{e}"
        );
        let e = flow(
            "[[steps]]\nloop = 2\nsteps = [{ loop = 2, steps = [{ name = \"a\", path = \"/\" }] }]",
        )
        .unwrap_err();
        assert!(
            e.contains("step 1 of the loop at item 1: loops do not nest"),
            "{e}"
        );
        let e = flow("[[steps]]\nname = \"a\"\npath = \"/\"\nsteps = []").unwrap_err();
        assert!(e.contains("`steps` goes with `loop = N`"), "{e}");
        let e = flow("[[steps]]\nloop = 2\nsteps = [{ path = \"/\" }]").unwrap_err();
        assert!(
            e.contains("step 1 of the loop at item 1: a request step needs a `name`"),
            "{e}"
        );
        assert!(Flow::new(
            Think::None,
            vec![Item::Loop(Loop {
                count: MAX_LOOP + 1,
                steps: vec![Step::get("a", "/")]
            })]
        )
        .is_err());
    }

    #[test]
    fn template_names_scan() {
        let names: Vec<_> = template_names(
            "/a/${id}?t=${token}&r=${rand:1-5}&s=${seq}&$${lit}&$$${x}&${}&${a b}&${1x}&${u.v-w}",
        )
        .collect();
        // `$$${x}` is `$` then a literal `${x}`, as the template crate reads it.
        assert_eq!(names, ["id", "token", "seq", "u.v-w"]);
        assert_eq!(template_names("${unterminated").count(), 0);
        assert_eq!(template_names("$").count(), 0);
        assert_eq!(template_names("${a}${b}").collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn variables_must_be_set_before_use() {
        let f = flow(SHOP).unwrap();
        // user and id are data columns; token is extracted by login, before browse.
        assert_eq!(
            f.variables_used_before_set(&["user".into(), "id".into()]),
            []
        );
        let unset = f.variables_used_before_set(&["user".into()]);
        assert_eq!(
            unset,
            [UnsetVariable {
                step: "browse".into(),
                field: "path".into(),
                var: "id".into(),
                set_later_by: None,
            }]
        );
        assert_eq!(
            unset[0].to_string(),
            "step `browse` uses `${id}` in its path, but no earlier step extracts `id` and no \
             data column has that name"
        );

        let f = flow(
            r#"
            [[steps]]
            name = "a"
            path = "/${next}"
            headers = { X-T = "${tok}", X-U = "${tok}${seq}${uuid}" }
            body = "$${literal} ${now}"
            extract = [{ var = "next", header = "Location" }]
            [[steps]]
            loop = 2
            steps = [
                { name = "b", path = "/b?c=${csrf}" },
                { name = "c", path = "/c", extract = [{ var = "csrf", regex = 'c=(\w+)' }] },
            ]
            [[steps]]
            name = "d"
            path = "/d/${csrf}/${next}"
            extract = [{ var = "tok", header = "X-T" }]
            "#,
        )
        .unwrap();
        let unset = f.variables_used_before_set(&[]);
        let short: Vec<_> = unset
            .iter()
            .map(|u| {
                (
                    u.step.as_str(),
                    u.field.as_str(),
                    u.var.as_str(),
                    u.set_later_by.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            short,
            [
                ("a", "path", "next", Some("a")),
                ("a", "header `X-T`", "tok", Some("d")),
                ("a", "header `X-U`", "tok", Some("d")),
                ("b", "path", "csrf", Some("c")),
            ]
        );
        assert!(unset[0].to_string().contains("it extracts `next` itself"));
        assert!(unset[3]
            .to_string()
            .contains("step `c` extracts it, later: move that step first"));
    }

    #[test]
    fn variables_are_listed_once_and_must_not_be_columns() {
        let f = flow(
            r#"
            [[steps]]
            name = "a"
            path = "/"
            extract = [{ var = "token", json = "/t" }, { var = "id", json = "/id" }]
            [[steps]]
            loop = 2
            steps = [{ name = "b", path = "/", extract = [{ var = "id", header = "X" }, { var = "csrf", header = "Y" }] }]
            "#,
        )
        .unwrap();
        assert_eq!(f.variables(), ["token", "id", "csrf"]);
        assert_eq!(f.variables_named_like_columns(&["user".into()]), []);
        let clashes = f.variables_named_like_columns(&["id".into(), "csrf".into()]);
        assert_eq!(
            clashes,
            [
                ColumnClash {
                    step: "a".into(),
                    var: "id".into()
                },
                ColumnClash {
                    step: "b".into(),
                    var: "csrf".into()
                }
            ]
        );
        assert!(clashes[0]
            .to_string()
            .starts_with("step `a` extracts `id`, which is also a column of the data file"));
    }

    #[test]
    fn flows_built_in_code_are_checked_too() {
        let ok = Flow::new(Think::None, vec![Item::Step(Step::get("a", "/"))]).unwrap();
        assert_eq!(ok.walk_len(), 1);
        assert_eq!(
            Flow::new(
                Think::None,
                vec![
                    Item::Step(Step::get("a", "/")),
                    Item::Step(Step::get("a", "/b"))
                ]
            ),
            Err(SpecError::DuplicateName {
                name: "a".into(),
                first: "item 1".into(),
                second: "item 2".into()
            })
        );
        assert_eq!(Flow::new(Think::None, vec![]), Err(SpecError::NoSteps));
    }

    #[test]
    fn a_flow_opens_a_connection_per_session_unless_it_says_reuse() {
        let one = "[[steps]]\nname = \"a\"\npath = \"/\"\n";
        let f: Flow = toml::from_str(one).unwrap();
        assert_eq!(f.connection(), Connection::PerSession);
        let f: Flow = toml::from_str(&format!("connection = \"reuse\"\n{one}")).unwrap();
        assert_eq!(f.connection(), Connection::Reuse);
        // It survives the round trip an agent's workload makes.
        let back: Flow = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        let err = toml::from_str::<Flow>(&format!("connection = \"pooled\"\n{one}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("per-session") && err.contains("reuse"),
            "{err}"
        );
    }
}
