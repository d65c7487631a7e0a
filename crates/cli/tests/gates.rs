//! `--slo` gates on `loadlab run`: each form passes or fails on the run's own figures, a
//! failed gate is named and exits 3, and a gate that cannot be read exits 2 before any load.

mod util;

use std::time::Duration;

use util::{run, Behavior, TestServer};

#[test]
fn gates_pass_fail_and_set_the_exit_status() {
    // Every answer 50 ms late: p50 and p99 near 50 ms, no errors.
    let server = TestServer::start(Behavior::Delay(Duration::from_millis(50)));
    let url = server.url("/");
    let base = [url.as_str(), "--rate", "40", "-d", "2s", "-q"];
    let with = |gates: &[&str]| {
        let mut args = base.to_vec();
        for g in gates {
            args.extend(["--slo", g]);
        }
        run(&args)
    };
    let ok = with(&[
        "p99<2s",
        "p50>=50ms",
        "errors<0.1%",
        "achieved>=0.9",
        "achieved>=30/s",
    ]);
    assert_eq!(ok.code(), Some(0), "{}\n{}", ok.stdout, ok.stderr);
    assert_eq!(ok.stdout.matches("[PASS]").count(), 5, "{}", ok.stdout);

    let bad = with(&["p99<2s", "p99<10ms", "mean<1ms"]);
    assert_eq!(bad.code(), Some(3), "{}\n{}", bad.stdout, bad.stderr);
    assert!(bad.stdout.contains("[PASS] p99<2s: p99 "), "{}", bad.stdout);
    let line = bad
        .stdout
        .lines()
        .find(|l| l.contains("[FAIL] p99<10ms"))
        .unwrap_or_else(|| panic!("{}", bad.stdout));
    let p99 = util::number_after(line, "p99 ");
    assert!(p99 >= 50.0, "{line}");
    assert!(
        bad.stderr
            .contains("2 of 3 gates failed: p99<10ms, mean<1ms"),
        "{}",
        bad.stderr
    );
    // The result is written whatever the gates say.
    assert!(bad.json()["successful"].as_u64().unwrap() > 0);
}

#[test]
fn a_gate_that_cannot_be_read_is_refused_before_any_load() {
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    for (gate, needle) in [
        ("p99<", "no value after the comparison"),
        ("p42<1ms", "`p42` is not a percentile"),
        ("errors<abc", "`abc` is not a number"),
        ("p99<50", "needs its unit"),
    ] {
        let r = run(&[&url, "--rate", "10", "-d", "1s", "-q", "--slo", gate]);
        assert_eq!(r.code(), Some(2), "{gate}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{gate}: {}", r.stderr);
        assert!(r.json.is_none(), "{gate}: nothing ran");
    }
    // A ratio needs an offered rate.
    let r = run(&[&url, "-c", "2", "-d", "1s", "-q", "--slo", "achieved>=0.98"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("needs an offered rate"), "{}", r.stderr);
    assert_eq!(server.requests(), 0, "no load before the gates are read");
}
