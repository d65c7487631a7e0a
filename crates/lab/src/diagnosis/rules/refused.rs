//! `refused`: the server answered 5xx to most of the failed requests: it shed work it could
//! not take (a full queue, mailbox or pool answering 503). A proxy's 502 and 504 are its
//! upstream's, read by the `upstream` rule.

use super::{Check, Rule};
use crate::diagnosis::{pct, Bottleneck, Evidence, Finding};
use crate::verdict::LOAD_STATUSES;

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Refused,
    needs: "5xx answers other than 502 and 504 (and 429 too many requests, 408 request timeout) are at least half of the failed requests",
    says: "the count and the status codes: the server shed work it could not take (document 000's `/send_nowait` mailbox answering 503)",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    // 429 and 408 are a server shedding work too, as a 503 is; a 502 or 504 is a proxy's
    // word on its upstream (`upstream`).
    let shed = |c: &str| {
        (c.starts_with('5') && !super::upstream::GATEWAY.contains(&c)) || LOAD_STATUSES.contains(&c)
    };
    let server_errors: u64 = r
        .status_codes
        .iter()
        .filter(|(c, _)| shed(c))
        .map(|(_, n)| *n)
        .sum();
    if server_errors == 0 || server_errors * 2 < r.errors_total {
        return Check::RuledOut(format!(
            "{server_errors} 5xx (but 502 and 504), 429 or 408 answers"
        ));
    }
    let codes: Vec<String> = r
        .status_codes
        .iter()
        .filter(|(c, _)| shed(c))
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
                ("shed", server_errors as f64),
                ("requests", r.requests as f64),
            ],
        )
        .at(e.first_error_second()),
    )
}
