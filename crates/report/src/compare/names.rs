//! Request names in `loadlab compare`: when both sides of a series ran named requests (a
//! targets file, a plan scenario's `[[scenario.request]]`), each name both ran is compared
//! as its own series, p99 and achieved at every load both ran; names only one side ran are
//! listed.
//!
//! # What the data allows
//!
//! A step keeps one latency histogram per *second* for the whole run, but for each name
//! only its histogram over the whole window, and no successes per second. The whole's test
//! (a bootstrap over seconds, see [`super`]) therefore cannot be run per name, and nothing
//! per name says how correlated its requests were within a second. What is done instead:
//!
//! - **p99**: an interval for each side's p99 from its responses' order statistics (the
//!   distribution-free interval of a quantile: ranks from the binomial distribution of the
//!   count below it), each side at `√confidence` so that both hold together at the
//!   method's confidence, and the ratio's interval from their ends. That interval treats
//!   requests as independent, so it is *narrower* than the truth whenever requests of one
//!   second move together (a queue, a pause): it can show that even this optimistic view
//!   holds "no change" ([`Finding::WithinNoise`]), never that a difference is real. An
//!   interval that excludes no change is reported as not tested
//!   ([`Finding::TooLittleData`]), with the figures. A p99 is looked at only from
//!   [`MIN_TAIL`](super::bootstrap::MIN_TAIL) responses beyond it, as the whole's.
//! - **achieved**: the figures and the change side by side, not tested for noise: a name's
//!   rate is its share of the offered rate in open loop, and the spread of its successes
//!   over the seconds is not recorded.
//!
//! So a name's comparison never calls a difference ([`Finding::Better`] or
//! [`Finding::Worse`]); the whole's figures, tested, are where a difference is called.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

use super::bootstrap::{tail_testable, Counts};
use super::input::{Level, Series};
use super::{same_load, too_few_responses, Finding, Method, MetricChange};
use crate::format as text;

/// The quantile compared per name.
const Q: f64 = 0.99;

/// The sample a name's figures rest on, where the whole has per-second data.
pub const NO_SECONDS: &str = "no per-second data per name";

/// Request names of a series on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamesComparison {
    /// The names both sides ran, each as its own series, in the baseline's list order.
    pub names: Vec<NameComparison>,
    /// Names only the baseline ran (not compared).
    pub only_in_baseline: Vec<String>,
    /// Names only the other side ran (not compared).
    pub only_in_other: Vec<String>,
}

/// One request name on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameComparison {
    /// The request name.
    pub name: String,
    /// The loads both sides ran it at, ascending.
    pub steps: Vec<NameStepComparison>,
}

/// One request name at a load both sides ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameStepComparison {
    /// The load (req/s, connections or streams) of the steps.
    pub load: f64,
    /// The baseline's figures for the name.
    pub baseline: NameFigures,
    /// The other side's.
    pub other: NameFigures,
    /// Its p99 latency: at most within the noise, never a difference (see the module).
    pub p99: MetricChange,
    /// Its achieved throughput: side by side, not tested for noise.
    pub achieved: MetricChange,
}

/// One side's figures for a request name at a load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NameFigures {
    /// Runs that sent it.
    pub runs: u32,
    /// It held its own SLO in every run (`None`: a run result, which has no verdict).
    pub sustained: Option<bool>,
    /// p99 latency of its merged histograms, ms.
    pub p99_ms: Option<f64>,
    /// Mean achieved throughput of its runs, req/s.
    pub achieved_rps: Option<f64>,
    /// Responses in its latency histograms.
    pub responses: u64,
    /// Its failed requests.
    pub errors_total: u64,
}

/// The names of two matched series; `None` when neither side ran named requests.
pub(super) fn compare(a: &Series, b: &Series, method: &Method) -> Option<NamesComparison> {
    let (na, nb) = (a.names(), b.names());
    if na.is_empty() && nb.is_empty() {
        return None;
    }
    let names = na
        .iter()
        .filter(|n| nb.contains(n))
        .map(|name| NameComparison {
            name: name.to_string(),
            steps: a
                .levels
                .iter()
                .filter_map(|la| {
                    let lb = b.levels.iter().find(|lb| same_load(lb.load, la.load))?;
                    step(name, la, lb, method)
                })
                .collect(),
        })
        .collect();
    let only = |x: &[&str], y: &[&str]| -> Vec<String> {
        x.iter()
            .filter(|n| !y.contains(n))
            .map(|n| n.to_string())
            .collect()
    };
    Some(NamesComparison {
        names,
        only_in_baseline: only(&na, &nb),
        only_in_other: only(&nb, &na),
    })
}

/// One name at one load; `None` when a side did not send it there.
fn step(name: &str, a: &Level, b: &Level, method: &Method) -> Option<NameStepComparison> {
    let (fa, ca) = a.name_figures(name)?;
    let (fb, cb) = b.name_figures(name)?;
    Some(NameStepComparison {
        load: a.load,
        p99: p99(&fa, &fb, (&ca, &cb), method),
        achieved: achieved(&fa, &fb),
        baseline: fa,
        other: fb,
    })
}

