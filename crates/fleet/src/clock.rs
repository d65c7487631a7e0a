//! Clock offsets, NTP style: the coordinator stamps a ping when it sends it (t1), the agent
//! when it receives it (t2) and answers (t3), the coordinator when the answer arrives (t4).
//! The agent's clock minus the coordinator's is `((t2 - t1) + (t3 - t4)) / 2`, exact when
//! the two directions take equal time and off by at most half the round trip
//! `(t4 - t1) - (t3 - t2)` otherwise. Of several pings, the one with the shortest round
//! trip is kept (the least queueing, the tightest bound).

use std::time::SystemTime;

/// Offsets above this are a warning in the result: seconds would be misaligned by that
/// much, and the start instant would be that far off on that agent.
pub const OFFSET_WARNING_MS: f64 = 10.0;

/// Now, Unix nanoseconds.
pub fn now_unix_ns() -> u64 {
    loadlab_engine::runner::unix_ns(SystemTime::now())
}

/// One ping's four timestamps (Unix ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Coordinator sent.
    pub t1: u64,
    /// Agent received.
    pub t2: u64,
    /// Agent answered.
    pub t3: u64,
    /// Coordinator received.
    pub t4: u64,
}

impl Sample {
    /// Agent clock minus coordinator clock, ns.
    pub fn offset_ns(&self) -> i64 {
        ((self.t2 as i128 - self.t1 as i128 + self.t3 as i128 - self.t4 as i128) / 2) as i64
    }

    /// Network round trip (the agent's own time taken out), ns.
    pub fn rtt_ns(&self) -> u64 {
        (self.t4.saturating_sub(self.t1)).saturating_sub(self.t3.saturating_sub(self.t2))
    }
}

/// The offset and round trip of the best of `samples` (shortest round trip).
pub fn estimate(samples: &[Sample]) -> Option<(i64, u64)> {
    samples
        .iter()
        .min_by_key(|s| s.rtt_ns())
        .map(|s| (s.offset_ns(), s.rtt_ns()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_round_trip_of_a_skewed_clock() {
        // Agent 5 ms ahead; 1 ms each way; the agent takes 0.1 ms to answer.
        let ms = 1_000_000u64;
        let s = Sample {
            t1: 1000 * ms,
            t2: 1006 * ms,
            t3: 1006 * ms + ms / 10,
            t4: 1002 * ms + ms / 10,
        };
        assert_eq!(s.offset_ns(), 5 * ms as i64);
        assert_eq!(s.rtt_ns(), 2 * ms);
    }

    #[test]
    fn the_shortest_round_trip_wins() {
        let ms = 1_000_000u64;
        let slow = Sample {
            t1: 0,
            t2: 9 * ms,
            t3: 9 * ms,
            t4: 10 * ms,
        };
        let fast = Sample {
            t1: 20 * ms,
            t2: 21 * ms,
            t3: 21 * ms,
            t4: 22 * ms,
        };
        assert_eq!(estimate(&[slow, fast]), Some((0, 2 * ms)));
        assert_eq!(estimate(&[]), None);
    }
}
