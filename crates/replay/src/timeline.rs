//! A log's requests at the times it logged them: each replayed request (as [`crate::mix`]
//! admits it) as its offset from the log's first and the index of its distinct request in
//! the mix, read again from the file as a stream (a log of any size in little memory).
//!
//! A log's times resolve to a tick (`$time_local`: a second; `$msec`: a millisecond): the
//! requests of one tick are spread evenly across it (at its `(i + ½) / n`), where sending
//! them at once would make every second of a common log a burst it never was. A line
//! whose time is earlier than the tick before it (a log written at each request's end,
//! its start moved back by `$request_time`, is not quite in order) joins that tick.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::mix::{admit, Key, Mix};
use crate::{Format, Policy, ReplayError, Traffic};

/// A log to replay at its times: where it is, how it is read, and its mix's requests.
#[derive(Debug)]
pub struct Timeline {
    path: PathBuf,
    format: Option<Format>,
    policy: Policy,
    index: Arc<HashMap<Key, u32>>,
    /// The first replayed request's time, ns since the epoch: offset 0.
    pub first_ns: u64,
}

impl Timeline {
    /// The log at `path` (read as `mix` was: `format`, `policy`), each request its index
    /// in `mix.requests`.
    pub fn new(path: &Path, format: Option<&Format>, policy: &Policy, mix: &Mix) -> Timeline {
        let index = mix
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    Key {
                        method: r.method.clone(),
                        target: r.target.clone(),
                        body: r.body.clone(),
                    },
                    i as u32,
                )
            })
            .collect();
        Timeline {
            path: path.to_path_buf(),
            format: format.cloned(),
            policy: policy.clone(),
            index: Arc::new(index),
            first_ns: mix.shape.first_ns,
        }
    }

    /// Its arrivals from the start of the file: `(ns since the first request, index)`.
    pub fn arrivals(&self) -> Result<Arrivals, ReplayError> {
        Ok(Arrivals {
            traffic: Traffic::open(&self.path, self.format.as_ref())?,
            policy: self.policy.clone(),
            index: self.index.clone(),
            first_ns: self.first_ns,
            tick: None,
            group: Vec::new(),
            out: Vec::new(),
            ended: false,
        })
    }
}

/// A log's arrivals in order, read as they are asked for.
pub struct Arrivals {
    traffic: Traffic<std::io::BufReader<std::fs::File>>,
    policy: Policy,
    index: Arc<HashMap<Key, u32>>,
    first_ns: u64,
    /// The tick being gathered: its start and length, ns since the epoch.
    tick: Option<(u64, u64)>,
    /// Its requests so far.
    group: Vec<u32>,
    /// A spread tick's arrivals, last first (popped).
    out: Vec<(u64, u32)>,
    ended: bool,
}

impl Arrivals {
    /// Spreads the gathered tick's requests across it into `out`.
    fn spread(&mut self) {
        let Some((start, len)) = self.tick else {
            return;
        };
        let n = self.group.len() as u64;
        let base = start.saturating_sub(self.first_ns);
        self.out.clear();
        for (i, &k) in self.group.iter().enumerate().rev() {
            let at = base + (2 * i as u64 + 1) * len / (2 * n);
            self.out.push((at, k));
        }
        self.group.clear();
    }
}

impl Iterator for Arrivals {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        loop {
            if let Some(a) = self.out.pop() {
                return Some(a);
            }
            if self.ended {
                return None;
            }
            let Some(e) = self.traffic.next() else {
                self.ended = true;
                self.spread();
                continue;
            };
            let Ok(mut e) = e else { continue };
            let Some(at) = e.at_ns else { continue };
            let Ok(body) = admit(&self.policy, &mut e) else {
                continue;
            };
            let key = Key {
                method: e.method,
                target: e.target,
                body,
            };
            let Some(&k) = self.index.get(&key) else {
                continue;
            };
            let len = e.resolution_ns.max(1);
            match self.tick {
                Some((start, _)) if at <= start => self.group.push(k),
                _ => {
                    self.spread();
                    self.tick = Some((at, len));
                    self.group.push(k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::{mix, Limits};

    fn log(name: &str, lines: &[String]) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "loadlab-replay-timeline-{}-{name}.log",
            std::process::id()
        ));
        std::fs::write(&p, lines.join("\n")).unwrap();
        p
    }

