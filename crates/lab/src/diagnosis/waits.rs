//! What the target's threads waited on over a step (the probe's reading of each thread's
//! system call, [`ThreadWaits`]), said in words, and what held them when one thing did: a
//! downstream, one lock, the disk. It tells a worker pool from a database pool from a global
//! lock, which the counts of requests in service cannot.

use loadlab_system::probe::ThreadWaits;

use super::evidence::Evidence;

/// What held most of the target's busy threads (those not idle at an accept, an event
/// loop or a client's connection): at least half of them and two or more.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Held {
    /// Waiting on a socket to one address (a database, an HTTP backend): the address, threads.
    Downstream(String, u64),
    /// Waiting on one lock: threads on that futex.
    Lock(u64),
    /// In uninterruptible sleep (block I/O): threads.
    Disk(u64),
}

/// The step's typical reading of the target's threads (each count the median of the
/// measured window's samples); `None` where they were not read.
pub(crate) fn typical(e: &Evidence<'_>) -> Option<ThreadWaits> {
    let p = e.probes()?;
    let warmup = e.warmup_s();
    ThreadWaits::typical(
        p.samples
            .iter()
            .filter(|s| s.t_s >= warmup)
            .filter_map(|s| s.process.as_ref()?.waits.as_ref()),
    )
    .filter(|w| w.threads > 0)
}

/// `of its 17 threads (the step's median), 15 waited on a socket to 127.0.0.1:5432, 2 on a
/// lock`: every class with a thread, the largest first.
pub(crate) fn words(w: &ThreadWaits) -> String {
    let mut parts: Vec<(u64, String)> = w
        .downstream
        .iter()
        .map(|(a, n)| (*n, format!("on a socket to {a}")))
        .collect();
    // A futex is a lock's or a condition's: idle threads of a pool or a runtime park on
    // one too. Many on one address is one contended lock (or one queue they all wait on).
    let lock = if w.lock_shared >= 2 && w.lock_shared == w.lock {
        "on one lock (a futex, all on one address)".to_string()
    } else if w.lock_shared >= 2 {
        format!(
            "on a futex (a lock, or an idle thread's condition; {} on one address)",
            w.lock_shared
        )
    } else {
        "on a futex (a lock, or an idle thread's condition)".to_string()
    };
    parts.extend([
        (w.lock, lock),
        (w.disk, "on the disk (uninterruptible sleep)".into()),
        (w.sleep, "in a sleep".into()),
        (w.accept, "for a new connection (accept)".into()),
        (w.client, "on a client's connection".into()),
        (w.other_socket, "on another socket (Unix, UDP)".into()),
        (
            w.event_loop,
            "in an event loop's wait (epoll, select)".into(),
        ),
        (w.other, "on something else (a pipe, a child)".into()),
        (w.running, "ran or waited for a CPU".into()),
    ]);
    parts.retain(|(n, _)| *n > 0);
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let list: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, (n, what))| match (i, what.starts_with("ran")) {
            (0, true) => format!("{n} {what}"),
            (0, false) => format!("{n} waited {what}"),
            (_, _) => format!("{n} {what}"),
        })
        .collect();
    format!(
        "of its {} threads (the step's median), {}",
        w.threads,
        list.join(", ")
    )
}

/// What held the busy threads, when one thing held most of them.
pub(crate) fn held(w: &ThreadWaits) -> Option<Held> {
    let busy = w.busy();
    let most = |n: u64| n >= 2 && 2 * n >= busy;
    if let Some((a, n)) = w.downstream.iter().max_by_key(|(_, n)| **n) {
        if most(*n) {
            return Some(Held::Downstream(a.clone(), *n));
        }
    }
    if most(w.lock_shared) {
        return Some(Held::Lock(w.lock_shared));
    }
    most(w.disk).then_some(Held::Disk(w.disk))
}

/// The finding's figure of what held them: its name and the threads.
pub(crate) fn figure(h: &Held) -> (&'static str, f64) {
    match h {
        Held::Downstream(_, n) => ("threads_on_downstream", *n as f64),
        Held::Lock(n) => ("threads_on_one_lock", *n as f64),
        Held::Disk(n) => ("threads_on_disk", *n as f64),
    }
}

/// The advice for what held them, in place of the pool's own.
pub(crate) fn advice(h: &Held) -> String {
    match h {
        Held::Downstream(a, _) => format!(
            "its threads wait on {a}: find that downstream's limit first (its pool, its \
             latency: run loadlab against it, or probe it with --probe-pid); a larger pool \
             here only queues more at it"
        ),
        Held::Lock(_) => "its threads wait on one lock: shorten or split what it guards; a \
                          larger pool adds waiters, not throughput"
            .into(),
        Held::Disk(_) => "its threads wait on the disk: make each request's I/O lighter \
                          (fewer fsyncs, a cache) or the disk faster"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> ThreadWaits {
        ThreadWaits {
            threads: 17,
            running: 1,
            downstream: [("127.0.0.1:5432".to_string(), 15)].into(),
            accept: 1,
            ..ThreadWaits::default()
        }
    }

    #[test]
    fn a_pool_on_a_downstream_is_named_by_its_address() {
        assert_eq!(
            words(&w()),
            "of its 17 threads (the step's median), 15 waited on a socket to 127.0.0.1:5432, \
             1 for a new connection (accept), 1 ran or waited for a CPU"
        );
        assert_eq!(
            held(&w()),
            Some(Held::Downstream("127.0.0.1:5432".into(), 15))
        );
    }

    #[test]
    fn a_pool_on_one_lock_and_a_pool_idle_on_nothing() {
        let lock = ThreadWaits {
            threads: 16,
            lock: 15,
            lock_shared: 15,
            sleep: 1,
            ..ThreadWaits::default()
        };
        assert_eq!(
            words(&lock),
            "of its 16 threads (the step's median), 15 waited on one lock (a futex, all on one \
             address), 1 in a sleep"
        );
        assert_eq!(held(&lock), Some(Held::Lock(15)));
        // Idle threads (an event loop, accept) hold nothing; a lock spread over many
        // futexes (an idle pool's condition variables) is no one lock.
        let idle = ThreadWaits {
            threads: 8,
            event_loop: 6,
            lock: 2,
            lock_shared: 1,
            ..ThreadWaits::default()
        };
        assert_eq!(held(&idle), None);
    }
}
