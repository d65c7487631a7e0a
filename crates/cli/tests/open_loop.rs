//! Open-loop runs: the schedule's count, Poisson arrivals, and coordinated omission.

mod util;

use util::{assert_stall_in_latency_not_service_time, num, run, Behavior, TestServer};

#[test]
fn fixed_rate_sends_that_many_requests() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "--rate", "500", "-d", "4s", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    let sent = s.requests() as f64;
    assert!(
        (sent - 2000.0).abs() <= 40.0,
        "server saw {sent}, expected 2000 within 2 %"
    );
    let recorded = num(j, &["requests"]);
    assert!((recorded - 2000.0).abs() <= 40.0, "recorded {recorded}");
    assert_eq!(num(j, &["offered_rps"]), 500.0);
    let achieved = num(j, &["achieved_rps"]);
    assert!((achieved - 500.0).abs() <= 10.0, "achieved {achieved}");
    assert_eq!(j["model"], "open");
    assert_eq!(j["arrival"], "constant");
}

/// Fewer connections than threads: a worker that starts with none still sends its share
/// of the arrivals (it opens connections as they come). It once ended at once, and the run
/// sent half the offered rate and blamed the idle worker as CPU-bound.
#[test]
fn a_worker_without_a_first_connection_still_sends_its_share() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-c",
        "1",
        "-t",
        "2",
        "-d",
        "2s",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    let sent = s.requests() as f64;
    assert!(
        (sent - 400.0).abs() <= 8.0,
        "server saw {sent}, expected 400: {j}"
    );
    assert!((num(j, &["achieved_rps"]) - 200.0).abs() <= 4.0, "{j}");
    // The idle worker is not blamed and nothing went unsent. A schedule-lag note is not
    // asserted: with this file's tests running at once on two cores, either transport
    // now and then releases a few sends over 1 ms late, and loadlab says so (the note
    // is right then).
    let notes = j["generator_notes"].as_array().expect("generator_notes");
    assert!(
        notes.iter().all(|n| {
            let n = n.as_str().unwrap_or_default();
            !n.contains("CPU-bound") && !n.contains("never sent")
        }),
        "{j}"
    );
    assert_eq!(num(j, &["unsent"]), 0.0, "{j}");
}

#[test]
fn poisson_arrivals_average_the_rate() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "--rate",
        "400",
        "--arrival",
        "poisson",
        "--seed",
        "7",
        "-d",
        "3s",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let n = num(r.json(), &["requests"]);
    // 1200 expected; five standard deviations is about 175.
    assert!((1025.0..=1375.0).contains(&n), "{n}");
    assert_eq!(r.json()["arrival"], "poisson");
}

#[test]
fn request_limit_ends_an_open_loop_run() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "--rate", "1000", "-n", "300", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.json()["requests"], 300);
    assert_eq!(s.requests(), 300);
    assert_eq!(r.json()["stop_reason"], "requests");
}

/// A server that holds every response for one second, once, in the middle of the run.
/// Latency from the intended send time must show the stall; service time with a bounded
/// pool must not (the requests delayed in the generator were sent after the stall).
#[test]
fn coordinated_omission_is_corrected() {
    let s = TestServer::start(Behavior::StallOnce {
        after: std::time::Duration::from_millis(2500),
        hold: std::time::Duration::from_secs(1),
    });
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "6s",
        "-c",
        "4",
        "--max-connections",
        "4",
        "-t",
        "1",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_stall_in_latency_not_service_time(j);
    // The latency of the ~200 requests intended during the stall spreads over 0..1 s: the
    // mean lands near 80 ms.
    let mean = num(j, &["latency_ms", "mean"]);
    assert!(mean > 40.0, "latency mean {mean} ms");
    assert!(num(j, &["latency_ms", "max"]) >= 950.0);
    // The generator was waiting on connections, not late itself: lag stays out of it.
    assert!(num(j, &["schedule_lag_ms", "p99"]) < 100.0);
    // The arrivals of the stall waited in loadlab's queue for one of its four connections,
    // and the result says how long (a verdict reads it before putting a latency on the
    // server that loadlab's side may have added).
    let before = num(j, &["before_send_ms_max"]);
    assert!(
        before >= 900.0 && before >= num(j, &["schedule_lag_ms", "max"]),
        "waited before the send at most {before} ms"
    );
}

