//! `loadlab compare`: result bundles (or `loadlab run --json` results) side by side, the
//! first as the baseline, and for each difference whether the measurement resolves it.
//!
//! What is compared, per scenario and configuration (matched by both names; when each side
//! has a single configuration of different names, those two are paired and the output says
//! so; whatever did not match is listed):
//!
//! - **the knee**, known only as a range: between the highest load sustained and the lowest
//!   not sustained (or "at least", "below");
//! - **p99 latency** and **achieved throughput** at every load step both sides ran.
//!
//! # The statistics, and why these
//!
//! **p99 and achieved at a common step: a bootstrap over seconds.** A step's runs keep one
//! latency histogram per second and the successes of each second. Resampling *seconds*
//! with replacement (not requests) keeps what happens inside a second together: the
//! latencies of one second are correlated (a queue, a pause, a noisy neighbour), those of
//! different seconds much less, so a request-level bootstrap would claim far more certainty
//! than the run holds. Histograms merge exactly, so the p99 of a resample is the p99 of the
//! merged seconds drawn (computed over a cumulative table, not by merging:
//! [`bootstrap::QuantileTable`]). Each side is resampled on its own, 20,000 times, and the
//! interval of the ratio other ÷ baseline is read off the resampled ratios (percentile
//! method) at [`CONFIDENCE`] (99.9 %, two-sided: the project's one level of proof). The
//! figures shown are the engine's own (p99 of the whole-window histogram at 3 significant
//! digits, the achieved rate of the step's definition), and the interval is the
//! bootstrap's relative spread around them. Achieved throughput resamples the successes
//! of the *full seconds of the measured window* (the seconds after it hold only the queue's
//! drain, a partial second that would fake a spread; the first second, whose completions
//! start one latency late, stays in and widens short steps' intervals, never narrows
//! them). The percentile bootstrap is only
//! approximate with few seconds, and with very few it would claim what no test of them
//! could: with 6 seconds a side, every second of one side beyond every second of the other
//! happens by chance once in 462 orderings, too often for 99.9 %. So a figure is tested
//! only when the seconds could resolve a difference at the confidence at all
//! ([`bootstrap::resolvable`]: 7 a side at 99.9 %, i.e. steps of 7 s or more, or repeats);
//! otherwise it is "too little data to test", never a difference.
//!
//! **A difference is called** only when (1) the interval excludes "no change", (2) it is not
//! entirely inside ± the noise threshold (5 % by default: criterion's rule, so a change of
//! 0.4 % resolved by a very steady step is reported as too small rather than as a change),
//! and (3) when a step was repeated (a knee search confirms its ends; a plan may run a load
//! twice), every run of one side lies beyond every run of the other: repeats are the only
//! view of run-to-run noise (a restarted server, a busy machine), which no resampling of
//! one run can see. Runs judged generator-limited, agent-lost or interrupted say nothing
//! about the server and are left out, as the report leaves them out of knees.
//!
//! **Knees: their ranges.** A knee is only known to lie between two steps, so two knees
//! differ only when their ranges do not overlap, and a step separates them: a load at or
//! above the lower knee's first unsustained step and at or below the higher knee's last
//! sustained one, which the higher side sustained with no unresolved clause. Each verdict
//! is already a test at [`CONFIDENCE`] (a clause fails only when the request count resolves
//! it), so the two boundary verdicts are the evidence; a step that held only within what
//! its count could resolve is borderline and separates nothing. Overlapping ranges are
//! "not resolved by the step spacing". The change in percent is that of the sustained
//! ends, with the range it could span given both ranges.
//!
//! **Request names: never a difference.** When both sides ran named requests, each name
//! both ran is compared as its own series, p99 and achieved at the loads both ran. A run
//! keeps no per-second data per name, so the test above cannot be run for them: a name's
//! p99 can at most be shown within the noise (by an interval that takes its requests as
//! independent, narrower than the truth), and its achieved rate is shown untested; see
//! [`names`].
//!
//! The result is a typed [`Comparison`] (serializable, [`COMPARISON_VERSION`]), rendered as
//! text by [`text::render`]; `loadlab compare --json` writes it as is (the committed
//! contract: `schema/comparison.schema.json`).

pub mod bootstrap;
mod input;
mod knee;
pub mod names;
pub mod text;

