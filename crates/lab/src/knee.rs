//! Knee search: grow the load geometrically until a step is not sustained, bisect between
//! the last sustained and the first unsustained value to the requested precision, then
//! confirm the boundary: both ends are run again (`confirm` times each). A low end that
//! fails on a repeat is not the knee: the search falls back to the highest value sustained
//! in every run and bisects again. The knee is the range between the highest value
//! sustained in every run and the lowest value not sustained in every run; values whose
//! runs disagreed, and sustained values above unsustained ones, are reported as such.
//! A generator-limited step or a crashed target ends the search: the first is never
//! reported as the server's knee, the second leaves nothing to measure.

use serde::{Deserialize, Serialize};

use crate::verdict::Limit;

/// The search's bounds.
#[derive(Clone, Copy, Debug)]
pub struct KneeParams {
    /// First value tried (`load.knee.start`).
    pub start: f64,
    /// Largest value tried.
    pub max: f64,
    /// Stop when `(hi - lo) / lo` is at most this.
    pub precision: f64,
    /// Growth factor while sustained.
    pub growth: f64,
    /// Values are connection counts (whole numbers).
    pub integer: bool,
    /// Repeats of each end of the boundary once bisection has found it (0: none).
    pub confirm: u32,
    /// Open loop with Poisson arrivals: a step's measured seconds. Bisection stops before
    /// a step halfway that such steps would not tell apart from an end of the bracket
    /// ([`unresolved`]), however fine `precision` asks for.
    pub poisson_s: Option<f64>,
}

/// Whether values `l` < `h` are closer than open-loop steps of `s` seconds with Poisson
/// arrivals resolve: the two steps' arrival counts differ by `(h - l) s` on average, with
/// a spread of `sqrt((l + h) s)`; within two spreads, the step at `l` carries the larger
/// load one time in 44 or more, and a verdict between them says as much about the draw as
/// about the server.
pub fn unresolved(l: f64, h: f64, s: f64) -> bool {
    (h - l) * s < 2.0 * ((l + h) * s).sqrt()
}

/// Rounds of "the low end failed on a repeat: bisect below it again" before the search
/// settles for what it has.
pub const MAX_CONFIRM_ROUNDS: u32 = 3;

/// What one step told the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepSignal {
    /// Every SLO held.
    Sustained,
    /// Not sustained, limited by this.
    NotSustained(Limit),
}

/// The phase a step ran in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A fixed step of the plan.
    Fixed,
    /// Geometric growth (by `growth`) while every step is sustained.
    Search,
    /// Bisection between the last sustained and the first unsustained value.
    Bisect,
    /// A repeat of one end of the boundary.
    Confirm,
    /// `loadlab tune`: a configuration tried first at the best knee found so far.
    Race,
    /// All scenarios together.
    Together,
}

/// How one value fared over its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueRuns {
    /// The load (req/s, connections or streams).
    pub value: f64,
    /// Steps run at it.
    pub runs: u32,
    /// Of which sustained.
    pub sustained: u32,
}

impl ValueRuns {
    fn always(&self) -> bool {
        self.runs > 0 && self.sustained == self.runs
    }
    /// Run, and never sustained.
    pub(crate) fn never(&self) -> bool {
        self.runs > 0 && self.sustained == 0
    }
}

/// The outcome of a knee search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeOutcome {
    /// The highest value sustained in every run (`None`: none was).
    pub knee: Option<f64>,
    /// The lowest value above the knee not sustained in every run.
    pub first_unsustained: Option<f64>,
    /// What limited the first unsustained value (or ended the search).
    pub limited_by: Option<Limit>,
    /// The knee lies between these: `[knee, first_unsustained]`, when both are known.
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// Both ends of the range were repeated and every run agreed.
    #[serde(default)]
    pub confirmed: bool,
    /// Values whose runs disagreed, and sustained values above unsustained ones.
    #[serde(default)]
    pub non_monotonic: Vec<String>,
    /// Every value tried, in the order first tried, with its runs.
    #[serde(default)]
    pub values: Vec<ValueRuns>,
    /// One sentence for reports.
    pub summary: String,
    /// `loadlab tune`: the load this configuration was raced at first (the best knee so
    /// far); with `knee` unset and `first_unsustained` at it, it was dropped there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raced_at: Option<f64>,
    /// Where the search stopped on a step that judged loadlab or the run rather than the
    /// server (generator-limited, an agent lost, the data rows used up, interrupted), with
    /// that limit: the knee is only known as far as the steps before it. During the
    /// narrowing, the range found so far stands and is only less narrow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// Open loop with Poisson arrivals: the bisection stopped where steps of this many
    /// seconds no longer tell loads apart ([`unresolved`]): the range is as narrow as they
    /// resolve, wider than `precision` asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_s: Option<f64>,
}

