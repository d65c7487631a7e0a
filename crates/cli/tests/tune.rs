//! `loadlab tune` end to end: a fixture pool whose capacity is the pool size × 20 req/s
//! and a knob that changes nothing; tune must follow the diagnosis to the larger pool, name
//! it, measure what each knob did, and write tune.json (the committed schema) and the
//! report's tune section. Plans tune cannot use are refused before any load.

mod util;

use std::process::Command;

use serde_json::Value;
use util::lab::{generator_limited_steps, write_plan, LAB_BOUND};
use util::{loadlab_bin, output_within, temp_path};

fn tune_schema_errors(v: &Value) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/tune.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

const PLAN: &str = r#"
name = "tune-pool"
[[target]]
name = "fx"
command = ["FIXTURE", "--port", "{port}", "--pool", "{pool}", "--service-ms", "50"]
ready = { http = "http://127.0.0.1:{port}/", status = 200 }
ready_timeout = "5s"
stop_grace = "1s"
cpus = "0"

[matrix]
pool = [1, 2, 4]
mode = ["a", "b"]

[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/"
timeout = "2s"

[load]
cpus = "1"
knee = { start = 5, max = 400, precision = 0.1, confirm = 1 }
step_duration = "1s"
warmup = "200ms"
connections = 8
threads = 1

[slo]
p99_ms = 150
"#;

fn tune(plan: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    output_within(
        Command::new(loadlab_bin())
            .args(["tune", "-q"])
            .arg(plan)
            .arg("--out")
            .arg(out)
            .args(extra),
        LAB_BOUND,
    )
    .0
}

#[test]
fn tune_follows_the_diagnosis_to_the_larger_pool_and_measures_each_knob() {
    let plan = write_plan("tune-pool", PLAN);
    // A search with a step loadlab itself fell behind on (a loaded host) measured less of the
    // server than the test reads (a pool with no knee at all, once): run again, three runs at
    // most; the last is judged whatever it says. So is one whose pool of 4, by the product's
    // own diagnosis, did not serve 4 requests at once (CI of de1a829: ≈2.1 in service, knee
    // 40 to 42.5, "a pool of about that size"): that is not the server the test is about.
    let (mut out, mut o) = (temp_path("tune-pool-bundle"), None);
    for attempt in 1..=3 {
        out = temp_path("tune-pool-bundle");
        o = Some(tune(&plan, &out, &["--seed", "3"]));
        if generator_limited_steps(&out) {
            eprintln!("tune run {attempt}: a step was generator-limited; running it again");
            continue;
        }
        match pool_of_4_served_less(&out) {
            Some(seen) => eprintln!(
                "tune run {attempt}: the pool of 4 did not serve 4 at once; running it again:\n{seen}"
            ),
            None => break,
        }
    }
    let o = o.unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tune.json")).unwrap()).unwrap();
    let errors = tune_schema_errors(&t);
    assert!(
        errors.is_empty(),
        "tune.json violates its schema:\n{}\n{t:#}",
        errors.join("\n")
    );
    // 6 configurations: the default budget is 4 (30 %, at least 4).
    assert_eq!(t["configs_total"], 6, "{t:#}");
    assert_eq!(t["budget"]["configs"], 4, "{t:#}");
    let tried = t["tried"].as_array().unwrap();
    // The start is the middle pool (2); its diagnosis (concurrency-bound, ≈2 in service)
    // names pool=2, so the larger pool comes next, raced at the start's knee.
    assert_eq!(tried[0]["params"]["pool"], "2", "{t:#}");
    assert!(tried[0]["raced_at"].is_null(), "{t:#}");
    assert_eq!(tried[1]["params"]["pool"], "4", "{t:#}");
    assert!(
        tried[1]["reason"]
            .as_str()
            .unwrap()
            .contains("the diagnosis named pool=2"),
        "{t:#}"
    );
    assert_eq!(tried[1]["raced_at"], tried[0]["knee"]["lo"], "{t:#}");
    // The best is the larger pool: 80 req/s, within its measured range give or take the
    // step spacing.
    let best = &t["best"];
    assert_eq!(best["params"]["pool"], "4", "{t:#}");
    let (lo, hi) = (
        best["knee"]["lo"]
            .as_f64()
            .unwrap_or_else(|| panic!("no knee: {t:#}")),
        best["knee"]["hi"]
            .as_f64()
            .unwrap_or_else(|| panic!("no knee: {t:#}")),
    );
    assert!(
        lo >= 60.0 && hi <= 100.0,
        "pool 4 × 20 req/s: knee {lo}..{hi}"
    );
    assert!(
        best["why"]
            .as_str()
            .unwrap()
            .starts_with("concurrency-bound"),
        "{t:#}"
    );
    // pool moved the knee (resolved, the diagnosis named it); mode, if measured, did not.
    let knob = |name: &str| {
        t["knobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["knob"] == name)
            .unwrap_or_else(|| panic!("{name}: {t:#}"))
            .clone()
    };
    assert_eq!(knob("pool")["verdict"], "moved", "{t:#}");
    assert_ne!(knob("mode")["verdict"], "moved", "{t:#}");
    let up = t["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["knob"] == "pool" && e["from"] == "2" && e["to"] == "4")
        .unwrap_or_else(|| panic!("{t:#}"));
    assert_eq!(up["change"], "higher", "{up}");
    assert!(
        up["sentence"]
            .as_str()
            .unwrap()
            .contains("the concurrency-bound limit the diagnosis named (pool=2)"),
        "{up}"
    );
    assert!(t["load_seconds"].as_f64().unwrap() > 0.0);
    assert!(
        t["load_seconds"].as_f64().unwrap() < t["full_product_load_seconds"].as_f64().unwrap(),
        "{t:#}"
    );
    // Every configuration tried is in the bundle, and only those.
    let configs = util::lab::lines(&out.join("configs.jsonl"));
    assert_eq!(configs.len(), tried.len());
    // The answer first: the terminal, report.md before any table, report.html before any chart.
    assert!(
        stdout.starts_with("## Tune: the configuration with the highest knee of `s`"),
        "{stdout}"
    );
    assert!(stdout.contains("**Best: `mode="), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let tune_at = md.find("## Tune:").unwrap_or_else(|| panic!("{md}"));
    assert!(tune_at < md.find("Sustained means").unwrap(), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = html
        .find("<section class=\"tune md\">")
        .unwrap_or_else(|| panic!("no tune section"));
    assert!(section < html.find("<svg").unwrap_or(usize::MAX));
}

/// When the trial of pool=4 was diagnosed at a concurrency other than its pool's, what its
/// steps saw (load, sustained, in service, the server's CPU and its wait for it, loadlab's
/// lag): the evidence for whoever reads a failure.
fn pool_of_4_served_less(bundle: &std::path::Path) -> Option<String> {
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("tune.json")).ok()?).ok()?;
    let trial = t["tried"]
        .as_array()?
        .iter()
        .find(|x| x["params"]["pool"] == "4")?;
    let why = trial["why"].as_str().unwrap_or_default();
    if why.contains("the 4 `pool` are the limit") {
        return None;
    }
    let config = trial["config"].as_str()?;
    let steps = util::lab::steps(bundle)
        .into_iter()
        .filter(|s| s["config"] == config)
        .map(|s| {
            let f = &s["diagnosis"]["findings"][0];
            format!(
                "  {} at {}: sustained {}, {} ({}), lag p99 {} ms, {} connections opened",
                s["phase"],
                s["load"],
                s["verdict"]["sustained"],
                f["bottleneck"],
                f["figures"],
                s["result"]["schedule_lag_ms"]["p99"],
                s["result"]["connections_opened"],
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(format!("{config}: {why}\n{steps}"))
}

#[test]
fn plans_tune_cannot_use_are_refused_before_any_load() {
    let base = PLAN.replace("FIXTURE", &util::lab::fixture());
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace(
                "[matrix]\npool = [1, 2, 4]\nmode = [\"a\", \"b\"]",
                "[matrix]\npool = [1]",
            ),
            "tune searches a [matrix] of two or more",
        ),
        (
            base.replace(
                "knee = { start = 5, max = 400, precision = 0.1, confirm = 1 }",
                "steps = [10, 20]",
            ),
            "set `load.knee = { start, max }` or `[tune] knee",
        ),
        (
            base.clone() + "\n[[scenario]]\nname = \"t\"\nurl = \"http://127.0.0.1:{port}/\"\n",
            "[tune] scenario = \"NAME\"",
        ),
        (
            base.clone() + "\n[tune.knobs]\nthreads = { relieves = \"concurrency\" }\n",
            "tune.knobs.threads",
        ),
        (
            base.clone() + "\n[tune.knobs]\npool = { relieves = \"magic\" }\n",
            "a bottleneck a knob can relieve",
        ),
        (base.clone() + "\n[tune]\nbudget = 0\n", "tune.budget"),
        (
            base.clone() + "\n[tune]\nscenario = \"nope\"\n",
            "tune.scenario",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let plan = temp_path(&format!("tune-bad-{i}.toml"));
        std::fs::write(&plan, text).unwrap();
        let out = temp_path(&format!("tune-bad-{i}-bundle"));
        let o = tune(&plan, &out, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "case {i}: {stderr}");
        assert!(
            stderr.contains(needle),
            "case {i}: expected `{needle}` in {stderr}"
        );
        assert!(!out.exists(), "case {i}: a bundle was started");
    }
    // A budget of 0 on the command line.
    let plan = temp_path("tune-bad-budget.toml");
    std::fs::write(&plan, &base).unwrap();
    let o = tune(
        &plan,
        &temp_path("tune-bad-budget-bundle"),
        &["--budget", "0"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a budget of 0 configurations"));
}
