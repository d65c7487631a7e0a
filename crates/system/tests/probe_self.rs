//! `sample_tree` on this test process itself. One test in its own binary, so no other test
//! adds or removes threads and file descriptors while it measures.

use std::hint::black_box;
use std::sync::{Arc, Barrier};

use loadlab_system::os::process_cpu_seconds;
use loadlab_system::probe::sample_tree;

#[test]
fn sees_its_own_threads_fds_and_cpu() {
    let me = std::process::id();

    // Threads: N parked threads show up.
    const N: u64 = 8;
    let before = sample_tree(me).unwrap();
    assert_eq!(before.processes, 1);
    assert!(before.threads >= 1 && before.fds >= 3 && before.rss_bytes > 0);
    let parked = Arc::new(Barrier::new(N as usize + 1));
    let started = Arc::new(Barrier::new(N as usize + 1));
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let (parked, started) = (parked.clone(), started.clone());
            std::thread::spawn(move || {
                started.wait();
                parked.wait();
            })
        })
        .collect();
    started.wait();
    let during = sample_tree(me).unwrap();
    assert!(
        during.threads >= before.threads + N,
        "{} threads before, {} with {N} more parked",
        before.threads,
        during.threads
    );
    parked.wait();
    for h in handles {
        h.join().unwrap();
    }

    // File descriptors: 20 open files show up.
    let before = sample_tree(me).unwrap();
    let files: Vec<_> = (0..20)
        .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
        .collect();
    let during = sample_tree(me).unwrap();
    assert!(
        during.fds >= before.fds + 20,
        "{} fds before, {} with 20 files open",
        before.fds,
        during.fds
    );
    drop(files);
    let after = sample_tree(me).unwrap();
    assert!(after.fds + 20 <= during.fds);

    // CPU: ~200 ms of user-space work (measured in CPU time, not wall time) shows up.
    let before = sample_tree(me).unwrap();
    let cpu0 = process_cpu_seconds();
    let mut x = 0u64;
    while process_cpu_seconds() - cpu0 < 0.2 {
        for i in 0..1_000_000u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    black_box(x);
    let after = sample_tree(me).unwrap();
    let grown = after.cpu_user_s - before.cpu_user_s;
    assert!(
        grown >= 0.1,
        "user CPU grew by {grown} s after 0.2 s of work"
    );
    assert!(after.cpu_system_s >= before.cpu_system_s);
}
