//! Requests that vary, compiled: the run's kinds of request (its one request, or each
//! request of a list) with their templates compiled once, the data rows, the names results
//! count under, and what each worker draws per request (a kind, a row, a `${seq}`).
//!
//! Validation ([`crate::config::Workload::validate`]) builds a [`Traffic`] once; every
//! worker shares it and keeps a [`TrafficWorker`] of its own (its random state and its
//! place in the weighted round robin). The request loop takes a [`Planned`] per request
//! from [`Traffic::plan`] when it is about to send it; the transports render it with
//! [`Traffic::draw`] into buffers they reuse, so the hot path allocates nothing for HTTP/1.1.

use std::sync::atomic::{AtomicBool, Ordering};

use loadlab_template::{Cursor, Data, Draw, Generator, Order, Origin, Slot, Template};

use crate::config::error::{value_err, ConfigError, Field};
use crate::config::traffic::{MixOrder, NamedRequest, Traffic as Spec, MAX_NAMES, MAX_REQUESTS};
use crate::config::values::parse_header;
use crate::recorder::{NameMap, Planned};

/// One kind of request of a run, its parts compiled.
#[derive(Debug)]
pub struct Kind {
    /// The name its results count under (its own, or method and path as written).
    pub name: String,
    /// Method, upper-cased.
    pub method: String,
    /// Path and query.
    pub path: Template,
    /// Headers: the name as given, the value compiled.
    pub headers: Vec<(String, Template)>,
    /// Body.
    pub body: Template,
    /// gRPC: the request message, rendered per call into its frame (the body then unused).
    pub message: Option<loadlab_grpc::CompiledMessage>,
}

/// The run's requests, compiled: shared by every worker.
#[derive(Debug)]
pub struct Traffic {
    /// The kinds of request, in the order given.
    pub kinds: Vec<Kind>,
    /// The names results count under, in order of first appearance; empty for a run of one
    /// unnamed request (results for the whole only).
    pub names: Vec<String>,
    /// Each kind's name.
    name_of_kind: Vec<u32>,
    /// Each kind's weight.
    weights: Vec<u32>,
    /// Every weight is the same (a targets file): kinds are taken by a counter or a uniform
    /// draw, not by a pass over the weights (a file may hold 100,000 requests).
    uniform: bool,
    order: MixOrder,
    data: Option<std::sync::Arc<Data>>,
    data_order: Order,
    cursor: Cursor,
    /// `${seq}` of a distributed run: this machine's part of how many.
    seq_parts: u64,
    seq_part: u64,
    /// Set once `unique` has used every row: no request is planned after that.
    used_up: AtomicBool,
    /// Notes for the reader (names merged, …).
    pub notes: Vec<String>,
    /// A flow: kind `i` is the flow's step `i` (as written), and every arrival or user is a
    /// session ([`crate::session`]). `None`: independent requests.
    pub flow: Option<FlowPlan>,
}

/// A flow, compiled: the steps' order, think times and extract rules, and the names of the
/// variables its templates read (in the slots [`loadlab_session::Vars::values`] fills).
#[derive(Debug)]
pub struct FlowPlan {
    /// The flow as read (its steps' templates are compiled into the run's kinds).
    pub flow: loadlab_session::Flow,
    /// The session variables, in slot order.
    pub vars: Vec<String>,
    /// Whether a step's response must be kept (it has extract rules), by step id.
    pub captures: Vec<bool>,
    /// A WebSocket step's `reply_contains`, compiled as its body is, by step id.
    pub replies: Vec<Option<Template>>,
    /// Requests one complete session sends (loops unrolled).
    pub requests_per_session: u64,
}

/// What a worker keeps to draw requests: its random state and its round-robin place.
#[derive(Debug)]
pub struct TrafficWorker {
    /// Random numbers for the templates and for random orders.
    pub gen: Generator,
    /// Smooth weighted round robin: each kind's current weight.
    current: Vec<i64>,
    total: i64,
    /// Plain round robin (equal weights): requests planned so far.
    turn: u64,
}

impl Traffic {
    /// The data file's column names (empty without one): what `${COLUMN}` may name.
    pub fn columns(&self) -> Vec<String> {
        self.data
            .as_ref()
            .map(|d| d.columns().to_vec())
            .unwrap_or_default()
    }