/// A search stopped before it was done, by a step that did not judge the server.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// The load of the step that stopped it.
    pub at: f64,
    /// What that step was limited by.
    pub by: Limit,
}

impl KneeOutcome {
    /// Dropped in a race: not sustained at the load it was raced at, in every run there.
    pub fn dropped(&self) -> bool {
        self.raced_at.is_some() && self.knee.is_none() && self.first_unsustained == self.raced_at
    }
}

/// A load value as summaries print it (as the terminal and the reports do).
pub use loadlab_engine::format::load as fmt;

/// Runs of every value tried.
#[derive(Default)]
struct History {
    values: Vec<ValueRuns>,
    /// What limited each value's last unsustained run.
    limits: Vec<(f64, Limit)>,
}

impl History {
    fn get(&self, v: f64) -> Option<&ValueRuns> {
        self.values.iter().find(|r| r.value == v)
    }
    fn failed(&mut self, v: f64, l: Limit) {
        self.record(v, false);
        self.limits.retain(|(x, _)| *x != v);
        self.limits.push((v, l));
    }
    fn limit(&self, v: f64) -> Option<Limit> {
        self.limits.iter().find(|(x, _)| *x == v).map(|(_, l)| *l)
    }
    /// The lowest value above `v` never sustained, with what limited it.
    fn never_above(&self, v: f64) -> Option<(f64, Limit)> {
        let never = self
            .values
            .iter()
            .filter(|r| r.value > v && r.never())
            .map(|r| r.value)
            .reduce(f64::min)?;
        Some((never, self.limit(never)?))
    }
    fn record(&mut self, v: f64, sustained: bool) {
        let i = match self.values.iter().position(|r| r.value == v) {
            Some(i) => i,
            None => {
                self.values.push(ValueRuns {
                    value: v,
                    runs: 0,
                    sustained: 0,
                });
                self.values.len() - 1
            }
        };
        self.values[i].runs += 1;
        self.values[i].sustained += u32::from(sustained);
    }
    /// The highest value below `v` that was sustained in every run.
    fn always_below(&self, v: f64) -> Option<f64> {
        self.values
            .iter()
            .filter(|r| r.value < v && r.always())
            .map(|r| r.value)
            .reduce(f64::max)
    }
    /// Disagreeing runs, and sustained values above unsustained ones.
    fn non_monotonic(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .values
            .iter()
            .filter(|r| !r.always() && !r.never())
            .map(|r| {
                format!(
                    "{}: sustained in {} of {} runs",
                    fmt(r.value),
                    r.sustained,
                    r.runs
                )
            })
            .collect();
        let lowest_never = self
            .values
            .iter()
            .filter(|r| r.never())
            .map(|r| r.value)
            .reduce(f64::min);
        if let Some(low) = lowest_never {
            if let Some(above) = self
                .values
                .iter()
                .filter(|r| r.always() && r.value > low)
                .map(|r| r.value)
                .reduce(f64::max)
            {
                out.push(format!(
                    "sustained at {} above {}, which was not sustained",
                    fmt(above),
                    fmt(low)
                ));
            }
        }
        out
    }
}

fn terminal(l: Limit) -> bool {
    matches!(
        l,
        Limit::GeneratorLimited
            | Limit::ClientLimited
            | Limit::AgentLost
            | Limit::RowsUsedUp
            | Limit::TargetCrashed
            | Limit::Interrupted
            | Limit::Rejected
            | Limit::Unreachable
    )
}

/// Where `loadlab tune` races a configuration: the best knee so far, and the top of its
/// range (the first load it did not sustain).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Race {
    /// The best knee so far: the first step.
    pub at: f64,
    /// The top of the best knee's range: the second step when `at` is sustained (a
    /// configuration that fails there has the same bracket as the best, already narrow).
    pub then: Option<f64>,
}

