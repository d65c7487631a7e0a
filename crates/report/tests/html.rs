//! `report.html` of a recorded bundle (`backlog-workers` at --quick: its plan and
//! environment here, its steps from the diagnosis fixtures of the lab): the charts each
//! scenario needs, the knee and the SLO marked, every string from the bundle escaped,
//! nothing fetched from anywhere, and a 100-step bundle kept small.

mod util;
use util::TempDir;

use std::path::Path;

/// A fresh copy of the fixture bundle, with `edit` applied to its plan's JSON.
fn bundle(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> TempDir {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = TempDir::new(&format!("html-{name}"));
    let fixture = here.join("tests/fixtures/backlog-workers");
    for f in ["environment.json", "configs.jsonl"] {
        std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
    }
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("plan.json")).unwrap()).unwrap();
    edit(&mut plan);
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    std::fs::copy(
        here.join("../lab/tests/fixtures/diagnosis/backlog-workers.steps.jsonl"),
        dir.join("steps.jsonl"),
    )
    .unwrap();
    dir
}

#[test]
fn each_scenario_has_its_charts_with_the_knee_and_the_slo() {
    let dir = bundle("charts", |_| {});
    let path = loadlab_report::write_report(&dir).unwrap();
    assert_eq!(path, dir.join("report.md"));
    let html = std::fs::read_to_string(loadlab_report::html_path(&dir)).unwrap();
    for scenario in ["health", "sleep"] {
        assert_eq!(
            html.matches(&format!("{scenario}: latency against load</text>"))
                .count(),
            1,
            "{scenario}"
        );
        assert!(html.contains(&format!("{scenario}: achieved against offered</text>")));
        assert!(html.contains(&format!(
            "{scenario}: latency percentiles, last step held and first not</text>"
        )));
    }
    // /sleep: 2 workers held 10 req/s, not 50; 16 workers held 50, not 200.
    // Each knee a shaded band from the last load held to the first not held.
    assert!(
        html.contains("<title>knee between 10 and 50: backlog=16,workers=2</title>"),
        "knee 10-50"
    );
    assert!(
        html.contains("<title>knee between 50 and 200: backlog=16,workers=16</title>"),
        "knee 50-200"
    );
    assert!(html.contains(">knee 10–50</text>"));
    // /health held everywhere: no knee is drawn for it. Two knees, in each chart against
    // load (latency, achieved, errors by class: /sleep timed out), read out on the band and
    // on its label.
    assert!(html.contains("sleep: errors by class against load</text>"));
    assert!(!html.contains("health: errors by class against load</text>"));
    // Each knee on the three charts against load, and on its own configuration's chart of
    // where the mean latency went.
    assert_eq!(html.matches("class=\"band\"").count(), 2 * 3 + 2);
    assert_eq!(html.matches("<title>knee between").count(), 2 * (2 * 3 + 2));
    assert!(html.contains(">sleep · backlog=16,workers=2: where the mean latency went</text>"));
    assert!(html.contains("queued in loadlab (a connection or the schedule)"));
    assert!(html.contains("SLO p99 1000 ms"));
    // The percentile curves on either side of each knee.
    assert!(html.contains("backlog=16,workers=2 at 10 (sustained)"));
    assert!(html.contains("backlog=16,workers=2 at 50 (not sustained)"));
    // No request names in these steps: no chart or table of them (see tests/names.rs).
    assert!(!html.contains("percentiles by request name") && !html.contains("By request name"));
    // Every step folded with its timeline and probes.
    assert_eq!(html.matches("<details class=\"step\">").count(), 16);
    // One unit per axis: CPU, memory, overflows and TIME_WAIT each on a chart of its own.
    for title in [
        ">target: CPU</text>",
        ">target: memory</text>",
        ">kernel: listen-queue overflows</text>",
        ">kernel: TIME_WAIT</text>",
    ] {
        assert_eq!(html.matches(title).count(), 16, "{title}");
    }
    assert!(!html.contains("CPU (% of one core) · RSS (MB)"));
    assert!(!html.contains("overflows per s · sockets in TIME_WAIT"));
    // report.md's tables, as HTML.
    assert!(html.contains("<th>configuration</th>"), "the Knees table");
    // Self-contained: nothing loaded from anywhere (URLs appear only as text: the plan's).
    for needle in [
        "src=", "href=", "@import", "url(", "<link", "<img", "<iframe",
    ] {
        assert!(!html.contains(needle), "found {needle}");
    }
}

