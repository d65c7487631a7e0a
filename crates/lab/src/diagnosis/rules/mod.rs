//! The rules of the diagnosis, one file per bottleneck, in one table ([`RULES`]).
//!
//! A rule reads the step's [`Evidence`] and returns a [`Check`]: it fired (a finding with
//! its figures), its evidence rules the bottleneck out (what it saw), or the evidence it
//! needs was not there (what was not probed). Adding a bottleneck is adding a file and a
//! line to [`RULES`]; the README's and the report's lists come from [`markdown_table`].

mod accept_queue;
mod agent_lost;
mod client_ports;
mod concurrency;
mod cpu_bound;
mod cpu_throttled;
mod crash;
mod descriptors;
mod generator;
mod host_steal;
mod io_bound;
mod latency_floor;
mod memory_growth;
mod memory_limit;
mod pids_limit;
mod refused;
mod rejected;
mod thread_bound;
mod timeouts;
mod unreachable;
mod upstream;

use super::{Bottleneck, Evidence, Finding};

/// What a rule made of a step's evidence.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// Its bottleneck held, with the figures.
    Fired(Finding),
    /// Its evidence rules its bottleneck out: what it saw, in a few words with figures.
    RuledOut(String),
    /// The evidence it needs was not seen (not probed): what.
    NoEvidence(String),
    /// The rule says nothing about this kind of step.
    NotApplicable,
}

/// One rule of the table.
pub struct Rule {
    /// What it names.
    pub bottleneck: Bottleneck,
    /// The evidence it needs to fire (Markdown, for the README and the report).
    pub needs: &'static str,
    /// What its sentence says (Markdown).
    pub says: &'static str,
    /// The rule.
    pub check: fn(&Evidence<'_>) -> Check,
}

/// Every rule, in the order their findings are listed when their signals moved at once.
pub const RULES: &[Rule] = &[
    generator::RULE,
    agent_lost::RULE,
    crash::RULE,
    latency_floor::RULE,
    cpu_throttled::RULE,
    cpu_bound::RULE,
    thread_bound::RULE,
    io_bound::RULE,
    concurrency::RULE,
    accept_queue::RULE,
    timeouts::RULE,
    client_ports::RULE,
    descriptors::RULE,
    memory_growth::RULE,
    memory_limit::RULE,
    pids_limit::RULE,
    upstream::RULE,
    refused::RULE,
    rejected::RULE,
    unreachable::RULE,
    // Last: the host's share comes after whatever the server's figures showed.
    host_steal::RULE,
];

/// The rules as a Markdown table: bottleneck, the evidence it needs, what it says.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| bottleneck | evidence it needs | what the sentence says |\n|---|---|---|\n",
    );
    for r in RULES {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            r.bottleneck.name(),
            r.needs,
            r.says
        ));
    }
    out.push_str(
        "| `unknown` | no rule fired | what ruled out each bottleneck, with its figures, and what was not probed |\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bottleneck_but_unknown_has_one_rule() {
        let mut seen: Vec<Bottleneck> = RULES.iter().map(|r| r.bottleneck).collect();
        seen.sort();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a bottleneck with two rules");
        assert!(!seen.contains(&Bottleneck::Unknown));
        let table = markdown_table();
        for r in RULES {
            assert!(table.contains(&format!("| `{}` |", r.bottleneck.name())));
            assert!(!r.needs.contains('|') && !r.says.contains('|'));
        }
    }
}