    /// Compiles `spec` for a run whose own request is `(method, path, headers, body)` (the
    /// path as written, with any templates), or `None` when nothing varies (the fixed
    /// request's fast path). `base` is the workload's `scheme://authority`, which every
    /// URL of a list must share.
    pub(crate) fn compile(
        spec: &Spec,
        base: &Base,
        own: OwnRequest<'_>,
        multiplexed: bool,
    ) -> Result<Option<Traffic>, ConfigError> {
        let own_templated = own.is_templated();
        if let Some(flow) = &spec.flow {
            return compile_flow(spec, flow, base, multiplexed).map(Some);
        }
        if spec.is_fixed() && !own_templated {
            return Ok(None);
        }
        if spec.requests.len() > MAX_REQUESTS {
            return Err(value_err(
                Field::Targets,
                format!("{} requests", spec.requests.len()),
                format!("at most {MAX_REQUESTS} requests in one load"),
            ));
        }
        let columns: Vec<String> = spec
            .data
            .as_ref()
            .map(|d| d.columns().to_vec())
            .unwrap_or_default();
        let mut kinds = Vec::new();
        let mut weights = Vec::new();
        let mut explicit = Vec::new();
        if spec.requests.is_empty() {
            kinds.push(own.compile(&columns, spec.data.as_deref())?);
            weights.push(1);
            explicit.push(false);
        } else {
            for r in &spec.requests {
                if r.weight == 0 {
                    return Err(value_err(
                        Field::Targets,
                        format!("{} weight 0", r.where_()),
                        "a weight of at least 1",
                    ));
                }
                kinds.push(compile_named(r, base, &columns, multiplexed)?);
                weights.push(r.weight);
                explicit.push(r.name.is_some());
            }
        }
        if let Some(data) = &spec.data {
            for k in &kinds {
                k.path.check_data(data)?;
                for (_, v) in &k.headers {
                    v.check_data(data)?;
                }
            }
        }
        let (names, name_of_kind, notes) = if spec.requests.is_empty() {
            (Vec::new(), Vec::new(), Vec::new())
        } else {
            name_kinds(&kinds, &explicit, &spec.requests)?
        };
        Ok(Some(Traffic {
            kinds,
            names,
            name_of_kind,
            uniform: weights.windows(2).all(|w| w[0] == w[1]),
            weights,
            order: spec.order,
            data: spec.data.clone(),
            data_order: spec.data_order,
            cursor: Cursor::starting_at(spec.resume.next_row, spec.resume.next_seq + 1),
            seq_parts: spec.seq_parts.max(1),
            seq_part: spec.seq_part,
            used_up: AtomicBool::new(false),
            notes,
            flow: None,
        }))
    }

    /// Which name each kind counts under, for the recorders.
    pub fn name_map(&self) -> NameMap {
        if self.names.is_empty() {
            NameMap::default()
        } else {
            NameMap::new(self.name_of_kind.clone())
        }
    }

    /// Each name's share of the requests (weights summed per name over the total).
    pub fn name_shares(&self) -> Vec<f64> {
        let total: u64 = self.weights.iter().map(|&w| u64::from(w)).sum();
        let mut shares = vec![0.0; self.names.len()];
        for (k, &w) in self.weights.iter().enumerate() {
            if let Some(&n) = self.name_of_kind.get(k) {
                shares[n as usize] += f64::from(w) / total as f64;
            }
        }
        shares
    }

    /// A worker's drawing state, seeded from the run's seed and its index.
    pub fn worker(&self, seed: u64, index: usize) -> TrafficWorker {
        TrafficWorker {
            gen: Generator::new(seed, index),
            current: if self.uniform {
                Vec::new()
            } else {
                vec![0; self.kinds.len()]
            },
            total: self.weights.iter().map(|&w| i64::from(w)).sum(),
            // Workers start their turns apart, so that together they cover every kind.
            turn: index as u64,
        }
    }

    /// Plans the request intended at `intended`: its kind and its row. `None` once
    /// `unique` has used every row (the run ends there).
    #[inline]
    pub fn plan(&self, w: &mut TrafficWorker, intended: u64) -> Option<Planned> {
        let kind = self.pick_kind(w);
        let row = match &self.data {
            None => Planned::NO_ROW,
            Some(data) => match data.pick(self.data_order, &self.cursor, &mut w.gen) {
                Some(r) => r as u32,
                None => {
                    self.used_up.store(true, Ordering::Relaxed);
                    return None;
                }
            },
        };
        Some(Planned {
            intended,
            kind,
            row,
        })
    }