#[test]
fn beyond_two_configurations_each_has_its_own_chart_on_shared_scales() {
    // A third and a fourth configuration: copies of the first's steps under other names.
    let dir = bundle("multiples", |_| {});
    let path = dir.join("steps.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = text.clone();
    for (i, extra) in ["backlog=64,workers=2", "backlog=256,workers=2"]
        .iter()
        .enumerate()
    {
        for line in text.lines() {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["config"] == "backlog=16,workers=2" {
                v["config"] = (*extra).into();
                v["index"] = (100 * (i + 1) as u64 + v["index"].as_u64().unwrap()).into();
                out.push_str(&v.to_string());
                out.push('\n');
            }
        }
    }
    std::fs::write(&path, out).unwrap();
    let html = loadlab_report::html::render_html(&dir).unwrap();
    // Latency against load: one chart per configuration, each legend its four figures.
    assert!(!html.contains(">sleep: latency against load</text>"));
    for config in [
        "backlog=16,workers=2",
        "backlog=16,workers=16",
        "backlog=64,workers=2",
        "backlog=256,workers=2",
    ] {
        assert_eq!(
            html.matches(&format!(">sleep: latency against load · {config}</text>"))
                .count(),
            1,
            "{config}"
        );
    }
    let first = html
        .find(">sleep: latency against load · backlog=16,workers=2</text>")
        .unwrap();
    let figure = &html[first..first + html[first..].find("</figure>").unwrap()];
    assert_eq!(
        figure.matches("data-toggle=").count(),
        4,
        "p50, p99, p99.9, mean"
    );
    // Its own knee only.
    assert!(figure.contains("knee between 10 and 50"));
    assert!(!figure.contains("knee between 50 and 200"));
    // The achieved chart stays one (one line per configuration).
    assert_eq!(
        html.matches(">sleep: achieved against offered</text>")
            .count(),
        1
    );
}

#[test]
fn the_answer_comes_before_any_chart() {
    let dir = bundle("answer", |_| {});
    let html = loadlab_report::html::render_html(&dir).unwrap();
    let answer = html
        .find("<section class=\"answer md\"")
        .expect("an answer section");
    let first_chart = html.find("<svg").expect("charts");
    assert!(
        answer < first_chart,
        "the answer at {answer}, a chart at {first_chart}"
    );
    let section = &html[answer..html[answer..].find("</section>").unwrap() + answer];
    // /sleep's knee in each configuration with its why, and the clauses around it.
    assert!(
        section.contains(
            "<strong>sleep</strong> (backlog=16,workers=2): knee between 10 and 50 req/s."
        ),
        "{section}"
    );
    assert!(section.contains("Why: concurrency-bound: "), "{section}");
    assert!(section.contains("<td>p99 &lt; 1000 ms</td>"), "{section}");
    assert!(section.contains("<strong>failed</strong>"), "{section}");
    // /health held at every step: its knee is above the highest load tried.
    // /health held at every step in both configurations: one line for both.
    assert!(
        section.contains("<strong>health</strong> (all 2 configurations): knee at least"),
        "{section}"
    );
    assert_eq!(
        section.matches("<strong>health</strong>").count(),
        1,
        "{section}"
    );
}

/// A fixed-steps knee whose top step was loadlab's limit, not the server's: the answer
/// says so in the words of the Knees table, not "every step sustained".
#[test]
fn a_generator_limited_top_step_is_named_in_the_answer() {
    let dir = bundle("generator-limited-top", |_| {});
    let steps = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let edited: Vec<String> = steps
        .lines()
        .map(|l| {
            let mut s: serde_json::Value = serde_json::from_str(l).unwrap();
            if s["scenario"] == "health"
                && s["load"] == 800.0
                && s["config"] == "backlog=16,workers=2"
            {
                s["verdict"]["sustained"] = false.into();
                s["verdict"]["limits"] = serde_json::json!(["generator_limited"]);
            }
            s.to_string()
        })
        .collect();
    std::fs::write(dir.join("steps.jsonl"), edited.join("\n") + "\n").unwrap();
    let report = loadlab_report::render_bundle(&dir).unwrap();
    let answer = &report[report.find("## Answer").unwrap()..report.find("## Knees").unwrap()];
    assert!(
        answer.contains(
            "**health** (backlog=16,workers=2): knee at least 200 req/s (the step at 800 req/s was generator-limited: it says nothing about the server)."
        ),
        "{answer}"
    );
    // The configuration whose every step held still reads so.
    assert!(answer.contains("every step sustained"), "{answer}");
    assert!(
        report.contains("| backlog=16,workers=2 | health | at least 200 | generator-limited |"),
        "{report}"
    );
}

/// Beyond four configurations a scenario is answered in groups and its clauses in counts:
/// a large matrix still answers in its first screen.
#[test]
fn a_scenario_of_many_configurations_is_answered_in_groups() {
    // Four more configurations: copies of the first's steps (2 workers) under other names.
    let dir = bundle("compact", |_| {});
    let path = dir.join("steps.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = text.clone();
    let extra = ["b=64,w=2", "b=256,w=2", "b=512,w=2", "b=2048,w=2"];
    for (i, name) in extra.iter().enumerate() {
        for line in text.lines() {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["config"] == "backlog=16,workers=2" {
                v["config"] = (*name).into();
                v["index"] = (100 * (i + 1) as u64 + v["index"].as_u64().unwrap()).into();
                out.push_str(&v.to_string());
                out.push('\n');
            }
        }
    }
    std::fs::write(&path, out).unwrap();
    let report = loadlab_report::render_bundle(&dir).unwrap();
    let answer = &report[report.find("## Answer").unwrap()..report.find("## Knees").unwrap()];
    // /sleep: one line per knee shared, with its configurations and their whys counted.
    assert!(
        answer.contains("- **sleep** (6 configurations):\n"),
        "{answer}"
    );
    assert!(
        answer.contains(
            "  - knee between 10 and 50 req/s in 5 of 6: `backlog=16,workers=2`, `b=64,w=2`, `b=256,w=2`, `b=512,w=2`, `b=2048,w=2`. Why: concurrency-bound in 5."
        ),
        "{answer}"
    );
    assert!(
        answer.contains("  - knee between 50 and 200 req/s in 1 of 6: `backlog=16,workers=16`."),
        "{answer}"
    );
    // 16 workers sustained 50 req/s, where every 2-worker configuration had broken.
    assert!(
        answer.contains(
            "- **sleep**: best configuration `backlog=16,workers=16`: it sustained 50 req/s"
        ),
        "{answer}"
    );
    // The clauses counted over the six that broke; no line per configuration.
    assert!(
        answer.contains("| sleep | the 6 of 6 that broke | p99 < 1000 ms | passed in 6 |"),
        "{answer}"
    );
    assert!(!answer.contains("| sleep | b=64,w=2 |"), "{answer}");
    assert!(!answer.contains("Why: concurrency-bound: "), "{answer}");
    // /health has as many configurations: one line for its one knee.
    assert!(
        answer.contains("- **health** (6 configurations):\n  - knee at least"),
        "{answer}"
    );
    assert!(answer.lines().count() < 25, "{answer}");
}

#[test]
fn strings_from_the_bundle_are_escaped() {
    let dir = bundle("hostile", |p| {
        p["name"] = "<script>alert(1)</script>".into();
        p["description"] = "a \"quoted\" <b>bold</b> & more".into();
    });
    loadlab_report::write_report(&dir).unwrap();
    let html = std::fs::read_to_string(loadlab_report::html_path(&dir)).unwrap();
    assert!(!html.contains("<script>alert(1)"), "the name is escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<b>bold</b>"));
    // The page's own script is the only one.
    assert_eq!(html.matches("<script>").count(), 1);
}

#[test]
fn a_hundred_step_bundle_stays_small() {
    let dir = bundle("big", |_| {});
    let text = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let mut lines = Vec::new();
    for k in 0..7 {
        for (i, l) in text.lines().enumerate() {
            let mut s: serde_json::Value = serde_json::from_str(l).unwrap();
            s["load"] = (1000.0 * k as f64 + i as f64 + 1.0).into();
            lines.push(s.to_string());
        }
    }
    assert!(lines.len() >= 100);
    std::fs::write(dir.join("steps.jsonl"), lines.join("\n") + "\n").unwrap();
    loadlab_report::write_report(&dir).unwrap();
    let size = std::fs::metadata(loadlab_report::html_path(&dir))
        .unwrap()
        .len();
    assert!(
        size < 5 * 1024 * 1024,
        "{size} bytes for {} steps",
        lines.len()
    );
    let html = std::fs::read_to_string(loadlab_report::html_path(&dir)).unwrap();
    assert_eq!(
        html.matches("<details class=\"step\">").count(),
        lines.len()
    );
}