use serde::{Deserialize, Serialize};

use loadlab_engine::stats::CONFIDENCE;
use loadlab_lab::verdict::Limit;

pub use input::{Input, InputError, InputKind};
pub use names::{NameComparison, NameFigures, NameStepComparison, NamesComparison};

use bootstrap::RESAMPLES;
use input::{Level, Series};

/// Version of the [`Comparison`] JSON; bumped on incompatible changes.
pub const COMPARISON_VERSION: u32 = 1;

/// Changes whose whole interval lies within ± this fraction are not reported as changes.
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.05;

/// How the comparison is made.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Method {
    /// Two-sided confidence of every interval ([`CONFIDENCE`]).
    pub confidence: f64,
    /// Bootstrap resamples per interval.
    pub resamples: u32,
    /// A change whose interval lies entirely within ± this fraction is "below the
    /// threshold", not a change.
    pub noise_threshold: f64,
    /// Seconds a side (with as many on the other) before a figure can be tested at
    /// `confidence` (see [`bootstrap::resolvable`]).
    pub min_seconds: u32,
    /// Responses a side must have beyond its p99 before the p99 is tested
    /// ([`bootstrap::MIN_TAIL`]: 1,000 responses).
    pub min_tail: u32,
}

impl Default for Method {
    fn default() -> Method {
        Method {
            confidence: CONFIDENCE,
            resamples: RESAMPLES,
            noise_threshold: DEFAULT_NOISE_THRESHOLD,
            min_seconds: bootstrap::min_seconds(CONFIDENCE) as u32,
            min_tail: bootstrap::MIN_TAIL as u32,
        }
    }
}

/// Everything `loadlab compare` found; `--json` writes this.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`COMPARISON_VERSION`].
    pub comparison_version: u32,
    /// How differences were tested.
    pub method: Method,
    /// The inputs in command-line order; the first is the baseline.
    pub inputs: Vec<InputSummary>,
    /// Each later input against the baseline.
    pub pairs: Vec<PairComparison>,
}

/// One input as the comparison names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputSummary {
    /// `A`, `B`, `C`... (A is the baseline).
    pub label: String,
    /// Path as given.
    pub path: String,
    /// A bundle or a run result.
    pub kind: InputKind,
    /// The plan's name, or the method and URL of a run.
    pub name: String,
    /// When it ran (`environment.started_at`), if recorded.
    pub started_at: Option<String>,
    /// Steps it holds (1 for a run result).
    pub steps: usize,
}

/// A scenario and configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesKey {
    /// Scenario name (`run` for a `loadlab run` result).
    pub scenario: String,
    /// Configuration id (the URL for a `loadlab run` result).
    pub config: String,
}

/// One input against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairComparison {
    /// Label of the baseline (`A`).
    pub baseline: String,
    /// Label of the other input.
    pub other: String,
    /// `[baseline's, other's]`: the single configurations of each side, paired although
    /// their names differ.
    pub paired_configs: Option<[String; 2]>,
    /// Series only the baseline has.
    pub only_in_baseline: Vec<SeriesKey>,
    /// Series only the other input has.
    pub only_in_other: Vec<SeriesKey>,
    /// The matched series.
    pub series: Vec<SeriesComparison>,
}

/// One scenario and configuration on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesComparison {
    /// Scenario name.
    pub scenario: String,
    /// The baseline's configuration id.
    pub config: String,
    /// The other side's configuration id (differs when paired as the single ones).
    pub other_config: String,
    /// What a load step counts: `req/s`, `connections` or `concurrent streams`.
    pub unit: String,
    /// Why nothing more is compared (open loop against closed loop).
    pub not_comparable: Option<String>,
    /// The knees, when both sides have one.
    pub knee: Option<KneeComparison>,
    /// The loads both sides ran, ascending.
    pub steps: Vec<StepComparison>,
    /// Loads only the baseline ran.
    pub loads_only_in_baseline: Vec<f64>,
    /// Loads only the other side ran.
    pub loads_only_in_other: Vec<f64>,
    /// Request names, when either side ran named requests: each name both ran compared
    /// on its own (see [`names`]), and those only one side ran. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<NamesComparison>,
}

