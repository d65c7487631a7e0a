//! Monotonic nanosecond clock shared by all workers, and a precise timer for the arrival
//! schedule.
//!
//! tokio's timers have millisecond resolution; an open-loop schedule at thousands of
//! requests per second needs better, or every send would look up to a millisecond late.
//! [`PreciseTimer`] arms a `timerfd` with an absolute `CLOCK_MONOTONIC` deadline and waits
//! for it through the worker's event loop.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use loadlab_system::os;
use tokio::io::unix::AsyncFd;

/// The dispatcher wakes at most this often. Below `1 / MIN_WAKE_GAP` arrivals per second
/// per worker every arrival gets its own wake-up; above, the arrivals due within one gap
/// are released together. Each wake-up re-arms a timer and wakes the server: per arrival,
/// at tens of thousands per second, that costs more CPU than the requests themselves.
/// The lateness this adds (at most the gap) is recorded as schedule lag and charged to
/// latency like any other.
pub const MIN_WAKE_GAP_NS: u64 = 200_000;

/// Nanoseconds since the run's origin, from the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
    /// `CLOCK_MONOTONIC` at `origin`, in nanoseconds.
    origin_mono_ns: u64,
    /// `CLOCK_REALTIME` at `origin`, in nanoseconds (for the kernel's receive timestamps).
    origin_real_ns: u64,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Clock {
        // Instant is CLOCK_MONOTONIC on Linux; read both back to back.
        let origin = Instant::now();
        let origin_mono_ns = os::monotonic_ns();
        let origin_real_ns = os::realtime_ns();
        Clock {
            origin,
            origin_mono_ns,
            origin_real_ns,
        }
    }

    /// The `CLOCK_MONOTONIC` reading (ns) of clock reading `t`.
    pub fn monotonic_ns(&self, t: u64) -> u64 {
        self.origin_mono_ns + t
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The clock reading of a kernel receive timestamp (`CLOCK_REALTIME` ns), kept within
    /// `[not_before, now]`: a step of the wall clock during the run cannot move a
    /// completion before its send or after the moment it was read.
    #[inline]
    pub fn from_realtime(&self, real_ns: u64, not_before: u64, now: u64) -> u64 {
        real_ns
            .saturating_sub(self.origin_real_ns)
            .clamp(not_before.min(now), now)
    }

    /// The `CLOCK_REALTIME` reading (ns) of clock reading `t`.
    pub fn realtime_ns(&self, t: u64) -> u64 {
        self.origin_real_ns + t
    }

    /// The `Instant` of a clock reading, for tokio timers.
    pub fn instant(&self, ns: u64) -> Instant {
        self.origin + Duration::from_nanos(ns)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// A timer with sub-millisecond precision, driven by the worker's event loop.
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
    clock: Clock,
}

impl PreciseTimer {
    /// Creates the timer; must be called inside a tokio runtime.
    pub fn new(clock: Clock) -> io::Result<PreciseTimer> {
        let fd = os::timerfd_monotonic()?;
        // SAFETY: `fd` is an owned, valid descriptor that lives as long as the AsyncFd.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(PreciseTimer { fd, clock })
    }

    /// Waits until the clock reads at least `deadline_ns`.
    pub async fn sleep_until(&self, deadline_ns: u64) -> io::Result<()> {
        loop {
            let now = self.clock.now();
            if now >= deadline_ns {
                return Ok(());
            }
            let abs = self.clock.monotonic_ns(deadline_ns);
            os::timerfd_fire_at(self.fd.get_ref().as_fd(), abs)?;
            let mut guard = self.fd.readable().await?;
            // Not read: arming the timer again (above) zeroes its expiration count, so it is
            // not readable until that deadline, and every expiration is a new edge for the
            // edge-triggered event loop. Clearing the cached readiness is enough for the
            // next wait to really wait (one system call per release fewer).
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precise_timer_wakes_close_to_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let clock = Clock::new();
            let timer = PreciseTimer::new(clock).unwrap();
            for _ in 0..20 {
                let deadline = clock.now() + 300_000; // 0.3 ms
                timer.sleep_until(deadline).await.unwrap();
                // Never early.
                assert!(clock.now() >= deadline);
            }
        });
    }
}
