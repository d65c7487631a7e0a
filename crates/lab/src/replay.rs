//! A log's mix as a load's requests (`replay_mix` in a plan, `--replay-mix` on the command
//! line): [`loadlab_replay::mix`] read within the engine's limits, each distinct request a
//! [`NamedRequest`] whose URL, headers and body are the logged text (a `${` in them is not
//! a template); and the same log at its times (`--replay`: [`timed`], the engine's
//! [`Replay`] of a [`LogTimeline`]).

use std::sync::Arc;

use loadlab_engine::config::traffic::{NamedRequest, MAX_NAMES, MAX_REQUESTS};
use loadlab_engine::replay::{Replay, ReplaySource};
use loadlab_replay::mix::{mix, Limits, Shape};
use loadlab_replay::name::NameRule;
use loadlab_replay::timeline::Timeline;
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

/// A log read for replay: its requests (each distinct one a [`NamedRequest`]), the
/// paragraph that says what was read, replayed and left out, when its requests were made,
/// and its arrivals at their times.
pub struct Loaded {
    /// One per distinct request, weighted by its count, in the order the log first has them.
    pub requests: Vec<NamedRequest>,
    /// What was read, replayed and left out.
    pub report: String,
    /// When its replayed requests were made.
    pub shape: Shape,
    /// Its arrivals at their times, each the index of its request in `requests`.
    pub timeline: Arc<LogTimeline>,
}

/// A log to replay at its times, step by step (`replay` in a plan, `knee --replay`): its
/// shape and its arrivals. A step's load is a multiple of the log's speed.
#[derive(Debug)]
pub struct TimedLog {
    /// When its replayed requests were made.
    pub shape: Shape,
    /// Its arrivals.
    pub timeline: Arc<LogTimeline>,
}

/// One step of a [`TimedLog`].
#[derive(Clone, Debug)]
pub struct TimedStep {
    /// The engine's replay: the log's busiest stretch the step lasts, at its speed.
    pub replay: Replay,
    /// The mean rate it offers, req/s.
    pub rate: f64,
    /// Its measured duration: the step's, or less when the log is shorter.
    pub duration: std::time::Duration,
}

/// The shortest measured step a log too short for the step is replayed in.
const SHORTEST_STEP: std::time::Duration = std::time::Duration::from_millis(500);

impl TimedLog {
    /// The log at `speed` for `warmup` then `duration`: its busiest stretch of
    /// `(warmup + duration) × speed` (a knee step is a multiple of the log's peak, not of
    /// its quiet hours); the whole log, in a shorter step, when it is no longer.
    pub fn step(
        &self,
        speed: f64,
        warmup: std::time::Duration,
        duration: std::time::Duration,
    ) -> TimedStep {
        let speed = if speed.is_finite() && speed > 0.0 {
            speed
        } else {
            1.0
        };
        let wall = (warmup + duration).as_secs_f64();
        let seconds = (wall * speed).ceil() as usize;
        let (from_ns, count) = self.shape.busiest(seconds);
        let stretch_s = (self.shape.span_s() - from_ns as f64 / 1e9).min(seconds as f64);
        let lasts = (stretch_s / speed - warmup.as_secs_f64()).max(SHORTEST_STEP.as_secs_f64());
        TimedStep {
            replay: Replay {
                source: self.timeline.clone(),
                speed,
                from_ns,
            },
            rate: count as f64 / stretch_s.max(1e-9) * speed,
            duration: duration.min(std::time::Duration::from_secs_f64(lasts)),
        }
    }
}

/// A log's arrivals at their times, as the engine's timed replay reads them.
#[derive(Debug)]
pub struct LogTimeline(Timeline);

impl ReplaySource for LogTimeline {
    fn arrivals(&self) -> Result<Box<dyn Iterator<Item = (u64, u32)> + Send>, String> {
        Ok(Box::new(self.0.arrivals().map_err(|e| e.to_string())?))
    }
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
    load(path, format, policy, rules, common, false).map(|l| (l.requests, l.report))
}

/// The log at `path` read for replay (as [`requests`]; `timed`: to be sent at its times,
/// as its report says).
pub fn load(
    path: &std::path::Path,
    format: Option<&Format>,
    policy: &Policy,
    rules: &[NameRule],
    common: &[String],
    timed: bool,
) -> Result<Loaded, String> {
    let m = mix(
        path,
        format,
        policy,
        Limits {
            rules,
            names: MAX_NAMES,
            requests: MAX_REQUESTS,
            timed,
        },
    )
    .map_err(|e| e.to_string())?;
    let timeline = Arc::new(LogTimeline(Timeline::new(path, format, policy, &m)));
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
    Ok(Loaded {
        requests,
        report: m.report,
        shape: m.shape,
        timeline,
    })
}

/// A timed replay of `loaded` at `speed`: the engine's [`Replay`], the mean rate it offers
/// (req/s), and the time it lasts; `Err`: why the log cannot be replayed at its times.
pub fn timed(
    loaded: &Loaded,
    path: &std::path::Path,
    speed: f64,
) -> Result<(Replay, f64, std::time::Duration), String> {
    let shape = &loaded.shape;
    if !(speed.is_finite() && speed > 0.0) {
        return Err(format!(
            "--speed {speed}: give a positive number (2: twice as fast)"
        ));
    }
    if shape.untimed > 0 || shape.timed() == 0 {
        return Err(format!(
            "{}: {} of its replayed requests have no time, so they cannot be sent at their times: replay its mix at a rate instead (--replay-mix)",
            path.display(),
            shape.untimed
        ));
    }
    let span = shape.span_s() / speed;
    Ok((
        Replay {
            source: loaded.timeline.clone(),
            speed,
            from_ns: 0,
        },
        shape.mean_rate() * speed,
        std::time::Duration::from_secs_f64(span.max(0.001)),
    ))
}
