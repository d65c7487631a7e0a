//! Two knees, each known only as a range of load: they differ when the ranges do not
//! overlap and a step the higher side sustained cleanly lies between them (see the module
//! comment of [`super`]).

use super::input::Series;
use super::{Finding, KneeComparison, KneeRange};
use crate::format::{num, pct, pct_range};

/// The range as numbers: `[sustained or 0, not_sustained or ∞]`.
fn bounds(k: &KneeRange) -> Option<(f64, f64)> {
    if k.sustained.is_none() && k.not_sustained.is_none() {
        return None;
    }
    Some((
        k.sustained.unwrap_or(0.0),
        k.not_sustained.unwrap_or(f64::INFINITY),
    ))
}

/// A load in `[from, to]` that `side` sustained with no unresolved clause in any run.
fn separating_step(side: &Series, from: f64, to: f64) -> Option<f64> {
    side.levels
        .iter()
        .filter(|l| l.load >= from - 1e-9 && l.load <= to + 1e-9)
        .find(|l| l.cleanly_sustained())
        .map(|l| l.load)
}

/// Compares the baseline's knee `ka` (of series `a`, labelled `la`) with `kb` (of `b`,
/// labelled `lb`).
pub(super) fn compare(
    (ka, a, la): (&KneeRange, &Series, &str),
    (kb, b, lb): (&KneeRange, &Series, &str),
    unit: &str,
) -> KneeComparison {
    let mut out = KneeComparison {
        baseline: ka.clone(),
        other: kb.clone(),
        change: None,
        change_range: [None, None],
        finding: Finding::NotComparable,
        evidence: String::new(),
        why: String::new(),
    };
    let (Some((a_lo, a_hi)), Some((b_lo, b_hi))) = (bounds(ka), bounds(kb)) else {
        out.why = format!(
            "not comparable: {}'s knee is unknown (loadlab itself was the limit)",
            if bounds(ka).is_none() { la } else { lb }
        );
        return out;
    };
    if let (Some(x), Some(y)) = (ka.sustained, kb.sustained) {
        if x > 0.0 {
            out.change = Some(y / x - 1.0);
        }
    }
    // The true knees lie in [lo, hi): their ratio in (b_lo / a_hi, b_hi / a_lo).
    let ratio_or_none = |r: f64| r.is_finite().then_some(r - 1.0);
    out.change_range = [
        ratio_or_none(b_lo / a_hi).or(Some(-1.0)),
        if a_lo > 0.0 {
            ratio_or_none(b_hi / a_lo)
        } else {
            None
        },
    ];
    let ranges = format!(
        "{la} {} {unit}, {lb} {} {unit}",
        ka.describe(),
        kb.describe()
    );
    let mut caveats = Vec::new();
    for (k, who) in [(ka, la), (kb, lb)] {
        if k.non_monotonic {
            caveats.push(format!("{who}'s steps were non-monotonic"));
        }
    }
    let caveat = if caveats.is_empty() {
        String::new()
    } else {
        format!(" ({})", caveats.join("; "))
    };
    let change = match out.change {
        Some(c) => format!("{}, ", pct(c)),
        None => String::new(),
    };
    let span = match out.change_range {
        [Some(lo), Some(hi)] => format!("somewhere in {}", pct_range(lo, hi)),
        [Some(lo), None] => format!("{} or more", pct(lo)),
        [None, Some(hi)] => format!("{} or less", pct(hi)),
        [None, None] => "unbounded".into(),
    };
    let limited = |k: &KneeRange| {
        k.limited_by
            .map_or(String::new(), |l| format!(" ({})", l.describe()))
    };
    let held = |who: &str, from: f64, to: f64| {
        if from == to {
            format!(
                "{who} held {} only within what its request count could resolve",
                num(from)
            )
        } else {
            format!(
                "{who} held from {} to {} only within what its request counts could resolve",
                num(from),
                num(to)
            )
        }
    };
    let (finding, evidence) = if a_lo == b_lo && a_hi == b_hi {
        (Finding::SameRange, String::new())
    } else if a_hi <= b_lo {
        // The other knee is higher if it sustained, cleanly, a load the baseline failed at
        // or above.
        match separating_step(b, a_hi, b_lo) {
            Some(at) => (
                Finding::Better,
                format!(
                    "{la} was not sustained at {}{}, {lb} sustained {} with every clause resolved",
                    num(a_hi),
                    limited(ka),
                    num(at)
                ),
            ),
            None => (Finding::Borderline, held(lb, a_hi, b_lo)),
        }
    } else if b_hi <= a_lo {
        match separating_step(a, b_hi, a_lo) {
            Some(at) => (
                Finding::Worse,
                format!(
                    "{lb} was not sustained at {}{}, {la} sustained {} with every clause resolved",
                    num(b_hi),
                    limited(kb),
                    num(at)
                ),
            ),
            None => (Finding::Borderline, held(la, b_hi, a_lo)),
        }
    } else {
        (
            Finding::NotResolvedBySteps,
            "the ranges overlap; steps between them would tell".to_string(),
        )
    };
    out.finding = finding;
    out.why = match finding {
        Finding::SameRange => format!("same range: {ranges}{caveat}"),
        Finding::Better | Finding::Worse => format!(
            "{}: {ranges}, {change}{span}: {evidence}{caveat}",
            if finding == Finding::Better {
                "higher"
            } else {
                "lower"
            }
        ),
        _ => format!("{}: {ranges}: {evidence}{caveat}", finding.describe()),
    };
    out.evidence = evidence;
    out
}
