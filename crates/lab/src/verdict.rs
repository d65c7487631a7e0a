//! Whether a step was sustained, and if not, what limited it.

use loadlab_engine::stats;
use loadlab_engine::RunResult;
use serde::{Deserialize, Serialize};

use crate::gate::Figures;
use crate::plan::Slo;

/// What stopped a step from being sustained, most decisive first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// A target exited during the step.
    TargetCrashed,
    /// loadlab itself fell behind: the step says nothing about the server.
    GeneratorLimited,
    /// An agent of a distributed run was lost during the step: its share is missing, and
    /// the step says nothing about the server.
    AgentLost,
    /// Every row of the data file had been sent once (`unique`) before the step's end: the
    /// step ran short, and no later step has rows to send. A knee search stops there.
    RowsUsedUp,
    /// The server answered most requests with a 4xx status other than 429 (too many
    /// requests) and 408 (request timeout): the request is wrong, not the load, and a knee
    /// search stops there.
    Rejected,
    /// Nothing answered at the address: every connection was refused and no request
    /// succeeded (nothing listens there). No load measures anything; a knee search stops.
    Unreachable,
    /// More failed requests than the SLO allows.
    Errors,
    /// p99 latency above the SLO.
    Latency,
    /// Achieved less than the SLO's fraction of offered.
    Throughput,
    /// Stopped by the user.
    Interrupted,
    /// loadlab ran out of its own local ports or file descriptors, and without those
    /// failures the errors clause would have held: the step says nothing of the server
    /// beyond it, and a knee search stops there.
    ClientLimited,
}

impl Limit {
    /// Words for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::TargetCrashed => "target crashed",
            Limit::GeneratorLimited => "generator-limited",
            Limit::AgentLost => "agent lost",
            Limit::RowsUsedUp => "data rows used up",
            Limit::Rejected => "request rejected",
            Limit::Unreachable => "unreachable",
            Limit::Errors => "errors",
            Limit::Latency => "latency",
            Limit::ClientLimited => "loadlab-limited (its ports or descriptors)",
            Limit::Throughput => "throughput",
            Limit::Interrupted => "interrupted",
        }
    }
}

/// The judgement of one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Every SLO held (or missed it by less than the step can resolve).
    pub sustained: bool,
    /// The SLO clauses that failed, most decisive first.
    pub limits: Vec<Limit>,
    /// Clauses the step's figures appear to miss but too few requests can resolve at
    /// [`CONFIDENCE`](stats::CONFIDENCE) (one sentence each, with the count that would), or
    /// that loadlab's own lateness could have failed while another clause failed beyond its
    /// reach (see [`lag_cannot_explain`]): they do not fail the step.
    #[serde(default)]
    pub unresolved: Vec<String>,
    /// Why loadlab's own lateness did not decide the step although the run noted it (see
    /// [`lag_cannot_explain`]): one sentence with the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_excused: Option<String>,
    /// A run of named requests: the names that missed their SLO, each with what it
    /// missed (their limits are among `limits` too). Empty when every name held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<NameVerdict>,
}

/// One request name that missed its SLO.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameVerdict {
    /// The request name.
    pub name: String,
    /// The clauses it failed (errors, latency, throughput).
    pub limits: Vec<Limit>,
}

