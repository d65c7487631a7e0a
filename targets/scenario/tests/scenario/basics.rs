//! `/health`, `/count`, `/stats`, keep-alive and graceful shutdown.

use std::thread;

use loadlab_target::KeepAlive;
use loadlab_target_common::testing::http_exchange;

use crate::util::{concurrently, ms, timed, Target};

#[test]
fn health_answers_ok() {
    let target = Target::start(|_| {});
    assert_eq!(target.ok("/health"), "ok");
}

#[test]
fn unknown_paths_are_404_and_counted_as_other() {
    let target = Target::start(|_| {});
    assert_eq!(target.get("/nope").status, 404);
    assert_eq!(target.stats().requests["other"], 1);
}

#[test]
fn count_yields_distinct_consecutive_values_under_concurrency() {
    let target = Target::start(|c| c.workers = Some(4));
    let (bodies, _) = concurrently(20, |_| target.ok("/count"));
    let mut values: Vec<u64> = bodies.iter().map(|b| b.parse().unwrap()).collect();
    values.sort_unstable();
    assert_eq!(values, (1..=20).collect::<Vec<_>>());
    assert_eq!(target.stats().count, 20);
}

#[test]
fn stats_count_requests_per_endpoint() {
    let target = Target::start(|_| {});
    for path in ["/health", "/health", "/count"] {
        target.ok(path);
    }
    let stats = target.stats();
    assert_eq!(stats.requests["/health"], 2);
    assert_eq!(stats.requests["/count"], 1);
    assert_eq!(stats.requests["/stats"], 1, "the /stats request itself");
    assert_eq!(stats.requests["/sleep"], 0);
    assert_eq!(stats.requests.len(), 13, "twelve endpoints and `other`");
}

#[test]
fn keep_alive_off_closes_after_one_response() {
    let target = Target::start(|c| c.keep_alive = KeepAlive::Off);
    // No `Connection: close` from the client: the server must close by itself.
    let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", target.addr());
    let (raw, elapsed) = timed(|| http_exchange(target.addr(), &request));
    assert!(
        raw.to_ascii_lowercase().contains("connection: close"),
        "{raw}"
    );
    assert!(raw.ends_with("ok"));
    assert!(
        elapsed < ms(3_000),
        "server kept the connection for {elapsed:?}"
    );
}

#[test]
fn shutdown_lets_in_flight_requests_finish() {
    let target = Target::start(|c| c.sleep = ms(500));
    let addr = target.addr();
    let in_flight =
        thread::spawn(move || loadlab_target_common::testing::http_get(addr, "/f_sleep"));
    thread::sleep(ms(150));
    assert_eq!(target.stop(), Ok(()));
    let response = in_flight.join().unwrap();
    assert_eq!((response.status, response.body.as_str()), (200, "done"));
}