    /// A data row for a session (`NO_ROW` without data); `None` once `unique` has used every
    /// row.
    #[inline]
    pub fn pick_row(&self, w: &mut TrafficWorker) -> Option<u32> {
        match &self.data {
            None => Some(Planned::NO_ROW),
            Some(data) => match data.pick(self.data_order, &self.cursor, &mut w.gen) {
                Some(r) => Some(r as u32),
                None => {
                    self.used_up.store(true, Ordering::Relaxed);
                    None
                }
            },
        }
    }

    /// A request that failed before it could be sent (it waited past its deadline): a kind
    /// only, so that it counts under a name; no row is used.
    #[inline]
    pub fn plan_unsent(&self, w: &mut TrafficWorker, intended: u64) -> Planned {
        Planned {
            intended,
            // A session that never started fails at its first step.
            kind: if self.flow.is_some() {
                0
            } else {
                self.pick_kind(w)
            },
            row: Planned::NO_ROW,
        }
    }

    fn pick_kind(&self, w: &mut TrafficWorker) -> u32 {
        let n = self.weights.len();
        if n == 1 {
            return 0;
        }
        match (self.order, self.uniform) {
            (MixOrder::RoundRobin, true) => {
                let k = w.turn % n as u64;
                w.turn += 1;
                k as u32
            }
            (MixOrder::Random, true) => rand::Rng::gen_range(w.gen.rng(), 0..n as u32),
            (MixOrder::RoundRobin, false) => {
                // Smooth weighted round robin (nginx's upstream choice): each kind gains its
                // weight, the largest is chosen and loses the total.
                let mut best = 0;
                for k in 0..n {
                    w.current[k] += i64::from(self.weights[k]);
                    if w.current[k] > w.current[best] {
                        best = k;
                    }
                }
                w.current[best] -= w.total;
                best as u32
            }
            (MixOrder::Random, false) => {
                let mut x = rand::Rng::gen_range(w.gen.rng(), 0..w.total);
                for (k, &wt) in self.weights.iter().enumerate() {
                    x -= i64::from(wt);
                    if x < 0 {
                        return k as u32;
                    }
                }
                (n - 1) as u32
            }
        }
    }

    /// What the templates of request `p` share: its `${seq}` (drawn now) and its row.
    #[inline]
    pub fn draw(&self, p: Planned) -> Draw<'_> {
        let seq = self.cursor.next_seq_strided(self.seq_parts, self.seq_part);
        let row = match (&self.data, p.row) {
            (Some(d), r) if r != Planned::NO_ROW => Some(d.row(r as usize)),
            _ => None,
        };
        Draw::new(seq, row)
    }

    /// The kind of request `p`.
    #[inline]
    pub fn kind(&self, p: Planned) -> &Kind {
        &self.kinds[p.kind as usize]
    }

    /// Whether `unique` has used every row.
    pub fn used_up(&self) -> bool {
        self.used_up.load(Ordering::Relaxed)
    }

    /// Whether rows are drawn once each (`unique`), so the run may end on them.
    pub fn unique_rows(&self) -> Option<usize> {
        match (&self.data, self.data_order) {
            (Some(d), Order::Unique) => Some(d.len()),
            _ => None,
        }
    }

    /// Where the next run resumes: rows and `${seq}` values taken so far.
    pub fn resume(&self) -> crate::config::traffic::Resume {
        crate::config::traffic::Resume {
            next_row: self.cursor.rows_taken(),
            next_seq: self.cursor.seqs_taken(),
        }
    }

    /// The data file's rows, if any.
    pub fn data(&self) -> Option<&Data> {
        self.data.as_deref()
    }

    /// How rows are drawn.
    pub fn data_order(&self) -> Order {
        self.data_order
    }

    /// How the requests of a list are taken.
    pub fn order(&self) -> MixOrder {
        self.order
    }
}

