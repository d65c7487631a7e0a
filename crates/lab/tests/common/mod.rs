//! Recorded steps shared by the lab's tests.

use std::path::Path;

use loadlab_lab::bundle::StepRecord;

/// The step of the committed `backlog-workers` bundle at this configuration, scenario and
/// load.
pub fn recorded_step(config: &str, scenario: &str, load: f64) -> StepRecord {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/diagnosis/backlog-workers.steps.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str::<StepRecord>(l).expect("a step record"))
        .find(|s| s.config == config && s.scenario == scenario && s.load == load)
        .unwrap_or_else(|| panic!("no step {config} {scenario} {load}"))
}