/// The start of a comparison of two values, and the change (`None`: not comparable, and
/// the comparison says why).
fn change(what: &str, a: Option<f64>, b: Option<f64>, test: String) -> (MetricChange, Option<f64>) {
    let mut out = MetricChange {
        baseline: a,
        other: b,
        change: None,
        ci: None,
        finding: Finding::NotComparable,
        test,
        why: String::new(),
    };
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => {
            out.change = Some(b / a - 1.0);
        }
        (Some(_), Some(_)) => {
            out.why = format!("not comparable: the baseline's {what} is 0");
        }
        (a, _) => {
            out.why = format!(
                "not comparable: no {what} on {}",
                if a.is_none() {
                    "the baseline's side"
                } else {
                    "the other side"
                }
            );
        }
    }
    let c = out.change;
    (out, c)
}

fn p99(
    fa: &NameFigures,
    fb: &NameFigures,
    (ca, cb): (&Counts, &Counts),
    method: &Method,
) -> MetricChange {
    let (na, nb) = (ca.total(), cb.total());
    let test = format!(
        "order statistics of {na}+{nb} responses taken as independent ({NO_SECONDS}): it can show no change, never a difference"
    );
    let (mut out, c) = change("p99", fa.p99_ms, fb.p99_ms, test);
    let Some(c) = c else {
        return out;
    };
    out.finding = Finding::TooLittleData;
    if let Some(n) = [na, nb].into_iter().find(|&n| !tail_testable(n, Q)) {
        out.why = format!("{}, not tested: {}", text::pct(c), too_few_responses(n));
        return out;
    }
    let Some(ci) = ratio_interval(ca, cb, Q, method.confidence) else {
        out.why = format!(
            "{}, not tested: the responses bound no interval of the p99 at {}",
            text::pct(c),
            text::confidence(method.confidence)
        );
        return out;
    };
    let figures = format!(
        "{} ms → {} ms",
        text::ms(Some(fa.p99_ms.unwrap_or_default())),
        text::ms(Some(fb.p99_ms.unwrap_or_default()))
    );
    if ci[0] <= 0.0 && ci[1] >= 0.0 {
        out.finding = Finding::WithinNoise;
        out.ci = Some(ci);
        out.why = format!(
            "{}: {figures}, {} ({})",
            Finding::WithinNoise.describe(),
            text::pct(c),
            out.interval_text(method.confidence).unwrap_or_default()
        );
    } else {
        out.why = format!(
            "{figures}, {}, not tested for noise ({NO_SECONDS}): taken as independent, its requests would put the change in {}, but requests of one second move together, so the interval is wider by an amount the data does not tell: no difference is called",
            text::pct(c),
            text::pct_range(ci[0], ci[1])
        );
    }
    out
}

fn achieved(fa: &NameFigures, fb: &NameFigures) -> MetricChange {
    let (mut out, c) = change(
        "achieved",
        fa.achieved_rps,
        fb.achieved_rps,
        format!("none: {NO_SECONDS}"),
    );
    let Some(c) = c else {
        return out;
    };
    out.finding = Finding::TooLittleData;
    out.why = format!(
        "{} → {} req/s, {}, not tested for noise ({NO_SECONDS})",
        text::num(fa.achieved_rps.unwrap_or_default()),
        text::num(fb.achieved_rps.unwrap_or_default()),
        text::pct(c)
    );
    out
}

/// The interval of other ÷ baseline − 1 for the `q` quantile, from each side's order
/// statistics at `√confidence` (both hold together at `confidence`, the sides being
/// independent): `[low_other / high_baseline, high_other / low_baseline] − 1`. `None` when
/// a side's responses are too few to bound its quantile on either end.
pub fn ratio_interval(
    baseline: &Counts,
    other: &Counts,
    q: f64,
    confidence: f64,
) -> Option<[f64; 2]> {
    let side = confidence.sqrt();
    let (a_lo, a_hi) = quantile_bounds(baseline, q, side)?;
    let (b_lo, b_hi) = quantile_bounds(other, q, side)?;
    if a_lo == 0 || a_hi == 0 {
        return None;
    }
    Some([
        b_lo as f64 / a_hi as f64 - 1.0,
        b_hi as f64 / a_lo as f64 - 1.0,
    ])
}

/// The distribution-free interval of the `q` quantile at `confidence` (two-sided): the
/// order statistics `X(l) ≤ X(u)` such that the count of values below the quantile, a
/// binomial of `n` trials at `q`, falls short of `l` or reaches `u` with a chance of at
/// most `(1 − confidence) / 2` each. Values as recorded (µs); `None` when `n` is too small
/// for either rank to exist.
pub fn quantile_bounds(c: &Counts, q: f64, confidence: f64) -> Option<(u64, u64)> {
    let n = c.total();
    if n == 0 {
        return None;
    }
    let b = Binomial::new(q, n).ok()?;
    let tail = (1.0 - confidence) / 2.0;
    // The largest k with P(B ≤ k) ≤ tail gives l = k + 1.
    if b.cdf(0) > tail {
        return None;
    }
    let (mut lo, mut hi) = (0u64, n);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if b.cdf(mid) <= tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let l = lo + 1;
    // The smallest m with P(B ≤ m) ≥ 1 − tail gives u = m + 1, which must be a rank.
    let (mut lo, mut hi) = (0u64, n);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if b.cdf(mid) >= 1.0 - tail {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let m = if b.cdf(lo) >= 1.0 - tail { lo } else { hi };
    let u = m + 1;
    if u > n {
        return None;
    }
    Some((c.at_rank(l)?, c.at_rank(u)?))
}
