//! How fast loadlab reads traffic, in requests read and named per second beside the 100,000
//! req/s a replay may send (`bench/replay.sh` runs it in release):
//!
//! - `parse_rate PATH [FORMAT]`: a log file, streamed as a replay streams it (its format told
//!   from its first line unless named), with the process's peak memory (which a log of any
//!   size leaves flat);
//! - `parse_rate`: `LINES` generated lines (1,000,000 by default) of three formats, from
//!   memory.

use std::time::Instant;

use loadlab_replay::{Format, Traffic};

fn lines(n: usize, line: impl Fn(usize) -> String) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 160);
    for i in 0..n {
        out.extend_from_slice(line(i).as_bytes());
        out.push(b'\n');
    }
    out
}

/// The process's peak resident memory, KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(path) = args.first() {
        let format: Option<Format> = args.get(1).map(|f| f.parse().expect("a format"));
        let start = Instant::now();
        let mut t = Traffic::open(std::path::Path::new(path), format.as_ref())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut names = 0usize;
        for e in t.by_ref().flatten() {
            names += loadlab_replay::name::fold(&e.target).len();
        }
        let s = start.elapsed().as_secs_f64();
        let tally = t.tally();
        println!(
            "loadlab {} requests ({} bad lines) in {s:.2} s: {:.0} requests/s read and named, peak memory {} KiB [{names}]",
            tally.entries,
            tally.bad,
            tally.entries as f64 / s,
            peak_rss_kib()
        );
        return;
    }
    let n: usize = std::env::var("LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let paths = [
        "/",
        "/users/42",
        "/items/123e4567-e89b-12d3-a456-426614174000",
        "/search?q=shoes&page=3",
    ];
    let cases: Vec<(&str, String, Vec<u8>)> = vec![
        (
            "combined",
            "combined".into(),
            lines(n, |i| {
                format!(
                    "10.0.0.{} - - [14/Nov/2023:22:13:{:02} +0000] \"GET {} HTTP/1.1\" 200 {} \"https://shop.example/\" \"Mozilla/5.0 (X11; Linux x86_64)\"",
                    i % 250,
                    i % 60,
                    paths[i % paths.len()],
                    100 + i % 900
                )
            }),
        ),
        (
            "nginx $msec",
            "nginx:$msec $request_time \"$request\" $status $host \"$http_user_agent\"".into(),
            lines(n, |i| {
                format!(
                    "1700000000.{:03} 0.0{:02} \"GET {} HTTP/1.1\" 200 shop.example \"curl/8.5\"",
                    i % 1000,
                    i % 100,
                    paths[i % paths.len()]
                )
            }),
        ),
        (
            "jsonl",
            "jsonl".into(),
            lines(n, |i| {
                format!(
                    "{{\"ts\": 1700000000.{:03}, \"method\": \"GET\", \"url\": \"{}\", \"status\": 200}}",
                    i % 1000,
                    paths[i % paths.len()]
                )
            }),
        ),
    ];
    for (label, format, data) in cases {
        let format: Format = format.parse().expect("a format");
        let start = Instant::now();
        let mut t = Traffic::new(&data[..], &format).expect("a reader");
        let mut names = 0usize;
        for e in t.by_ref().flatten() {
            names += loadlab_replay::name::fold(&e.target).len();
        }
        let s = start.elapsed().as_secs_f64();
        let tally = t.tally();
        assert_eq!(tally.bad, 0, "{label}: {:?}", tally.first_bad);
        let rate = tally.entries as f64 / s;
        println!(
            "{label:<12} {} lines, {:.0} MB in {s:.2} s: {rate:.0} requests/s read and named ({:.1}× a 100,000 req/s replay) [{names}]",
            tally.entries,
            data.len() as f64 / 1e6,
            rate / 100_000.0
        );
    }
}
