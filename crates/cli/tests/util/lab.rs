//! Helpers for the `loadlab lab` tests: the fixture server, plans in temp files, and
//! reading a bundle.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use super::{loadlab_bin, output_within, temp_path};

/// How long a `loadlab lab` of these tests may take before it counts as hung and is
/// killed: far more than any plan here needs (a few steps of at most 10 s each, or a knee
/// search of 1-2 s steps), a backstop that turns a hang into a failure, not a performance
/// threshold (tests check their own time where it matters).
pub const LAB_BOUND: Duration = Duration::from_secs(300);

/// The fixture server (an example of this package, built by `cargo test`).
pub fn fixture() -> String {
    example("fixture_server")
}

/// An example program of this package (`cargo test` builds them beside the tests).
pub fn example(name: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "the {name} example is not built at {}",
        path.display()
    );
    path.display().to_string()
}

pub fn write_plan(name: &str, text: &str) -> PathBuf {
    let path = temp_path(&format!("{name}.toml"));
    std::fs::write(&path, text.replace("FIXTURE", &fixture())).unwrap();
    path
}

/// `loadlab lab -q PLAN --out OUT`, killed (and the test failed) past [`LAB_BOUND`].
pub fn lab(plan: &Path, out: &Path) -> Output {
    lab_within(plan, out, LAB_BOUND).0
}

/// `loadlab lab -q PLAN --out OUT` and the time it took, killed (and the test failed) past
/// `bound`.
pub fn lab_within(plan: &Path, out: &Path, bound: Duration) -> (Output, Duration) {
    output_within(
        Command::new(loadlab_bin())
            .args(["lab", "-q"])
            .arg(plan)
            .arg("--out")
            .arg(out),
        bound,
    )
}

/// Each plan text must be refused (exit 2) with its needle in the message, before
/// anything starts.
pub fn assert_plans_rejected<T: AsRef<str>>(prefix: &str, cases: &[(T, &str)]) {
    for (i, (text, needle)) in cases.iter().enumerate() {
        let plan = write_plan(&format!("{prefix}{i}"), text.as_ref());
        let out = lab(&plan, &temp_path("never"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {stderr}");
        assert!(
            stderr.contains(needle),
            "case {i}: expected `{needle}` in {stderr}"
        );
    }
}

/// `loadlab lab -q PLAN --out OUT`, which must succeed (stderr shown if not).
pub fn lab_ok(plan: &Path, out: &Path) {
    let o = lab(plan, out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Whether a step of the bundle was limited by loadlab itself (generator-limited, on a loaded
/// host): such a step says nothing of the server, and a test that needs the server's answer
/// runs the plan again, as a user would after reading that note.
pub fn generator_limited_steps(bundle: &Path) -> bool {
    steps(bundle).iter().any(|s| {
        s["verdict"]["limits"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "generator_limited"))
    })
}

/// Runs `plan` into a fresh bundle named after `name` (must succeed); a run with a step loadlab
/// itself fell behind on is run again, three runs at most, and the last bundle is returned
/// whatever it says, for the test to judge.
pub fn lab_ok_unless_generator_limited(plan: &Path, name: &str) -> PathBuf {
    let mut out = temp_path(name);
    for attempt in 1..=3 {
        out = temp_path(name);
        lab_ok(plan, &out);
        if !generator_limited_steps(&out) {
            break;
        }
        eprintln!("{name}: run {attempt} had a generator-limited step; running the plan again");
    }
    out
}

/// The bundle's steps as the lab decided them: steps.jsonl without the attempts it repeated
/// (a step loadlab limited, or that lost an agent, is tried once more at the same load, and
/// the repeat is the step's figure).
pub fn steps(bundle: &Path) -> Vec<Value> {
    let all = lines(&bundle.join("steps.jsonl"));
    let says_nothing = |s: &Value| {
        s["verdict"]["limits"].as_array().is_some_and(|l| {
            l.iter()
                .any(|x| x == "generator_limited" || x == "agent_lost")
        })
    };
    let same_series =
        |a: &Value, b: &Value| a["config"] == b["config"] && a["scenario"] == b["scenario"];
    (0..all.len())
        .filter(|&i| {
            let next = all[i + 1..].iter().find(|n| same_series(n, &all[i]));
            !(says_nothing(&all[i]) && next.is_some_and(|n| n["load"] == all[i]["load"]))
        })
        .map(|i| all[i].clone())
        .collect()
}

/// `loadlab knee ARGS --out BUNDLE` within [`LAB_BOUND`]; must succeed. Returns its
/// standard output and the bundle (read with [`first_knee`]).
pub fn knee_search(args: &[&str]) -> (String, PathBuf) {
    let out = temp_path("knee-search");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .arg("knee")
            .args(args)
            .arg("--out")
            .arg(&out),
        LAB_BOUND,
    );
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    (stdout, out)
}

/// The first knee of the first configuration of the bundle at `out` (a `loadlab knee`
/// run's), and its range: the highest load sustained and the first one not.
pub fn first_knee(out: &Path) -> (Value, f64, f64) {
    let configs = lines(&out.join("configs.jsonl"));
    let k = configs[0]["knees"][0].clone();
    let low = k["outcome"]["knee"]
        .as_f64()
        .unwrap_or_else(|| panic!("no knee: {k}"));
    let high = k["outcome"]["first_unsustained"]
        .as_f64()
        .unwrap_or_else(|| panic!("no first unsustained step: {k}"));
    (k, low, high)
}

/// Whether the diagnosis of knee `k` (as [`first_knee`] returns it) names `bottleneck`
/// among its findings, first or not.
pub fn has_finding(k: &Value, bottleneck: &str) -> bool {
    k["diagnosis"]["findings"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f["bottleneck"] == bottleneck))
}

pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !matches!(
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next()),
                Some("Z") | Some("X")
            )
        })
        .unwrap_or(false)
}

pub fn pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

pub const TARGET: &str = r#"
[[target]]
name = "fx"
command = ["FIXTURE", "--port", "{port}", "--mode", "{mode}", "--pid-file", "{bundle}/{mode}.pids", EXTRA]
ready = { http = "http://127.0.0.1:{port}/", status = 200 }
ready_timeout = "2s"
stop_grace = "1s"
cpus = "0"
"#;

pub fn plan_text(extra: &str, matrix: &str, load: &str) -> String {
    format!(
        "name = \"t\"\n{}\n[matrix]\n{matrix}\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:{{port}}/\"\ntimeout = \"1s\"\n[load]\n{load}\n",
        TARGET.replace("EXTRA", extra)
    )
}

/// The first finding of a diagnosis that is the server's (loadlab's own lateness, a lost
/// agent and the host's steal excepted).
pub fn server_finding(d: &Value) -> &Value {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            !["generator", "agent_lost", "host_steal"].contains(&f["bottleneck"].as_str().unwrap())
        })
        .unwrap_or_else(|| panic!("no finding of the server: {d}"))
}
