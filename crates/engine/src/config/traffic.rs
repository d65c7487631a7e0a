//! [`Traffic`]: requests that vary, as the user described them (before validation):
//! `${...}` templates in the workload's own URL, headers and body, a data file's rows, and a
//! list of named requests sent in proportion to their weights (a targets file, or a plan
//! scenario's `[[scenario.request]]`). It travels inside a [`super::Workload`], so an agent
//! receives it as text and compiles it itself; the data rows travel too (an agent's share
//! only).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use loadlab_template::{Data, Order as DataOrder};

/// The most request names one run may count separately: each costs a latency histogram
/// per worker thread.
pub const MAX_NAMES: usize = 32;
/// The most requests one list may hold (a targets file).
pub const MAX_REQUESTS: usize = 100_000;

/// How the requests of a list are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MixOrder {
    /// In turn, each in proportion to its weight, evenly interleaved (smooth weighted round
    /// robin): the proportions are exact over every cycle of the weights.
    #[default]
    RoundRobin,
    /// At random, each with probability weight / total.
    Random,
}

impl MixOrder {
    /// The value as flags and plans spell it.
    pub fn name(self) -> &'static str {
        match self {
            MixOrder::RoundRobin => "round-robin",
            MixOrder::Random => "random",
        }
    }
}

impl std::str::FromStr for MixOrder {
    type Err = String;

    /// Reads `round-robin` (or `sequential`, vegeta's word for it) or `random`.
    fn from_str(s: &str) -> Result<MixOrder, String> {
        match s {
            "round-robin" | "round_robin" | "sequential" => Ok(MixOrder::RoundRobin),
            "random" => Ok(MixOrder::Random),
            _ => Err("\"round-robin\" or \"random\"".into()),
        }
    }
}

/// One request of a list, as written (templates not yet compiled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedRequest {
    /// The name its results count under; `None`: its method and URL path as written
    /// (`GET /users/${id}`).
    #[serde(default)]
    pub name: Option<String>,
    /// Its share of the load, relative to the others' (at least 1).
    #[serde(default = "one")]
    pub weight: u32,
    /// HTTP method.
    #[serde(default = "get")]
    pub method: String,
    /// A URL on the workload's server (same scheme, host and port), or a path from `/`.
    pub url: String,
    /// Headers, `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Body text.
    #[serde(default)]
    pub body: String,
    /// Where it was written, for errors: a file (`targets.txt`) or a plan's place.
    #[serde(default)]
    pub origin: String,
    /// Line of its first line in `origin` (1-based; 0: not from a file).
    #[serde(default)]
    pub line: usize,
    /// Where its body came from (`@body.json` of a targets file), for errors; its text
    /// starts on line 1 there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_origin: Option<String>,
    /// Column of the URL on `line` (0: not from a file).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub url_col: usize,
    /// Where each header's value starts in `origin`, (line, column), parallel to `headers`
    /// ((0, 0): not from the file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub header_at: Vec<(usize, usize)>,
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl NamedRequest {
    /// A request of a targets file, sent with `common` headers first (a plan scenario's).
    pub fn from_target(t: loadlab_template::TargetSpec, common: &[String]) -> NamedRequest {
        NamedRequest {
            name: t.name,
            weight: 1,
            method: t.method,
            url: t.url,
            headers: common.iter().cloned().chain(t.headers).collect(),
            body: t.body.unwrap_or_default(),
            origin: t.file,
            line: t.line,
            body_origin: t.body_path.or(t.body_file),
            url_col: t.url_col,
            header_at: common.iter().map(|_| (0, 0)).chain(t.header_at).collect(),
        }
    }
}

fn one() -> u32 {
    1
}

fn get() -> String {
    "GET".into()
}

/// Where a run starts in the data rows and in `${seq}`: a new run starts at 0; a step of an
/// experiment starts where the one before it ended, so `unique` stays unique across steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// Rows already taken (the next row's index, before wrapping around).
    pub next_row: u64,
    /// `${seq}` values already handed out.
    pub next_seq: u64,
}

/// Requests that vary. The default is one fixed request: the workload's own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Traffic {
    /// Requests sent in one load; empty: the workload's own URL and request, which may hold
    /// templates.
    pub requests: Vec<NamedRequest>,
    /// How the list is taken.
    pub order: MixOrder,
    /// The data file's rows (in a distributed run, this machine's share), shared: a step
    /// of an experiment does not copy them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Arc<Data>>,
    /// How rows are drawn.
    pub data_order: DataOrder,
    /// Where this run starts.
    pub resume: Resume,
    /// `${seq}` of a distributed run: this machine is part `seq_part` of `seq_parts`, and
    /// hands out the values `k × parts + part + 1` (so no two machines share one). 0 parts:
    /// alone.
    pub seq_parts: u64,
    /// This machine's part (below `seq_parts`).
    pub seq_part: u64,
    /// A flow: every arrival (open loop) or user (closed loop) is a session that sends its
    /// steps in order, with think times, extract rules and a cookie jar. Its steps are the
    /// run's requests and names; `requests` is then empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<loadlab_session::Flow>,
    /// Which series of steps this traffic belongs to (a plan's scenario name): a
    /// coordinator keeps each agent's place in the rows per key between steps.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
}

impl Traffic {
    /// Nothing varies and there is no list: the workload's fixed request.
    pub fn is_fixed(&self) -> bool {
        self.requests.is_empty() && self.data.is_none() && self.flow.is_none()
    }

    /// Nothing set (what a workload of one fixed request has; not sent over the wire).
    pub fn is_default(&self) -> bool {
        *self == Traffic::default()
    }

    /// This traffic as part `part` of `parts` machines: its share of the data rows (so
    /// that `unique` stays unique) and of `${seq}`.
    #[must_use]
    pub fn share(&self, part: usize, parts: usize) -> Traffic {
        Traffic {
            data: self.data.as_ref().map(|d| Arc::new(d.share(part, parts))),
            seq_parts: parts as u64,
            seq_part: part as u64,
            ..self.clone()
        }
    }
}
