//! `loadlab lab`: plan validation, target lifecycle (never ready, crash mid-step, SIGTERM
//! ignored, forked children), knee search against a server of known capacity, probes, a
//! killed run's bundle, and `loadlab report`.

mod util;

use std::process::Command;
use std::time::{Duration, Instant};

use util::lab::{assert_plans_rejected, lab, lab_ok, lines, pids, plan_text, running, write_plan};
use util::{loadlab_bin, temp_path};

/// The binary's side of plan validation (exit 2, the field named on stderr); every other
/// refused plan is a unit test of `loadlab_lab::plan`.
#[test]
fn plan_mistakes_name_their_field() {
    let cases = [
        ("name = \"x\"\nbogus = 1\n[[scenario]]\nname=\"s\"\nurl=\"http://127.0.0.1:1/\"\n[load]\nsteps=[1]\n", "unknown field `bogus`"),
        ("name = \"x\"\n[[scenario]]\nname=\"s\"\nurl=\"http://127.0.0.1:1/\"\n[load]\nsteps=[1]\ncpus=\"1-0\"\n", "load.cpus"),
    ];
    assert_plans_rejected("bad", &cases);
}

#[test]
fn lifecycle_never_ready_crash_sigterm_and_children_leave_no_process() {
    // Four configurations: never ready; exits after 150 requests mid-step; ignores SIGTERM;
    // forks a child. The run goes on after each.
    let plan = write_plan(
        "life",
        &plan_text(
            "",
            "mode = [\"never\", \"crash\", \"stubborn\", \"forker\"]",
            "steps = [200, 200]\nstep_duration = \"1s\"\nconnections = 4\nthreads = 1",
        ),
    );
    let out_dir = temp_path("life-bundle");
    let started = Instant::now();
    let out = lab(&plan, &out_dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let configs = lines(&out_dir.join("configs.jsonl"));
    let status = |mode: &str| {
        configs
            .iter()
            .find(|c| {
                c["config"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("mode={mode}"))
            })
            .unwrap_or_else(|| panic!("no config for {mode}: {configs:?}"))
            .clone()
    };
    assert_eq!(status("never")["status"], "not_ready");
    assert!(status("never")["message"]
        .as_str()
        .unwrap()
        .contains("not ready"));
    let crash = status("crash");
    assert_eq!(crash["status"], "crashed", "{crash}");
    assert!(
        crash["message"].as_str().unwrap().contains("exit status 3"),
        "{crash}"
    );
    assert_eq!(status("stubborn")["status"], "completed");
    assert_eq!(status("forker")["status"], "completed");
    let steps = lines(&out_dir.join("steps.jsonl"));
    let crashed_step = steps
        .iter()
        .find(|s| s["crashed"].is_object())
        .expect("a crashed step");
    assert!(crashed_step["crashed"]["log_tail"]
        .as_str()
        .unwrap()
        .contains("exiting after"));
    assert_eq!(crashed_step["verdict"]["limits"][0], "target_crashed");
    // The crash run stopped early; the configurations after it ran both steps.
    assert_eq!(
        steps
            .iter()
            .filter(|s| s["config"].as_str().unwrap().starts_with("mode=forker"))
            .count(),
        2
    );
    // No process survives: not the servers, not the forked child.
    let mut all = Vec::new();
    for mode in ["never", "crash", "stubborn", "forker"] {
        all.extend(pids(&out_dir.join(format!("{mode}.pids"))));
    }
    assert!(
        all.len() >= 5,
        "expected pids of 4 servers and 1 child, got {all:?}"
    );
    let alive: Vec<u32> = all.into_iter().filter(|p| running(*p)).collect();
    assert!(alive.is_empty(), "processes left behind: {alive:?}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("target crashed"), "{report}");
    assert!(report.contains("target never ready"), "{report}");
}

#[test]
fn killed_run_leaves_every_finished_step_readable() {
    let plan = write_plan(
        "killed",
        &plan_text("\"--capacity\", \"100000\"", "mode = [\"killed\"]", "steps = [50, 50, 50, 50, 50, 50, 50, 50]\nstep_duration = \"1s\"\nconnections = 2\nthreads = 1"),
    );
    let out_dir = temp_path("killed-bundle");
    let mut child = Command::new(loadlab_bin())
        .args(["lab", "-q"])
        .arg(&plan)
        .arg("--out")
        .arg(&out_dir)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while lines(&out_dir.join("steps.jsonl")).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let steps = lines(&out_dir.join("steps.jsonl"));
    assert!(steps.len() >= 2);
    for s in &steps {
        assert_eq!(s["result"]["requests"], 50, "{s}");
    }
    // The target died with loadlab (parent-death signal).
    std::thread::sleep(Duration::from_millis(300));
    for p in pids(&out_dir.join("killed.pids")) {
        assert!(!running(p), "target {p} outlived a killed loadlab");
    }
    // The report renders from what is on disk.
    let out = Command::new(loadlab_bin())
        .arg("report")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("| 50 |"));
}

#[test]
fn probes_see_listen_overflows_and_the_target_process() {
    // Backlog 1, accepting one connection per 200 ms, new connection per request at 300/s:
    // the accept queue overflows.
    let plan = write_plan(
        "probes",
        &plan_text(
            "\"--backlog\", \"1\", \"--accept-delay-ms\", \"200\"",
            "mode = [\"probes\"]",
            "steps = [300]\nstep_duration = \"2s\"\nconnections = 64\nthreads = 1",
        )
        .replace("timeout = \"1s\"", "timeout = \"1s\"\nkeep_alive = false")
        .replace(
            "ready = { http = \"http://127.0.0.1:{port}/\", status = 200 }",
            "ready = { tcp = \"127.0.0.1:{port}\" }",
        ),
    );
    let out_dir = temp_path("probes-bundle");
    lab_ok(&plan, &out_dir);
    let steps = lines(&out_dir.join("steps.jsonl"));
    let probes = &steps[0]["probes"];
    let delta = &probes["delta"];
    assert!(delta["listen_overflows"].as_u64().unwrap() > 0, "{delta}");
    // The target's own figures: one process with at least its main and accept threads.
    let first = &probes["samples"][0]["process"];
    assert!(first["processes"].as_u64().unwrap() >= 1, "{first}");
    assert!(delta["threads_max"].as_u64().unwrap() >= 1);
    assert!(delta["fds_max"].as_u64().unwrap() >= 3);
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        report.contains("the target's listen queue dropped"),
        "{report}"
    );
    // The diagnosis names the accept queue, with the counts and somaxconn.
    let findings = steps[0]["diagnosis"]["findings"].as_array().unwrap();
    let q = findings
        .iter()
        .find(|f| f["bottleneck"] == "accept_queue")
        .unwrap_or_else(|| panic!("no accept-queue finding: {findings:?}"));
    let evidence = q["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("the plan set no backlog, somaxconn is"),
        "{evidence}"
    );
    assert!(q["figures"]["listen_overflows"].as_f64().unwrap() > 0.0);
    // The target's own listening socket, read from the kernel's socket diagnostics: the
    // drops are its own, at the backlog its command set.
    assert!(
        evidence.starts_with("the target's listen queue (port ") && evidence.contains("backlog 1,"),
        "{evidence}"
    );
    assert!(
        q["figures"]["listener_drops"].as_f64().unwrap() > 0.0,
        "{q}"
    );
    assert_eq!(delta["listen"]["backlog"], 1, "{delta}");
}

