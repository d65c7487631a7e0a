//! Bad input gets a clear error naming what is wrong, and a non-zero exit.

mod util;

use std::process::{Command, Output};
use std::time::Duration;

use util::{loadlab_bin, output_within};

/// A refusal comes before anything is sent or waited for: a bound that catches a hang (a
/// name that does not resolve included), not a performance threshold.
const REFUSED_WITHIN: Duration = Duration::from_secs(20);

/// `loadlab ARGS`, killed (and the test failed) past a minute; checked to end within
/// [`REFUSED_WITHIN`].
fn loadlab(args: &[&str]) -> Output {
    let (out, took) = output_within(
        Command::new(loadlab_bin()).args(args),
        Duration::from_secs(60),
    );
    assert!(took < REFUSED_WITHIN, "{args:?} took {took:?}");
    out
}

fn run_err(args: &[&str]) -> (Option<i32>, String) {
    let out = loadlab(&[&["run"], args].concat());
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_mistake_names_its_cause() {
    let cases: &[(&[&str], &str)] = &[
        (&["not a url"], "invalid URL"),
        (&["ftp://127.0.0.1/"], "unsupported scheme `ftp`"),
        (&["http://127.0.0.1:1/", "--rate", "0"], "--rate = 0"),
        (&["http://127.0.0.1:1/", "--rate", "-5"], "--rate = -5"),
        (&["http://127.0.0.1:1/", "--duration", "0s"], "--duration"),
        (&["http://127.0.0.1:1/", "--duration", "-3s"], "negative"),
        (&["http://127.0.0.1:1/", "--requests", "0"], "--requests"),
        (
            &["http://127.0.0.1:1/", "--connections", "0"],
            "--connections",
        ),
        (&["http://127.0.0.1:1/", "--timeout", "0s"], "--timeout"),
        (
            &["http://127.0.0.1:1/", "--rate", "10", "--pipeline", "4"],
            "--pipeline",
        ),
        (
            &["http://127.0.0.1:1/", "-H", "broken header"],
            "-H/--header",
        ),
        (
            &[
                "http://127.0.0.1:1/",
                "--source-addrs",
                "127.0.0.9-127.0.0.2",
            ],
            "--source-addrs",
        ),
        (
            &["http://127.0.0.1:1/", "--body-file", "/nonexistent/file"],
            "--body-file",
        ),
        (&["http://no-such-host.invalid/"], "cannot resolve host"),
        (&["http://127.0.0.1:1/", "--cpus", "two"], "--cpus"),
    ];
    for (args, needle) in cases {
        let (code, stderr) = run_err(args);
        assert_eq!(code, Some(2), "{args:?} should exit 2; stderr: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected `{needle}` in: {stderr}"
        );
    }
}

#[test]
fn unreachable_host_says_so_and_still_writes_the_result() {
    let r = util::run(&["http://127.0.0.1:1/", "-d", "1s", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(1));
    // 1 s of refused connects and the 5 s timeout at most: a bound for a loaded machine.
    assert!(r.took < Duration::from_secs(20), "took {:?}", r.took);
    assert!(r.stdout.contains("EVERY REQUEST FAILED"), "{}", r.stdout);
    assert!(r.stdout.contains("is the server running"), "{}", r.stdout);
    let j = r.json();
    assert_eq!(j["successful"], 0);
    assert_eq!(j["latency_ms"]["p99"], serde_json::Value::Null);
    assert!(j["errors"]["connect_refused"].as_u64().unwrap() > 0);
    assert!(j["warnings"][0]
        .as_str()
        .unwrap()
        .contains("no request succeeded"));
}

/// Every flag with a limit states it in `--help` (the limits `bounded_work.rs` enforces).
#[test]
fn help_states_every_limit() {
    let out = loadlab(&["run", "--help"]);
    // Each option's entry: its header line (`  -d, --duration <DURATION>`) and the lines
    // below it, joined (clap wraps at the terminal width).
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let t = line.trim_start();
        let header = t
            .strip_prefix("-")
            .map(|r| r.split_once(", ").map_or(t, |(_, f)| f));
        match header {
            Some(h) if line.starts_with("  ") && h.starts_with("--") => {
                let flag = h.split_whitespace().next().unwrap().to_string();
                entries.push((flag, String::new()));
            }
            _ => {
                if let Some((_, text)) = entries.last_mut() {
                    text.push(' ');
                    text.push_str(t);
                }
            }
        }
    }
    for (flag, limit) in [
        ("--rate", "at most 10,000,000"),
        ("--connections", "1 to 1,000,000"),
        ("--max-connections", "At most 1,000,000"),
        ("--concurrency", "At most 1,000,000"),
        ("--duration", "at most 8h"),
        ("--requests", "still stops after 8h"),
        ("--warmup", "at most 1h"),
        ("--threads", "1 to 1024"),
        ("--cpus", "0 to 4095"),
        ("--timeout", "At most 1h"),
        ("--source-addrs", "At most 65,000 addresses"),
        ("--pipeline", "1 to 1024"),
    ] {
        let (_, text) = entries
            .iter()
            .find(|(f, _)| f == flag)
            .unwrap_or_else(|| panic!("--help lacks {flag}"));
        assert!(
            text.contains(limit),
            "{flag}'s help does not state its limit ({limit}): {text}"
        );
    }
}

#[test]
fn help_lists_both_loop_models() {
    let out = loadlab(&["run", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--rate",
        "--connections",
        "--keep-alive",
        "--pipeline",
        "--source-addrs",
        "Examples",
    ] {
        assert!(text.contains(needle), "--help lacks {needle}");
    }
}