impl Verdict {
    /// The names that failed, in words: `checkout (latency), search (errors)`.
    pub fn names_failed(&self) -> Option<String> {
        (!self.names.is_empty()).then(|| {
            self.names
                .iter()
                .map(|n| {
                    let l: Vec<&str> = n.limits.iter().map(|l| l.describe()).collect();
                    format!("{} ({})", n.name, l.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
    }
}

use loadlab_engine::format::pct_abs as pct;

/// A count clause: `bad` of `n` against the rate `bound`. Fails only when resolved at
/// [`CONFIDENCE`](stats::CONFIDENCE); a miss the count cannot resolve is described in `unresolved`.
fn count_clause(bad: u64, n: u64, bound: f64, what: &str, unresolved: &mut Vec<String>) -> bool {
    if bad as f64 <= bound * n as f64 {
        return false;
    }
    if stats::resolvably_above(bad, n, bound) {
        return true;
    }
    let needed = match stats::min_resolvable(n, bound) {
        Some(k) => format!("{k} would"),
        None => "no count would".into(),
    };
    unresolved.push(format!(
        "{bad} of {n} {what} ({}): above the {} bound, but {n} are too few to tell that from chance ({needed})",
        pct(bad as f64 / n as f64),
        pct(bound),
    ));
    false
}

/// The failures that were loadlab's own (no local port, no file descriptor): where the
/// errors clause fails with them and holds without them, the step is limited by loadlab, not
/// the server (`errors` becomes [`Limit::ClientLimited`]).
fn client_limited(r: &RunResult, slo: &Slo, limits: &mut Vec<Limit>) {
    use loadlab_engine::ErrorClass;
    let own = r
        .errors
        .sum_of(&[ErrorClass::LocalPortExhaustion, ErrorClass::FdExhaustion]);
    if own == 0 || !limits.contains(&Limit::Errors) {
        return;
    }
    let f = Figures::of_run(r);
    let (bad, n) = (
        f.errors_total.saturating_sub(own),
        f.attempts.saturating_sub(own),
    );
    if n == 0 || !count_clause(bad, n, slo.max_error_rate, "", &mut Vec::new()) {
        limits.retain(|l| *l != Limit::Errors);
        limits.push(Limit::ClientLimited);
    }
}

/// Responses slower than `bound_ms` (from a latency histogram, encoded).
fn slower_than(histogram: &str, bound_ms: f64) -> u64 {
    let Ok(h) = loadlab_engine::records::decode_histogram(histogram) else {
        return 0;
    };
    let bound_us = (bound_ms * 1000.0) as u64;
    h.iter_recorded()
        .filter(|v| h.lowest_equivalent(v.value_iterated_to()) > bound_us)
        .map(|v| v.count_at_value())
        .sum()
}

impl Limit {
    /// The request or the address is wrong, not the load: more load measures nothing, so
    /// a knee search and a plan's remaining fixed steps stop there.
    pub fn not_the_load(self) -> bool {
        matches!(self, Limit::Rejected | Limit::Unreachable)
    }
}

/// True when nothing answered: no request succeeded and refused connections are at least
/// half of the attempts.
pub fn unreachable(r: &RunResult) -> bool {
    let refused = r
        .errors
        .sum_of(&[loadlab_engine::ErrorClass::ConnectRefused]);
    r.successful == 0 && refused > 0 && refused * 2 >= r.attempts()
}

/// 4xx statuses that say the load, not the request, is the matter: 429 (too many
/// requests) and 408 (request timeout) are a server shedding work, as a 503 is.
pub const LOAD_STATUSES: [&str; 2] = ["429", "408"];

/// Responses with a 4xx status that says the request is wrong (all but
/// [`LOAD_STATUSES`]), and the requests attempted, when they are at least half of them.
pub fn rejected(r: &RunResult) -> Option<(u64, u64)> {
    let n: u64 = r
        .status_codes
        .iter()
        .filter(|(c, _)| c.starts_with('4') && !LOAD_STATUSES.contains(&c.as_str()))
        .map(|(_, n)| *n)
        .sum();
    let attempts = r.attempts();
    (n > 0 && n * 2 >= attempts).then_some((n, attempts))
}

/// The `q` percentile of a step's latency, ms: p99 from the result, others from its
/// histogram.
pub fn percentile_of(f: &Figures<'_>, q: f64) -> Option<f64> {
    if q == 99.0 {
        return f.latency.p99;
    }
    let h = loadlab_engine::records::decode_histogram(f.histogram).ok()?;
    (!h.is_empty()).then(|| h.value_at_quantile(q / 100.0) as f64 / 1000.0)
}

/// Judges a step's result against the SLO. Each clause fails only on a difference the
/// step resolves at [`CONFIDENCE`](stats::CONFIDENCE):
/// - errors: the failures, as a count out of the requests, against `max_error_rate`; held
///   server streams also their stream-seconds that missed a message, out of those held;
/// - latency: the responses slower than `p99_ms`, as a count, against 1 %;
/// - throughput (open loop): the server kept pace with the arrivals (the latency trend's
///   resolved slope) within `min_achieved_ratio`; failures are the error clause's.
pub fn judge(r: &RunResult, slo: &Slo, crashed: bool) -> Verdict {
    let mut limits = Vec::new();
    let mut unresolved = Vec::new();
    if crashed {
        limits.push(Limit::TargetCrashed);
    }
    if r.stop_reason == loadlab_engine::result::StopReason::Interrupted {
        limits.push(Limit::Interrupted);
    }
    if r.agents.iter().any(|a| a.lost.is_some()) {
        limits.push(Limit::AgentLost);
    }
    if r.stop_reason == loadlab_engine::result::StopReason::RowsUsedUp {
        limits.push(Limit::RowsUsedUp);
    }
    if rejected(r).is_some() {
        limits.push(Limit::Rejected);
    }
    if unreachable(r) {
        limits.push(Limit::Unreachable);
    }
    let before = limits.len();
    server_clauses(&Figures::of_run(r), slo, "", &mut limits, &mut unresolved);
    let run_failed = limits[before..].to_vec();
    // Every request name is judged on its own figures, by its own bounds if it has any.
    let mut names = Vec::new();
    for n in &r.by_name {
        let mut failed = Vec::new();
        let prefix = format!("{}: ", n.name);
        server_clauses(
            &Figures::of_name(n),
            slo.for_name(&n.name),
            &prefix,
            &mut failed,
            &mut unresolved,
        );
        if !failed.is_empty() {
            for l in &failed {
                if !limits.contains(l) {
                    limits.push(*l);
                }
            }
            names.push(NameVerdict {
                name: n.name.clone(),
                limits: failed,
            });
        }
    }
    let mut generator_excused = None;
    if r.generator_limited {
        // Each clause is weighed on the figures that failed it: the whole run's, or a name's.
        let mut scopes = vec![Scope {
            figures: Figures::of_run(r),
            slo,
            name: None,
            failed: &run_failed,
        }];
        for v in &names {
            if let Some(n) = r.by_name.iter().find(|n| n.name == v.name) {
                scopes.push(Scope {
                    figures: Figures::of_name(n),
                    slo: slo.for_name(&n.name),
                    name: Some(&n.name),
                    failed: &v.limits,
                });
            }
        }
        match lag_cannot_explain(r, &limits, &scopes) {
            Some(excuse) => {
                // A clause the lateness could have failed is not counted against the
                // server: the step fails on the others, which it could not have.
                for (l, why) in excuse.within_reach {
                    limits.retain(|x| *x != l);
                    for n in &mut names {
                        n.limits.retain(|x| *x != l);
                    }
                    unresolved.push(why);
                }
                names.retain(|n| !n.limits.is_empty());
                generator_excused = Some(excuse.why);
            }
            None => limits.push(Limit::GeneratorLimited),
        }
    }
    // After the lateness is weighed: the errors clause is judged beyond its reach there, as
    // it was before loadlab's own failures were told apart.
    client_limited(r, slo, &mut limits);
    limits.sort();
    Verdict {
        sustained: limits.is_empty(),
        limits,
        unresolved,
        generator_excused,
        names,
    }
}

/// The clauses that judge the server, on a run's figures or one name's: errors, each
/// latency bound, throughput. Failed ones are added to `limits`; a miss the counts cannot
/// resolve is described in `unresolved`, after `prefix` (a name, or nothing).
fn server_clauses(
    f: &Figures<'_>,
    slo: &Slo,
    prefix: &str,
    limits: &mut Vec<Limit>,
    unresolved: &mut Vec<String>,
) {
    let mut notes = Vec::new();
    // Held server streams are judged per stream-second too: a starved stream fails one
    // wait per timeout, which against a fed stream's message every gap is too few to
    // count, but it misses every second it is held.
    let starved = f.starved.is_some_and(|(failed, held)| {
        count_clause(
            failed,
            held,
            slo.max_error_rate,
            "stream-seconds missed a message",
            &mut notes,
        )
    });
    if f.attempts == 0
        || count_clause(
            f.errors_total,
            f.attempts,
            slo.max_error_rate,
            "requests failed",
            &mut notes,
        )
        || starved
    {
        limits.push(Limit::Errors);
    }
    // Each latency bound: the responses slower than it, as a count, against the share the
    // percentile allows (1 % for p99).
    let mut latency_failed = false;
    for (q, bound) in slo.latency_bounds() {
        let over = match percentile_of(f, q) {
            Some(v) => v > bound,
            None => false,
        };
        if over {
            let slow = slower_than(f.histogram, bound);
            let what = format!("responses slower than {bound} ms (p{q})");
            if count_clause(slow, f.latency.count, 1.0 - q / 100.0, &what, &mut notes) {
                latency_failed = true;
            }
        }
    }
    if latency_failed {
        limits.push(Limit::Latency);
    }
    if f.offered_rps.is_some() && f.successful > 0 {
        match f.trend {
            Some(t) if t.pace < slo.min_achieved_ratio => limits.push(Limit::Throughput),
            Some(_) => {}
            None => notes.push(format!(
                "throughput not judged: {} successful requests are too few to tell a growing queue from latency spread (at least {})",
                f.successful,
                stats::MIN_TREND_SAMPLES
            )),
        }
    }
    unresolved.extend(notes.into_iter().map(|n| format!("{prefix}{n}")));
}

/// The longest a request of `r` waited in loadlab before its send (`before_send_ms_max`),
/// ms, when it is notably longer than the worst schedule lag: more than a tenth and 1 ms
/// over it (a wait for a free connection behind the late release; a send always comes a
/// few microseconds after its release). `None` otherwise, or without the figure.
pub fn waited_before_send(r: &RunResult) -> Option<f64> {
    let lag = r.schedule_lag_ms.max;
    r.before_send_ms_max.filter(|&b| b > lag * 1.1 + 1.0)
}

/// A worker thread at most this busy (a fraction of its time over the step) takes each
/// reply in as it comes and frees its connection then.
pub const FREES_CONNECTIONS_BUSY: f64 = 0.5;

/// Whether the requests of `r` that waited before their send waited for the server rather
/// than for loadlab: every worker thread at most [`FREES_CONNECTIONS_BUSY`] busy (each
/// connection freed as its reply came) and, in open loop, the pool under its ceiling (a
/// request with no free connection got a new one, at once). Such a wait is for connections
/// the server kept busy with requests it had not answered, and for new ones it was slow to
/// accept (a full listen queue: a SYN sent again after a second; descriptors it had run out
/// of): the server's latency, as a client with any number of connections would see it. A
/// closed loop queues nothing: a request waits only for its own connection to open (the
/// step's connections are the load, not a ceiling). An open-loop pool at its ceiling is
/// loadlab's own limit, and a busy worker may have been slow to free a connection: their
/// waits stay loadlab's.
pub fn queued_for_the_server(r: &RunResult) -> bool {
    let w = &r.worker_cpu_utilization;
    !w.is_empty()
        && w.iter()
            .all(|u| u.is_finite() && *u <= FREES_CONNECTIONS_BUSY)
        && (r.model == loadlab_engine::config::Model::Closed
            || r.connections_opened < r.max_connections)
}

/// How far behind (`(1 − pace) × window`) a server must fall, in multiples of loadlab's
/// lateness `L`, before lateness cannot be what failed the throughput clause. Sends up to
/// `L` late move each completion by at most `L`. The pace is the lower of two rates, and
/// neither moves by more than `2 L` of the window for it: the middle half of the
/// completions can spread by at most `L` (half the window plus `L`: `2 L` behind over the
/// window), and the least-squares latency slope by at most `L × E[(x − x̄)₊] / Var(x)` =
/// `1.5 L / window` for sends even across the window (`1.5 L` behind). A server left idle
/// by a late release makes the time up if it has capacity to spare, and one already
/// behind has a queue to work on and loses none; the third `L` is for a server with little
/// to spare (at its capacity exactly, the step is the knee either way).
pub const BEHIND_PER_LATENESS: f64 = 3.0;

/// What failed a step's clauses: the whole run's figures, or one request name's, with the
/// SLO that judged them and the clauses they failed.
pub struct Scope<'a> {
    /// The figures.
    pub figures: Figures<'a>,
    /// The SLO they were judged by (a name's own bounds, where it has any).
    pub slo: &'a Slo,
    /// The request name; `None` for the whole run.
    pub name: Option<&'a str>,
    /// The server clauses these figures failed.
    pub failed: &'a [Limit],
}

/// Why a run's late sends did not decide its step: see [`lag_cannot_explain`].
#[derive(Clone, Debug, PartialEq)]
pub struct LagExcuse {
    /// One sentence with the figures, for the verdict.
    pub why: String,
    /// Failed clauses the lateness could have caused, each with the sentence saying so:
    /// they are not counted against the server (the step failed on the others).
    pub within_reach: Vec<(Limit, String)>,
}

/// A run noted as generator-limited only because some sends left late (no worker thread
/// was CPU-bound, no agent lost) still judges the server when the lateness could not have
/// changed the verdict. Every send left within the schedule's worst lag `L` of its
/// intended instant, so:
/// - the load was offered as planned but for the arrivals released after the window's
///   end: when every clause held, the step is sustained if their share is within the
///   throughput clause's tolerance, `1 − min_achieved_ratio` (open loop). The engine counts
///   them (`sent_after_window`); a result without the count is bounded by the arrivals of
///   the window's last `L`, `L / window`. Lateness only made latency look worse (it counts
///   from the intended send time) and the arrivals burstier, never the load lighter;
/// - when clauses failed, the step is the server's (not sustained) if at least one of them
///   is far beyond what `L` can cause, on the figures that failed it (the whole run's, or a
///   request name's with its own bounds: [`Scope`]; `scopes[0]` is the whole run's): latency — the responses slower than the bound plus
///   `L` still resolve above 1 %; throughput — the server fell behind by
///   `(1 − pace) × window`, at least [`BEHIND_PER_LATENESS`] times `L`; errors — `L` is
///   under a tenth of the request timeout (lateness cannot time requests out, and refusals
///   and resets are not the generator's). A failed clause
///   within `L`'s reach is not counted against the server (`within_reach`); one far clause
///   is enough to fail the step, and lateness cannot have made it fail. `L` is the longest
///   a request waited in loadlab before its send (`before_send_ms_max`) when that is
///   longer than the worst lag: a worker slow to take responses in keeps connections
///   busy, and the arrivals behind them wait in its queue (and may time out there), a wait
///   the schedule lag does not count.
///
/// Returns the excuse, or `None` when the step must stay generator-limited: a worker was
/// CPU-bound (of the time the host left its CPUs: responses were read late too, by an
/// amount nothing bounds), an agent was
/// lost, or the lag is within reach of the verdict.
pub fn lag_cannot_explain(
    r: &RunResult,
    failed: &[Limit],
    scopes: &[Scope<'_>],
) -> Option<LagExcuse> {
    let slo = scopes.first()?.slo;
    // Arrivals never sent are not late sends: the load was not offered as planned.
    if failed.contains(&Limit::AgentLost) || r.unsent > 0 || !r.cpu_bound_workers().is_empty() {
        return None;
    }
    let server: Vec<Limit> = failed
        .iter()
        .copied()
        .filter(|l| matches!(l, Limit::Errors | Limit::Latency | Limit::Throughput))
        .collect();
    let lag_ms = r.schedule_lag_ms.max;
    let lag = format!(
        "loadlab sent some requests late (schedule lag p99 {:.2} ms, worst {lag_ms:.2} ms)",
        r.schedule_lag_ms.p99
    );
    let window_ms = r.duration_s * 1000.0;
    if server.is_empty() {
        let tolerance = 1.0 - slo.min_achieved_ratio;
        // The arrivals released after the window's end, as counted; without the count (an
        // older result), those intended in its last `L` at most.
        let planned = r.offered_rps.unwrap_or(0.0) * r.duration_s;
        let (slipped, how) = match r.sent_after_window {
            Some(n) if planned >= 1.0 => {
                let f = n as f64 / planned;
                let how = format!(
                    "{n} of the step's {} arrivals ({}) were sent after its end",
                    planned.round(),
                    pct(f)
                );
                (f, how)
            }
            _ => {
                let f = lag_ms / window_ms;
                let how = format!(
                    "at most {} of the step's arrivals slipped past its end",
                    pct(f)
                );
                (f, how)
            }
        };
        return (r.offered_rps.is_some()
            && window_ms > 0.0
            && failed.is_empty()
            && slipped <= tolerance)
            .then(|| LagExcuse {
                why: format!(
                    "{lag}: {how}, within the {} the throughput clause allows; every clause held \
                     with the load offered",
                    pct(tolerance)
                ),
                within_reach: Vec::new(),
            });
    }
    // What loadlab's side can have added to a request, the `L` of the failed clauses: all it
    // waited before its send, the release's lateness and, when the worker was slow to free a
    // connection, a wait in its queue (where an arrival can also time out).
    let wait_ms = if queued_for_the_server(r) {
        lag_ms
    } else {
        waited_before_send(r).unwrap_or(lag_ms)
    };
    let wait = if wait_ms > lag_ms {
        format!(
            "the longest a request waited in loadlab before its send ({wait_ms:.2} ms: a late release, then a wait for a free connection)"
        )
    } else {
        format!("loadlab's worst lateness ({lag_ms:.2} ms)")
    };
    // How far behind a scope's server fell over the step, ms.
    let behind = |s: &Scope<'_>| s.figures.trend.map_or(0.0, |t| (1.0 - t.pace) * window_ms);
    // Whether a scope failed `l` far beyond the lateness.
    let far_in = |l: Limit, s: &Scope<'_>| match l {
        Limit::Latency => s.slo.latency_bounds().iter().any(|(q, bound)| {
            stats::resolvably_above(
                slower_than(s.figures.histogram, bound + wait_ms),
                s.figures.latency.count,
                1.0 - q / 100.0,
            )
        }),
        Limit::Throughput => behind(s) >= BEHIND_PER_LATENESS * wait_ms,
        _ => false,
    };
    // The scopes that failed `l`.
    let failing = |l: Limit| scopes.iter().filter(move |s| s.failed.contains(&l));
    // Each failed clause: `None` when far beyond the lateness in a scope that failed it, or
    // the sentence saying how it is within its reach.
    let reach = |l: Limit| -> Option<String> {
        if failing(l).any(|s| far_in(l, s)) {
            return None;
        }
        match l {
            Limit::Latency => Some(format!(
                "latency not counted against the server: the responses slower than its bound plus {wait} do not resolve above the share it allows"
            )),
            Limit::Throughput => {
                // The scope that fell furthest behind, in the sentence.
                let worst = failing(l).max_by(|a, b| behind(a).total_cmp(&behind(b)));
                let who = worst.and_then(|s| s.name).unwrap_or("it");
                let behind = worst.map_or(0.0, behind);
                Some(format!(
                    "throughput not counted against the server: {who} fell {behind:.0} ms behind over the step, less than {BEHIND_PER_LATENESS} times {wait}"
                ))
            }
            Limit::Errors => (r.timeout_ms <= 0.0 || wait_ms * 10.0 >= r.timeout_ms).then(|| {
                format!(
                    "errors not counted against the server: {wait} is not under a tenth of the request timeout ({:.0} ms)",
                    r.timeout_ms
                )
            }),
            _ => None,
        }
    };
    let (far, near): (Vec<Limit>, Vec<Limit>) = server.iter().partition(|l| reach(**l).is_none());
    if far.is_empty() {
        return None;
    }
    let names = |ls: &[Limit]| {
        ls.iter()
            .map(|l| l.describe())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let queued = if wait_ms > lag_ms {
        format!(" and up to {wait_ms:.2} ms before their send")
    } else {
        String::new()
    };
    let mut why = format!(
        "{lag}{queued}, too little to cause what failed ({}): the step is the server's",
        names(&far)
    );
    if !near.is_empty() {
        why.push_str(&format!("; {} within its reach, not counted", names(&near)));
    }
    Some(LagExcuse {
        why,
        within_reach: near
            .into_iter()
            .map(|l| (l, reach(l).unwrap_or_default()))
            .collect(),
    })
}
