//! `crash`: a target exited during the step.

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::Crash,
    needs: "a target loadlab started exited during the step",
    says: "its exit status or signal and its last log lines",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let Some(c) = e.step.crashed else {
        return Check::NotApplicable;
    };
    let tail: Vec<&str> = c.log_tail.lines().rev().take(3).collect();
    let mut f = Finding::new(
        Bottleneck::Crash,
        format!(
            "target {} exited during the step ({}){}",
            c.target,
            c.status,
            if tail.is_empty() {
                String::new()
            } else {
                format!(
                    "; its last log lines: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                )
            }
        ),
        "see the target's log in logs/",
        &[],
    );
    if let Some(code) = c.code {
        f.figures.insert("exit_code".into(), f64::from(code));
    }
    Check::Fired(f)
}