/// Races a configuration at `race.at`, the best knee found so far (`loadlab tune`): one
/// step there, and one more if it was not sustained. Not sustained in both, the
/// configuration is dropped: its knee is below `at`, and no search is run. Otherwise the
/// search goes on from `at` as [`search`] does (the step already run there counts as its
/// first), its next step at `race.then` (the bracket of the best knee, reused) and growing
/// from there.
pub fn race(
    p: KneeParams,
    race: Race,
    step: &mut dyn FnMut(f64, Phase) -> StepSignal,
) -> KneeOutcome {
    let at = if p.integer {
        race.at.round().max(1.0)
    } else {
        race.at
    };
    let mut runs = 0u32;
    let mut last = None;
    while runs < 2 {
        match step(at, Phase::Race) {
            StepSignal::Sustained => {
                // The search's first step is this one, already run.
                let mut first = Some(StepSignal::Sustained);
                let mut o = search_from(
                    KneeParams { start: at, ..p },
                    race.then.filter(|&t| t > at && t <= p.max),
                    &mut |v, phase| match first.take().filter(|_| v == at) {
                        Some(signal) => signal,
                        None => step(v, phase),
                    },
                );
                if runs > 0 {
                    o.non_monotonic.push(format!(
                        "{}: not sustained in the race's first run, sustained in its second",
                        fmt(at)
                    ));
                }
                o.raced_at = Some(at);
                return o;
            }
            StepSignal::NotSustained(l) if terminal(l) => {
                let mut o = ended(History::default(), None, at, l);
                o.raced_at = Some(at);
                return o;
            }
            StepSignal::NotSustained(l) => last = Some(l),
        }
        runs += 1;
    }
    let l = last.expect("two unsustained runs");
    KneeOutcome {
        knee: None,
        first_unsustained: Some(at),
        limited_by: Some(l),
        range: None,
        confirmed: true,
        resolution_s: None,
        non_monotonic: Vec::new(),
        values: vec![ValueRuns {
            value: at,
            runs: 2,
            sustained: 0,
        }],
        summary: format!(
            "dropped in the race: not sustained at {} (the best knee so far) in 2 of 2 runs ({}): its knee is below {}",
            fmt(at),
            l.describe(),
            fmt(at)
        ),
        raced_at: Some(at),
        stopped: None,
    }
}

/// Runs the search; `step` runs one step at a value and says how it went.
pub fn search(p: KneeParams, step: &mut dyn FnMut(f64, Phase) -> StepSignal) -> KneeOutcome {
    search_from(p, None, step)
}

