//! Knee search against a server of known capacity (its own test binary, so that no other
//! test competes with it for the two cores while it measures).

mod util;

use util::lab::{lab_ok, lines, plan_text, write_plan};
use util::temp_path;

#[test]
fn knee_search_finds_a_known_capacity() {
    // The fixture answers 503 above a token bucket of 400 requests/s.
    let plan = write_plan(
        "knee",
        &plan_text(
            "\"--capacity\", \"{capacity}\"",
            "capacity = [400]\nmode = [\"knee\"]",
            "knee = { start = 100, max = 3200, precision = 0.05 }\nstep_duration = \"1s\"\nwarmup = \"200ms\"\nconnections = 8\nthreads = 1\ncpus = \"1\"",
        ),
    );
    let out_dir = temp_path("knee-bundle");
    lab_ok(&plan, &out_dir);
    let configs = lines(&out_dir.join("configs.jsonl"));
    let outcome = &configs[0]["knees"][0]["outcome"];
    let knee = outcome["knee"]
        .as_f64()
        .unwrap_or_else(|| panic!("no knee: {outcome}"));
    assert!(
        (360.0..=440.0).contains(&knee),
        "knee {knee} should be within 10 % of 400: {outcome}"
    );
    assert_eq!(outcome["limited_by"], "errors", "{outcome}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        report.contains("| capacity=400,mode=knee | s |"),
        "{report}"
    );
    assert!(report.contains("knee at"), "{report}");
    // Every step line carries a full engine result that the run schema accepts.
    for step in lines(&out_dir.join("steps.jsonl")) {
        util::assert_schema_valid(&step["result"]);
    }
}