    fn timeline(path: &Path, format: Option<&Format>) -> (Mix, Timeline) {
        let limits = Limits {
            rules: &[],
            names: 32,
            requests: 1000,
            timed: true,
        };
        let m = mix(path, format, &Policy::default(), limits).unwrap();
        let t = Timeline::new(path, format, &Policy::default(), &m);
        (m, t)
    }

    #[test]
    fn a_seconds_requests_are_spread_across_it_and_each_names_its_request() {
        // Two requests in second 20, one POST (not replayed), three in second 22, one out
        // of order (second 21, after 22: it joins 22).
        let at = |s: u32, what: &str| {
            format!("1.1.1.1 - - [14/Nov/2023:22:13:{s} +0000] \"{what} HTTP/1.1\" 200 1")
        };
        let lines = vec![
            at(20, "GET /a"),
            at(20, "GET /b"),
            at(20, "POST /c"),
            at(22, "GET /a"),
            at(22, "GET /b"),
            at(21, "GET /a"),
        ];
        let path = log("spread", &lines);
        let format: Format = "common".parse().unwrap();
        let (m, t) = timeline(&path, Some(&format));
        assert_eq!(m.shape.per_second, vec![2, 1, 2]);
        assert_eq!(m.shape.span_s(), 3.0);
        assert_eq!(m.shape.peak_rate(), 2);
        // Its busiest second, and two: the earliest of those that tie.
        assert_eq!(m.shape.busiest(1), (0, 2));
        assert_eq!(m.shape.busiest(2), (0, 3));
        assert_eq!(m.shape.busiest(5), (0, 5));
        let got: Vec<(u64, u32)> = t.arrivals().unwrap().collect();
        let ms = |x: u64| x * 1_000_000;
        assert_eq!(got.len(), 5, "{got:?}");
        // Within a millisecond of a third of the tick and its half.
        let near = |got: u64, want: u64| got.abs_diff(want) < 1_000_000;
        assert!(
            near(got[0].0, ms(250)) && near(got[1].0, ms(750)),
            "{got:?}"
        );
        assert!(
            near(got[2].0, ms(2167)) && near(got[3].0, ms(2500)),
            "{got:?}"
        );
        assert!(near(got[4].0, ms(2833)), "{got:?}");
        assert_eq!(
            got.iter().map(|a| a.1).collect::<Vec<_>>(),
            vec![0, 1, 0, 1, 0]
        );
    }

    #[test]
    fn millisecond_times_are_kept() {
        let lines: Vec<String> = [
            "1700000000.000",
            "1700000000.004",
            "1700000000.004",
            "1700000001.500",
        ]
        .iter()
        .map(|t| format!("{t} \"GET /x HTTP/1.1\" 200"))
        .collect();
        let path = log("msec", &lines);
        let format: Format = "nginx:$msec \"$request\" $status".parse().unwrap();
        let (m, t) = timeline(&path, Some(&format));
        assert_eq!(m.shape.per_second, vec![3, 1]);
        let got: Vec<u64> = t.arrivals().unwrap().map(|a| a.0).collect();
        // The tick of 4 ms holds two: at its quarter and three quarters.
        assert_eq!(got, vec![500_000, 4_250_000, 4_750_000, 1_500_500_000]);
        // Its busiest second is its second one when that is busier: a start within the
        // log's first second is counted from the earliest request, not the epoch second.
        let mut shape = m.shape.clone();
        shape.per_second = vec![1, 3];
        assert_eq!(shape.busiest(1), (1_000_000_000, 3));
    }
}