impl SeriesComparison {
    /// `sleep / workers=16`, or `sleep / workers=2 against workers=16` when the
    /// configurations were paired as the only ones.
    pub fn name(&self) -> String {
        if self.config == self.other_config {
            format!("{} / {}", self.scenario, self.config)
        } else {
            format!(
                "{} / {} against {}",
                self.scenario, self.other_config, self.config
            )
        }
    }
}

/// What a comparison concluded about one figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Better than the baseline, beyond the noise.
    Better,
    /// Worse than the baseline, beyond the noise.
    Worse,
    /// The interval holds "no change".
    WithinNoise,
    /// Resolved, but the whole interval lies within ± the noise threshold.
    BelowThreshold,
    /// The interval excludes no change, but repeated runs of the two sides overlap.
    WithinRepeatSpread,
    /// Knees: the same range on both sides.
    SameRange,
    /// Knees: the ranges overlap; steps between them would tell.
    NotResolvedBySteps,
    /// Knees: the ranges do not overlap, but no cleanly sustained step separates them.
    Borderline,
    /// Too few seconds (or repeats) to test.
    TooLittleData,
    /// Nothing to compare (no responses, a knee unknown, a zero baseline).
    NotComparable,
}

impl Finding {
    /// True for a difference the measurement resolves.
    pub fn is_difference(self) -> bool {
        matches!(self, Finding::Better | Finding::Worse)
    }

    /// Words for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Finding::Better => "better",
            Finding::Worse => "worse",
            Finding::WithinNoise => "within the noise",
            Finding::BelowThreshold => "below the noise threshold",
            Finding::WithinRepeatSpread => "within the spread of the repeats",
            Finding::SameRange => "same range",
            Finding::NotResolvedBySteps => "not resolved by the step spacing",
            Finding::Borderline => "not resolved: borderline step",
            Finding::TooLittleData => "too little data to test",
            Finding::NotComparable => "not comparable",
        }
    }
}

/// How a knee was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeSource {
    /// A knee search (`load.knee`).
    Search,
    /// The plan's fixed steps (`load.steps`).
    FixedSteps,
}

/// A knee as a range of load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeRange {
    /// The highest load sustained (in every run); `None`: not even the lowest step.
    pub sustained: Option<f64>,
    /// The lowest load above it not sustained; `None`: every step held ("at least").
    pub not_sustained: Option<f64>,
    /// What failed at `not_sustained` (or ended the search).
    pub limited_by: Option<Limit>,
    /// Search or fixed steps.
    pub source: KneeSource,
    /// A search whose two ends were repeated and agreed.
    pub confirmed: bool,
    /// Runs that disagreed, or a sustained step above an unsustained one.
    pub non_monotonic: bool,
}

impl KneeRange {
    /// "between 50 and 200", "at least 800", "below 10", "unknown".
    pub fn describe(&self) -> String {
        crate::knee::knee_cell(self.sustained, self.not_sustained)
    }
}

/// Two knees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeComparison {
    /// The baseline's.
    pub baseline: KneeRange,
    /// The other side's.
    pub other: KneeRange,
    /// Change of the sustained end, as a fraction (`0.25`: 25 % higher).
    pub change: Option<f64>,
    /// The change could be anywhere in `[low, high]` given both ranges (`None`: unbounded).
    pub change_range: [Option<f64>; 2],
    /// The conclusion.
    pub finding: Finding,
    /// The verdicts that decide it: "B was not sustained at 40 (latency), A sustained 40
    /// with every clause resolved" (empty for the same range or an unknown knee).
    pub evidence: String,
    /// One sentence: the conclusion, the ranges, the change and the evidence.
    pub why: String,
}

/// A load both sides ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepComparison {
    /// The load (req/s, connections or streams).
    pub load: f64,
    /// The baseline's runs at it.
    pub baseline: StepFigures,
    /// The other side's runs at it.
    pub other: StepFigures,
    /// p99 latency (lower is better).
    pub p99: MetricChange,
    /// Achieved throughput (higher is better).
    pub achieved: MetricChange,
}

