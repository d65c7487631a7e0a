//! A log's mix as a load's requests (`replay_mix` in a plan, `--replay-mix` on the command
//! line): [`loadlab_replay::mix`] read within the engine's limits, each distinct request a
//! [`NamedRequest`] whose URL, headers and body are the logged text (a `${` in them is not
//! a template).

use loadlab_engine::config::traffic::{NamedRequest, MAX_NAMES, MAX_REQUESTS};
use loadlab_replay::mix::{mix, Limits};
use loadlab_replay::name::NameRule;
use loadlab_replay::{Format, Policy};
use loadlab_template::Template;

/// A window's end as written (ISO 8601, the common log format's time, or a number since
/// the epoch): ns since the epoch; `Err`: why it is not a time.
pub fn window_end(text: Option<&str>) -> Result<Option<u64>, String> {
    text.map(|t| {
        loadlab_replay::time::any(t).ok_or_else(|| {
            format!("{t:?} is not a time: ISO 8601 (2023-11-14T08:00:00Z), 14/Nov/2023:08:00:00 +0000, or seconds since the epoch")
        })
    })
    .transpose()
}

/// The replay policy of `methods` (upper-cased; none: GET and HEAD) and `keep` (headers
/// sent although they carry a session or credentials).
pub fn policy(methods: &[String], keep: &[String]) -> Policy {
    let mut p = Policy::default();
    if !methods.is_empty() {
        p.methods = methods
            .iter()
            .map(|m| m.trim().to_ascii_uppercase())
            .collect();
    }
    p.keep = keep.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
    p
}

/// Name rules as written (`PATTERN=NAME`); `Err`: the first that cannot be read, and why.
pub fn name_rules(rules: &[String]) -> Result<Vec<NameRule>, String> {
    rules
        .iter()
        .map(|r| {
            r.parse()
                .map_err(|e: loadlab_replay::name::NameRuleError| e.to_string())
        })
        .collect()
}

/// The requests of the log at `path` (each also sending `common` headers; named by
/// `rules`, else by their folded path), and the paragraph that says what was read,
/// replayed and left out; `Err`: why the log gives no load.
pub fn requests(
    path: &std::path::Path,
    format: Option<&Format>,
    policy: &Policy,
    rules: &[NameRule],
    common: &[String],
) -> Result<(Vec<NamedRequest>, String), String> {
    let m = mix(
        path,
        format,
        policy,
        Limits {
            rules,
            names: MAX_NAMES,
            requests: MAX_REQUESTS,
        },
    )
    .map_err(|e| e.to_string())?;
    let origin = path.display().to_string();
    let requests = m
        .requests
        .into_iter()
        .map(|r| NamedRequest {
            name: Some(r.name),
            weight: u32::try_from(r.weight).unwrap_or(u32::MAX),
            url: Template::escape(&r.target),
            headers: common
                .iter()
                .cloned()
                .chain(
                    r.headers
                        .iter()
                        .map(|(h, v)| format!("{h}: {}", Template::escape(v))),
                )
                .collect(),
            body: Template::escape(&r.body),
            method: r.method,
            origin: origin.clone(),
            line: usize::try_from(r.line).unwrap_or(usize::MAX),
            body_origin: None,
            url_col: 0,
            header_at: Vec::new(),
        })
        .collect();
    Ok((requests, m.report))
}