/// The workload's `scheme://host:port`, which every URL of a list must name.
#[derive(Clone, Debug)]
pub(crate) struct Base {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Host as written in the URL.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// The workload's own request, as given (the run's one request when there is no list).
pub(crate) struct OwnRequest<'a> {
    /// Method, upper-cased.
    pub method: &'a str,
    /// Path and query as written (templates intact).
    pub path: &'a str,
    /// Column of the path in the URL as given (1-based), for errors.
    pub path_col: usize,
    /// Headers, parsed.
    pub headers: &'a [(String, String)],
    /// Body.
    pub body: &'a [u8],
    /// gRPC: the message's template, when it holds any.
    pub message: Option<&'a loadlab_grpc::MessageTemplate>,
}

impl OwnRequest<'_> {
    fn is_templated(&self) -> bool {
        self.message.is_some()
            || Template::has_expressions(self.path)
            || self
                .headers
                .iter()
                .any(|(_, v)| Template::has_expressions(v))
            || std::str::from_utf8(self.body).is_ok_and(Template::has_expressions)
    }

    fn compile(&self, columns: &[String], data: Option<&Data>) -> Result<Kind, ConfigError> {
        let origin = Origin::new("URL", 1, self.path_col.max(1));
        let path = Template::parse(self.path, Slot::Url, &origin, columns)?;
        let mut headers = Vec::with_capacity(self.headers.len());
        for (i, (name, value)) in self.headers.iter().enumerate() {
            let origin = Origin::flag(&format!("--header {} ({name})", i + 1));
            headers.push((
                name.clone(),
                Template::parse(value, Slot::Header, &origin, columns)?,
            ));
        }
        let body = match std::str::from_utf8(self.body) {
            Ok(text) => Template::parse(text, Slot::Body, &Origin::flag("--body"), columns)?,
            // A binary body holds no templates.
            Err(_) => Template::literal(self.body.to_vec()),
        };
        let message = match self.message {
            Some(t) => Some(loadlab_grpc::CompiledMessage::compile(t, data, "-D")?),
            None => None,
        };
        Ok(Kind {
            name: format!("{} {}", self.method, self.path),
            method: self.method.to_string(),
            path,
            headers,
            body,
            message,
        })
    }
}

impl NamedRequest {
    /// Where it was written, for messages: `targets.txt:5` or a plan's place.
    pub(crate) fn where_(&self) -> String {
        match self.line {
            0 => self.origin.clone(),
            n => format!("{}:{n}", self.origin),
        }
    }

    fn origin_at(&self, what: &str) -> Origin {
        let source = if self.line == 0 {
            format!("{} {what}", self.origin)
        } else {
            self.origin.clone()
        };
        Origin::new(source, self.line.max(1), 1)
    }

    /// Where the URL starts (its column on the request line of a targets file).
    fn url_origin(&self) -> Origin {
        let mut o = self.origin_at("url");
        o.col = self.url_col.max(1);
        o
    }

    /// Where header `i`'s value starts.
    fn header_origin(&self, i: usize, name: &str) -> Origin {
        match self.header_at.get(i) {
            Some(&(line, col)) if line > 0 => Origin::new(self.origin.clone(), line, col),
            _ => self.origin_at(&format!("header {name}")),
        }
    }
}

/// Compiles one request of a list: its URL checked against the workload's server.
fn compile_named(
    r: &NamedRequest,
    base: &Base,
    columns: &[String],
    multiplexed: bool,
) -> Result<Kind, ConfigError> {
    let method = r.method.trim().to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(value_err(
            Field::Method,
            format!("{} ({})", r.method, r.where_()),
            "an HTTP method such as GET or POST",
        ));
    }
    let path = path_of(&r.url, base).map_err(|allowed| {
        value_err(
            Field::Targets,
            format!("{} ({})", r.url, r.where_()),
            allowed,
        )
    })?;
    // The path is the URL's tail: its column moves by what was cut.
    let mut origin = r.url_origin();
    origin.col += r.url.trim_start().len().saturating_sub(path.len());
    let path_t = Template::parse(&path, Slot::Url, &origin, columns)?;
    let mut headers = Vec::with_capacity(r.headers.len());
    for (i, h) in r.headers.iter().enumerate() {
        let (name, value) = parse_header(h).map_err(|allowed| {
            value_err(Field::Header, format!("{h} ({})", r.where_()), allowed)
        })?;
        if multiplexed && crate::config::values::is_connection_header(&name) {
            return Err(value_err(
                Field::Header,
                format!("{name} ({})", r.where_()),
                "no connection-specific headers over HTTP/2",
            ));
        }
        let origin = r.header_origin(i, &name);
        headers.push((
            name,
            Template::parse(&value, Slot::Header, &origin, columns)?,
        ));
    }
    let body_origin = match &r.body_origin {
        Some(file) => Origin::new(file.clone(), 1, 1),
        None => r.origin_at("body"),
    };
    let body = Template::parse(&r.body, Slot::Body, &body_origin, columns)?;
    Ok(Kind {
        name: r
            .name
            .clone()
            .unwrap_or_else(|| format!("{method} {}", path_only(&path))),
        method,
        path: path_t,
        headers,
        body,
        message: None,
    })
}