/// [`search`], its second step at `second` (when above the first) instead of one growth
/// factor up.
fn search_from(
    p: KneeParams,
    second: Option<f64>,
    step: &mut dyn FnMut(f64, Phase) -> StepSignal,
) -> KneeOutcome {
    let mut second = second;
    let mut history = History::default();
    let mut run = |v: f64, phase: Phase, history: &mut History| {
        let signal = step(v, phase);
        match signal {
            StepSignal::Sustained => history.record(v, true),
            StepSignal::NotSustained(l) if !terminal(l) => history.failed(v, l),
            StepSignal::NotSustained(_) => {}
        }
        signal
    };
    let round = |v: f64| if p.integer { v.round().max(1.0) } else { v };
    let mut lo: Option<f64> = None;
    let mut v = round(p.start);
    let (mut h, mut hl) = loop {
        match run(v, Phase::Search, &mut history) {
            StepSignal::Sustained => {
                lo = Some(v);
                if v >= p.max {
                    return finish(
                        history,
                        lo,
                        None,
                        None,
                        false,
                        format!(
                            "sustained up to the plan's maximum {}: the knee is higher",
                            fmt(v)
                        ),
                    );
                }
                let next = match second.take().map(round) {
                    Some(t) if t > v => t.min(p.max),
                    _ => round((v * p.growth).min(p.max)),
                };
                v = if next <= v {
                    round(v + 1.0).min(p.max)
                } else {
                    next
                };
            }
            StepSignal::NotSustained(l) if terminal(l) => return ended(history, lo, v, l),
            StepSignal::NotSustained(l) => break (v, l),
        }
    };
    let Some(mut l) = lo else {
        let summary = format!(
            "not sustained even at the first step {} ({})",
            fmt(h),
            hl.describe()
        );
        return finish(history, None, Some(h), Some(hl), false, summary);
    };
    let mut rounds = 0;
    let mut note: Option<String> = None;
    let mut stopped = None;
    let mut resolution: Option<f64> = None;
    'confirm: loop {
        loop {
            let narrow = if p.integer {
                h - l <= 1.0
            } else {
                (h - l) / l <= p.precision
            };
            if narrow {
                resolution = None;
                break;
            }
            let mid = if p.integer {
                ((l + h) / 2.0).floor()
            } else {
                (l + h) / 2.0
            };
            // A step halfway that its steps could not tell from either end would only
            // report a draw: the bracket stays one whose ends they do tell apart.
            if let Some(s) = p
                .poisson_s
                .filter(|&s| unresolved(l, mid, s) || unresolved(mid, h, s))
            {
                resolution = Some(s);
                break;
            }
            match run(mid, Phase::Bisect, &mut history) {
                StepSignal::Sustained => l = mid,
                // The bracket already found is the server's: a step in it that judged
                // loadlab or the run only stops the narrowing.
                StepSignal::NotSustained(x) if stops_narrowing(x) => {
                    stopped = Some(Stopped { at: mid, by: x });
                    note = Some(format!(
                        "narrowing stopped at {}: {}",
                        fmt(mid),
                        x.describe()
                    ));
                    break 'confirm;
                }
                StepSignal::NotSustained(x) if terminal(x) => {
                    return ended(history, Some(l), mid, x)
                }
                StepSignal::NotSustained(x) => {
                    h = mid;
                    hl = x;
                }
            }
        }
        if p.confirm == 0 || rounds >= MAX_CONFIRM_ROUNDS {
            break;
        }
        rounds += 1;
        // Repeat the low end until it has 1 + confirm runs; one failure demotes it.
        while history.get(l).map_or(0, |r| r.runs) < 1 + p.confirm {
            match run(l, Phase::Confirm, &mut history) {
                StepSignal::Sustained => {}
                StepSignal::NotSustained(x) if terminal(x) => {
                    note = Some(format!("confirmation stopped: {}", x.describe()));
                    stopped = Some(Stopped { at: l, by: x });
                    break 'confirm;
                }
                StepSignal::NotSustained(x) => {
                    h = l;
                    hl = x;
                    match history.always_below(l) {
                        Some(below) => {
                            l = below;
                            continue 'confirm;
                        }
                        None => {
                            let summary = format!(
                                "not sustained in every run even at {} ({})",
                                fmt(h),
                                hl.describe()
                            );
                            return finish(history, None, Some(h), Some(hl), false, summary);
                        }
                    }
                }
            }
        }
        // Repeat the high end: a sustained repeat makes it a value whose runs disagree.
        while history.get(h).map_or(0, |r| r.runs) < 1 + p.confirm {
            if let StepSignal::NotSustained(x) = run(h, Phase::Confirm, &mut history) {
                if terminal(x) {
                    note = Some(format!("confirmation stopped: {}", x.describe()));
                    stopped = Some(Stopped { at: h, by: x });
                    break 'confirm;
                }
            }
        }
        // A high end some run sustained bounds nothing (a load at the server's very
        // capacity goes either way): a step one bracket width above it, run once, says
        // whether the knee may lie above it, so that a comparison of knees (`tune`) has a
        // bound as fine as the bracket where it would otherwise have none (the growth
        // step alone bounded a pool of 2, mixed at 40 req/s, by 80: the very capacity of
        // the pool of 4 it was compared with). If that step holds, the failure below it
        // was the run's, not the server's: the search grows on from it (as it did before
        // the first failure) and narrows the bracket it then finds (a client-streaming
        // server of 400 msg/s, failed once at 200 on a busy host, held 206: its knee is
        // not 194 to 200).
        if history.get(h).is_some_and(|r| r.sustained > 0) {
            let width = if p.integer { (h - l).max(1.0) } else { h - l };
            let mixed = h;
            let mut above = round((h + width).min(p.max));
            while above > l.max(mixed) {
                let signal = match history.get(above) {
                    Some(r) if r.always() => StepSignal::Sustained,
                    Some(_) => StepSignal::NotSustained(history.limit(above).unwrap_or(hl)),
                    None => run(above, Phase::Confirm, &mut history),
                };
                match signal {
                    StepSignal::Sustained => {
                        l = above;
                        if let Some((never, x)) = history.never_above(l) {
                            h = never;
                            hl = x;
                            continue 'confirm;
                        }
                        if l >= p.max {
                            let summary = format!(
                                "sustained up to the plan's maximum {}: the knee is higher",
                                fmt(l)
                            );
                            return finish(history, Some(l), None, None, false, summary);
                        }
                        let next = round((l * p.growth).min(p.max));
                        above = if next <= l {
                            round(l + 1.0).min(p.max)
                        } else {
                            next
                        };
                    }
                    StepSignal::NotSustained(x) if terminal(x) && l > mixed => {
                        return ended(history, Some(l), above, x)
                    }
                    StepSignal::NotSustained(x) if terminal(x) => {
                        note = Some(format!("confirmation stopped: {}", x.describe()));
                        stopped = Some(Stopped { at: above, by: x });
                        break 'confirm;
                    }
                    StepSignal::NotSustained(x) if l > mixed => {
                        h = above;
                        hl = x;
                        continue 'confirm;
                    }
                    StepSignal::NotSustained(_) => break,
                }
            }
        }
        break;
    }
    let confirmed = p.confirm > 0
        && note.is_none()
        && history
            .get(l)
            .is_some_and(|r| r.always() && r.runs > p.confirm)
        && history
            .get(h)
            .is_some_and(|r| r.never() && r.runs > p.confirm);
    let mut summary = format!(
        "knee between {} and {} (not sustained at {}: {})",
        fmt(l),
        fmt(h),
        fmt(h),
        hl.describe()
    );
    if confirmed {
        summary.push_str(&format!(
            "; both ends confirmed by {} repeat{}",
            p.confirm,
            if p.confirm == 1 { "" } else { "s" }
        ));
    } else if p.confirm > 0 {
        summary.push_str("; not confirmed");
    }
    if let Some(s) = resolution {
        summary.push_str(&format!(
            "; narrowed no further than {} s steps of Poisson arrivals tell apart (a longer \
             step_duration narrows it)",
            fmt(s)
        ));
    }
    if let Some(n) = note {
        summary.push_str(&format!(" ({n})"));
    }
    let mut o = finish(history, Some(l), Some(h), Some(hl), confirmed, summary);
    o.stopped = stopped;
    o.resolution_s = resolution;
    o
}

