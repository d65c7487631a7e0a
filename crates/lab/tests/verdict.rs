//! The verdict on recorded steps (the `backlog-workers` bundle of the diagnosis fixtures):
//! the stored judgement is reproduced, and a run noted generator-limited only for a little
//! schedule lag still judges a server that clearly failed, or one that held with the load
//! offered as planned, while real generator trouble (a CPU-bound worker, lag within reach
//! of the verdict) does not.

mod common;

use common::recorded_step as step;
use loadlab_lab::bundle::StepRecord;
use loadlab_lab::plan::Slo;
use loadlab_lab::verdict::{judge, Limit};

/// `plans/backlog-workers.toml`'s SLO.
const SLO: Slo = Slo {
    p99_ms: Some(1000.0),
    percentiles: Vec::new(),
    max_error_rate: 0.01,
    min_achieved_ratio: 0.98,
    names: Vec::new(),
};

/// `SLO` with only its throughput clause judged: no latency bound, any error rate.
fn throughput_only() -> Slo {
    Slo {
        p99_ms: None,
        max_error_rate: 1.0,
        ..SLO
    }
}

/// The step marked as the engine marks a run whose sends were late by `p99`/`max` ms.
fn lagging(s: &StepRecord, p99: f64, max: f64) -> loadlab_engine::RunResult {
    let mut r = s.result.clone();
    r.generator_limited = true;
    r.generator_notes = vec![format!("schedule lag p99 is {p99:.2} ms")];
    r.schedule_lag_ms.p99 = p99;
    r.schedule_lag_ms.max = max;
    r
}

#[test]
fn the_recorded_verdicts_are_reproduced() {
    for (config, scenario, load) in [
        ("backlog=16,workers=2", "sleep", 800.0),
        ("backlog=16,workers=2", "sleep", 50.0),
        ("backlog=16,workers=2", "health", 800.0),
    ] {
        let s = step(config, scenario, load);
        let v = judge(&s.result, &SLO, false);
        assert_eq!(
            v.sustained, s.verdict.sustained,
            "{config} {scenario} {load}"
        );
        assert_eq!(v.limits, s.verdict.limits, "{config} {scenario} {load}");
        assert_eq!(v.generator_excused, None);
    }
}

#[test]
fn a_little_lag_does_not_hide_a_server_that_failed() {
    // 2 workers × 100 ms offered 800 req/s: errors, latency and throughput all failed, by
    // seconds; 1.5 ms of schedule lag cannot have caused any of it.
    let s = step("backlog=16,workers=2", "sleep", 800.0);
    let v = judge(&lagging(&s, 1.5, 2.0), &SLO, false);
    assert!(!v.sustained);
    assert_eq!(
        v.limits,
        vec![Limit::Errors, Limit::Latency, Limit::Throughput]
    );
    let why = v.generator_excused.expect("the lag is named");
    assert!(why.contains("p99 1.50 ms, worst 2.00 ms"), "{why}");
    assert!(why.contains("errors, latency, throughput"), "{why}");
}