/// The path and query of `url`, a path from `/` or a URL on `base`'s server.
/// A flow's steps as the run's kinds (kind `i` is step `i`, counted under its own name),
/// their templates compiled with the session's variables.
fn compile_flow(
    spec: &Spec,
    flow: &loadlab_session::Flow,
    base: &Base,
    multiplexed: bool,
) -> Result<Traffic, ConfigError> {
    if multiplexed {
        return Err(value_err(
            Field::Flow,
            "over HTTP/2 or gRPC",
            "flows over HTTP/1.1 (a session keeps its own connection and cookies)",
        ));
    }
    if !spec.requests.is_empty() {
        return Err(value_err(
            Field::Flow,
            "with a list of requests",
            "a flow's steps or a list of requests (--targets), not both",
        ));
    }
    if flow.step_count() > MAX_NAMES {
        return Err(value_err(
            Field::Flow,
            format!("{} steps", flow.step_count()),
            format!("at most {MAX_NAMES} steps written (each keeps its own latency histogram; a loop's steps count once)"),
        ));
    }
    let columns: Vec<String> = spec
        .data
        .as_ref()
        .map(|d| d.columns().to_vec())
        .unwrap_or_default();
    if let Some(unset) = flow.variables_used_before_set(&columns).first() {
        return Err(value_err(Field::Flow, "", unset.to_string()));
    }
    if let Some(clash) = flow.variables_named_like_columns(&columns).first() {
        return Err(value_err(Field::Flow, "", clash.to_string()));
    }
    let vars = flow.variables();
    let data = spec.data.as_deref();
    let mut kinds = Vec::with_capacity(flow.step_count());
    let mut replies = Vec::with_capacity(flow.step_count());
    for step in flow.steps() {
        let at = |what: &str| Origin::flag(&format!("flow step `{}` {what}", step.name));
        if Template::has_expressions(&step.method) {
            return Err(value_err(
                Field::Flow,
                format!("step `{}` method {}", step.name, step.method),
                "a literal method (templates go in the path, headers and body)",
            ));
        }
        // A path that is a variable (`${next}`, a link taken from a response) is sent as
        // the value renders.
        let path = if step.path.trim_start().starts_with("${") {
            Ok(step.path.trim().to_string())
        } else {
            path_of(&step.path, base)
        }
        .map_err(|allowed| {
            value_err(
                Field::Flow,
                format!("step `{}` path {}", step.name, step.path),
                allowed,
            )
        })?;
        let path_t = Template::compile_session(&path, Slot::Url, &at("path"), data, &vars)?;
        let mut headers = Vec::with_capacity(step.headers.len());
        for (name, value) in &step.headers {
            if name.eq_ignore_ascii_case("cookie") {
                return Err(value_err(
                    Field::Flow,
                    format!("step `{}` header Cookie", step.name),
                    "cookies from the session's jar (Set-Cookie of earlier responses); set other values in another header",
                ));
            }
            headers.push((
                name.clone(),
                Template::compile_session(
                    value,
                    Slot::Header,
                    &at(&format!("header {name}")),
                    data,
                    &vars,
                )?,
            ));
        }
        let body = Template::compile_session(&step.body, Slot::Body, &at("body"), data, &vars)?;
        replies.push(
            step.reply_contains
                .as_ref()
                .map(|r| {
                    Template::compile_session(r, Slot::Body, &at("reply_contains"), data, &vars)
                })
                .transpose()?,
        );
        kinds.push(Kind {
            name: step.name.clone(),
            method: step.method.to_ascii_uppercase(),
            path: path_t,
            headers,
            body,
            message: None,
        });
    }
    // Each step's weight is how often one session sends it: the names' shares of the
    // requests.
    let mut weights = vec![0u32; kinds.len()];
    for s in flow.walk() {
        weights[s.id] = weights[s.id].saturating_add(1);
    }
    let names: Vec<String> = kinds.iter().map(|k| k.name.clone()).collect();
    Ok(Traffic {
        name_of_kind: (0..kinds.len() as u32).collect(),
        names,
        uniform: false,
        weights,
        kinds,
        order: MixOrder::RoundRobin,
        data: spec.data.clone(),
        data_order: spec.data_order,
        cursor: Cursor::starting_at(spec.resume.next_row, spec.resume.next_seq + 1),
        seq_parts: spec.seq_parts.max(1),
        seq_part: spec.seq_part,
        used_up: AtomicBool::new(false),
        notes: Vec::new(),
        flow: Some(FlowPlan {
            captures: flow.steps().map(|s| !s.extract.is_empty()).collect(),
            replies,
            requests_per_session: flow.walk_len(),
            vars,
            flow: flow.clone(),
        }),
    })
}

