//! How the reports read and word a knee: from a search's outcome ([`range_words`]) or from
//! fixed steps ([`fixed_knee`]), so that the terminal, report.md, report.html, the answer
//! and `compare` say the same.

use loadlab_lab::bundle::StepRecord;
use loadlab_lab::knee::KneeOutcome;
use loadlab_lab::plan::Plan;
use loadlab_lab::verdict::Limit;

use crate::format::load as num;

/// The knee of one search in words: `between 40 and 41.25 req/s`, `at least 100000 req/s`,
/// `below 10 req/s`, or why none was measured.
pub fn range_words(o: &KneeOutcome, unit: &str) -> String {
    let at = o.first_unsustained.map_or("?".into(), num);
    match o.limited_by {
        Some(Limit::Rejected) => {
            return format!("not measured: the server rejected the request at {at} {unit}")
        }
        Some(Limit::Unreachable) => {
            return format!("not measured: nothing answered at the address ({at} {unit} tried)")
        }
        _ => {}
    }
    match (o.knee, o.first_unsustained, o.stopped) {
        (Some(lo), Some(hi), _) => format!("between {} and {} {unit}", num(lo), num(hi)),
        (Some(lo), None, Some(s)) => format!(
            "at least {} {unit} (the search stopped at {}: {})",
            num(lo),
            num(s.at),
            s.by.describe()
        ),
        (Some(lo), None, None) => format!(
            "at least {} {unit} (sustained at the highest load tried)",
            num(lo)
        ),
        (None, Some(hi), _) => format!(
            "below {} {unit} (the first load tried was not sustained)",
            num(hi)
        ),
        (None, None, _) => "not measured".into(),
    }
}

/// The unit of a plan's loads.
pub fn unit(plan: &Plan) -> &'static str {
    plan.unit()
}

/// What a closed-loop step counts: streams over HTTP/2 and gRPC, connections over HTTP/1.1,
/// open connections (WebSocket) or open streams (server-sent events) when every step's
/// protocol is that one.
pub fn closed_unit<'a>(steps: impl Iterator<Item = &'a StepRecord>) -> &'static str {
    let steps: Vec<&StepRecord> = steps.collect();
    if !steps.is_empty() && steps.iter().all(|s| s.result.sessions.is_some()) {
        "users"
    } else if steps.iter().any(|s| s.result.protocol.multiplexed()) {
        "concurrent streams"
    } else {
        common_protocol(&steps).map_or("connections", |p| p.units().held)
    }
}

/// What an open-loop step's rate counts: sessions per second for flows, else the rate of
/// the steps' protocol (`req/s`, `msg/s` for WebSocket messages), `req/s` when they mix.
pub fn open_unit<'a>(steps: impl Iterator<Item = &'a StepRecord>) -> &'static str {
    let steps: Vec<&StepRecord> = steps.collect();
    if !steps.is_empty() && steps.iter().all(|s| s.result.sessions.is_some()) {
        "sessions/s"
    } else if !steps.is_empty() && steps.iter().all(|s| replayed(s)) {
        loadlab_lab::plan::TIMES_THE_LOG
    } else {
        common_protocol(&steps).map_or("req/s", |p| p.units().rate)
    }
}

/// A step of a log replayed at its times: its load is a multiple of the log's speed.
pub fn replayed(s: &StepRecord) -> bool {
    s.result
        .traffic
        .as_ref()
        .is_some_and(|t| t.replay.is_some())
}

/// The protocol every step ran, if they agree.
fn common_protocol(steps: &[&StepRecord]) -> Option<loadlab_engine::Protocol> {
    let first = steps.first()?.result.protocol;
    steps
        .iter()
        .all(|s| s.result.protocol == first)
        .then_some(first)
}

/// The knee as a range: "between 775 and 800", "at least 800" (never unsustained), "below
/// 100" (not even the lowest).
pub fn knee_cell(best: Option<f64>, fail: Option<f64>) -> String {
    match (best, fail) {
        (Some(b), Some(f)) => format!("between {} and {}", num(b), num(f)),
        (Some(b), None) => format!("at least {}", num(b)),
        (None, Some(f)) => format!("below {}", num(f)),
        (None, None) => "unknown".into(),
    }
}