/// One side's runs at a load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// Runs compared.
    pub runs: u32,
    /// Runs left out: generator-limited, agent lost or interrupted (they say nothing about
    /// the server).
    pub excluded_runs: u32,
    /// Every compared run was sustained (`None`: no run to compare, or a run result, which
    /// has no verdict).
    pub sustained: Option<bool>,
    /// p99 latency of the runs' merged histograms, ms.
    pub p99_ms: Option<f64>,
    /// Mean achieved throughput of the runs, req/s.
    pub achieved_rps: Option<f64>,
    /// Each run's p99, ms.
    pub run_p99_ms: Vec<f64>,
    /// Each run's achieved throughput, req/s.
    pub run_achieved_rps: Vec<f64>,
    /// Responses in the runs' latency histograms (what the p99 rests on).
    pub responses: u64,
    /// Per-second latency histograms resampled (every second with a response).
    pub latency_seconds: u32,
    /// Full seconds of the measured windows resampled for throughput.
    pub window_seconds: u32,
    /// A run result that `loadlab run` itself flagged as generator-limited.
    pub generator_limited: bool,
    /// A flow's sessions, summed over the runs (absent for independent requests). Shown
    /// side by side, not tested for noise: a run keeps no per-second session counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionCounts>,
    /// Held streams' own timing (server streams, event streams, WebSocket pushes) and the
    /// flow-control stalls of streams that send; absent for other loads. Shown side by
    /// side, not tested for noise: a run keeps these as summaries, with no per-second
    /// histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamFigures>,
}

/// Streams in the compared runs of a step. A run keeps its stream timing as percentiles,
/// which do not merge: with repeats, each figure is the highest of the runs' (the worst
/// seen), never an average that no run had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    /// Streams that sent a first message, summed over the runs.
    pub streams: u64,
    /// Time to first message, median, ms.
    pub first_message_p50_ms: Option<f64>,
    /// Time to first message, 99th percentile, ms.
    pub first_message_p99_ms: Option<f64>,
    /// Gap between a stream's messages, median, ms.
    pub gap_p50_ms: Option<f64>,
    /// Gap between a stream's messages, 99th percentile, ms.
    pub gap_p99_ms: Option<f64>,
    /// Messages the server's flow-control window held back, summed over the runs
    /// (`None`: streams that only receive).
    pub window_stalls: Option<u64>,
    /// Held server streams: the stream-seconds held and those in which a stream missed a
    /// message, summed over the runs (0 and 0: not counted by the loadlab that ran it).
    #[serde(default)]
    pub stream_seconds: u64,
    /// See `stream_seconds`.
    #[serde(default)]
    pub failed_stream_seconds: u64,
}

impl StreamFigures {
    /// Failed stream-seconds of those held, when any were counted (as
    /// [`loadlab_engine::result::StreamTiming::starved`]).
    pub fn starved(&self) -> Option<(u64, u64)> {
        (self.stream_seconds > 0).then_some((self.failed_stream_seconds, self.stream_seconds))
    }

    /// The figures of several runs: counts summed, each percentile the highest of the
    /// runs'.
    pub fn over(runs: impl IntoIterator<Item = StreamFigures>) -> Option<StreamFigures> {
        let worst = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, None) => x,
            (None, y) => y,
        };
        runs.into_iter().reduce(|a, b| StreamFigures {
            streams: a.streams + b.streams,
            first_message_p50_ms: worst(a.first_message_p50_ms, b.first_message_p50_ms),
            first_message_p99_ms: worst(a.first_message_p99_ms, b.first_message_p99_ms),
            gap_p50_ms: worst(a.gap_p50_ms, b.gap_p50_ms),
            gap_p99_ms: worst(a.gap_p99_ms, b.gap_p99_ms),
            window_stalls: match (a.window_stalls, b.window_stalls) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
            },
            stream_seconds: a.stream_seconds + b.stream_seconds,
            failed_stream_seconds: a.failed_stream_seconds + b.failed_stream_seconds,
        })
    }
}

/// A flow's sessions in the compared runs of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionCounts {
    /// Sessions started.
    pub started: u64,
    /// Sessions that sent every step and had every response.
    pub completed: u64,
    /// Sessions ended by a failed request.
    pub aborted: u64,
    /// Sessions still running when their window ended.
    pub running_at_end: u64,
}