/// Scenarios run together over a matrix (document 003): the report opens with one row per
/// configuration, its timeouts, run time and the targets' CPU, like the document's table.
#[test]
fn together_configurations_side_by_side() {
    let plan = write_plan(
        "together",
        r#"
name = "together"
[[target]]
name = "fx"
command = ["FIXTURE", "--port", "{port}", "--pool", "{pool}", "--service-ms", "200"]
ready = { http = "http://127.0.0.1:{port}/", status = 200 }
ready_timeout = "5s"
stop_grace = "1s"

[matrix]
pool = [1, 16]

[[scenario]]
name = "a"
url = "http://127.0.0.1:{port}/a"
rate = 20
requests = 20
timeout = "1s"

[[scenario]]
name = "b"
url = "http://127.0.0.1:{port}/b"
rate = 10
requests = 10
timeout = "1s"

[load]
together = true
step_duration = "10s"
"#,
    );
    let out = temp_path("together-bundle");
    lab_ok(&plan, &out);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let table: Vec<&str> = report
        .split("## Configurations side by side")
        .nth(1)
        .unwrap_or_else(|| panic!("no side-by-side table: {report}"))
        .lines()
        .filter(|l| l.starts_with("| pool="))
        .collect();
    assert_eq!(table.len(), 2, "{report}");
    let cells = |row: &str| -> Vec<String> {
        row.split('|')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    // configuration | answered | timeouts | errors | run time s | targets' CPU
    let small = cells(table[0]);
    let large = cells(table[1]);
    assert_eq!(
        (small[0].as_str(), large[0].as_str()),
        ("pool=1", "pool=16")
    );
    let timeouts = |row: &[String]| row[2].parse::<u64>().unwrap();
    assert!(timeouts(&small) > 0, "{report}");
    assert_eq!(timeouts(&large), 0, "{report}");
    assert_eq!(
        large[1], "30",
        "every request of both scenarios answered: {report}"
    );
    assert!(large[4].parse::<f64>().unwrap() > 0.0, "{report}");
    assert!(large[5].parse::<f64>().is_ok(), "a CPU figure: {report}");
    assert!(report.contains("% of one core (and waited"), "{report}");
}

/// `--matrix KNOB=V1,V2` runs only those values of one parameter (a value the plan does not
/// list too), after `[quick]`, says so in the report, and a parameter the plan does not
/// define, or a malformed list, is refused before any target starts.
#[test]
fn matrix_narrowed_on_the_command_line() {
    let plan = write_plan(
        "narrowed",
        r#"
name = "narrowed"
[[target]]
name = "fx"
command = ["FIXTURE", "--port", "{port}", "--pool", "{pool}", "--service-ms", "1"]
ready = { http = "http://127.0.0.1:{port}/", status = 200 }
ready_timeout = "5s"
stop_grace = "1s"

[matrix]
pool = [1, 2, 4]
tag = ["x"]

[[exclude]]
pool = 2

[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/{tag}"
timeout = "1s"

[load]
steps = [20]
step_duration = "1s"
warmup = "0s"

[quick]
matrix = { pool = [1] }
"#,
    );
    let run = |extra: &[&str], out: &std::path::Path| {
        util::output_within(
            Command::new(loadlab_bin())
                .args(["lab", "-q", "--quick"])
                .arg(&plan)
                .arg("--out")
                .arg(out)
                .args(extra),
            util::lab::LAB_BOUND,
        )
        .0
    };
    // 2 is excluded by the plan, 8 is not in it; --quick's pool = [1] is replaced.
    let out = temp_path("narrowed-bundle");
    let o = run(&["--matrix", "pool=2,4,8", "--matrix", "tag=y"], &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let configs: Vec<String> = lines(&out.join("configs.jsonl"))
        .iter()
        .map(|c| c["config"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(configs, ["pool=4,tag=y", "pool=8,tag=y"]);
    let steps = util::lab::steps(&out);
    assert_eq!(steps.len(), 2);
    assert!(steps
        .iter()
        .all(|s| s["result"]["successful"].as_u64() > Some(0)));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains(
            "quick scale, the matrix narrowed on the command line (`--matrix pool=2,4,8` `--matrix tag=y`)"
        ),
        "{report}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
    assert_eq!(
        saved["matrix_set"],
        serde_json::json!(["pool=2,4,8", "tag=y"])
    );

    for (args, needle) in [
        (
            &["--matrix", "threads=2"][..],
            "--matrix = threads=2 is not allowed: a parameter that [matrix] defines (pool, tag)",
        ),
        (
            &["--matrix", "pool=1", "--matrix", "pool=2"][..],
            "pool is set twice",
        ),
        (
            &["--matrix", "pool=2"][..],
            "exclude = the only configuration is not allowed: at least one configuration left by the [[exclude]] tables (with --matrix pool=2)",
        ),
        (&["--matrix", "pool"][..], "expected KNOB=VALUE[,VALUE...]"),
        (&["--matrix", "pool=1,,2"][..], "an empty value"),
    ] {
        let never = temp_path("narrowed-never");
        let o = run(args, &never);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!never.join("configs.jsonl").exists(), "{args:?}: nothing runs");
    }
}
