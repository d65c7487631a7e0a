//! What each knob did, measured as an intervention: every two configurations tune tried
//! that differ in that knob alone, the knee of one against the other, resolved only when
//! the two knee ranges do not overlap.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::search::{Space, Trial};
use super::{range_words, KneeRange};
use crate::matrix::Config;

/// One knob moved, the others held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The knob.
    pub knob: String,
    /// Its value before (the lower value of an ordered knob).
    pub from: String,
    /// Its value after.
    pub to: String,
    /// The other knobs' values.
    pub context: BTreeMap<String, String>,
    /// The knee at `from`.
    pub from_knee: KneeRange,
    /// The knee at `to`.
    pub to_knee: KneeRange,
    /// `higher`, `lower` (the ranges do not overlap) or `unresolved`.
    pub change: String,
    /// Change of the knee's middle, percent, when both ranges are bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
    /// The diagnosis of the configuration with the lower knee, when it named this knob
    /// (its parameter, or a bottleneck the plan says the knob relieves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
    /// One sentence.
    pub sentence: String,
}

/// What one knob did over every move measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnobVerdict {
    /// The knob.
    pub knob: String,
    /// `moved` (a move changed the knee resolvably), `no_effect` (moves measured, none
    /// resolved) or `not_measured` (no two configurations tried differ in it alone).
    pub verdict: String,
    /// Moves measured.
    pub moves: usize,
    /// One sentence.
    pub sentence: String,
}

fn mid(k: &KneeRange) -> Option<f64> {
    Some((k.lo? + k.hi?) / 2.0)
}

/// The knob verdicts and every one-knob-apart pair of `trials`.
pub fn measure(
    space: &Space,
    configs: &[Config],
    trials: &[Trial],
    unit: &str,
) -> (Vec<KnobVerdict>, Vec<Effect>) {
    let mut effects: Vec<(usize, Effect)> = Vec::new();
    for (i, a) in trials.iter().enumerate() {
        for b in &trials[i + 1..] {
            let Some(k) = space.one_apart(a.config, b.config) else {
                continue;
            };
            if a.eval.failed || b.eval.failed {
                continue;
            }
            // From the lower value to the higher (ordered), or in the order tried.
            let (x, y) = if space.knobs[k].ordered
                && space.coords[a.config][k] > space.coords[b.config][k]
            {
                (b, a)
            } else {
                (a, b)
            };
            let knob = &space.knobs[k];
            let from_knee = KneeRange {
                lo: x.eval.lo,
                hi: x.eval.hi,
            };
            let to_knee = KneeRange {
                lo: y.eval.lo,
                hi: y.eval.hi,
            };
            let change = if y.eval.resolved_above(&x.eval) {
                "higher"
            } else if x.eval.resolved_above(&y.eval) {
                "lower"
            } else {
                "unresolved"
            };
            let change_pct = match (mid(&from_knee), mid(&to_knee)) {
                (Some(f), Some(t)) if f > 0.0 => Some(100.0 * (t / f - 1.0)),
                _ => None,
            };
            // The lower knee's diagnosis, when it pointed at this knob.
            let low = if change == "lower" { y } else { x };
            let setting = space.setting(low.config, k);
            let diagnosis = low.eval.bottleneck.and_then(|b| {
                if low.eval.named.contains(&setting) {
                    Some(format!(
                        "the {} limit the diagnosis named ({setting})",
                        b.label()
                    ))
                } else if knob.relieves.contains(&b) {
                    Some(format!(
                        "the {} limit the diagnosis found, which the plan says {} relieves",
                        b.label(),
                        knob.name
                    ))
                } else {
                    None
                }
            });
            let context: BTreeMap<String, String> = configs[x.config]
                .params
                .iter()
                .filter(|(n, _)| n != &knob.name)
                .cloned()
                .collect();
            let ctx = if context.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    context
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let how = match (change, change_pct) {
                ("unresolved", _) => {
                    "no change the step spacing resolves, the ranges overlap".to_string()
                }
                (c, Some(p)) => format!("{p:+.0} %, {c}, ranges disjoint"),
                (c, None) => format!("{c}, ranges disjoint"),
            };
            let sentence = format!(
                "{} {} → {}{ctx}: knee {} → {} ({how}){}",
                knob.name,
                configs[x.config]
                    .params
                    .iter()
                    .find(|(n, _)| n == &knob.name)
                    .map_or("", |(_, v)| v),
                configs[y.config]
                    .params
                    .iter()
                    .find(|(n, _)| n == &knob.name)
                    .map_or("", |(_, v)| v),
                range_words(&from_knee, "").trim_end(),
                range_words(&to_knee, unit),
                diagnosis
                    .as_ref()
                    .filter(|_| change != "unresolved")
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
            effects.push((
                k,
                Effect {
                    knob: knob.name.clone(),
                    from: space.knobs[k].values[space.coords[x.config][k]].clone(),
                    to: space.knobs[k].values[space.coords[y.config][k]].clone(),
                    context,
                    from_knee,
                    to_knee,
                    change: change.into(),
                    change_pct,
                    diagnosis,
                    sentence,
                },
            ));
        }
    }
    let verdicts = space
        .knobs
        .iter()
        .enumerate()
        .map(|(k, knob)| {
            let mine: Vec<&Effect> = effects
                .iter()
                .filter(|(i, _)| *i == k)
                .map(|(_, e)| e)
                .collect();
            let resolved: Vec<&&Effect> =
                mine.iter().filter(|e| e.change != "unresolved").collect();
            let (verdict, sentence) = if mine.is_empty() {
                (
                    "not_measured",
                    format!(
                        "{}: not measured (no two configurations tried differ in it alone)",
                        knob.name
                    ),
                )
            } else if resolved.is_empty() {
                (
                    "no_effect",
                    format!(
                        "{}: no effect resolved ({} move{}, the knee ranges overlapped in each)",
                        knob.name,
                        mine.len(),
                        if mine.len() == 1 { "" } else { "s" }
                    ),
                )
            } else {
                (
                    "moved",
                    format!(
                        "{}: moved the knee ({} of {} move{} resolved)",
                        knob.name,
                        resolved.len(),
                        mine.len(),
                        if mine.len() == 1 { "" } else { "s" }
                    ),
                )
            };
            KnobVerdict {
                knob: knob.name.clone(),
                verdict: verdict.into(),
                moves: mine.len(),
                sentence,
            }
        })
        .collect();
    (verdicts, effects.into_iter().map(|(_, e)| e).collect())
}