/// One figure on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricChange {
    /// The baseline's value.
    pub baseline: Option<f64>,
    /// The other side's value.
    pub other: Option<f64>,
    /// other ÷ baseline − 1 (`0.38`: 38 % more).
    pub change: Option<f64>,
    /// The interval of `change` at [`Method::confidence`].
    pub ci: Option<[f64; 2]>,
    /// The conclusion.
    pub finding: Finding,
    /// The test and its sample: "bootstrap over 30+30 per-second histograms".
    pub test: String,
    /// One sentence: the conclusion, the figure and how sure it is.
    pub why: String,
}

impl MetricChange {
    /// `99.9 % CI +30..+47 %, bootstrap over 30+30 per-second histograms` (`None`: not
    /// tested).
    pub fn interval_text(&self, confidence: f64) -> Option<String> {
        let [lo, hi] = self.ci?;
        Some(format!(
            "{} CI {}, {}",
            text::confidence(confidence),
            text::pct_range(lo, hi),
            self.test
        ))
    }
}

/// Compares each input after the first with the first.
pub fn compare(inputs: &[&Input], method: &Method) -> Comparison {
    let labels: Vec<String> = (0..inputs.len()).map(label).collect();
    let summaries = inputs
        .iter()
        .zip(&labels)
        .map(|(i, l)| i.summary(l))
        .collect();
    let pairs = match inputs.split_first() {
        Some((baseline, others)) => others
            .iter()
            .zip(&labels[1..])
            .map(|(other, l)| compare_pair(baseline, &labels[0], other, l, method))
            .collect(),
        None => Vec::new(),
    };
    Comparison {
        comparison_version: COMPARISON_VERSION,
        method: *method,
        inputs: summaries,
        pairs,
    }
}

/// `A`, `B`, ... `Z`, then `#27`.
fn label(i: usize) -> String {
    if i < 26 {
        char::from(b'A' + i as u8).to_string()
    } else {
        format!("#{}", i + 1)
    }
}

/// When each side has a single configuration and their names differ, those two are
/// compared with each other: `[baseline's, other's]`.
pub fn sole_configs(baseline: &[&str], other: &[&str]) -> Option<[String; 2]> {
    fn distinct<'a>(v: &[&'a str]) -> Vec<&'a str> {
        let mut d = v.to_vec();
        d.sort_unstable();
        d.dedup();
        d
    }
    match (distinct(baseline).as_slice(), distinct(other).as_slice()) {
        ([a], [b]) if a != b => Some([a.to_string(), b.to_string()]),
        _ => None,
    }
}

fn compare_pair(
    a: &Input,
    a_label: &str,
    b: &Input,
    b_label: &str,
    method: &Method,
) -> PairComparison {
    let configs =
        |i: &Input| -> Vec<String> { i.series.iter().map(|s| s.config.clone()).collect() };
    let (ca, cb) = (configs(a), configs(b));
    let ca: Vec<&str> = ca.iter().map(String::as_str).collect();
    let cb: Vec<&str> = cb.iter().map(String::as_str).collect();
    let paired = sole_configs(&ca, &cb);
    // The baseline's name for a configuration of the other side.
    let in_baseline = |config: &str| match &paired {
        Some([pa, pb]) if pb == config => pa.clone(),
        _ => config.to_string(),
    };
    let mut matched = vec![false; b.series.len()];
    let mut series = Vec::new();
    let mut only_in_baseline = Vec::new();
    for sa in &a.series {
        let found = b
            .series
            .iter()
            .position(|sb| sb.scenario == sa.scenario && in_baseline(&sb.config) == sa.config);
        match found {
            Some(i) => {
                matched[i] = true;
                series.push(compare_series(
                    (sa, a_label),
                    (&b.series[i], b_label),
                    method,
                ));
            }
            None => only_in_baseline.push(sa.key()),
        }
    }
    let only_in_other = b
        .series
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(s, _)| s.key())
        .collect();
    PairComparison {
        baseline: a_label.to_string(),
        other: b_label.to_string(),
        paired_configs: paired,
        only_in_baseline,
        only_in_other,
        series,
    }
}

