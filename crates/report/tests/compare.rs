//! `loadlab compare`'s inputs on the committed bundle (`tests/fixtures/queue`) and broken
//! copies of it: each refusal names the path and the cause.

mod util;
use util::TempDir;

use std::path::{Path, PathBuf};

use loadlab_report::compare::{compare, Finding, Input, InputError, Method};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queue")
}

/// A copy of the fixture in a fresh directory, with `steps.jsonl` replaced by `steps`.
fn copy_with_steps(name: &str, steps: &str) -> TempDir {
    let dir = TempDir::new(&format!("compare-{name}"));
    for f in ["plan.json", "environment.json", "configs.jsonl"] {
        std::fs::copy(fixture().join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("steps.jsonl"), steps).unwrap();
    dir
}

#[test]
fn the_committed_bundle_against_itself_shows_no_difference() {
    let a = Input::load(&fixture()).unwrap();
    let c = compare(&[&a, &a], &Method::default());
    let pair = &c.pairs[0];
    // Both configurations of the one scenario matched by name.
    assert_eq!(pair.series.len(), 2);
    assert!(pair.only_in_baseline.is_empty() && pair.only_in_other.is_empty());
    for s in &pair.series {
        assert_eq!(s.knee.as_ref().unwrap().finding, Finding::SameRange);
        assert_eq!(
            s.steps.iter().map(|st| st.load).collect::<Vec<_>>(),
            vec![100.0, 300.0]
        );
        for st in &s.steps {
            // Its 2 s steps hold too few seconds to test anything at 99.9 %.
            assert_eq!(st.p99.finding, Finding::TooLittleData, "{}", st.p99.why);
            assert_eq!(st.p99.change, Some(0.0));
        }
    }
}

#[test]
fn broken_bundles_are_refused_with_the_cause() {
    let steps = std::fs::read_to_string(fixture().join("steps.jsonl")).unwrap();
    let first = steps.lines().next().unwrap();
    let err = |dir: &Path| match Input::load(dir) {
        Err(e) => e,
        Ok(_) => panic!("{} was accepted", dir.display()),
    };

    let empty = copy_with_steps("empty", "");
    let e = err(&empty);
    assert!(matches!(e, InputError::NotABundle { .. }), "{e}");
    assert!(
        e.to_string()
            .ends_with("is not a loadlab result bundle: no step finished (steps.jsonl is empty)"),
        "{e}"
    );

    // A histogram that does not decode names the step and the histogram.
    let mut step: serde_json::Value = serde_json::from_str(first).unwrap();
    step["result"]["histograms"]["per_second_latency"][1] = "not base64!".into();
    let bad = copy_with_steps("histogram", &format!("{step}\n{first}\n"));
    let e = err(&bad).to_string();
    assert!(e.contains("steps.jsonl: capacity=150 / queue step"), "{e}");
    assert!(
        e.contains("histograms.per_second_latency[1]: bad base64"),
        "{e}"
    );

    // A line that is not a step (not the torn last line of a killed run).
    let torn = copy_with_steps("garbled", &format!("{{\"x\": 1}}\n{first}\n"));
    assert!(
        err(&torn).to_string().contains("steps.jsonl line 1"),
        "{}",
        err(&torn)
    );

    // Without plan.json it is no bundle at all.
    std::fs::remove_file(empty.join("plan.json")).unwrap();
    assert!(err(&empty)
        .to_string()
        .ends_with("is not a loadlab result bundle: no plan.json"));

    // A step of the bundle is not a run result: the file names what is missing.
    let file = empty.join("step.json");
    std::fs::write(&file, first).unwrap();
    let e = err(&file).to_string();
    assert!(
        e.contains(
            "step.json is not a loadlab run result (`loadlab run --json`): no schema_version"
        ),
        "{e}"
    );
}

#[test]
fn the_html_comparison_overlays_both_sides_and_escapes_what_it_shows() {
    // The fixture under a name a browser would read as markup.
    let steps = std::fs::read_to_string(fixture().join("steps.jsonl")).unwrap();
    let odd = copy_with_steps("<b>odd</b>", &steps);
    let a = Input::load(&fixture()).unwrap();
    let b = Input::load(&odd).unwrap();
    let c = compare(&[&a, &b], &Method::default());
    let html = loadlab_report::html::render_comparison(&c);
    // One section per matched series, each with both charts, each chart with both sides.
    assert_eq!(html.matches("<section class=\"series\">").count(), 2);
    assert_eq!(html.matches("queue: p99 latency</text>").count(), 2);
    assert_eq!(html.matches("queue: achieved</text>").count(), 2);
    assert_eq!(
        html.matches("data-toggle=\"1\"").count(),
        4,
        "B in every chart"
    );
    // The text of `loadlab compare`, below the charts.
    assert!(
        html.contains("<h2>The comparison</h2><pre>loadlab compare: 2 inputs, A is the baseline")
    );
    assert!(html.contains("B against A"));
    assert!(!html.contains("<b>odd</b>") && html.contains("&lt;b&gt;odd&lt;/b&gt;"));
    for needle in ["src=", "href=", "<link", "url("] {
        assert!(!html.contains(needle), "found {needle}");
    }
}
