//! Diagnoses end to end, against fixture servers built to break one way each: a fixed pool
//! of N slots (the diagnosis must name ≈N and the matrix parameter), a CPU-bound server
//! pinned to one CPU, one that leaks memory per request. One at a time: they measure.

mod util;

use std::sync::Mutex;

use serde_json::Value;
use util::lab::{lab_ok, lines, plan_text, write_plan};
use util::temp_path;

static SERIAL: Mutex<()> = Mutex::new(());

/// The findings of the step at `load`.
fn findings(steps: &[Value], load: f64) -> Vec<Value> {
    let step = steps
        .iter()
        .find(|s| s["load"].as_f64() == Some(load))
        .unwrap_or_else(|| panic!("no step at {load}"));
    assert_eq!(step["verdict"]["sustained"], false, "{}", step["verdict"]);
    step["diagnosis"]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnosis at {load}: {step}"))
        .clone()
}

fn kinds(f: &[Value]) -> Vec<&str> {
    f.iter()
        .map(|x| x["bottleneck"].as_str().unwrap())
        .collect()
}

#[test]
fn a_pool_of_n_slots_is_named_with_its_size() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 8 slots held 50 ms each: 160 req/s at most, CPU idle. 80 req/s is fine; 320 is not.
    let plan = write_plan(
        "pool",
        &plan_text(
            "\"--pool\", \"{pool}\", \"--service-ms\", \"50\"",
            "pool = [8]\nmode = [\"pool\"]",
            "steps = [80, 320]\nstep_duration = \"2s\"\nconnections = 16\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("pool-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let low = steps.iter().find(|s| s["load"] == 80.0).unwrap();
    assert_eq!(low["verdict"]["sustained"], true, "{}", low["verdict"]);
    assert!(
        low.get("diagnosis").is_none(),
        "a sustained step has no diagnosis"
    );
    let f = findings(&steps, 320.0);
    let c = f
        .iter()
        .find(|x| x["bottleneck"] == "concurrency_bound")
        .unwrap_or_else(|| panic!("not concurrency-bound: {f:?}"));
    let n = c["figures"]["in_service"].as_f64().unwrap();
    assert!((6.4..=9.6).contains(&n), "≈{n} in service for a pool of 8");
    assert_eq!(c["parameter"], "pool=8", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("the 8 `pool` are the limit"),
        "{c}"
    );
    assert!(!kinds(&f).contains(&"cpu_bound"), "{f:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| concurrency-bound (`pool=8`) |"),
        "{report}"
    );
    assert!(report.contains("### Why"), "{report}");
}

#[test]
fn a_cpu_bound_target_is_judged_against_its_one_cpu() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 2 ms of CPU per request on the one CPU the target may use (the plan pins it to CPU
    // 0): 500 req/s at most. 100 req/s is fine; 1000 is not.
    let plan = write_plan(
        "cpu",
        &plan_text(
            "\"--burn-us\", \"2000\"",
            "mode = [\"cpu\"]",
            "steps = [100, 1000]\nstep_duration = \"2s\"\nconnections = 8\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("cpu-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let f = findings(&steps, 1000.0);
    let c = f
        .iter()
        .find(|x| x["bottleneck"] == "cpu_bound")
        .unwrap_or_else(|| panic!("not CPU-bound: {f:?}"));
    assert_eq!(c["figures"]["cpus"], 1.0, "{c}");
    assert!(c["figures"]["utilization"].as_f64().unwrap() >= 0.9, "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("of its 1 CPU (affinity: 1 CPU)"),
        "{c}"
    );
    assert!(!kinds(&f).contains(&"concurrency_bound"), "{f:?}");
}

#[test]
fn memory_growth_is_reported_with_its_rate() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A pool of 4 slots × 20 ms (200 req/s) offered 400 req/s, every request leaking 256 KiB:
    // the step fails on the pool, and the target's memory grows ~50 MB/s while it does.
    let plan = write_plan(
        "leak",
        &plan_text(
            "\"--pool\", \"4\", \"--service-ms\", \"20\", \"--leak-kb\", \"256\"",
            "mode = [\"leak\"]",
            "steps = [400]\nstep_duration = \"3s\"\nconnections = 16\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("leak-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let f = findings(&steps, 400.0);
    let m = f
        .iter()
        .find(|x| x["bottleneck"] == "memory_growth")
        .unwrap_or_else(|| panic!("no memory growth: {f:?}"));
    let per_s = m["figures"]["bytes_per_s"].as_f64().unwrap() / 1048576.0;
    // 200 answers/s × 256 KiB = 50 MiB/s (the probe's seconds blur the edges).
    assert!((25.0..=75.0).contains(&per_s), "{per_s} MiB/s");
}