fn compare_series(
    (a, la): (&Series, &str),
    (b, lb): (&Series, &str),
    method: &Method,
) -> SeriesComparison {
    let mut out = SeriesComparison {
        scenario: a.scenario.clone(),
        config: a.config.clone(),
        other_config: b.config.clone(),
        unit: a.unit.to_string(),
        not_comparable: None,
        knee: None,
        steps: Vec::new(),
        loads_only_in_baseline: Vec::new(),
        loads_only_in_other: Vec::new(),
        names: None,
    };
    if a.model != b.model || a.unit != b.unit {
        out.not_comparable = Some(format!("{la}'s steps are {}, {lb}'s {}", a.unit, b.unit));
        return out;
    }
    out.knee = match (&a.knee, &b.knee) {
        (Some(ka), Some(kb)) => Some(knee::compare((ka, a, la), (kb, b, lb), a.unit)),
        _ => None,
    };
    for la in &a.levels {
        match b.levels.iter().find(|lb| same_load(lb.load, la.load)) {
            Some(lb) => out.steps.push(compare_step(la, lb, method)),
            None => out.loads_only_in_baseline.push(la.load),
        }
    }
    out.loads_only_in_other = b
        .levels
        .iter()
        .filter(|lb| !a.levels.iter().any(|la| same_load(la.load, lb.load)))
        .map(|lb| lb.load)
        .collect();
    out.names = names::compare(a, b, method);
    out
}

/// Loads are plan values (or a search's arithmetic on them): equal to rounding.
fn same_load(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn compare_step(a: &Level, b: &Level, method: &Method) -> StepComparison {
    let (fa, fb) = (a.figures(), b.figures());
    let p99 = {
        let (ta, tb) = (a.latency_table(), b.latency_table());
        let short = [ta.total(), tb.total()]
            .into_iter()
            .find(|&n| !bootstrap::tail_testable(n, 0.99));
        let interval = match short {
            Some(n) => Err(too_few_responses(n)),
            None => bootstrap::relative_interval(
                ta.len(),
                tb.len(),
                &ta.figure(0.99),
                &tb.figure(0.99),
                method.confidence,
                method.resamples,
            )
            .ok_or_else(|| too_few_seconds(Metric::P99, ta.len(), tb.len(), method)),
        };
        judge(
            Metric::P99,
            (&fa, &fb),
            (ta.len(), tb.len()),
            interval,
            method,
        )
    };
    let achieved = {
        let (sa, sb) = (a.window_successes(), b.window_successes());
        let interval = bootstrap::relative_interval(
            sa.len(),
            sb.len(),
            &|w| bootstrap::weighted_mean(&sa, w),
            &|w| bootstrap::weighted_mean(&sb, w),
            method.confidence,
            method.resamples,
        )
        .ok_or_else(|| too_few_seconds(Metric::Achieved, sa.len(), sb.len(), method));
        judge(
            Metric::Achieved,
            (&fa, &fb),
            (sa.len(), sb.len()),
            interval,
            method,
        )
    };
    StepComparison {
        load: a.load,
        baseline: fa,
        other: fb,
        p99,
        achieved,
    }
}

/// Why a p99 of `n` responses is not tested ([`bootstrap::MIN_TAIL`]).
fn too_few_responses(n: u64) -> String {
    format!(
        "a p99 of {n} responses rests on the slowest {}; testing it needs {} responses a side ({} beyond the p99)",
        n.div_ceil(100).max(1),
        loadlab_system::doctor::thousands(100 * bootstrap::MIN_TAIL),
        bootstrap::MIN_TAIL
    )
}

/// Why a figure was not tested, when its interval could not be had.
fn too_few_seconds(metric: Metric, na: usize, nb: usize, method: &Method) -> String {
    if bootstrap::resolvable(na, nb, method.confidence) {
        format!(
            "the {} are undefined in too many resamples",
            metric.seconds_kind()
        )
    } else {
        format!(
            "{na}+{nb} {} are too few to resolve any change at {} ({} a side would do: longer steps or repeats)",
            metric.seconds_kind(),
            text::confidence(method.confidence),
            bootstrap::min_seconds(method.confidence)
        )
    }
}

/// The figures compared at a step.
#[derive(Clone, Copy)]
enum Metric {
    /// p99 latency, ms: lower is better.
    P99,
    /// Achieved throughput, req/s (in closed loop too): higher is better.
    Achieved,
}

impl Metric {
    fn value(self, f: &StepFigures) -> Option<f64> {
        match self {
            Metric::P99 => f.p99_ms,
            Metric::Achieved => f.achieved_rps,
        }
    }
    fn runs(self, f: &StepFigures) -> &[f64] {
        match self {
            Metric::P99 => &f.run_p99_ms,
            Metric::Achieved => &f.run_achieved_rps,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Metric::P99 => "p99",
            Metric::Achieved => "achieved",
        }
    }
    fn seconds_kind(self) -> &'static str {
        match self {
            Metric::P99 => "per-second histograms",
            Metric::Achieved => "seconds of successes",
        }
    }
    fn fmt(self, v: f64) -> String {
        match self {
            Metric::P99 => format!("{} ms", text::ms(v)),
            Metric::Achieved => format!("{} req/s", text::num(v)),
        }
    }
}

