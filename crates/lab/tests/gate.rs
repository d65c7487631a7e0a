//! Gates checked against recorded results (the `backlog-workers` bundle of the diagnosis
//! fixtures): each figure is the run's own, each outcome says what it rests on.

mod common;

use loadlab_lab::gate::Gate;

fn result(scenario: &str, load: f64) -> loadlab_engine::RunResult {
    common::recorded_step("backlog=16,workers=2", scenario, load).result
}

fn check(gate: &str, r: &loadlab_engine::RunResult) -> loadlab_lab::gate::GateOutcome {
    gate.parse::<Gate>().unwrap().check(r)
}

#[test]
fn gates_read_the_runs_own_figures() {
    let healthy = result("health", 800.0);
    let p99 = healthy.latency_ms.p99.unwrap();
    // Just above and just below the recorded p99 (the histogram's value, to 3 digits).
    assert!(check(&format!("p99<{}ms", p99 * 1.01 + 0.001), &healthy).passed);
    let below = check(&format!("p99<{}ms", p99 * 0.9), &healthy);
    assert!(!below.passed, "{below}");
    assert!(below.to_string().starts_with("[FAIL] p99<"), "{below}");
    assert_eq!(healthy.latency_ms.count, 1600);
    assert!(below.shown.ends_with("(1,600 responses)"), "{below}");
    assert!(check("errors<0.1%", &healthy).passed);
    assert!(check("achieved>=0.98", &healthy).passed);
    assert!(check("achieved>=700/s", &healthy).passed);
    assert!(!check("achieved>=900/s", &healthy).passed);

    // /sleep at 800 req/s over 2 workers of 100 ms: errors and a throughput far short.
    let over = result("sleep", 800.0);
    assert!(over.errors_total > 0);
    let e = check("errors<1%", &over);
    assert!(!e.passed, "{e}");
    assert!(
        (e.actual.unwrap() - over.errors_total as f64 / over.attempts() as f64).abs() < 1e-12,
        "{e}"
    );
    assert!(e.shown.contains(" failed of "), "{e}");
    let a = check("achieved>=0.98", &over);
    assert!(!a.passed, "{a}");
    assert!((a.actual.unwrap() - over.achieved_rps / 800.0).abs() < 1e-9);
}
