//! `rejected`: the server answered most requests with a 4xx status. The request (its URL,
//! method, headers or body) is wrong, not the load: no knee is measured by sending more.

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding};
use crate::verdict::LOAD_STATUSES;

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Rejected,
    needs: "4xx answers other than 429 (too many requests) and 408 (request timeout) are at least half of the requests sent",
    says: "which statuses, how many, and the first response body (capped): the request, not the load, is wrong; a knee search stops there",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let Some((rejected, attempts)) = crate::verdict::rejected(r) else {
        return Check::RuledOut(format!(
            "{} 4xx answers",
            r.errors.sum_of(&[ErrorClass::Http4xx])
        ));
    };
    let codes: Vec<String> = r
        .status_codes
        .iter()
        .filter(|(c, _)| c.starts_with('4') && !LOAD_STATUSES.contains(&c.as_str()))
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
