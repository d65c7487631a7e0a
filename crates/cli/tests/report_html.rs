//! `report.html` of a real bundle (a small plan run against the fixture server) opened in a
//! real browser: Debian's `chromium`, headless. The page runs with no console message at
//! all, and its DOM holds the answer before any chart, one latency chart per scenario, the
//! knee as a band and the errors by class. Needs Chromium: ignored by a plain `cargo test`,
//! run by `./test.sh`, which installs it.

mod util;

use std::process::Command;

use util::lab::{lab_ok_unless_generator_limited, plan_text, write_plan};

#[test]
#[ignore = "needs Chromium (./test.sh installs it)"]
fn the_html_report_opens_in_a_browser_with_its_charts_and_knee() {
    // A capacity of 100 req/s: 50 is held, 400 is not; the knee lies between them.
    let plan = write_plan(
        "html",
        &plan_text(
            "\"--capacity\", \"100\"",
            "mode = [\"ok\"]",
            "steps = [50, 400]\nstep_duration = \"2s\"\nconnections = 8\nthreads = 1\ncpus = \"1\"",
        ),
    );
    // A step loadlab itself fell behind on (generator-limited, on a loaded host) says nothing
    // of the server, and its page would say so instead of a knee: run again.
    let out = lab_ok_unless_generator_limited(&plan, "html-bundle");
    let page = out.join("report.html");
    assert!(page.exists(), "no report.html in {}", out.display());

    let run = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("chromium is needed (apt-get install chromium): {e}"));
    let dom = String::from_utf8_lossy(&run.stdout);
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert_eq!(
        dom.matches(">s: latency against load</text>").count(),
        1,
        "one latency chart for the one scenario"
    );
    // The answer (where, why, pass or fail) before the first chart.
    let answer = dom
        .find("<section class=\"answer md\" id=\"answer\">")
        .unwrap_or_else(|| panic!("no answer section: {dom}"));
    let first_chart = dom.find("<svg").expect("charts");
    assert!(
        answer < first_chart,
        "answer at {answer}, first chart at {first_chart}"
    );
    let section = &dom[answer..answer + dom[answer..].find("</section>").unwrap()];
    assert!(
        section.contains("knee between 50 and 400 req/s."),
        "{section}"
    );
    assert!(section.contains("<strong>failed</strong>"), "{section}");
    // The knee as a shaded band on the charts against load, errors by class among them
    // (the fixture answers 503 above its capacity).
    assert!(
        dom.contains("<title>knee between 50 and 400: mode=ok</title>"),
        "{dom}"
    );
    assert!(dom.contains("class=\"band\""), "{dom}");
    assert!(
        dom.contains(">s: errors by class against load</text>"),
        "{dom}"
    );
    assert!(dom.contains("http_5xx"), "{dom}");
    assert!(dom.contains("data-toggle"), "legends are there");
}
