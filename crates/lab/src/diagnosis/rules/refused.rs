//! `refused`: the server answered 5xx to most of the failed requests: it shed work it could
//! not take (a full queue, mailbox or pool answering 503).

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Refused,
    needs: "5xx answers are at least half of the failed requests",
    says: "the count and the status codes: the server shed work it could not take (document 000's `/send_nowait` mailbox answering 503)",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let server_errors = r.errors.sum_of(&[ErrorClass::Http5xx]);
    if server_errors == 0 || server_errors * 2 < r.errors_total {
        return Check::RuledOut(format!("{server_errors} 5xx answers"));
    }
    let codes: Vec<String> = r
        .status_codes
        .iter()
        .filter(|(c, _)| c.starts_with('5'))
        .map(|(c, n)| format!("{c}: {n}"))
        .collect();
    Check::Fired(
        Finding::new(
            Bottleneck::Refused,
            format!(
                "the server answered {server_errors} of {} requests with an error status ({}){}: it refused \
                 work it could not take (a full queue, mailbox or pool)",
                r.requests,
                codes.join(", "),
                e.cpu
                    .as_ref()
                    .map_or(String::new(), |c| format!(" at {} CPU", pct(c.util())))
            ),
            "see what the status means in the server's log, and raise the capacity behind it",
            &[
                ("http_5xx", server_errors as f64),
                ("requests", r.requests as f64),
            ],
        )
        .at(e.first_error_second()),
    )
}
