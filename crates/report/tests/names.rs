//! Named requests in the reports and in `loadlab compare`, on a committed bundle
//! (`tests/fixtures/named`: `loadlab lab named.toml --quick` against the scenario server,
//! `/health` and `/sleep` in one load with weights 3 and 1, `/sleep` judged by its own
//! bound `sleep:p90<130ms`; a knee search of 2 s steps at 20, 40, 80, 60 and 50 req/s).
//! At 60 req/s `/sleep` missed its bound while `/health` held; at 80 both fell behind.
//! After an intended change of the report, regenerate its expected file with
//! `UPDATE_EXPECT=1 cargo test -p loadlab-report --test names`.

mod util;
use util::TempDir;

use std::path::{Path, PathBuf};

use loadlab_report::compare::{compare, Comparison, Finding, Input, Method};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/named")
}

/// A fresh copy of the named fixture, each step's JSON passed through `edit`.
fn copy(name: &str, edit: impl Fn(&mut serde_json::Value)) -> TempDir {
    let dir = TempDir::new(&format!("names-{name}"));
    for f in std::fs::read_dir(fixture()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        edit(&mut v);
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(dir.join("steps.jsonl"), out).unwrap();
    dir
}

/// The steps of the fixture as JSON.
fn steps() -> Vec<serde_json::Value> {
    std::fs::read_to_string(fixture().join("steps.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The rows of the report's "By request name" table, as cells.
fn name_rows(report: &str) -> Vec<Vec<String>> {
    let section = report
        .split("#### By request name")
        .nth(1)
        .unwrap_or_else(|| panic!("no By request name section:\n{report}"));
    section
        .lines()
        .skip_while(|l| !l.starts_with("| step:"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn the_named_bundle_renders_the_expected_report() {
    let report = loadlab_report::render_bundle(&fixture()).unwrap();
    let expected_path = fixture().join("expected-report.md");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &report).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert!(
        report == expected,
        "report.md differs from {} (UPDATE_EXPECT=1 rewrites it after an intended change)",
        expected_path.display()
    );
}

#[test]
fn the_fixture_is_a_run_of_named_requests_whose_counts_add_up() {
    for s in steps() {
        let r = &s["result"];
        let names = r["by_name"].as_array().unwrap();
        assert_eq!(names.len(), 2);
        for key in ["requests", "successful", "errors_total"] {
            let sum: u64 = names.iter().map(|n| n[key].as_u64().unwrap()).sum();
            assert_eq!(sum, r[key].as_u64().unwrap(), "{key} at {}", s["load"]);
        }
    }
}

#[test]
fn the_by_name_table_has_a_row_per_step_and_name_in_load_then_list_order() {
    let report = loadlab_report::render_bundle(&fixture()).unwrap();
    let rows = name_rows(&report);
    let order: Vec<(String, String)> = rows.iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let mut expected = Vec::new();
    for load in ["20", "40", "50", "60", "80"] {
        for name in ["health", "sleep"] {
            expected.push((load.to_string(), name.to_string()));
        }
    }
    assert_eq!(order, expected);
    let row = |load: &str, name: &str| -> String {
        rows.iter()
            .find(|r| r[0] == load && r[1] == name)
            .unwrap()
            .join(" | ")
    };
    // load | name | share | offered | achieved | p50 | p99 | errors | status codes | verdict
    assert_eq!(
        row("60", "health"),
        "60 | health | 75 % | 45 | 45 | 27.4 | 106 | 0 | 200: 90 | ✓"
    );
    assert_eq!(
        row("60", "sleep"),
        "60 | sleep | 25 % | 15 | 15 | 110 | 155 | 0 | 200: 30 | ✗ latency"
    );
    assert_eq!(
        row("80", "health"),
        "80 | health | 75 % | 60 | 57.2 | 91.9 | 189 | 0 | 200: 120 | ✗ throughput"
    );
    assert_eq!(
        row("80", "sleep"),
        "80 | sleep | 25 % | 20 | 19.5 | 162 | 214 | 0 | 200: 40 | ✗ latency, throughput"
    );
    // Every sustained step's names held.
    for load in ["20", "40", "50"] {
        for name in ["health", "sleep"] {
            assert!(row(load, name).ends_with("| ✓"), "{}", row(load, name));
        }
    }
    // Above the table: how the requests were taken, the name's own bounds, the data file.
    assert!(
        report.contains("the requests were taken in turn, in proportion to their weights."),
        "{report}"
    );
    assert!(
        report.contains("`sleep` is judged by bounds of its own: p90 latency at most 130 ms, p99 latency at most 1000 ms"),
        "{report}"
    );
    assert!(
        report.contains("Data file `/tmp/named-plan/ids.csv`: 20 rows, taken in sequential order."),
        "{report}"
    );
}

#[test]
fn where_a_step_was_not_sustained_the_report_names_the_requests_that_failed() {
    let report = loadlab_report::render_bundle(&fixture()).unwrap();
    // The knee: not sustained at 60 because /sleep missed its bound.
    assert!(
        report.contains(
            "| workers=2 | mix | between 50 and 60 | latency; names failed: sleep (latency) |"
        ),
        "{report}"
    );
    // The notes of the steps' rows in the scenario's table.
    let main_row = |load: &str| -> &str {
        report
            .lines()
            .take_while(|l| !l.starts_with("#### By request name"))
            .filter(|l| l.starts_with(&format!("| {load} | ")))
            .last()
            .unwrap_or_else(|| panic!("no row at {load}:\n{report}"))
    };
    assert!(
        main_row("60").contains("names failed: sleep (latency)"),
        "{}",
        main_row("60")
    );
    assert!(
        main_row("80").contains("names failed: health (throughput), sleep (latency, throughput)"),
        "{}",
        main_row("80")
    );
    assert!(
        !main_row("50").contains("names failed"),
        "{}",
        main_row("50")
    );
}

/// The same bundle without its names renders what the report rendered before names
/// existed: exactly the named report less the names' section and words.
#[test]
fn the_answer_names_the_request_that_broke_with_its_own_clause() {
    let report = loadlab_report::render_bundle(&fixture()).unwrap();
    let answer =
        &report[report.find("## Answer").unwrap()..report.find("Sustained means").unwrap()];
    // The whole held every clause at 60 req/s; `sleep` missed its own p90 bound there.
    assert!(
        answer.contains("| mix | workers=2 | p99 < 1000 ms | 50 req/s: 125 ms, passed | 60 req/s: 153 ms, passed |"),
        "{answer}"
    );
    assert!(
        answer.contains("|  |  | `sleep`: p90 < 130 ms | 122 ms, passed | 147 ms, **failed** |"),
        "{answer}"
    );
    assert!(!answer.contains("`health`"), "{answer}");
}

#[test]
fn without_names_the_report_is_the_named_one_less_the_names() {
    let plain = copy("plain", |s| {
        let r = s["result"].as_object_mut().unwrap();
        r.remove("by_name").unwrap();
        r.remove("traffic").unwrap();
        s["verdict"].as_object_mut().unwrap().remove("names");
    });
    let without = loadlab_report::render_bundle(&plain).unwrap();
    let named = loadlab_report::render_bundle(&fixture()).unwrap();
    let start = named.find("#### By request name").unwrap();
    let end = start + named[start..].find("\nFiles:").unwrap() + 1;
    let mut expected = format!("{}{}", &named[..start], &named[end..]);
    for words in [
        "; names failed: sleep (latency)",
        "names failed: sleep (latency); ",
        "names failed: health (throughput), sleep (latency, throughput); ",
    ] {
        expected = expected.replace(words, "");
    }
    // The answer's rows of the name that failed.
    let expected: String = expected
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("|  |  | `sleep`: "))
        .collect();
    assert_eq!(without, expected);
    assert!(!without.contains("names failed") && !without.contains("By request name"));
    let html = loadlab_report::html::render_html(&plain).unwrap();
    assert!(!html.contains("percentiles by request name"));
}

#[test]
fn the_html_report_draws_each_names_percentiles_at_the_knee() {
    let dir = copy("html", |_| {});
    loadlab_report::write_report(&dir).unwrap();
    let html = std::fs::read_to_string(loadlab_report::html_path(&dir)).unwrap();
    // The scenario's percentile chart draws the knee's two sides: 50 held, 60 not. The
    // names' charts are drawn at those two steps, one each.
    assert!(html.contains("mix: latency percentiles, last step held and first not</text>"));
    let figures: Vec<&str> = html
        .split("<figure class=\"names\">")
        .skip(1)
        .map(|f| &f[..f.find("</figure>").unwrap()])
        .collect();
    assert_eq!(figures.len(), 2, "one chart per side of the knee");
    assert!(figures[0]
        .contains(">mix · workers=2 at 50 req/s (sustained): percentiles by request name</text>"));
    assert!(figures[1].contains(
        ">mix · workers=2 at 60 req/s (not sustained): percentiles by request name</text>"
    ));
    // One line per name plus all requests, each with its legend entry, on the percentile
    // axis of the scenario's chart.
    for (f, sleep) in figures.iter().zip(["sleep (✓)", "sleep (✗)"]) {
        assert_eq!(f.matches("<g data-series=").count(), 3, "{f}");
        for (i, name) in ["all requests", "health (✓)", sleep].iter().enumerate() {
            assert!(
                f.contains(&format!(
                    "<button type=\"button\" data-toggle=\"{i}\"><span style=\"border-top:3px {} {}\"></span>{name}</button>",
                    if i == 0 { "dashed" } else { "solid" },
                    loadlab_report::svg::color(i)
                )),
                "{name} in {f}"
            );
        }
        assert!(f.contains(">99.9%</text>") && f.contains(">latency (ms, log scale)</text>"));
        // The plan's p99 bound and /sleep's own p90 bound, each a line from its percentile
        // on: it starts where that percentile's tick stands.
        for (bound, tick) in [("SLO p99 1000 ms", "99%"), ("sleep p90 130 ms", "90%")] {
            assert!(f.contains(&format!(">{bound}</text>")), "{bound} in {f}");
            assert_eq!(
                bound_line_start(f, bound),
                tick_x(f, tick),
                "{bound} starts at {tick}"
            );
        }
    }
    // Each curve is its own histogram: the end of /sleep's at 60 req/s is its slowest
    // response, above the whole's p99 and /health's slowest.
    let step60 = steps().into_iter().find(|s| s["load"] == 60.0).unwrap();
    let max_ms = |h: &serde_json::Value| {
        loadlab_engine::records::decode_histogram(h.as_str().unwrap())
            .unwrap()
            .max() as f64
            / 1000.0
    };
    let by_name = step60["result"]["by_name"].as_array().unwrap();
    for (n, label) in by_name.iter().zip(["health (✓)", "sleep (✗)"]) {
        let read_out = format!(
            "<title>{label}: {} at 5</title>",
            loadlab_report::svg::short_num(max_ms(&n["latency_histogram"]))
        );
        assert!(figures[1].contains(&read_out), "{read_out}");
    }
    // The table of report.md, and each step's verdict with the names that failed.
    assert!(html.contains("<h4>By request name</h4>"));
    assert!(html.contains("<td>sleep</td>") && html.contains("<td>✗ latency</td>"));
    assert!(html.contains("not sustained: latency; names failed: sleep (latency)</span>"));
    for needle in ["src=", "href=", "<link", "url("] {
        assert!(!html.contains(needle), "found {needle}");
    }
}

#[test]
fn the_html_report_draws_each_names_p99_and_errors_against_load() {
    // /sleep timed out on 10 requests at 80 req/s: 10 of its 50 attempts.
    let dir = copy("names-load", |s| {
        if s["load"] == 80.0 {
            let sleep = &mut s["result"]["by_name"][1];
            sleep["errors"]["request_timeout"] = 10.into();
            sleep["errors_total"] = 10.into();
        }
    });
    let html = loadlab_report::html::render_html(&dir).unwrap();
    let figures: Vec<&str> = html
        .split("<figure class=\"names-load\">")
        .skip(1)
        .map(|f| &f[..f.find("</figure>").unwrap()])
        .collect();
    assert_eq!(figures.len(), 2, "a latency and an errors chart");
    let (latency, errors) = (figures[0], figures[1]);
    assert!(latency.contains(">mix: p99 latency by request name against load</text>"));
    assert!(errors.contains(">mix: failed requests by request name against load</text>"));
    assert!(errors.contains(">failed requests (% of the name&#39;s attempts)</text>"));
    // All requests and each name on the latency chart; each name on the errors chart.
    assert_eq!(latency.matches("<g data-series=").count(), 3);
    assert_eq!(errors.matches("<g data-series=").count(), 2);
    // Every step's p99 of each name, read from its own result, at its load.
    for s in steps() {
        let load = loadlab_report::svg::short_num(s["load"].as_f64().unwrap());
        for n in s["result"]["by_name"].as_array().unwrap() {
            let p99 = n["latency_ms"]["p99"].as_f64().unwrap();
            let read_out = format!(
                "<title>{}: {} at {load}</title>",
                n["name"].as_str().unwrap(),
                loadlab_report::svg::short_num(p99)
            );
            assert!(latency.contains(&read_out), "{read_out}");
        }
    }
    // The errors are the name's own share: 10 of /sleep's 50 attempts, none of /health's.
    assert!(
        errors.contains("<title>sleep: 20 at 80</title>"),
        "{errors}"
    );
    assert!(
        errors.contains("<title>health: 0 at 80</title>"),
        "{errors}"
    );
    // The knee band (50 held, 60 not) and the plan's p99 bound.
    for f in [latency, errors] {
        assert!(f.contains(">knee 50–60</text>"), "{f}");
    }
    assert!(latency.contains(">SLO p99 1000 ms</text>"));
}

#[test]
fn a_names_histogram_that_does_not_decode_is_named_and_its_curve_left_out() {
    let dir = copy("bad-histogram", |s| {
        if s["load"] == 60.0 {
            s["result"]["by_name"][1]["latency_histogram"] = "not base64!".into();
        }
    });
    let report = loadlab_report::render_bundle(&dir).unwrap();
    assert!(
        report.contains("**Warning**: steps.jsonl: workers=2 / mix step 3: request name `sleep`'s latency histogram does not decode (bad base64"),
        "{report}"
    );
    let html = loadlab_report::html::render_html(&dir).unwrap();
    let at60 = html.split("<figure class=\"names\">").nth(2).unwrap();
    let at60 = &at60[..at60.find("</figure>").unwrap()];
    // Its line is drawn empty; the others are there.
    assert!(at60.contains("<polyline points=\"\""), "{at60}");
    assert!(!at60.contains("<title>sleep (✗): ") && at60.contains("<title>health (✓): "));
}

/// `loadlab compare --json`'s contract: the committed schema accepts the comparison.
fn assert_schema_valid(c: &Comparison) -> serde_json::Value {
    let v = serde_json::to_value(c).unwrap();
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
    let back: Comparison = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(&back, c, "the JSON reads back");
    v
}

/// The line of the text output that starts with `start`.
fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?}:\n{text}"))
}

#[test]
fn compare_takes_each_name_as_its_own_series_and_never_calls_a_difference_on_it() {
    let a = Input::load(&fixture()).unwrap();
    let c = compare(&[&a, &a], &Method::default());
    let s = &c.pairs[0].series[0];
    let names = s.names.as_ref().expect("both sides ran names");
    assert!(names.only_in_baseline.is_empty() && names.only_in_other.is_empty());
    assert_eq!(
        names
            .names
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        ["health", "sleep"]
    );
    for n in &names.names {
        assert_eq!(
            n.steps.iter().map(|st| st.load).collect::<Vec<_>>(),
            [20.0, 40.0, 50.0, 60.0, 80.0]
        );
        for st in &n.steps {
            // A few dozen responses per name and step: under 1,000, the p99 is not tested.
            assert_eq!(st.p99.finding, Finding::TooLittleData, "{}", st.p99.why);
            assert!(st
                .p99
                .why
                .contains("testing it needs 1,000 responses a side"));
            assert_eq!(st.achieved.finding, Finding::TooLittleData);
            assert!(st
                .achieved
                .why
                .ends_with("+0.0 %, not tested for noise (no per-second data per name)"));
            assert_eq!(st.p99.change, Some(0.0));
        }
    }
    let sleep60 = &names.names[1].steps[3];
    assert_eq!(sleep60.baseline.sustained, Some(false));
    assert_eq!(sleep60.baseline.p99_ms, Some(154.879));
    assert_eq!(sleep60.baseline.responses, 30);

    let text = loadlab_report::compare::text::render(&c);
    let p99 = line(&text, "sleep: p99 at 60 ");
    assert_eq!(p99.matches("155 ms ✗").count(), 2, "{p99}");
    assert!(
        p99.ends_with("not tested +0.0 % (30+30 responses)"),
        "{p99}"
    );
    let achieved = line(&text, "health: achieved at 60 ");
    assert!(
        achieved.ends_with("not tested +0.0 % (no per-second data per name)"),
        "{achieved}"
    );
    assert!(
        text.contains("request names (health, sleep): no per-second data per name."),
        "{text}"
    );
    assert!(
        text.contains(
            "request names: 0 within the noise, 20 not tested (no per-second data per name)"
        ),
        "{text}"
    );
    let json = assert_schema_valid(&c);
    assert_eq!(
        json["pairs"][0]["series"][0]["names"]["names"][1]["steps"][3]["p99"]["finding"],
        "too_little_data"
    );
}

#[test]
fn names_only_one_side_ran_are_listed_not_compared() {
    // B's /sleep is called `checkout`.
    let renamed = copy("renamed", |s| {
        for n in s["result"]["by_name"].as_array_mut().unwrap() {
            if n["name"] == "sleep" {
                n["name"] = "checkout".into();
            }
        }
        // (`get_mut`: indexing a missing key would insert a null.)
        if let Some(names) = s["verdict"].get_mut("names").and_then(|n| n.as_array_mut()) {
            for n in names {
                if n["name"] == "sleep" {
                    n["name"] = "checkout".into();
                }
            }
        }
    });
    let a = Input::load(&fixture()).unwrap();
    let b = Input::load(&renamed).unwrap();
    let c = compare(&[&a, &b], &Method::default());
    let names = c.pairs[0].series[0].names.as_ref().unwrap();
    assert_eq!(names.names.len(), 1);
    assert_eq!(names.names[0].name, "health");
    assert_eq!(names.only_in_baseline, ["sleep"]);
    assert_eq!(names.only_in_other, ["checkout"]);
    let text = loadlab_report::compare::text::render(&c);
    assert!(
        text.contains("    request names only A ran: sleep (not compared)\n"),
        "{text}"
    );
    assert!(
        text.contains("    request names only B ran: checkout (not compared)\n"),
        "{text}"
    );
    assert!(text.contains("health: p99 at 20 ") && !text.contains("sleep: p99"));
    assert_schema_valid(&c);

    // A side without names at all: every name of the other is listed, none compared.
    let plain = copy("plain-compare", |s| {
        s["result"].as_object_mut().unwrap().remove("by_name");
        s["verdict"].as_object_mut().unwrap().remove("names");
    });
    let p = Input::load(&plain).unwrap();
    let c = compare(&[&a, &p], &Method::default());
    let names = c.pairs[0].series[0].names.as_ref().unwrap();
    assert!(names.names.is_empty());
    assert_eq!(names.only_in_baseline, ["health", "sleep"]);
    let text = loadlab_report::compare::text::render(&c);
    assert!(
        text.contains("    request names only A ran: health, sleep (not compared)\n"),
        "{text}"
    );
    assert!(!text.contains("request names (")); // nothing compared, no note on how
    assert_schema_valid(&c);

    // Neither side with names: no `names` in the JSON at all (as before names existed).
    let c = compare(&[&p, &p], &Method::default());
    assert!(c.pairs[0].series[0].names.is_none());
    let json = assert_schema_valid(&c);
    assert!(json["pairs"][0]["series"][0].get("names").is_none());
}

/// The report's answer for the fixture bundle with one field of its first knee's outcome set.
fn answer_with_knee(name: &str, field: &str, value: serde_json::Value) -> String {
    let dir = copy(name, |_| {});
    let configs = std::fs::read_to_string(dir.join("configs.jsonl")).unwrap();
    let mut c: serde_json::Value = serde_json::from_str(configs.lines().next().unwrap()).unwrap();
    c["knees"][0]["outcome"][field] = value;
    std::fs::write(dir.join("configs.jsonl"), format!("{c}\n")).unwrap();
    let report = loadlab_report::render_bundle(&dir).unwrap();
    report[report.find("## Answer").unwrap()..report.find("Sustained means").unwrap()].to_string()
}

#[test]
fn a_knee_whose_end_held_in_one_run_and_not_another_says_so_in_the_answer() {
    let answer = answer_with_knee(
        "non-monotonic",
        "non_monotonic",
        serde_json::json!(["60: sustained in 1 of 2 runs"]),
    );
    assert!(
        answer.contains(
            "knee between 50 and 60 req/s, not confirmed (at 60 req/s: sustained in 1 of 2 runs)"
        ),
        "{answer}"
    );
    // Without it, the answer is the range alone.
    let plain = loadlab_report::render_bundle(&fixture()).unwrap();
    assert!(!plain.contains("not confirmed ("), "{plain}");
}

#[test]
fn a_knee_as_wide_as_its_poisson_steps_resolve_says_so_in_the_answer() {
    let answer = answer_with_knee("poisson-resolution", "resolution_s", serde_json::json!(4.0));
    assert!(
        answer.contains(
            "knee between 50 and 60 req/s, as narrow as its 4 s steps of Poisson arrivals tell apart"
        ),
        "{answer}"
    );
    let plain = loadlab_report::render_bundle(&fixture()).unwrap();
    assert!(!plain.contains("Poisson arrivals tell apart"), "{plain}");
}

#[test]
fn a_run_result_of_named_requests_is_named_by_its_requests_not_its_first_method() {
    // One step's result, as `loadlab run --targets ... --json` writes it.
    let result = steps()[0]["result"].clone();
    let url = result["url"].as_str().unwrap().to_string();
    let dir = TempDir::new("names-run");
    let path = dir.join("run.json");
    std::fs::write(&path, result.to_string()).unwrap();
    let a = Input::load(&path).unwrap();
    let text = loadlab_report::compare::text::render(&compare(&[&a, &a], &Method::default()));
    let sent = format!("run result: 2 requests (health, sleep) at {url}");
    assert!(text.contains(&sent), "no '{sent}':\n{text}");
}

/// Where the reference line titled `title` starts on x (its `x1`).
fn bound_line_start(svg: &str, title: &str) -> f64 {
    let end = svg
        .find(&format!("class=\"ref\"><title>{title}</title>"))
        .or_else(|| svg.find(&format!("><title>{title}</title></line>")))
        .unwrap_or_else(|| panic!("no line titled {title}"));
    let start = svg[..end].rfind("<line ").unwrap();
    attr(&svg[start..end], "x1")
}

/// Where the x tick labelled `label` stands.
fn tick_x(svg: &str, label: &str) -> f64 {
    let end = svg
        .find(&format!(
            "class=\"tick\" text-anchor=\"middle\">{label}</text>"
        ))
        .unwrap_or_else(|| panic!("no tick {label}"));
    let start = svg[..end].rfind("<text ").unwrap();
    attr(&svg[start..end], "x")
}

/// The number in ` name="..."` of one SVG element's text.
fn attr(element: &str, name: &str) -> f64 {
    let at = element
        .find(&format!(" {name}=\""))
        .unwrap_or_else(|| panic!("no {name} in {element}"))
        + name.len()
        + 3;
    let len = element[at..].find('"').unwrap();
    element[at..at + len].parse().unwrap()
}
