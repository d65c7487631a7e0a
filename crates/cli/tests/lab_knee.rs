//! Knee search against servers of known capacity (their own test binary, so that no other
//! test competes with them for the two cores while they measure; one at a time).

mod util;

use std::sync::Mutex;

use util::lab::{lab_ok, lines, plan_text, write_plan};
use util::temp_path;

static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn knee_search_finds_a_known_capacity() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
    assert!(report.contains("knee between"), "{report}");
    // Every step line carries a full engine result that the run schema accepts.
    for step in lines(&out_dir.join("steps.jsonl")) {
        util::assert_schema_valid(&step["result"]);
    }
}

#[test]
fn knee_range_contains_the_capacity_of_a_queueing_server_with_latency_spread() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Capacity 400/s that queues (never refuses), plus 0-80 ms of latency that costs no
    // capacity: above 400/s latency grows through the step; below, it only spreads. The
    // search starts at 300 and grows by 1.5: a step at 2x capacity would hold ~1,000
    // connections open into this thread-per-connection fixture, and the kernel work that
    // costs can delay loadlab's sends enough to be (rightly) called generator-limited.
    // Steps of 4 s: at 412.5/s, 3 % over the capacity, the server falls about 120 ms behind
    // over the step, which lateness cannot explain up to 40 ms (three times its reach); in
    // steps of 2 s it fell 60 ms behind, and on 7 December CI's other tests beside it made
    // loadlab's worst lateness 20 ms or more in three searches of three, each stopped there
    // as generator-limited (rightly: the step could not tell the server from loadlab).
    let plan = write_plan(
        "knee-spread",
        &plan_text(
            "\"--queue-capacity\", \"400\", \"--latency-ms\", \"0-80\"",
            "mode = [\"knee-spread\"]",
            "knee = { start = 300, max = 3200, precision = 0.05, growth = 1.5 }\nstep_duration = \"4s\"\nwarmup = \"200ms\"\nconnections = 8\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let mut out_dir = temp_path("knee-spread-bundle");
    lab_ok(&plan, &out_dir);
    // A search that loadlab's own lateness stopped (generator-limited twice at one step: a
    // scheduling hiccup of this shared machine; "the server's knee is at least ...") says
    // nothing of the server, and one whose narrowing it stopped inside the bracket ("the
    // search stopped at 412.5: the range is the server's, only not narrowed or confirmed")
    // cannot show the precision or the confirmation: it is run again (twice at most: on a
    // busy shared machine two searches in a row have both been stopped so), and must then
    // measure the knee.
    let stopped_by_loadlab = |dir: &std::path::Path| {
        let o = &lines(&dir.join("configs.jsonl"))[0]["knees"][0]["outcome"];
        o["limited_by"] == "generator_limited" || !o["stopped"].is_null()
    };
    for again in 0..2 {
        if !stopped_by_loadlab(&out_dir) {
            break;
        }
        out_dir = temp_path(&format!("knee-spread-bundle-again-{again}"));
        lab_ok(&plan, &out_dir);
    }
    let configs = lines(&out_dir.join("configs.jsonl"));
    let outcome = &configs[0]["knees"][0]["outcome"];
    // Each step's load and verdict, for the failure messages.
    let steps: Vec<String> = lines(&out_dir.join("steps.jsonl"))
        .iter()
        .map(|s| format!("{} {}", s["load"], s["verdict"]))
        .collect();
    let range = outcome["range"]
        .as_array()
        .unwrap_or_else(|| panic!("no range: {outcome}\nsteps:\n{}", steps.join("\n")));
    let (lo, hi) = (range[0].as_f64().unwrap(), range[1].as_f64().unwrap());
    // The range holds the capacity, or sits just below it by less than the precision
    // (a step 2 % over capacity keeps pace with 98 % of arrivals: the SLO's own slack).
    let steps = steps.join("\n");
    assert!(
        hi >= 400.0 * 0.95,
        "range {lo}-{hi} below 400: {outcome}\n{steps}"
    );
    assert!(
        lo <= 400.0 * 1.025,
        "range {lo}-{hi} above 400: {outcome}\n{steps}"
    );
    assert!((hi - lo) / lo <= 0.05 + 1e-9, "{outcome}");
    assert_eq!(outcome["limited_by"], "throughput", "{outcome}");
    // Both ends were repeated.
    let runs = |v: f64| {
        outcome["values"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["value"].as_f64() == Some(v))
            .map_or(0, |r| r["runs"].as_u64().unwrap())
    };
    assert!(runs(lo) >= 2 && runs(hi) >= 2, "{outcome}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("knee between"), "{report}");
    // No step below the capacity was blamed on the server. A step loadlab itself sent late
    // (a scheduling hiccup of this shared machine) is judged generator-limited, which blames
    // nobody (the clauses within loadlab's lateness are listed beside it: `throughput`, on a
    // loaded host), and the search repeats it; below the capacity a step is sustained or
    // generator-limited.
    for step in lines(&out_dir.join("steps.jsonl")) {
        if step["load"].as_f64().unwrap() <= 380.0 {
            let limits = step["verdict"]["limits"].as_array().unwrap();
            assert!(
                limits.is_empty() || limits.iter().any(|l| l == "generator_limited"),
                "a step below capacity blamed on the server: {}",
                step["verdict"]
            );
        }
    }
}
