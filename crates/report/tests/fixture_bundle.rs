//! `report.md` rendered from a committed bundle (`tests/fixtures/queue`: a server that
//! queues at 150 or 400 req/s, driven at 100 and 300 req/s by `loadlab lab`), so that a
//! change to the report, or to the types the bundle is read with, shows here as a diff.
//! After an intended change of the report, regenerate the expected file with
//! `UPDATE_EXPECT=1 cargo test -p loadlab-report --test fixture_bundle`.

mod util;
use util::TempDir;

use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queue")
}

#[test]
fn the_committed_bundle_renders_the_expected_report() {
    let dir = fixture();
    let report = loadlab_report::render_bundle(&dir).unwrap();
    let expected_path = dir.join("expected-report.md");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &report).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    if report != expected {
        let first = report
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(report.lines().count().min(expected.lines().count()));
        panic!(
            "report.md differs from {} from line {}:\n  got:      {:?}\n  expected: {:?}\n(UPDATE_EXPECT=1 rewrites it after an intended change)",
            expected_path.display(),
            first + 1,
            report.lines().nth(first),
            expected.lines().nth(first)
        );
    }
}

#[test]
fn the_report_says_what_the_steps_measured() {
    let report = loadlab_report::render_bundle(&fixture()).unwrap();
    // The 150 req/s queue fell behind at 300: half the offered rate, marked unsustained.
    assert!(
        report.contains("| capacity=150 | 100 | 150 ✗ |"),
        "{report}"
    );
    assert!(
        report.contains("served 50 % of the offered rate"),
        "{report}"
    );
    assert!(
        report.contains("| capacity=150 | queue | between 100 and 300 |"),
        "{report}"
    );
    // The 400 req/s one kept up with both steps.
    assert!(report.contains("| capacity=400 | 100 | 300 |"), "{report}");
    assert!(
        report.contains("| capacity=400 | queue | at least 300 | not reached |"),
        "{report}"
    );
    // The answer first: each knee, the best configuration, the clauses around the knee.
    let answer = report.find("## Answer").expect("an answer");
    assert!(answer < report.find("## Knees").unwrap(), "{report}");
    assert!(answer < report.find("Sustained means").unwrap(), "{report}");
    assert!(
        report.contains("- **queue** (capacity=150): knee between 100 and 300 req/s."),
        "{report}"
    );
    assert!(
        report.contains("- **queue**: best configuration `capacity=400`: it sustained 300 req/s, where every other configuration had already broken."),
        "{report}"
    );
    assert!(
        report.contains("| queue | capacity=150 | p99 < 500 ms | 100 req/s: "),
        "{report}"
    );
    assert!(
        report.contains("keeps pace ≥ 98 % | 100 %, passed | 50 %, **failed** |"),
        "{report}"
    );
    // The plan's SLO and the pre-flight findings come from the bundle's typed files.
    assert!(report.contains("p99 latency at most 500 ms"), "{report}");
    assert!(
        report.contains("## Pre-flight (loadlab doctor)"),
        "{report}"
    );
}

/// A bundle written before later fields existed still renders: its plan has no `cpus` or
/// `quick`, its results no `latency_trend` or re-send counters, and it has no
/// `doctor.json` (only the text `doctor.txt` was written then).
#[test]
fn an_older_bundle_without_later_fields_still_renders() {
    let old = TempDir::new("old-bundle");
    for f in std::fs::read_dir(fixture()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, old.join(f.file_name().unwrap())).unwrap();
    }
    // Removes `keys` from the object at `nested` of each JSON value in the file (one value
    // in a .json file, one per line in a .jsonl file).
    let strip = |name: &str, keys: &[&str], nested: &[&str]| {
        let path = old.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let values: Vec<&str> = if name.ends_with(".jsonl") {
            text.lines().collect()
        } else {
            vec![text.as_str()]
        };
        let mut out = String::new();
        for value in values {
            let mut v: serde_json::Value = serde_json::from_str(value).unwrap();
            let target = nested.iter().fold(&mut v, |v, k| &mut v[*k]);
            for k in keys {
                assert!(target.as_object_mut().unwrap().remove(*k).is_some(), "{k}");
            }
            out.push_str(&v.to_string());
            out.push('\n');
        }
        std::fs::write(&path, out).unwrap();
    };
    strip("plan.json", &["quick"], &[]);
    strip("plan.json", &["cpus"], &["load"]);
    strip(
        "steps.jsonl",
        &[
            "latency_trend",
            "resent_unprocessed",
            "server_closes",
            "requests_per_server_close",
        ],
        &["result"],
    );
    std::fs::remove_file(old.join("doctor.json")).unwrap();
    let report = loadlab_report::render_bundle(&old).unwrap();
    assert!(report.contains("| capacity=400 | 100 | 300 |"), "{report}");
    assert!(!report.contains("## Pre-flight"), "{report}");
}

