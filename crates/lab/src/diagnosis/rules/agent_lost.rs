//! `agent_lost`: an agent of a distributed run was lost during the step.

use super::{Check, Rule};
use crate::diagnosis::{Bottleneck, Evidence, Finding};

pub(super) const RULE: Rule = Rule {
    bottleneck: Bottleneck::AgentLost,
    needs: "an agent of a distributed run stopped answering during the step",
    says: "which agent and why: its share is missing, so the step says nothing about the server",
    check,
};

fn check(e: &Evidence<'_>) -> Check {
    let r = e.result();
    if r.agents.is_empty() {
        return Check::NotApplicable;
    }
    match r.agents.iter().find(|a| a.lost.is_some()) {
        None => Check::RuledOut(format!("all {} agents answered", r.agents.len())),
        Some(lost) => Check::Fired(Finding::new(
            Bottleneck::AgentLost,
            format!(
                "agent {} was lost during the step ({}): its share is missing",
                lost.name,
                lost.lost.as_deref().unwrap_or("")
            ),
            "the step says nothing about the server: run it again with every agent",
            &[],
        )),
    }
}
