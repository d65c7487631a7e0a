//! The bounded blocking pool behind `/page`: the Play/Akka dispatcher of document 003.
//!
//! `--blocking-threads` threads run the blocking work; when they are all busy, further
//! requests queue (first come, first served) while the actix workers stay free. A pool too
//! small for the load makes requests time out while the CPU idles.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::background::Background;

/// What a `/page` request does for `work_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Work {
    /// Sleeps, like a call to a slow database.
    #[default]
    Sleep,
    /// Spins on the CPU.
    Cpu,
}

impl Work {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Work::Sleep => "sleep",
            Work::Cpu => "cpu",
        }
    }

    fn perform(self, duration: Duration) {
        match self {
            Work::Sleep => std::thread::sleep(duration),
            Work::Cpu => {
                let start = Instant::now();
                let mut x = 0_u64;
                while start.elapsed() < duration {
                    for _ in 0..1_000 {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) + 1);
                    }
                }
            }
        }
    }
}

/// The pool's counters, as reported by `/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolStats {
    /// Threads of the pool (`--blocking-threads`).
    pub threads: usize,
    /// Jobs waiting for a thread now.
    pub queued: u64,
    /// Jobs running now.
    pub busy: u64,
    /// Jobs finished since the server started.
    pub completed: u64,
}

#[derive(Debug, Default)]
struct Gauges {
    queued: AtomicU64,
    busy: AtomicU64,
    completed: AtomicU64,
}

pub(crate) struct BlockingPool {
    runtime: Background,
    threads: usize,
    gauges: Arc<Gauges>,
}

/// The pool has shut down.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("blocking pool stopped")]
pub(crate) struct PoolStopped;

impl BlockingPool {
    pub(crate) fn new(threads: usize) -> std::io::Result<Self> {
        // The pool is the runtime's blocking-thread limit; its one worker thread idles.
        let runtime = Background::new("loadlab-page", |b| {
            b.worker_threads(1).max_blocking_threads(threads)
        })?;
        Ok(BlockingPool {
            runtime,
            threads,
            gauges: Arc::default(),
        })
    }

    /// Runs `work` for `duration` on a pool thread, waiting in the queue first if needed.
    pub(crate) async fn run(&self, work: Work, duration: Duration) -> Result<(), PoolStopped> {
        let gauges = Arc::clone(&self.gauges);
        gauges.queued.fetch_add(1, Relaxed);
        let job = move || {
            gauges.queued.fetch_sub(1, Relaxed);
            gauges.busy.fetch_add(1, Relaxed);
            work.perform(duration);
            gauges.busy.fetch_sub(1, Relaxed);
            gauges.completed.fetch_add(1, Relaxed);
        };
        self.runtime
            .handle()
            .spawn_blocking(job)
            .await
            .map_err(|_| PoolStopped)
    }

    pub(crate) fn stats(&self) -> PoolStats {
        PoolStats {
            threads: self.threads,
            queued: self.gauges.queued.load(Relaxed),
            busy: self.gauges.busy.load(Relaxed),
            completed: self.gauges.completed.load(Relaxed),
        }
    }
}
