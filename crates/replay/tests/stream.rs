//! A log far larger than what the reader may hold: 400,000 lines (about 60 MB) generated as
//! they are read, never in memory at once. Every request is read, in order, and the
//! process's peak memory grows by less than the log's size many times over: the reader
//! keeps a line, not the log.

use std::io::{BufReader, Read};

use loadlab_replay::{Format, Traffic};

/// Lines of nginx's combined format made on demand, one bad line in every 1,000.
struct Log {
    next: usize,
    lines: usize,
    pending: Vec<u8>,
}

impl Read for Log {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() && self.next < self.lines {
            let i = self.next;
            self.next += 1;
            let line = if i % 1000 == 999 {
                "this line is not a request\n".to_string()
            } else {
                format!(
                    "10.0.0.{} - - [14/Nov/2023:22:{:02}:{:02} +0000] \"GET /users/{i} HTTP/1.1\" 200 512 \"-\" \"Mozilla/5.0 (X11; Linux x86_64) {}\"\n",
                    i % 250,
                    (i / 3000) % 60,
                    (i / 50) % 60,
                    "x".repeat(40)
                )
            };
            self.pending = line.into_bytes();
        }
        let n = out.len().min(self.pending.len());
        out[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_log_many_times_larger_than_memory_allows_is_read_in_a_line_of_memory() {
    let lines = 400_000;
    let before = peak_rss_kib();
    let log = Log {
        next: 0,
        lines,
        pending: Vec::new(),
    };
    let format: Format = "combined".parse().unwrap();
    let mut t = Traffic::new(BufReader::with_capacity(1 << 16, log), &format).unwrap();
    let (mut n, mut bytes, mut last) = (0usize, 0usize, 0u64);
    for e in t.by_ref().flatten() {
        // In order, every one.
        assert!(e.line > last);
        last = e.line;
        n += 1;
        bytes += e.target.len()
            + e.headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
    }
    let tally = t.tally();
    assert_eq!(n, lines - lines / 1000);
    assert_eq!(
        (tally.entries, tally.bad),
        (n as u64, (lines / 1000) as u64)
    );
    assert_eq!(tally.first_bad.len(), 5);
    assert_eq!(tally.first_bad[0].line, 1000);
    // What was read is tens of MB; what the reader held at its peak is a line and a buffer.
    let grew_kib = peak_rss_kib().saturating_sub(before);
    assert!(bytes > 30_000_000, "{bytes}");
    assert!(grew_kib < 8 * 1024, "peak memory grew by {grew_kib} KiB");
}