/// Responses that land just after the window (a 100 ms service time) still count: achieved
/// equals offered when every request succeeds.
#[test]
fn achieved_counts_responses_that_land_after_the_window() {
    let s = TestServer::start(Behavior::Delay(std::time::Duration::from_millis(100)));
    let r = run(&[&s.url("/"), "--rate", "20", "-d", "2s", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["successful"], 40);
    let achieved = num(j, &["achieved_rps"]);
    assert!(
        (19.8..=20.2).contains(&achieved),
        "achieved {achieved} of 20 offered"
    );
    // Open loop counts the arrivals released after the window's end (the verdicts read it).
    assert!(
        j["sent_after_window"].is_u64(),
        "{}",
        j["sent_after_window"]
    );
    // The wait before the send leaves out the server's 100 ms: the request that waited
    // longest still took 100 ms after it.
    let before = num(j, &["before_send_ms_max"]);
    let slowest = num(j, &["latency_ms", "max"]);
    assert!(
        before >= 0.0 && before + 99.0 <= slowest,
        "waited at most {before} ms before the send, slowest response {slowest} ms"
    );
}

/// A saturated server (two connections, 100 ms each: at most 20 req/s) offered 40 req/s
/// achieves the pace it kept, not the offered rate, although every request eventually
/// succeeds. The pace is read from what the server took per request (the service time): on
/// a loaded host its 100 ms sleeps wake late and it keeps 17 req/s, not 20.
#[test]
fn achieved_shows_a_saturated_server() {
    let s = TestServer::start(Behavior::Delay(std::time::Duration::from_millis(100)));
    let r = run(&[
        &s.url("/"),
        "--rate",
        "40",
        "-d",
        "2s",
        "-c",
        "2",
        "--max-connections",
        "2",
        "--timeout",
        "10s",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["successful"], 80);
    let achieved = num(j, &["achieved_rps"]);
    let service = num(j, &["service_time_ms", "mean"]);
    // Two connections, each busy `service` ms per request.
    let kept = 2.0 * 1000.0 / service;
    assert!(
        achieved <= 21.0 && achieved >= 0.8 * kept,
        "achieved {achieved} req/s; the server kept {kept:.1} (2 connections, {service:.1} ms \
         each; at most 20)"
    );
}

/// Open loop takes each response's completion from the kernel's receive timestamp: those
/// are real instants on loadlab's clock, never before the server could have answered (a
/// wrong clock conversion would put them there), and every request is still counted once.
#[test]
fn receive_timestamps_are_on_loadlabs_clock() {
    let s = TestServer::start(Behavior::Delay(std::time::Duration::from_millis(4)));
    let r = run(&[
        &s.url("/"),
        "--rate",
        "2000",
        "-d",
        "2s",
        "-c",
        "32",
        "-t",
        "1",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(num(j, &["successful"]), 4000.0, "{j}");
    for what in ["latency_ms", "service_time_ms"] {
        let min = num(j, &[what, "min"]);
        assert!(
            min >= 4.0,
            "{what} min {min} ms: before the server's 4 ms delay"
        );
        let p50 = num(j, &[what, "p50"]);
        assert!(p50 < 100.0, "{what} p50 {p50} ms");
    }
}

/// A server that holds its responses while loadlab keeps to its schedule gets a connection
/// for each arrival it holds up: the pool grows to carry them (open loop's promise), far
/// beyond `-c`, and no further than the arrivals the stall held.
#[test]
fn a_stalled_server_gets_a_connection_for_each_arrival_it_holds() {
    let s = TestServer::start(Behavior::StallOnce {
        after: std::time::Duration::from_millis(1000),
        hold: std::time::Duration::from_millis(500),
    });
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "3s",
        "-c",
        "2",
        "-t",
        "1",
        "--timeout",
        "5s",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["successful"], 600, "{j}");
    // 100 arrivals come due while the server holds its answers.
    let opened = num(j, &["connections_opened"]);
    assert!((60.0..=110.0).contains(&opened), "opened {opened}: {j}");
    // The stall is in the latency, not in loadlab's schedule: it kept sending on time.
    assert!(num(j, &["latency_ms", "max"]) >= 400.0, "{j}");
    assert!(num(j, &["schedule_lag_ms", "p99"]) < 50.0, "{j}");
}

/// A loadlab kept from running (stopped for 300 ms, as a host or a neighbour on its core
/// would) at a rate that leaves its worker idle releases requests late and says so, and says
/// that it was most likely not its own work: the worker was nearly idle.
#[test]
fn an_idle_generator_woken_late_says_it_was_likely_not_its_own_work() {
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let s = TestServer::start(Behavior::Ok);
    let json = util::temp_path("woken-late.json");
    let child = Command::new(util::loadlab_bin())
        .args(["run", &s.url("/"), "--rate", "200", "-d", "3s", "-c", "2"])
        .args(["-t", "1", "-q", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let pid = child.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let r = util::finish(child.wait_with_output().unwrap(), &json);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["successful"], 600, "{j}");
    assert_eq!(j["generator_limited"], true, "{j}");
    let note = j["generator_notes"][0].as_str().unwrap_or_default();
    assert!(note.contains("loadlab released requests late"), "{note}");
    // The wake-ups are named when, and only when, every worker thread was at most 10 %
    // busy: 3 to 4 % here on a quiet machine; a debug build on a host that steals has
    // measured more (the note then claims no cause, which is right for that run).
    let busiest = j["worker_cpu_utilization"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_f64().unwrap())
        .fold(0.0, f64::max);
    let named = note.contains("released requests late, with its worker threads at most")
        && note.contains("most likely not held up by its own work but woken late");
    assert_eq!(named, busiest <= 0.1, "busiest worker {busiest}: {note}");
    // And what the hypervisor took during the run, read from /proc/stat like `top`'s `st`
    // (a stop is not steal: either clause may be true here, but one is said).
    assert!(
        !named
            || (note.contains("; the hypervisor took ")
                && note.contains(" of CPU time of the CPUs the workers ran on during the run ("))
            || note.contains("; no steal time during the run ("),
        "{note}"
    );
}
