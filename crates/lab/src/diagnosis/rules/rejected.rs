//! `rejected`: the server answered most requests with a 4xx status. The request (its URL,
//! method, headers or body) is wrong, not the load: no knee is measured by sending more.

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Rejected,
    needs: "4xx answers are at least half of the requests sent",
    says: "which statuses, how many, and the first response body (capped): the request, not the load, is wrong; a knee search stops there",
    check,
};

/// True when most of the requests of `r` were answered 4xx.
pub(crate) fn mostly_rejected(r: &loadlab_engine::RunResult) -> bool {
    let rejected = r.errors.sum_of(&[ErrorClass::Http4xx]);
    rejected > 0 && rejected * 2 >= r.attempts()
}

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let rejected = r.errors.sum_of(&[ErrorClass::Http4xx]);
    if !mostly_rejected(r) {
        return Check::RuledOut(format!("{rejected} 4xx answers"));
    }
    let attempts = r.attempts();
    let codes: Vec<String> = r
        .status_codes
        .iter()
        .filter(|(c, _)| c.starts_with('4'))
        .map(|(c, n)| format!("{c} to {n}"))
        .collect();
    let body = e
        .step
        .response_sample
        .map(|s| format!("; {s}"))
        .unwrap_or_default();
    Check::Fired(
        Finding::new(
            Bottleneck::Rejected,
            format!(
                "the server answered {} of {attempts} requests ({}) at {}{body}: the request \
                 is wrong (its URL, method, headers or body), not the load",
                codes.join(", "),
                pct(rejected as f64 / attempts.max(1) as f64),
                e.load_words()
            ),
            "fix the request (try it with curl first); more load measures nothing while the \
             server rejects it",
            &[("http_4xx", rejected as f64), ("requests", attempts as f64)],
        )
        .at(e.first_error_second()),
    )
}
