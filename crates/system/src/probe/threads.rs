//! The busiest thread of a target: each thread's time on a CPU (`/proc/PID/task/TID/
//! schedstat`) followed from one sample to the next, so that a server held by one thread (an
//! event loop, an interpreter lock, a lock holder) shows, though its process uses only a
//! fraction of its CPUs.

use std::collections::HashMap;
use std::time::Instant;

use crate::procfs;

/// Each thread's time on a CPU at the previous sample.
#[derive(Default)]
pub struct ThreadCpu {
    /// (pid, tid) → ns on a CPU, ns waiting for one.
    last: HashMap<(u32, u32), (u64, u64)>,
    /// When the previous sample was taken.
    at: Option<Instant>,
}

/// What the threads of some processes did since the previous sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadFigures {
    /// Seconds their threads waited, runnable, for a CPU, cumulative over the threads alive
    /// now.
    pub run_delay_s: f64,
    /// The busiest thread since the previous sample (the one that ran, or wanted to run,
    /// the longest); `None` at the first sample.
    pub busiest: Option<BusiestThread>,
}

/// The busiest thread of an interval.
#[derive(Clone, Debug, PartialEq)]
pub struct BusiestThread {
    /// CPUs it used (1.0: one CPU all the time).
    pub cpu: f64,
    /// CPUs it wanted and waited for, runnable behind other threads.
    pub wait: f64,
    /// Its name.
    pub name: String,
}

impl ThreadCpu {
    /// Reads the threads of `pids` now.
    pub fn sample(&mut self, pids: &[u32]) -> ThreadFigures {
        let now = Instant::now();
        let mut figures = ThreadFigures::default();
        let mut seen = HashMap::new();
        // (on-CPU ns, waiting ns, pid, tid) of the thread that ran or wanted to most.
        let mut best: Option<(u64, u64, u32, u32)> = None;
        let elapsed = self.at.map(|t| now.duration_since(t).as_secs_f64());
        for &pid in pids {
            for t in procfs::thread_schedstats(pid) {
                figures.run_delay_s += t.wait_ns as f64 / 1e9;
                seen.insert((pid, t.tid), (t.on_cpu_ns, t.wait_ns));
                if let Some(&(ran, waited)) = self.last.get(&(pid, t.tid)) {
                    let used = t.on_cpu_ns.saturating_sub(ran);
                    let wait = t.wait_ns.saturating_sub(waited);
                    if best.is_none_or(|b| used + wait > b.0 + b.1) {
                        best = Some((used, wait, pid, t.tid));
                    }
                }
            }
        }
        if let (Some((used, wait, pid, tid)), Some(dt)) = (best, elapsed.filter(|d| *d > 0.0)) {
            let name = procfs::thread_comm(pid, tid).unwrap_or_else(|| format!("thread {tid}"));
            figures.busiest = Some(BusiestThread {
                cpu: (used as f64 / 1e9 / dt).min(1.0),
                wait: (wait as f64 / 1e9 / dt).min(1.0),
                name,
            });
        }
        self.last = seen;
        self.at = Some(now);
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_is_the_busiest_at_nearly_one_cpu() {
        // A spinning process of its own: a spinner thread of this process was once not its
        // busiest, waiting for its CPU while another test of this binary ran on another thread.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let pid = child.id();
        let mut t = ThreadCpu::default();
        assert_eq!(
            t.sample(&[pid]).busiest,
            None,
            "no interval at the first sample"
        );
        std::thread::sleep(std::time::Duration::from_millis(400));
        let f = t.sample(&[pid]);
        let _ = child.kill();
        let _ = child.wait();
        let b = f.busiest.expect("an interval");
        assert_eq!(b.name, "sh");
        // On a shared, busy machine the spinner may wait for its CPU (a quarter of one when
        // three other busy programs shared the machine's two): it still leads, it ran a share
        // of the time, and it ran or waited all the time.
        assert!(b.cpu > 0.1 && b.cpu <= 1.0, "{b:?}");
        assert!(b.cpu + b.wait > 0.8, "{b:?}");
    }
}