/// A step limit that stops narrowing a bracket the server's steps already found, without
/// moving it: loadlab's or the run's, not the server's and not a crash.
fn stops_narrowing(l: Limit) -> bool {
    matches!(
        l,
        Limit::GeneratorLimited
            | Limit::ClientLimited
            | Limit::AgentLost
            | Limit::RowsUsedUp
            | Limit::Interrupted
    )
}

fn finish(
    history: History,
    knee: Option<f64>,
    first_unsustained: Option<f64>,
    limited_by: Option<Limit>,
    confirmed: bool,
    mut summary: String,
) -> KneeOutcome {
    let non_monotonic = history.non_monotonic();
    if !non_monotonic.is_empty() {
        summary.push_str(&format!("; non-monotonic: {}", non_monotonic.join("; ")));
    }
    KneeOutcome {
        knee,
        first_unsustained,
        limited_by,
        range: knee.zip(first_unsustained).map(|(a, b)| [a, b]),
        raced_at: None,
        stopped: None,
        resolution_s: None,
        confirmed,
        non_monotonic,
        values: history.values,
        summary,
    }
}

fn ended(history: History, lo: Option<f64>, at: f64, l: Limit) -> KneeOutcome {
    let what = match l {
        Limit::GeneratorLimited => format!(
            "search stopped at {}: loadlab was the bottleneck (generator-limited), so the server's knee is {}",
            fmt(at),
            lo.map_or("unknown".into(), |v| format!("at least {}", fmt(v)))
        ),
        Limit::ClientLimited => format!(
            "search stopped at {}: loadlab ran out of its own local ports or file descriptors (see the why), so the server's knee is {}",
            fmt(at),
            lo.map_or("unknown".into(), |v| format!("at least {}", fmt(v)))
        ),
        Limit::AgentLost => format!(
            "search stopped at {}: an agent was lost during the step, so the server's knee is {}",
            fmt(at),
            lo.map_or("unknown".into(), |v| format!("at least {}", fmt(v)))
        ),
        Limit::TargetCrashed => format!("the target crashed at {}", fmt(at)),
        Limit::RowsUsedUp => format!(
            "search stopped at {}: the data file's rows were used up (each sent once: data order unique), so the server's knee is {}",
            fmt(at),
            lo.map_or("unknown".into(), |v| format!("at least {}", fmt(v)))
        ),
        Limit::Rejected => format!(
            "search stopped at {}: the server rejected the request (4xx), which more load does not change: no knee measured",
            fmt(at)
        ),
        Limit::Unreachable => format!(
            "search stopped at {}: every connection was refused (nothing listens at the address): no knee measured",
            fmt(at)
        ),
        _ => format!("search {} at {}", l.describe(), fmt(at)),
    };
    let first = (l == Limit::TargetCrashed || l.not_the_load()).then_some(at);
    let mut o = finish(history, lo, first, Some(l), false, what);
    o.stopped = stops_narrowing(l).then_some(Stopped { at, by: l });
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(start: f64, max: f64) -> KneeParams {
        KneeParams {
            start,
            max,
            precision: 0.05,
            growth: 2.0,
            integer: false,
            confirm: 0,
            poisson_s: None,
        }
    }

    #[test]
    fn finds_a_capacity_within_precision() {
        for capacity in [137.0, 1000.0, 7321.0, 45_000.0] {
            let mut steps = 0;
            let out = search(params(100.0, 100_000.0), &mut |v, _| {
                steps += 1;
                if v <= capacity {
                    StepSignal::Sustained
                } else {
                    StepSignal::NotSustained(Limit::Latency)
                }
            });
            let knee = out.knee.unwrap();
            assert!(
                knee <= capacity && knee >= capacity * 0.95,
                "capacity {capacity}: knee {knee}"
            );
            assert_eq!(out.limited_by, Some(Limit::Latency));
            assert!(steps < 20, "{steps} steps");
        }
    }

    #[test]
    fn poisson_steps_are_told_apart_only_beyond_two_spreads_of_their_counts() {
        // 4 s at 25 and 30 per second: 100 and 120 arrivals on average, their difference
        // spread by sqrt(220) = 14.8; 20 is under two spreads.
        assert!(unresolved(25.0, 30.0, 4.0));
        // 100 against 150: 50 is over two spreads (2 sqrt(250) = 31.6).
        assert!(!unresolved(25.0, 37.5, 4.0));
        // Longer steps resolve finer: 10 s at 25 and 30, 50 against 2 sqrt(550) = 46.9.
        assert!(!unresolved(25.0, 30.0, 10.0));
        assert!(unresolved(25.0, 29.0, 10.0));
    }

    #[test]
    fn a_bracket_poisson_steps_cannot_resolve_is_not_narrowed() {
        let capacity = |v: f64, _| {
            if v <= 27.0 {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Latency)
            }
        };
        let fine = KneeParams {
            precision: 0.01,
            ..params(10.0, 400.0)
        };
        // Evenly spaced arrivals: bisected to the precision asked for.
        let even = search(fine, &mut capacity.clone());
        let [lo, hi] = even.range.unwrap();
        assert!((hi - lo) / lo <= 0.01, "{lo}..{hi}");
        assert!(!even.summary.contains("Poisson"), "{}", even.summary);
        // 4 s Poisson steps: 10, 20 held, 40 not; 30 not; 25 would be within two spreads
        // of 20's arrival count, so the search stops at 20..30 and says why.
        let mut tried = Vec::new();
        let poisson = search(
            KneeParams {
                poisson_s: Some(4.0),
                ..fine
            },
            &mut |v, ph| {
                tried.push(v);
                capacity(v, ph)
            },
        );
        assert_eq!(poisson.range, Some([20.0, 30.0]));
        assert_eq!(poisson.resolution_s, Some(4.0));
        assert_eq!(even.resolution_s, None);
        assert_eq!(tried, [10.0, 20.0, 40.0, 30.0]);
        assert!(
            poisson
                .summary
                .contains("narrowed no further than 4 s steps of Poisson arrivals tell apart"),
            "{}",
            poisson.summary
        );
        // Longer steps narrow it further.
        let long = search(
            KneeParams {
                poisson_s: Some(40.0),
                ..fine
            },
            &mut capacity.clone(),
        );
        let [lo, hi] = long.range.unwrap();
        assert!(lo >= 25.0 && hi <= 30.0 && hi - lo < 5.0, "{lo}..{hi}");
    }

    #[test]
    fn generator_limited_is_never_the_knee() {
        let out = search(params(100.0, 100_000.0), &mut |v, _| {
            if v >= 800.0 {
                StepSignal::NotSustained(Limit::GeneratorLimited)
            } else {
                StepSignal::Sustained
            }
        });
        assert_eq!(out.knee, Some(400.0));
        assert_eq!(out.first_unsustained, None);
        assert_eq!(out.limited_by, Some(Limit::GeneratorLimited));
        assert!(out.summary.contains("at least 400"), "{}", out.summary);
        assert_eq!(out.range, None);
        assert_eq!(
            out.stopped,
            Some(Stopped {
                at: 800.0,
                by: Limit::GeneratorLimited
            })
        );
    }

    #[test]
    fn loadlabs_own_ports_or_descriptors_stop_the_search_below_the_servers_knee() {
        let out = search(params(100.0, 100_000.0), &mut |v, _| {
            if v >= 1600.0 {
                StepSignal::NotSustained(Limit::ClientLimited)
            } else {
                StepSignal::Sustained
            }
        });
        assert_eq!((out.knee, out.first_unsustained), (Some(800.0), None));
        assert_eq!(
            out.stopped,
            Some(Stopped {
                at: 1600.0,
                by: Limit::ClientLimited
            })
        );
        assert!(
            out.summary.contains(
                "loadlab ran out of its own local ports or file descriptors (see the why), so \
                 the server's knee is at least 800"
            ),
            "{}",
            out.summary
        );
    }

    #[test]
    fn a_step_limited_by_loadlab_inside_the_bracket_keeps_the_bracket() {
        // The server breaks above 130; 160 fails by throughput, and the narrowing's step
        // at 140 (server-failing too) is generator-limited: the bracket 80..160 stands,
        // with what stopped it, and is never turned into "at least 80".
        let mut tried = Vec::new();
        let out = search(params(20.0, 640.0), &mut |v, _| {
            tried.push(v);
            match v {
                v if v <= 130.0 => StepSignal::Sustained,
                v if v < 150.0 => StepSignal::NotSustained(Limit::GeneratorLimited),
                _ => StepSignal::NotSustained(Limit::Throughput),
            }
        });
        assert_eq!(tried, [20.0, 40.0, 80.0, 160.0, 120.0, 140.0]);
        assert_eq!(
            (out.knee, out.first_unsustained, out.range),
            (Some(120.0), Some(160.0), Some([120.0, 160.0]))
        );
        assert_eq!(out.limited_by, Some(Limit::Throughput));
        assert_eq!(
            out.stopped,
            Some(Stopped {
                at: 140.0,
                by: Limit::GeneratorLimited
            })
        );
        assert!(
            out.summary
                .contains("narrowing stopped at 140: generator-limited"),
            "{}",
            out.summary
        );
        // A crash inside the bracket is the server's: it moves the top down to it.
        let out = search(params(20.0, 640.0), &mut |v, _| match v {
            v if v <= 130.0 => StepSignal::Sustained,
            v if v < 150.0 => StepSignal::NotSustained(Limit::TargetCrashed),
            _ => StepSignal::NotSustained(Limit::Throughput),
        });
        assert_eq!(
            (out.knee, out.first_unsustained),
            (Some(120.0), Some(140.0))
        );
        assert_eq!(out.stopped, None);
    }

    #[test]
    fn crash_ends_the_search_and_start_failure_is_reported() {
        let out = search(params(100.0, 1e6), &mut |v, _| {
            if v > 300.0 {
                StepSignal::NotSustained(Limit::TargetCrashed)
            } else {
                StepSignal::Sustained
            }
        });
        assert_eq!(
            (out.knee, out.first_unsustained),
            (Some(200.0), Some(400.0))
        );
        let out = search(params(100.0, 1e6), &mut |_, _| {
            StepSignal::NotSustained(Limit::Errors)
        });
        assert_eq!(out.knee, None);
        assert!(out.summary.contains("not sustained even at the first step"));
    }

    #[test]
    fn maximum_reached_and_integer_steps() {
        let out = search(params(100.0, 500.0), &mut |_, _| StepSignal::Sustained);
        assert_eq!(out.knee, Some(500.0));
        assert!(out.summary.contains("maximum"));
        let mut p = params(1.0, 1000.0);
        p.integer = true;
        let mut seen = Vec::new();
        let out = search(p, &mut |v, _| {
            seen.push(v);
            if v <= 37.0 {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Latency)
            }
        });
        assert_eq!(out.knee, Some(37.0));
        assert!(seen.iter().all(|v| v.fract() == 0.0));
    }

    #[test]
    fn confirmation_repeats_both_ends_and_reports_a_range() {
        let mut p = params(100.0, 100_000.0);
        p.confirm = 1;
        let mut phases = Vec::new();
        let out = search(p, &mut |v, phase| {
            phases.push(phase);
            if v <= 1000.0 {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Latency)
            }
        });
        let [lo, hi] = out.range.expect("a range");
        assert!(
            lo <= 1000.0 && hi > 1000.0 && (hi - lo) / lo <= 0.05,
            "{out:?}"
        );
        assert!(out.confirmed, "{out:?}");
        assert_eq!(phases.iter().filter(|p| **p == Phase::Confirm).count(), 2);
        for end in [lo, hi] {
            let r = out.values.iter().find(|r| r.value == end).unwrap();
            assert_eq!(r.runs, 2, "{r:?}");
        }
        assert!(out.non_monotonic.is_empty());
        assert!(out.summary.contains("knee between"), "{}", out.summary);
        assert!(out.summary.contains("confirmed"), "{}", out.summary);
    }

    #[test]
    fn a_low_end_that_fails_on_repeat_is_not_the_knee() {
        // Up to 950 always sustained; 950-1000 only the first time; above 1000 never.
        let mut p = params(100.0, 100_000.0);
        p.confirm = 1;
        let mut seen: Vec<f64> = Vec::new();
        let out = search(p, &mut |v, _| {
            let before = seen.iter().filter(|x| **x == v).count();
            seen.push(v);
            if v <= 950.0 || (v <= 1000.0 && before == 0) {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Throughput)
            }
        });
        let [lo, hi] = out.range.unwrap();
        assert!((900.0..=950.0).contains(&lo), "{out:?}");
        assert!(hi <= 1000.0, "{out:?}");
        // The high end's runs disagree: the boundary is not confirmed.
        assert!(!out.confirmed);
        assert!(
            out.non_monotonic
                .iter()
                .any(|n| n.contains("sustained in 1 of 2 runs")),
            "{out:?}"
        );
        assert!(out.summary.contains("non-monotonic"), "{}", out.summary);
    }

    #[test]
    fn a_high_end_sustained_on_its_repeat_is_bounded_one_bracket_width_above_or_searched_past() {
        // Up to 37.5 always sustained, 40 the second time only (a capacity of exactly 40),
        // nothing above: the search runs 42.5 once (one bracket width above), so that 40
        // is not the last word above the knee, and stops there when it fails.
        let mut p = params(5.0, 1000.0);
        p.confirm = 1;
        p.precision = 0.07;
        let mixed_at_40 = |holds_above: f64| {
            let mut seen: Vec<f64> = Vec::new();
            let out = search(p, &mut |v, _| {
                let before = seen.iter().filter(|x| **x == v).count();
                seen.push(v);
                if v < 40.0 || (v == 40.0 && before == 1) || (v > 40.0 && v <= holds_above) {
                    StepSignal::Sustained
                } else {
                    StepSignal::NotSustained(Limit::Throughput)
                }
            });
            (out, seen)
        };
        let (out, seen) = mixed_at_40(0.0);
        assert_eq!(out.range, Some([37.5, 40.0]), "{out:?}");
        assert!(!out.confirmed);
        let r = |out: &KneeOutcome, v: f64| {
            out.values
                .iter()
                .find(|r| r.value == v)
                .map(|r| (r.runs, r.sustained))
        };
        assert_eq!(r(&out, 40.0), Some((2, 1)), "{out:?}");
        assert_eq!(r(&out, 42.5), Some((1, 0)), "{out:?}");
        assert!(!seen.contains(&80.0), "{seen:?}");
        // That step held too (the failure at 40 was the run's, not the server's, whose
        // capacity is 50 here): the search grows on from it and narrows the bracket it
        // finds, the failure at 40 left in the non-monotonic notes.
        let (out, seen) = mixed_at_40(50.0);
        assert_eq!(r(&out, 42.5), Some((1, 1)), "{out:?}");
        assert_eq!(r(&out, 85.0), Some((1, 0)), "{out:?}");
        let [lo, hi] = out.range.unwrap();
        assert!(lo <= 50.0 && hi > 50.0 && (hi - lo) / lo <= 0.07, "{out:?}");
        assert!(
            out.summary.contains("40: sustained in 1 of 2 runs"),
            "{out:?}"
        );
        assert_eq!(seen.iter().filter(|v| **v == 85.0).count(), 1, "{seen:?}");
        // It holds up to the plan's maximum: the knee is higher, not 40.
        let mut p2 = p;
        p2.max = 60.0;
        let mut seen: Vec<f64> = Vec::new();
        let out = search(p2, &mut |v, _| {
            let before = seen.iter().filter(|x| **x == v).count();
            seen.push(v);
            if v != 40.0 || before == 1 {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Throughput)
            }
        });
        assert_eq!(out.knee, Some(60.0), "{out:?}");
        assert_eq!(out.first_unsustained, None, "{out:?}");
        assert!(out.summary.contains("the knee is higher"), "{out:?}");
        // A high end that never held needs no such step.
        let mut seen: Vec<f64> = Vec::new();
        let out = search(p, &mut |v, _| {
            seen.push(v);
            if v < 40.0 {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Throughput)
            }
        });
        assert!(out.confirmed, "{out:?}");
        assert!(!seen.iter().any(|v| *v > 40.0), "{seen:?}");
    }

    #[test]
    fn sustained_above_unsustained_is_named() {
        let mut h = History::default();
        h.record(20.0, true);
        h.record(100.0, false);
        h.record(300.0, true);
        let notes = h.non_monotonic();
        assert_eq!(
            notes,
            vec!["sustained at 300 above 100, which was not sustained".to_string()]
        );
    }
}