fn path_of(url: &str, base: &Base) -> Result<String, String> {
    let url = url.trim();
    if url.starts_with('/') {
        return Ok(url.to_string());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("a URL (http://host:port/path) or a path from /".into());
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if Template::has_expressions(authority) {
        return Err("templates in the path, query, headers and body only: every request of one load goes to one server".into());
    }
    let parsed = url::Url::parse(&format!("{scheme}://{authority}/"))
        .map_err(|e| format!("not a URL: {e}"))?;
    let host = match parsed.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => String::new(),
    };
    let port = parsed.port_or_known_default().unwrap_or(80);
    if parsed.scheme() != base.scheme || host != base.host || port != base.port {
        return Err(format!(
            "every request of one load goes to one server: {}://{}:{} (this one names {}://{host}:{port})",
            base.scheme,
            base.host,
            base.port,
            parsed.scheme()
        ));
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Ok(path)
}

/// The path without its query, for a request's default name.
fn path_only(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// The names results count under, each kind's name among them, and notes.
type Naming = (Vec<String>, Vec<u32>, Vec<String>);

/// The names of the kinds: each kind's own; kinds of one name share it. More than
/// [`MAX_NAMES`] default names (a targets file of many URLs) fall back to the method
/// alone, and say so; more explicit names than that are refused.
fn name_kinds(
    kinds: &[Kind],
    explicit: &[bool],
    requests: &[NamedRequest],
) -> Result<Naming, ConfigError> {
    let mut notes = Vec::new();
    let distinct = |names: &mut dyn Iterator<Item = String>| {
        let mut seen: Vec<String> = Vec::new();
        let of_kind: Vec<u32> = names
            .map(|n| match seen.iter().position(|s| *s == n) {
                Some(i) => i as u32,
                None => {
                    seen.push(n);
                    (seen.len() - 1) as u32
                }
            })
            .collect();
        (seen, of_kind)
    };
    let (mut names, mut of_kind) = distinct(&mut kinds.iter().map(|k| k.name.clone()));
    if names.len() > MAX_NAMES {
        let explicit_names = {
            let mut e: Vec<&str> = kinds
                .iter()
                .zip(explicit)
                .filter(|(_, &x)| x)
                .map(|(k, _)| k.name.as_str())
                .collect();
            e.sort_unstable();
            e.dedup();
            e.len()
        };
        if explicit_names > MAX_NAMES {
            return Err(value_err(
                Field::Targets,
                format!("{explicit_names} request names"),
                format!("at most {MAX_NAMES} names (each keeps its own latency histogram); give requests that belong together one name"),
            ));
        }
        let fallback = names.len();
        (names, of_kind) = distinct(&mut kinds.iter().zip(explicit).map(|(k, &x)| {
            if x {
                k.name.clone()
            } else {
                k.method.clone()
            }
        }));
        notes.push(format!(
            "{} requests have {fallback} different methods and paths, more than the {MAX_NAMES} names results are kept for: requests without a name (`# @name` in a targets file) count under their method alone ({})",
            requests.len(),
            names.join(", ")
        ));
    }
    Ok((names, of_kind, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Base {
        Base {
            scheme: "http",
            host: "127.0.0.1".into(),
            port: 8080,
        }
    }

    fn req(name: Option<&str>, weight: u32, url: &str) -> NamedRequest {
        NamedRequest {
            name: name.map(str::to_string),
            weight,
            method: "get".into(),
            url: url.into(),
            headers: vec![],
            body: String::new(),
            origin: "targets.txt".into(),
            line: 3,
            body_origin: None,
            url_col: 5,
            header_at: vec![],
        }
    }

    fn own() -> OwnRequest<'static> {
        OwnRequest {
            method: "GET",
            path: "/",
            path_col: 1,
            headers: &[],
            body: b"",
            message: None,
        }
    }

    #[test]
    fn urls_of_a_list_name_the_workloads_server() {
        assert_eq!(path_of("/a?b=1", &base()).unwrap(), "/a?b=1");
        assert_eq!(
            path_of("http://127.0.0.1:8080/x/${id}", &base()).unwrap(),
            "/x/${id}"
        );
        assert_eq!(path_of("http://127.0.0.1:8080", &base()).unwrap(), "/");
        assert_eq!(path_of("http://127.0.0.1:8080?q", &base()).unwrap(), "/?q");
        let e = path_of("http://127.0.0.1:9090/x", &base()).unwrap_err();
        assert!(e.contains("one server"), "{e}");
        let e = path_of("http://${host}:8080/x", &base()).unwrap_err();
        assert!(e.contains("templates in the path"), "{e}");
    }

    #[test]
    fn weighted_round_robin_is_exact_and_interleaved() {
        let spec = Spec {
            requests: vec![
                req(Some("a"), 3, "/a"),
                req(Some("b"), 1, "/b"),
                req(None, 1, "/c?x=1"),
            ],
            ..Spec::default()
        };
        let t = Traffic::compile(&spec, &base(), own(), false)
            .unwrap()
            .unwrap();
        assert_eq!(t.names, ["a", "b", "GET /c"]);
        assert_eq!(t.name_shares(), [0.6, 0.2, 0.2]);
        let mut w = t.worker(1, 0);
        let kinds: Vec<u32> = (0..10).map(|i| t.plan(&mut w, i).unwrap().kind).collect();
        assert_eq!(kinds.iter().filter(|&&k| k == 0).count(), 6);
        assert_eq!(kinds.iter().filter(|&&k| k == 1).count(), 2);
        // Interleaved: never three of `a` in a row.
        assert!(!kinds.windows(3).any(|w| w == [0, 0, 0]), "{kinds:?}");
    }

    #[test]
    fn random_order_keeps_the_proportions() {
        let spec = Spec {
            requests: vec![req(Some("a"), 9, "/a"), req(Some("b"), 1, "/b")],
            order: MixOrder::Random,
            ..Spec::default()
        };
        let t = Traffic::compile(&spec, &base(), own(), false)
            .unwrap()
            .unwrap();
        let mut w = t.worker(7, 0);
        let b = (0..20_000)
            .filter(|&i| t.plan(&mut w, i).unwrap().kind == 1)
            .count();
        assert!((1_700..2_300).contains(&b), "{b}");
    }

    #[test]
    fn too_many_default_names_fall_back_to_the_method() {
        let mut requests: Vec<NamedRequest> = (0..40)
            .map(|i| req(None, 1, &format!("/item/{i}")))
            .collect();
        requests.push(req(Some("checkout"), 1, "/checkout"));
        let spec = Spec {
            requests,
            ..Spec::default()
        };
        let t = Traffic::compile(&spec, &base(), own(), false)
            .unwrap()
            .unwrap();
        assert_eq!(t.names, ["GET", "checkout"]);
        assert!(
            t.notes[0].contains("count under their method alone"),
            "{:?}",
            t.notes
        );
    }

    #[test]
    fn a_fixed_request_compiles_to_nothing() {
        assert!(Traffic::compile(&Spec::default(), &base(), own(), false)
            .unwrap()
            .is_none());
        let templated = OwnRequest {
            path: "/x/${seq}",
            ..own()
        };
        let t = Traffic::compile(&Spec::default(), &base(), templated, false)
            .unwrap()
            .unwrap();
        assert!(t.names.is_empty());
        let mut w = t.worker(1, 0);
        let p = t.plan(&mut w, 5).unwrap();
        let mut out = Vec::new();
        let draw = t.draw(p);
        t.kind(p).path.render(&draw, &mut w.gen, &mut out);
        assert_eq!(out, b"/x/1");
    }
}
