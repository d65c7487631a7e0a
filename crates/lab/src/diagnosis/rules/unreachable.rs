//! `unreachable`: nothing answered at the address: every connection was refused and no
//! request succeeded. The server is not running there (or not on that port or address);
//! a knee search stops at once.

use loadlab_engine::ErrorClass;

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Unreachable,
    needs: "no request succeeded and refused connections (`connect_refused`: nothing listens at the address) are at least half of the attempts",
    says: "the address and the count: the server is not there, not overloaded; a knee search stops there",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    let refused = r.errors.sum_of(&[ErrorClass::ConnectRefused]);
    if !crate::verdict::unreachable(r) {
        return Check::RuledOut(format!("{refused} connections refused"));
    }
    let addr = url::Url::parse(&r.url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_else(|| r.url.clone());
    Check::Fired(Finding::new(
        Bottleneck::Unreachable,
        format!(
            "every connection to {addr} was refused ({refused} of {} attempts) and no request succeeded: \
             nothing listens there",
            r.attempts()
        ),
        "start the server, or check the URL's address and port (`ss -ltnp` lists what listens)",
        &[("connect_refused", refused as f64)],
    ))
}
