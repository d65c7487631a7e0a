//! `loadlab compare` and `loadlab lab --baseline` on real bundles of the scenario server
//! (`/sleep` holds one of N blocking workers for 100 ms: 2 workers serve 20 req/s, 16 serve
//! 160), and every input they refuse. The loads sit far from the capacities (10 and 30 req/s
//! for 2 workers: half and 1.5 times it; 10 to 80 for 16: at most half), the target runs on
//! CPU 0 and loadlab on CPU 1, and the steps last 8 s so that each figure has enough seconds
//! to be tested at 99.9 % (7 a side). Their own test binary, one lab at a time.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use loadlab_report::baseline::{BaselineCheck, RegressedFigure};
use loadlab_report::compare::{Comparison, Finding};
use util::lab::{lab_ok, LAB_BOUND};
use util::sse::{SseBehavior, SseServer};
use util::{loadlab_bin, output_within, run, temp_path, Behavior, TestServer};

static SERIAL: Mutex<()> = Mutex::new(());

/// `/sleep` on the scenario server with `workers` blocking workers, each request holding one
/// for `sleep_ms`, at these fixed steps.
fn sleep_plan(workers: u32, sleep_ms: u32, steps: &str) -> PathBuf {
    let plan = temp_path(&format!("compare-w{workers}-{sleep_ms}ms.toml"));
    std::fs::write(
        &plan,
        format!(
            r#"name = "sleep-w{workers}"
[[target]]
name = "scenario"
command = ["{{loadlab}}", "serve", "scenario", "--bind", "127.0.0.1:{{port}}",
           "--workers", "{{workers}}", "--sleep-ms", "{sleep_ms}", "--shutdown-timeout", "5"]
ready = {{ http = "http://127.0.0.1:{{port}}/health", status = 200 }}
ready_timeout = "30s"
cpus = "0"
[matrix]
workers = [{workers}]
[[scenario]]
name = "sleep"
url = "http://127.0.0.1:{{port}}/sleep"
timeout = "10s"
[load]
steps = {steps}
step_duration = "8s"
warmup = "500ms"
pause = "200ms"
threads = 1
cpus = "1"
[slo]
p99_ms = 1000
"#
        ),
    )
    .unwrap();
    plan
}