/// What fixed steps say of the knee.
pub struct FixedKnee {
    /// The highest sustained step below `fail`.
    pub best: Option<f64>,
    /// The first step the server itself did not sustain.
    pub fail: Option<f64>,
    /// What failed there.
    pub limit: Option<Limit>,
    /// A sustained step above one that was not.
    pub non_monotonic: Option<String>,
    /// The first step above `best` (and below `fail`) that says nothing about the server,
    /// and what limited it (loadlab, an agent, the data, an interruption).
    pub stopped: Option<(f64, Limit)>,
    /// Every step was sustained.
    pub all_sustained: bool,
}

/// The highest sustained step below the first step the server itself did not sustain
/// (a generator-limited, agent-lost or interrupted step says nothing about the server).
pub fn fixed_knee(list: &[&StepRecord]) -> FixedKnee {
    // Not the server's doing: whatever else such a step missed, loadlab's lateness or its
    // own ports and descriptors, a lost agent, an interruption or data used up could have
    // caused it.
    let not_the_server = |l: &Limit| {
        matches!(
            l,
            Limit::GeneratorLimited
                | Limit::ClientLimited
                | Limit::AgentLost
                | Limit::Interrupted
                | Limit::RowsUsedUp
        )
    };
    let says_nothing = |s: &StepRecord| s.verdict.limits.iter().any(not_the_server);
    let server_limit = |s: &StepRecord| {
        (!says_nothing(s))
            .then(|| s.verdict.limits.first().copied())
            .flatten()
    };
    let fail = list
        .iter()
        .filter(|s| server_limit(s).is_some())
        .min_by(|a, b| a.load.total_cmp(&b.load));
    let best = list
        .iter()
        .filter(|s| s.verdict.sustained && fail.is_none_or(|f| s.load < f.load))
        .map(|s| s.load)
        .reduce(f64::max);
    let above = fail.and_then(|f| {
        list.iter()
            .filter(|s| s.verdict.sustained && s.load > f.load)
            .map(|s| s.load)
            .reduce(f64::max)
    });
    // Where the range stops short of a server failure: the first step above the highest
    // sustained one that says nothing about the server (loadlab was the limit there).
    let stopped = list
        .iter()
        .filter(|s| {
            says_nothing(s)
                && best.is_none_or(|b| s.load > b)
                && fail.is_none_or(|f| s.load < f.load)
        })
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .and_then(|s| {
            let by = s.verdict.limits.iter().copied().find(not_the_server)?;
            Some((s.load, by))
        });
    FixedKnee {
        best,
        fail: fail.map(|s| s.load),
        limit: fail
            .and_then(|s| server_limit(s))
            .or(stopped.map(|(_, by)| by)),
        stopped,
        all_sustained: list.iter().all(|s| s.verdict.sustained),
        non_monotonic: above.zip(fail).map(|(a, f)| {
            format!(
                "sustained at {} above {}, which was not sustained",
                num(a),
                num(f.load)
            )
        }),
    }
}

/// The knee fixed steps show, in words with `unit`: `between 10 and 50 req/s`, `at least
/// 800 req/s (every step sustained)`, `at least 40 req/s (the step at 160 req/s was
/// generator-limited: it says nothing about the server)`, `below 10 req/s (the first step
/// was not sustained)`.
pub fn fixed_words(f: &FixedKnee, unit: &str) -> String {
    let stopped = |(at, by): (f64, Limit)| {
        format!(
            "the step at {} {unit} was {}: it says nothing about the server",
            num(at),
            by.describe()
        )
    };
    match (f.best, f.fail, f.stopped) {
        (Some(b), Some(x), _) => format!("between {} and {} {unit}", num(b), num(x)),
        (Some(b), None, Some(s)) => format!("at least {} {unit} ({})", num(b), stopped(s)),
        (Some(b), None, None) if f.all_sustained => {
            format!("at least {} {unit} (every step sustained)", num(b))
        }
        (Some(b), None, None) => format!("at least {} {unit} (the highest step sustained)", num(b)),
        (None, Some(x), _) => {
            format!("below {} {unit} (the first step was not sustained)", num(x))
        }
        (None, None, Some(s)) => format!("not measured ({})", stopped(s)),
        (None, None, None) => "not measured".into(),
    }
}
