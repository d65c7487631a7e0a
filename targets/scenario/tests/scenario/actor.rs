//! The slow actor: `/send_wait` blocks, `/fsend_wait` awaits, `/send_nowait` drops when full.

use std::thread;

use crate::util::{concurrently, ms, timed, Target};

#[test]
fn send_wait_calls_serialize_on_the_actor() {
    let delay = ms(100);
    let target = Target::start(|c| {
        c.workers = Some(6);
        c.actor_delay = delay;
    });
    let (bodies, elapsed) = concurrently(5, |_| target.ok("/send_wait"));
    assert!(bodies.iter().all(|b| b == "done"));
    assert!(elapsed >= delay * 5, "five messages took {elapsed:?}");
    assert_eq!(target.stats().actor.processed, 5);
}

/// With one worker, a blocked `/send_wait` holds up an unrelated `/health`…
#[test]
fn send_wait_blocks_the_worker() {
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.actor_delay = ms(300);
    });
    let (results, _) = concurrently(2, |i| {
        if i == 0 {
            timed(|| target.ok("/send_wait"))
        } else {
            thread::sleep(ms(50));
            timed(|| target.ok("/health"))
        }
    });
    let health = results[1].1;
    assert!(
        health >= ms(150),
        "/health answered in {health:?} despite a blocked worker"
    );
}

/// …while an awaited `/fsend_wait` does not.
#[test]
fn fsend_wait_serializes_without_blocking_the_worker() {
    let delay = ms(200);
    let target = Target::start(|c| {
        c.workers = Some(1);
        c.actor_delay = delay;
    });
    let (results, elapsed) = concurrently(4, |i| {
        if i < 3 {
            timed(|| target.ok("/fsend_wait"))
        } else {
            thread::sleep(ms(50));
            timed(|| target.ok("/health"))
        }
    });
    assert!(elapsed >= delay * 3, "three messages took {elapsed:?}");
    let health = results[3].1;
    assert!(
        health < delay * 2,
        "/health waited {health:?} behind awaited sends"
    );
}

#[test]
fn send_nowait_returns_before_the_actor_delay() {
    let delay = ms(500);
    let target = Target::start(|c| c.actor_delay = delay);
    let (body, elapsed) = timed(|| target.ok("/send_nowait"));
    assert_eq!(body, "queued");
    assert!(elapsed < delay, "{elapsed:?}");
}

#[test]
fn overflowing_the_mailbox_counts_dropped_messages() {
    let target = Target::start(|c| {
        c.actor_delay = ms(500);
        c.mailbox = 2;
    });
    let statuses: Vec<u16> = (0..8).map(|_| target.get("/send_nowait").status).collect();
    let rejected = statuses.iter().filter(|&&s| s == 503).count() as u64;
    assert!(
        statuses.iter().all(|&s| s == 200 || s == 503),
        "{statuses:?}"
    );
    // One message in the actor, two in the mailbox: at least five of eight do not fit.
    assert!(rejected >= 5, "{statuses:?}");
    let actor = target.stats().actor;
    assert_eq!(actor.dropped, rejected);
    assert_eq!(actor.mailbox_capacity, 2);
    assert!(actor.mailbox_depth <= 2);
}