#[test]
fn lag_that_could_explain_the_failure_keeps_the_step_generator_limited() {
    let s = step("backlog=16,workers=2", "sleep", 800.0);
    // A worst lag of 9 s: as large as the slowest response (9.96 s), near the timeout (10 s)
    // and the latency growth: nothing that failed is beyond its reach.
    let v = judge(&lagging(&s, 1.5, 9000.0), &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    assert_eq!(v.generator_excused, None);
    // A CPU-bound worker reads responses late too, by an amount nothing bounds.
    let mut r = lagging(&s, 1.5, 2.0);
    r.worker_cpu_utilization = vec![0.97, 0.4];
    let v = judge(&r, &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    // So is one 80 % busy on CPUs whose time the host took a quarter of: it wanted its
    // CPU throughout, and its CPU time counts none of what was stolen.
    let mut r = lagging(&s, 1.5, 2.0);
    r.worker_cpu_utilization = vec![0.8];
    assert!(judge(&r, &SLO, false).generator_excused.is_some());
    r.generator_steal_share = Some(0.25);
    let v = judge(&r, &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    assert_eq!(v.generator_excused, None);
    // Arrivals that were never sent: the load was not the load planned, whatever the lag.
    let mut r = lagging(&s, 1.5, 2.0);
    r.unsent = 40;
    let v = judge(&r, &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    assert_eq!(v.generator_excused, None);
}

#[test]
fn a_clause_within_reach_of_the_lag_is_not_counted_when_another_fails_beyond_it() {
    // A worst lag of 2 s: a fifth of the timeout and more than a tenth of how far the
    // server fell behind, so lateness could have failed the errors and throughput clauses;
    // but every response took at least 3.9 s from its intended send, more than the 1 s
    // bound plus 2 s of lateness: the latency clause is the server's, and fails the step.
    let s = step("backlog=16,workers=2", "sleep", 800.0);
    let v = judge(&lagging(&s, 1.5, 2000.0), &SLO, false);
    assert!(!v.sustained);
    assert_eq!(v.limits, vec![Limit::Latency], "{v:?}");
    let why = v.generator_excused.expect("the lag is named");
    assert!(
        why.contains("too little to cause what failed (latency)")
            && why.contains("errors, throughput within its reach, not counted"),
        "{why}"
    );
    let said = v.unresolved.join("\n");
    assert!(
        said.contains("errors not counted against the server: loadlab's worst lateness (2000.00 ms) is not under a tenth of the request timeout (10000 ms)"),
        "{said}"
    );
    assert!(
        said.contains("throughput not counted against the server: it fell 1378 ms behind over the step, less than 3 times loadlab's worst lateness (2000.00 ms)"),
        "{said}"
    );
    // The same lag, but requests waited up to 9 s in loadlab before their send, its worker
    // 70 % busy (slow to take responses in, the arrivals queued behind connections it had
    // not freed): the bound plus that wait takes in the slowest response (9.96 s), so
    // nothing that failed is beyond loadlab's reach, and the step is its own.
    let mut r = lagging(&s, 1.5, 2000.0);
    r.before_send_ms_max = Some(9000.0);
    r.worker_cpu_utilization = vec![0.7, 0.7];
    let v = judge(&r, &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    assert_eq!(v.generator_excused, None);
    // So is a pool at its ceiling, whatever its worker did: loadlab's own limit.
    let mut at_ceiling = r.clone();
    at_ceiling.worker_cpu_utilization = vec![0.01, 0.01];
    at_ceiling.connections_opened = at_ceiling.max_connections;
    let v = judge(&at_ceiling, &SLO, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    // A closed loop's connections are the load, not a ceiling: a request there waits only
    // for its own connection to open (a server out of descriptors never accepts some).
    at_ceiling.model = loadlab_engine::config::Model::Closed;
    assert!(loadlab_lab::verdict::queued_for_the_server(&at_ceiling));
    assert_eq!(judge(&at_ceiling, &SLO, false).limits, vec![Limit::Latency]);
    // The recorded workers (1 % busy) under the pool's ceiling (1,600 of 16,000 opened):
    // each connection freed as its reply came, a request with none free got a new one at
    // once, and its wait was for the server (busy connections, a slow accept). The latency
    // clause, far beyond the lag, is the server's.
    r.worker_cpu_utilization = s.result.worker_cpu_utilization.clone();
    assert!(loadlab_lab::verdict::queued_for_the_server(&r));
    assert_eq!(judge(&r, &SLO, false).limits, vec![Limit::Latency]);
    r.worker_cpu_utilization = vec![0.7, 0.7];
    // A wait no longer than the lag changes nothing.
    r.before_send_ms_max = Some(1500.0);
    assert_eq!(judge(&r, &SLO, false).limits, vec![Limit::Latency]);
    // Nor one a hair over it (a send comes just after its release): the note says the lag.
    r.before_send_ms_max = Some(2000.5);
    let why = judge(&r, &SLO, false).generator_excused.unwrap();
    assert!(!why.contains("before their send"), "{why}");
    // A wait of 2.5 s: every response still took more than the bound plus it, and the
    // sentences say the wait where they said the lag.
    r.before_send_ms_max = Some(2500.0);
    let v = judge(&r, &SLO, false);
    assert_eq!(v.limits, vec![Limit::Latency], "{v:?}");
    let why = v.generator_excused.expect("the lag is named");
    assert!(
        why.contains("worst 2000.00 ms) and up to 2500.00 ms before their send, too little to cause what failed (latency)"),
        "{why}"
    );
    assert!(
        v.unresolved.join("\n").contains("errors not counted against the server: the longest a request waited in loadlab before its send (2500.00 ms: a late release, then a wait for a free connection) is not under a tenth of the request timeout (10000 ms)"),
        "{:?}",
        v.unresolved
    );
}

#[test]
fn a_throughput_shortfall_beyond_three_times_the_lateness_is_the_servers() {
    // Only the throughput clause judged (no latency bound, any error rate): the server fell
    // 1378 ms behind over the step. Lateness moves the pace by at most twice itself, so
    // sends up to 400 ms late (1200 ms: three times) cannot have failed it, while sends up
    // to 500 ms late (1500 ms) could have.
    let s = step("backlog=16,workers=2", "sleep", 800.0);
    let slo = throughput_only();
    assert_eq!(
        judge(&s.result, &slo, false).limits,
        vec![Limit::Throughput]
    );
    let v = judge(&lagging(&s, 1.5, 400.0), &slo, false);
    assert_eq!(v.limits, vec![Limit::Throughput], "{v:?}");
    let why = v.generator_excused.expect("the lag is named");
    assert!(
        why.contains("worst 400.00 ms), too little to cause what failed (throughput)"),
        "{why}"
    );
    let v = judge(&lagging(&s, 1.5, 500.0), &slo, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    assert_eq!(v.generator_excused, None);
}

#[test]
fn a_names_shortfall_is_weighed_on_its_own_pace_not_the_whole_runs() {
    // One request name fell 1378 ms behind while the whole run kept pace (its trend level:
    // the other names' latency flat). Sends up to 400 ms late cannot have failed the name's
    // throughput clause (three times that is 1200 ms): the step is the server's, as it is
    // without names; the whole run's pace alone would have put the name within reach.
    let s = step("backlog=16,workers=2", "sleep", 800.0);
    let slo = throughput_only();
    let mut r = lagging(&s, 1.5, 400.0);
    let run = r.clone();
    r.by_name = vec![loadlab_engine::result::NameResult {
        name: "checkout".into(),
        share: 1.0,
        offered_rps: run.offered_rps,
        requests: run.requests,
        successful: run.successful,
        achieved_rps: run.achieved_rps,
        latency_trend: run.latency_trend.clone(),
        latency_ms: run.latency_ms.clone(),
        errors: run.errors,
        errors_total: run.errors_total,
        status_codes: run.status_codes.clone(),
        grpc_status: Default::default(),
        latency_histogram: run.histograms.latency.clone(),
    }];
    if let Some(t) = r.latency_trend.as_mut() {
        t.pace = 1.0;
    }
    let v = judge(&r, &slo, false);
    assert_eq!(v.limits, vec![Limit::Throughput], "{v:?}");
    assert_eq!(v.names_failed().as_deref(), Some("checkout (throughput)"));
    assert!(v.generator_excused.is_some(), "{v:?}");
    // Sends up to 500 ms late could have: the step is loadlab's.
    let mut late = r.clone();
    late.schedule_lag_ms.max = 500.0;
    let v = judge(&late, &slo, false);
    assert!(v.limits.contains(&Limit::GeneratorLimited), "{v:?}");
    // With the p99 bound judged too and sends up to 2 s late: every response took more
    // than the bound plus that, so the step is the server's on latency, and the name's
    // shortfall, within reach, is said with its name.
    late.schedule_lag_ms.max = 2000.0;
    let v = judge(&late, &SLO, false);
    assert_eq!(v.limits, vec![Limit::Latency], "{v:?}");
    assert!(
        v.unresolved.join("\n").contains("throughput not counted against the server: checkout fell 1378 ms behind over the step, less than 3 times loadlab's worst lateness (2000.00 ms)"),
        "{:?}",
        v.unresolved
    );
}

#[test]
fn a_healthy_step_with_a_little_lag_is_sustained_and_with_much_it_is_not() {
    // /health at 800 req/s held every clause. Sends at most 2 ms late over a window of
    // seconds: the load was offered as planned (0.1 % of it slipped past the end).
    let h = step("backlog=16,workers=2", "health", 800.0);
    let window_ms = h.result.duration_s * 1000.0;
    let v = judge(&lagging(&h, 1.5, 2.0), &SLO, false);
    assert!(v.sustained, "{v:?}");
    let why = v.generator_excused.expect("the lag is named");
    assert!(why.contains("worst 2.00 ms"), "{why}");
    assert!(why.contains("within the 2.0 %"), "{why}");
    // Sends up to 5 % of the window late: more than the 2 % the throughput clause allows
    // may never have been offered, so only the generator can be named.
    let v = judge(&lagging(&h, 1.5, 0.05 * window_ms), &SLO, false);
    assert_eq!(v.limits, vec![Limit::GeneratorLimited]);
    assert!(!v.sustained);
    // A CPU-bound worker: nothing is excused.
    let mut r = lagging(&h, 1.5, 2.0);
    r.worker_cpu_utilization = vec![0.95, 0.2];
    assert_eq!(judge(&r, &SLO, false).limits, vec![Limit::GeneratorLimited]);
}

#[test]
fn the_arrivals_counted_after_the_window_decide_a_healthy_step_not_the_worst_lag() {
    // /health at 800 req/s held every clause. Its worst send was 5 % of the window late, so
    // without a count up to 5 % of the load may have slipped out (generator-limited); the
    // engine counted how many did.
    let h = step("backlog=16,workers=2", "health", 800.0);
    let window_ms = h.result.duration_s * 1000.0;
    let planned = h.result.offered_rps.unwrap() * h.result.duration_s;
    let mut r = lagging(&h, 1.5, 0.05 * window_ms);
    // A few of them: the load was offered as planned.
    r.sent_after_window = Some(3);
    let v = judge(&r, &SLO, false);
    assert!(v.sustained, "{v:?}");
    let why = v.generator_excused.expect("the lag is named");
    assert!(
        why.contains(&format!("3 of the step's {} arrivals (", planned.round()))
            && why.contains("were sent after its end, within the 2.0 %"),
        "{why}"
    );
    // 3 % of them: more than the throughput clause allows may never have been offered.
    r.sent_after_window = Some((0.03 * planned).ceil() as u64);
    assert_eq!(judge(&r, &SLO, false).limits, vec![Limit::GeneratorLimited]);
    // Closed loop, or an older result: no count, the worst lag bounds it (5 %: too much).
    r.sent_after_window = None;
    assert_eq!(judge(&r, &SLO, false).limits, vec![Limit::GeneratorLimited]);
}

#[test]
fn a_bound_on_another_percentile_is_judged_on_its_own_share() {
    use loadlab_lab::plan::PercentileBound;
    // /health at 800 req/s held p99 < 1 s easily; its median is a fraction of a millisecond.
    let s = step("backlog=16,workers=2", "health", 800.0);
    assert!(judge(&s.result, &SLO, false).sustained);
    let p50 = s.result.latency_ms.p50.unwrap();
    let with = |percentile: f64, ms: f64| Slo {
        percentiles: vec![PercentileBound { percentile, ms }],
        ..SLO
    };
    // A median bound at a tenth of the median: nearly all responses are slower, far more
    // than the half a p50 bound allows.
    let v = judge(&s.result, &with(50.0, p50 / 10.0), false);
    assert_eq!(v.limits, vec![Limit::Latency], "{v:?}");
    // Above the median with room: held.
    let v = judge(&s.result, &with(50.0, 2.0 * p50), false);
    assert!(v.sustained, "{v:?}");
}

#[test]
fn held_streams_fail_on_the_stream_seconds_that_missed_a_message() {
    // A healthy step read as held server streams: its few failed waits pass the count of
    // requests, but one stream in nine starved for four seconds is resolved on
    // stream-seconds; the same share over two seconds is too few to tell and is said so.
    let h = step("backlog=16,workers=2", "health", 800.0);
    let mut r = h.result.clone();
    assert!(judge(&r, &SLO, false).sustained);
    r.stream_timing = Some(loadlab_engine::result::StreamTiming {
        stream_seconds: 36,
        failed_stream_seconds: 4,
        ..Default::default()
    });
    let v = judge(&r, &SLO, false);
    assert_eq!(v.limits, vec![Limit::Errors], "{v:?}");
    let t = r.stream_timing.as_mut().unwrap();
    (t.stream_seconds, t.failed_stream_seconds) = (18, 2);
    let v = judge(&r, &SLO, false);
    assert!(v.sustained, "{v:?}");
    assert!(
        v.unresolved
            .iter()
            .any(|u| u.starts_with("2 of 18 stream-seconds missed a message")),
        "{:?}",
        v.unresolved
    );
    // None missed: the clause holds.
    let t = r.stream_timing.as_mut().unwrap();
    (t.stream_seconds, t.failed_stream_seconds) = (36, 0);
    assert!(judge(&r, &SLO, false).sustained);
}

/// Failures that were loadlab's own (no local port, no descriptor) do not fail the server:
/// where the errors clause holds without them, the step is limited by loadlab
/// (`client_limited`, which stops a knee search); where the server failed enough requests
/// of its own, it is the server's errors still.
#[test]
fn loadlabs_own_ports_and_descriptors_are_not_the_servers_errors() {
    use loadlab_engine::ErrorClass;
    let s = step("backlog=16,workers=2", "health", 800.0);
    assert!(s.verdict.sustained);
    let failing = |own: u64, servers: u64| {
        let mut r = s.result.clone();
        r.errors[ErrorClass::LocalPortExhaustion] += own;
        r.errors[ErrorClass::ConnectionReset] += servers;
        r.errors_total += own + servers;
        judge(&r, &SLO, false)
    };
    let n = s.result.requests + s.result.errors_total;
    let v = failing(n / 2, 0);
    assert_eq!(v.limits, vec![Limit::ClientLimited], "{v:?}");
    assert!(!v.sustained);
    // The server's own resets fail it, whatever loadlab's ports did.
    let v = failing(n / 2, n / 4);
    assert_eq!(v.limits, vec![Limit::Errors], "{v:?}");
}
