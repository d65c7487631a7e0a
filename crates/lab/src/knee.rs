//! Knee search: grow the load geometrically until a step is not sustained, then bisect
//! between the last sustained and the first unsustained value to the requested precision.
//! A generator-limited step or a crashed target ends the search: the first is never
//! reported as the server's knee, the second leaves nothing to measure.

use serde::{Deserialize, Serialize};

use crate::verdict::Limit;

/// The search's bounds.
#[derive(Clone, Copy, Debug)]
pub struct KneeParams {
    /// First value.
    pub start: f64,
    /// Largest value tried.
    pub max: f64,
    /// Stop when `(hi - lo) / lo` is at most this.
    pub precision: f64,
    /// Growth factor while sustained.
    pub growth: f64,
    /// Values are connection counts (whole numbers).
    pub integer: bool,
}

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
    /// Geometric growth.
    Search,
    /// Bisection.
    Bisect,
    /// All scenarios together.
    Together,
}

/// The outcome of a knee search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeOutcome {
    /// The highest sustained value (`None`: not even the start was sustained).
    pub knee: Option<f64>,
    /// The lowest value found unsustained.
    pub first_unsustained: Option<f64>,
    /// What limited the first unsustained value (or ended the search).
    pub limited_by: Option<Limit>,
    /// One sentence for reports.
    pub summary: String,
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Runs the search; `step` runs one step at a value and says how it went.
pub fn search(p: KneeParams, step: &mut dyn FnMut(f64, Phase) -> StepSignal) -> KneeOutcome {
    let round = |v: f64| if p.integer { v.round().max(1.0) } else { v };
    let terminal = |l: Limit| {
        matches!(
            l,
            Limit::GeneratorLimited | Limit::TargetCrashed | Limit::Interrupted
        )
    };
    let mut lo: Option<f64> = None;
    let mut v = round(p.start);
    let (mut h, mut hl) = loop {
        match step(v, Phase::Search) {
            StepSignal::Sustained => {
                lo = Some(v);
                if v >= p.max {
                    return KneeOutcome {
                        knee: lo,
                        first_unsustained: None,
                        limited_by: None,
                        summary: format!(
                            "sustained up to the plan's maximum {}: the knee is higher",
                            fmt(v)
                        ),
                    };
                }
                let next = round((v * p.growth).min(p.max));
                v = if next <= v {
                    round(v + 1.0).min(p.max)
                } else {
                    next
                };
            }
            StepSignal::NotSustained(l) if terminal(l) => return ended(lo, v, l),
            StepSignal::NotSustained(l) => break (v, l),
        }
    };
    let Some(mut l) = lo else {
        return KneeOutcome {
            knee: None,
            first_unsustained: Some(h),
            limited_by: Some(hl),
            summary: format!(
                "not sustained even at the first step {} ({})",
                fmt(h),
                hl.describe()
            ),
        };
    };
    loop {
        let narrow = if p.integer {
            h - l <= 1.0
        } else {
            (h - l) / l <= p.precision
        };
        if narrow {
            break;
        }
        let mid = if p.integer {
            ((l + h) / 2.0).floor()
        } else {
            (l + h) / 2.0
        };
        match step(mid, Phase::Bisect) {
            StepSignal::Sustained => l = mid,
            StepSignal::NotSustained(x) if terminal(x) => return ended(Some(l), mid, x),
            StepSignal::NotSustained(x) => {
                h = mid;
                hl = x;
            }
        }
    }
    KneeOutcome {
        knee: Some(l),
        first_unsustained: Some(h),
        limited_by: Some(hl),
        summary: format!(
            "knee at {} (not sustained at {}: {})",
            fmt(l),
            fmt(h),
            hl.describe()
        ),
    }
}

fn ended(lo: Option<f64>, at: f64, l: Limit) -> KneeOutcome {
    let what = match l {
        Limit::GeneratorLimited => format!(
            "search stopped at {}: loadlab was the bottleneck (generator-limited), so the server's knee is {}",
            fmt(at),
            lo.map_or("unknown".into(), |v| format!("at least {}", fmt(v)))
        ),
        Limit::TargetCrashed => format!("the target crashed at {}", fmt(at)),
        _ => format!("search {} at {}", l.describe(), fmt(at)),
    };
    KneeOutcome {
        knee: lo,
        first_unsustained: (l == Limit::TargetCrashed).then_some(at),
        limited_by: Some(l),
        summary: what,
    }
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
}
