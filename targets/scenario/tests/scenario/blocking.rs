//! `/sleep` blocks its worker, `/f_sleep` does not, `/page` queues on the blocking pool.

use crate::util::{concurrently, ms, timed, Target};

const SLEEP_MS: u64 = 300;

#[test]
fn sleep_takes_at_least_the_sleep_time() {
    let target = Target::start(|c| c.sleep = ms(SLEEP_MS));
    let (body, elapsed) = timed(|| target.ok("/sleep"));
    assert_eq!(body, "done");
    assert!(elapsed >= ms(SLEEP_MS), "{elapsed:?}");
}

#[test]
fn sleep_on_one_worker_serializes() {
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.sleep = ms(SLEEP_MS);
    });
    let (_, elapsed) = concurrently(2, |_| target.ok("/sleep"));
    assert!(
        elapsed >= ms(SLEEP_MS * 18 / 10),
        "two blocking sleeps took {elapsed:?}"
    );
}

#[test]
fn f_sleep_on_one_worker_overlaps() {
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.sleep = ms(SLEEP_MS);
    });
    let (bodies, elapsed) = concurrently(2, |_| target.ok("/f_sleep"));
    assert_eq!(bodies, ["done", "done"]);
    assert!(elapsed >= ms(SLEEP_MS), "{elapsed:?}");
    assert!(
        elapsed < ms(SLEEP_MS * 16 / 10),
        "two async sleeps took {elapsed:?}"
    );
}

#[test]
fn page_on_one_blocking_thread_serializes() {
    let target = Target::start(|c| {
        c.workers = Some(2);
        c.blocking_threads = 1;
    });
    let path = format!("/page?work_ms={SLEEP_MS}&kind=sleep");
    let (bodies, elapsed) = concurrently(2, |_| target.ok(&path));
    assert_eq!(bodies[0], format!("page: sleep {SLEEP_MS} ms"));
    assert!(
        elapsed >= ms(SLEEP_MS * 18 / 10),
        "two pages on one thread took {elapsed:?}"
    );
    let pool = target.stats().blocking_pool;
    assert_eq!(
        (pool.threads, pool.completed, pool.queued, pool.busy),
        (1, 2, 0, 0)
    );
}

#[test]
fn page_on_two_blocking_threads_overlaps() {
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.blocking_threads = 2;
    });
    let path = format!("/page?work_ms={SLEEP_MS}");
    let (_, elapsed) = concurrently(2, |_| target.ok(&path));
    assert!(elapsed >= ms(SLEEP_MS), "{elapsed:?}");
    assert!(
        elapsed < ms(SLEEP_MS * 16 / 10),
        "two pages on two threads took {elapsed:?}"
    );
}

#[test]
fn page_cpu_work_spins_for_the_time_asked() {
    let target = Target::start(|_| {});
    let (body, elapsed) = timed(|| target.ok("/page?work_ms=50&kind=cpu"));
    assert_eq!(body, "page: cpu 50 ms");
    assert!(elapsed >= ms(50), "{elapsed:?}");
}

#[test]
fn page_rejects_bad_queries() {
    let target = Target::start(|_| {});
    for path in [
        "/page",
        "/page?work_ms=ten",
        "/page?work_ms=10&kind=gpu",
        "/page?work_ms=600000",
    ] {
        assert_eq!(target.get(path).status, 400, "{path}");
    }
}