/// Applies the rules of the module comment to one figure.
fn judge(
    metric: Metric,
    (fa, fb): (&StepFigures, &StepFigures),
    (na, nb): (usize, usize),
    interval: Result<[f64; 2], String>,
    method: &Method,
) -> MetricChange {
    let (a, b) = (metric.value(fa), metric.value(fb));
    let test = format!("bootstrap over {na}+{nb} {}", metric.seconds_kind());
    let mut out = MetricChange {
        baseline: a,
        other: b,
        change: None,
        ci: None,
        finding: Finding::NotComparable,
        test,
        why: String::new(),
    };
    let (Some(a), Some(b)) = (a, b) else {
        out.why = format!(
            "not comparable: no {} on {}",
            metric.name(),
            if a.is_none() {
                "the baseline's side"
            } else {
                "the other side"
            }
        );
        return out;
    };
    if a <= 0.0 {
        out.why = format!("not comparable: the baseline's {} is 0", metric.name());
        return out;
    }
    let ratio = b / a;
    let change = ratio - 1.0;
    out.change = Some(change);
    let rel = match interval {
        Ok(rel) => rel,
        Err(why) => {
            out.finding = Finding::TooLittleData;
            out.why = format!("{}, not tested: {why}", text::pct(change));
            return out;
        }
    };
    let ci = [ratio * rel[0] - 1.0, ratio * rel[1] - 1.0];
    out.ci = Some(ci);
    let interval_text = out.interval_text(method.confidence).unwrap_or_default();
    let nt = method.noise_threshold;
    let (runs_a, runs_b) = (metric.runs(fa), metric.runs(fb));
    let separated = if change > 0.0 {
        runs_b.iter().all(|y| runs_a.iter().all(|x| y > x))
    } else {
        runs_b.iter().all(|y| runs_a.iter().all(|x| y < x))
    };
    out.finding = if ci[0] <= 0.0 && ci[1] >= 0.0 {
        Finding::WithinNoise
    } else if ci[0] >= -nt && ci[1] <= nt {
        Finding::BelowThreshold
    } else if !separated {
        Finding::WithinRepeatSpread
    } else {
        let higher_is_better = matches!(metric, Metric::Achieved);
        if (change > 0.0) == higher_is_better {
            Finding::Better
        } else {
            Finding::Worse
        }
    };
    let figures = format!("{} → {}", metric.fmt(a), metric.fmt(b));
    out.why = match out.finding {
        Finding::WithinRepeatSpread => format!(
            "{}: {figures}, {} ({interval_text}), but the repeated runs overlap (baseline {}, other {})",
            out.finding.describe(),
            text::pct(change),
            runs_text(metric, runs_a),
            runs_text(metric, runs_b)
        ),
        Finding::BelowThreshold => format!(
            "{} of ±{}: {figures}, {} ({interval_text})",
            out.finding.describe(),
            text::pct_abs(nt),
            text::pct(change)
        ),
        _ => format!(
            "{}: {figures}, {} ({interval_text})",
            out.finding.describe(),
            text::pct(change)
        ),
    };
    out
}

fn runs_text(metric: Metric, runs: &[f64]) -> String {
    let lo = runs.iter().copied().reduce(f64::min).unwrap_or(f64::NAN);
    let hi = runs.iter().copied().reduce(f64::max).unwrap_or(f64::NAN);
    let n = runs.len();
    let plural = if n == 1 { "" } else { "s" };
    if n > 1 {
        format!("{n} runs {}..{}", metric.fmt(lo), metric.fmt(hi))
    } else {
        format!("{n} run{plural} {}", metric.fmt(lo))
    }
}

#[cfg(test)]
mod tests;