/// `loadlab ARGS` (a lab, a report or a comparison), killed (and the test failed) past
/// [`LAB_BOUND`].
fn loadlab(args: &[&str]) -> Output {
    output_within(Command::new(loadlab_bin()).args(args), LAB_BOUND).0
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `loadlab compare --json`, checked against the committed schema and decoded into the
/// library's type (the versioned contract).
fn compare_json(inputs: &[&Path]) -> Comparison {
    let mut args = vec!["compare", "--json"];
    args.extend(inputs.iter().map(|p| path(p)));
    let o = loadlab(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schema/comparison.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "violates the schema:\n{}",
        errors.join("\n")
    );
    let c: Comparison = serde_json::from_value(v).unwrap();
    assert_eq!(
        c.comparison_version,
        loadlab_report::compare::COMPARISON_VERSION
    );
    c
}

/// Every figure of every pair.
fn findings(c: &Comparison) -> Vec<(String, Finding)> {
    let mut out = Vec::new();
    for p in &c.pairs {
        for s in &p.series {
            if let Some(k) = &s.knee {
                out.push((format!("{} knee: {}", s.name(), k.why), k.finding));
            }
            for st in &s.steps {
                out.push((
                    format!("{} p99 at {}: {}", s.name(), st.load, st.p99.why),
                    st.p99.finding,
                ));
                out.push((
                    format!("{} achieved at {}: {}", s.name(), st.load, st.achieved.why),
                    st.achieved.finding,
                ));
            }
        }
    }
    out
}

#[test]
fn workers_2_against_16_differ_and_two_runs_of_16_do_not() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fast = sleep_plan(16, 100, "[10, 30, 80]");
    let slow = sleep_plan(2, 100, "[10, 30]");

    let base = temp_path("w16-base");
    lab_ok(&fast, &base);

    // 2 workers against the 16-worker baseline: a regression, exit 3, named on stderr and in
    // the report (the knee: at least 80 against between 10 and 30; p99 at 30).
    let regressed = temp_path("w2");
    let o = loadlab(&[
        "lab",
        "-q",
        path(&slow),
        "--out",
        path(&regressed),
        "--baseline",
        path(&base),
        "--max-regression",
        "10%",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("1 regression against the baseline"),
        "{stderr}"
    );
    assert!(
        stderr.contains("sleep / workers=2 against workers=16: knee at least 80 → between 10 and 30 req/s: at least")
            && stderr.contains("lower, more than the 10 % allowed"),
        "{stderr}"
    );
    let check: BaselineCheck =
        serde_json::from_str(&std::fs::read_to_string(regressed.join("baseline.json")).unwrap())
            .unwrap();
    let figures: Vec<&RegressedFigure> = check.regressions.iter().map(|r| &r.figure).collect();
    // The p99 at 30 rests on 240 responses, too few to test (1,000 a side): the knee alone.
    assert_eq!(figures, vec![&RegressedFigure::Knee]);
    let report = std::fs::read_to_string(regressed.join("report.md")).unwrap();
    assert!(report.contains("## Against the baseline"), "{report}");
    assert!(report.contains("**1 regression beyond 10 %:**"), "{report}");
    // `loadlab report` renders the section again from baseline.json.
    std::fs::remove_file(regressed.join("report.md")).unwrap();
    let o = loadlab(&["report", path(&regressed)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("## Against the baseline"));

    // The same plan again: no regression, exit 0.
    let again = temp_path("w16-again");
    let o = loadlab(&[
        "lab",
        "-q",
        path(&fast),
        "--out",
        path(&again),
        "--baseline",
        path(&base),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no regression against the baseline"));

    // compare: the knee difference is significant, with its evidence.
    let c = compare_json(&[&base, &regressed]);
    let pair = &c.pairs[0];
    assert_eq!(
        pair.paired_configs,
        Some(["workers=16".to_string(), "workers=2".to_string()])
    );
    let s = &pair.series[0];
    let knee = s.knee.as_ref().unwrap();
    assert_eq!(knee.finding, Finding::Worse, "{}", knee.why);
    assert_eq!(knee.change_range[1], Some(30.0 / 80.0 - 1.0));
    assert!(
        knee.evidence.contains("B was not sustained at 30"),
        "{}",
        knee.why
    );
    let at30 = s.steps.iter().find(|st| st.load == 30.0).unwrap();
    assert_eq!(at30.p99.finding, Finding::TooLittleData, "{}", at30.p99.why);
    assert_eq!(
        at30.achieved.finding,
        Finding::Worse,
        "{}",
        at30.achieved.why
    );
    assert_eq!(s.loads_only_in_baseline, vec![80.0]);
    // The text says the same, aligned.
    let o = loadlab(&["compare", path(&base), path(&regressed)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().any(|l| l.contains("knee (req/s)")
            && l.contains("at least 80")
            && l.contains("LOWER")),
        "{out}"
    );
    assert!(
        out.contains("B against A: worse: sleep / workers=2 against workers=16 (knee"),
        "{out}"
    );

    // Two runs of the same configuration: within the noise, every figure that was tested.
    let c = compare_json(&[&base, &again]);
    let all = findings(&c);
    let differences: Vec<&(String, Finding)> =
        all.iter().filter(|(_, f)| f.is_difference()).collect();
    assert!(differences.is_empty(), "{differences:#?}");
    assert!(
        all.iter()
            .any(|(w, f)| *f == Finding::SameRange && w.contains("knee")),
        "{all:#?}"
    );
    let tested = all
        .iter()
        .filter(|(_, f)| matches!(f, Finding::WithinNoise | Finding::BelowThreshold))
        .count();
    assert!(tested >= 3, "too few figures tested: {all:#?}");
}

#[test]
fn a_slower_handler_is_a_resolved_p99_regression() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The same server and load, /sleep holding its worker 100 ms, then 200 ms: 150 req/s for
    // 8 s (1,200 responses a side) keeps 15 or 30 of the 64 workers busy, far from the limit.
    let (fast, slow) = (sleep_plan(64, 100, "[150]"), sleep_plan(64, 200, "[150]"));
    let mut attempt = 1;
    let (base, after, o) = loop {
        let base = temp_path("sleep-100");
        lab_ok(&fast, &base);
        let after = temp_path("sleep-200");
        let o = loadlab(&[
            "lab",
            "-q",
            path(&slow),
            "--out",
            path(&after),
            "--baseline",
            path(&base),
        ]);
        // On a busy host the seconds' p99s spread (a 100 ms handler's p99 at 134 ms), and the
        // lab says so: the p99 is worse, but its interval's low end is within the 10 % allowed
        // ("No regression beyond 10 %", the change listed among the other differences). What
        // the product calls unresolved is measured again, as a user would: twice at most.
        let unresolved = o.status.code() == Some(0)
            && text(&o).contains("No regression beyond 10 %")
            && text(&o).contains("p99 at 150: worse");
        if unresolved && attempt < 3 {
            attempt += 1;
            continue;
        }
        break (base, after, o);
    };
    // The p99 doubled: a regression beyond the default 10 % even at the interval's low end.
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("1 regression against the baseline")
            && stderr.contains("sleep / workers=64: p99 at 150 req/s: "),
        "{stderr}"
    );

    let c = compare_json(&[&base, &after]);
    let s = &c.pairs[0].series[0];
    assert_eq!(s.knee.as_ref().unwrap().finding, Finding::SameRange);
    let st = &s.steps[0];
    assert!(
        st.baseline.responses >= 1000 && st.other.responses >= 1000,
        "{st:#?}"
    );
    assert_eq!(st.p99.finding, Finding::Worse, "{}", st.p99.why);
    // Each p99 at least its handler's sleep, and the change theirs: not a size, which a busy
    // host moves (142 → 224 ms, +58 %, beside the whole suite on a fresh machine).
    let (b, o) = (st.p99.baseline.unwrap(), st.p99.other.unwrap());
    assert!(b >= 100.0 && o >= 200.0, "{}", st.p99.why);
    let change = st.p99.change.unwrap();
    assert!((change - (o / b - 1.0)).abs() < 1e-9, "{}", st.p99.why);
    let [lo, hi] = st.p99.ci.unwrap();
    assert!(lo > 0.1 && lo <= change && hi >= change, "{}", st.p99.why);
    // The same rate delivered: no difference.
    assert!(!st.achieved.finding.is_difference(), "{}", st.achieved.why);
}

#[test]
fn run_results_compare_with_each_other() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    let files: Vec<PathBuf> = (0..2)
        .map(|_| {
            let r = run(&[url.as_str(), "--rate", "50", "-d", "2s", "-q"]);
            let p = temp_path("run.json");
            std::fs::write(&p, r.json().to_string()).unwrap();
            p
        })
        .collect();
    let c = compare_json(&[&files[0], &files[1]]);
    let pair = &c.pairs[0];
    // The same URL: matched by name.
    assert_eq!(pair.paired_configs, None);
    assert_eq!(pair.series.len(), 1, "{pair:#?}");
    let s = &pair.series[0];
    assert_eq!(
        (s.scenario.as_str(), s.config.as_str()),
        ("run", url.as_str())
    );
    assert_eq!(s.unit, "req/s");
    assert!(s.knee.is_none());
    assert_eq!(s.steps.len(), 1);
    assert_eq!(s.steps[0].load, 50.0);
    // 100 responses over 2 s cannot resolve anything at 99.9 %: said so, never a difference.
    assert_eq!(
        s.steps[0].p99.finding,
        Finding::TooLittleData,
        "{}",
        s.steps[0].p99.why
    );
    assert_eq!(s.steps[0].achieved.finding, Finding::TooLittleData);
}

/// Two event-stream servers, one writing every 50 ms and one every 100 ms: `compare` puts
/// their streams' own figures side by side (time to first message, the gaps between
/// events), says they are not tested for noise, and the JSON keeps them (the schema).
#[test]
fn held_streams_are_compared_by_their_gaps_and_first_messages_untested() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let files: Vec<PathBuf> = [50, 100]
        .into_iter()
        .map(|every_ms| {
            let server = SseServer::start(SseBehavior::Events {
                every_ms,
                end_after: None,
            });
            let r = run(&[&server.url(), "--sse", "-c", "4", "-d", "2s", "-q"]);
            let p = temp_path("sse-run.json");
            std::fs::write(&p, r.json().to_string()).unwrap();
            p
        })
        .collect();
    let c = compare_json(&[&files[0], &files[1]]);
    let s = &c.pairs[0].series[0];
    assert_eq!(s.unit, "open streams", "{s:#?}");
    assert_eq!(s.steps.len(), 1, "{s:#?}");
    let st = &s.steps[0];
    let (a, b) = (
        st.baseline.streams.expect("the baseline's streams"),
        st.other.streams.expect("the other's streams"),
    );
    // Each stream's events come every 50 or 100 ms, the first one such a wait after the
    // stream opened.
    assert_eq!((a.streams, b.streams), (4, 4), "{a:?} {b:?}");
    let gap = |f: Option<f64>| f.expect("a gap");
    assert!((40.0..75.0).contains(&gap(a.gap_p50_ms)), "{a:?}");
    assert!((85.0..140.0).contains(&gap(b.gap_p50_ms)), "{b:?}");
    assert!(
        a.first_message_p50_ms < b.first_message_p50_ms,
        "{a:?} {b:?}"
    );
    assert_eq!((a.window_stalls, b.window_stalls), (None, None));
    // Both servers fed every stream: stream-seconds counted, none starved.
    assert!(
        a.stream_seconds >= 4 && b.stream_seconds >= 4,
        "{a:?} {b:?}"
    );
    assert_eq!((a.failed_stream_seconds, b.failed_stream_seconds), (0, 0));
    let files: Vec<&str> = files.iter().map(|p| path(p)).collect();
    let o = loadlab(&["compare", files[0], files[1]]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.contains("gaps p50 / p99 at 4 open streams"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("not tested for noise"), "{row}");
    assert!(
        out.lines()
            .any(|l| l.contains("first message p50 / p99 at 4 open streams")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("starved stream-seconds at 4 open streams") && l.contains("0 of")),
        "{out}"
    );
}

#[test]
fn bad_inputs_are_refused_naming_the_path_and_the_cause() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/queue");
    let empty_dir = temp_path("not-a-bundle");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let text_file = temp_path("notes.txt");
    std::fs::write(&text_file, "hello").unwrap();
    let other_json = temp_path("other.json");
    std::fs::write(&other_json, r#"{"schema_version": 99, "url": "x"}"#).unwrap();
    let missing = temp_path("missing");
    let fx = path(&fixture);
    let cases: [(Vec<&str>, &str); 6] = [
        (vec![fx], "2 values required"),
        (vec![fx, path(&missing)], "missing: cannot read"),
        (
            vec![fx, path(&empty_dir)],
            "not-a-bundle is not a loadlab result bundle: no plan.json",
        ),
        (
            vec![path(&text_file), fx],
            "notes.txt is not a loadlab run result (`loadlab run --json`): not JSON",
        ),
        (
            vec![fx, path(&other_json)],
            "schema_version 99, this loadlab reads 1",
        ),
        (
            vec![fx, fx, "--noise-threshold", "5"],
            "write 5% for a percentage",
        ),
    ];
    for (args, needle) in cases {
        let o = loadlab(&[&["compare"], args.as_slice()].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(needle),
            "{args:?}: expected `{needle}` in {stderr}"
        );
    }

    // The committed bundle against itself: nothing differs.
    let c = compare_json(&[&fixture, &fixture]);
    assert!(
        findings(&c).iter().all(|(_, f)| !f.is_difference()),
        "{c:#?}"
    );

    // --baseline: refused before any load (no bundle is written).
    let plan = sleep_plan(16, 100, "[10]");
    let out = temp_path("never-written");
    for (baseline, needle) in [
        (path(&missing), "--baseline "),
        (path(&empty_dir), "is not a loadlab result bundle"),
        (path(&text_file), "--baseline takes the directory"),
        (fx, "nothing in common with the plan"),
    ] {
        let o = loadlab(&[
            "lab",
            "-q",
            path(&plan),
            "--out",
            path(&out),
            "--baseline",
            baseline,
        ]);
        assert_eq!(o.status.code(), Some(2), "{baseline}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(needle),
            "{baseline}: expected `{needle}` in {stderr}"
        );
        assert!(!out.exists(), "{baseline}: a bundle was started");
    }
    for bad in [
        vec!["--max-regression", "10"],
        vec!["--max-regression", "ten"],
    ] {
        let o = loadlab(
            &[
                &[
                    "lab",
                    "-q",
                    path(&plan),
                    "--out",
                    path(&out),
                    "--baseline",
                    fx,
                ],
                bad.as_slice(),
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", text(&o));
    }
    let o = loadlab(&["lab", "-q", path(&plan), "--max-regression", "10%"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--baseline"),
        "{}",
        text(&o)
    );
}