/// One agent's share as a distributed step records it.
fn agent_share(name: &str, generator_limited: bool) -> serde_json::Value {
    serde_json::json!({
        "name": name, "address": "10.77.0.2:40000", "threads": 1, "offered_rps": 50.0,
        "connections": 2, "concurrency": 0, "request_limit": null, "requests": 500,
        "successful": 500, "errors_total": 0, "achieved_rps": 50.0, "latency_p50_ms": 1.0,
        "latency_p99_ms": 2.0, "clock_offset_ms": 0.0, "clock_rtt_ms": 0.1,
        "start_skew_ms": 0.0, "cpu_seconds": 0.1, "generator_limited": generator_limited,
        "generator_notes": if generator_limited {
            vec!["schedule lag p99 is 1.50 ms (limit 1 ms)"]
        } else {
            vec![]
        },
        "lost": null
    })
}

/// The report of a copy of the committed bundle whose steps `edit` changed.
fn render_edited(name: &str, edit: impl FnOnce(&mut Vec<serde_json::Value>)) -> String {
    let dir = TempDir::new(name);
    for f in std::fs::read_dir(fixture()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let mut steps: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    edit(&mut steps);
    let body: String = steps.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(dir.join("steps.jsonl"), body).unwrap();
    loadlab_report::render_bundle(&dir).unwrap()
}

/// An agent whose own lag tripped the engine's 1 ms flag reads as the step does: excused
/// when the verdict found the lag too small to matter, generator-limited when it did not.
#[test]
fn an_agents_row_agrees_with_its_steps_verdict_on_lateness() {
    let report = render_edited("agents", |steps| {
        // Step 0 of capacity=150: sustained, its lag excused. Step 0 of capacity=400: judged
        // generator-limited.
        steps[0]["result"]["generator_limited"] = true.into();
        steps[0]["result"]["agents"] =
            serde_json::json!([agent_share("late-a", true), agent_share("calm-b", false)]);
        steps[2]["result"]["generator_limited"] = true.into();
        steps[2]["verdict"]["sustained"] = false.into();
        steps[2]["verdict"]["limits"] = serde_json::json!(["generator_limited"]);
        steps[2]["result"]["agents"] =
            serde_json::json!([agent_share("late-c", true), agent_share("calm-d", false)]);
    });
    let row = |name: &str| {
        report
            .lines()
            .find(|l| l.contains(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{report}"))
            .to_string()
    };
    assert!(
        row("late-a").ends_with("| some sends late, too little to change the load offered |"),
        "{}",
        row("late-a")
    );
    assert!(row("calm-b").ends_with("|  |"), "{}", row("calm-b"));
    assert!(
        row("late-c").ends_with("| generator-limited |"),
        "{}",
        row("late-c")
    );
    assert!(row("calm-d").ends_with("|  |"), "{}", row("calm-d"));
}

/// A late generator's step put on the server says, beside the lag, how long requests waited
/// in loadlab before their send when that was longer (what the verdict weighed).
#[test]
fn a_failed_steps_note_says_the_wait_before_the_send() {
    let report = render_edited("before-send", |steps| {
        // 21 ms is no notable wait beside a worst lag of 20 ms (a send comes just after its
        // release).
        for (i, wait) in [(0, 900.0), (2, 21.0)] {
            let r = &mut steps[i]["result"];
            r["generator_limited"] = true.into();
            r["schedule_lag_ms"]["p99"] = 12.0.into();
            r["schedule_lag_ms"]["max"] = 20.0.into();
            r["before_send_ms_max"] = serde_json::json!(wait);
            steps[i]["verdict"]["sustained"] = false.into();
            steps[i]["verdict"]["limits"] = serde_json::json!(["latency"]);
        }
    });
    assert!(
        report.contains("some sends late (lag p99 12.00 ms, worst 20.00 ms; up to 900.00 ms before their send), too little to explain the failure"),
        "{report}"
    );
    // A wait not notably longer than the worst lag adds nothing.
    assert!(
        report.contains(
            "some sends late (lag p99 12.00 ms, worst 20.00 ms), too little to explain the failure"
        ),
        "{report}"
    );
}
