//! `loadlab demo`, the first run: it must end on the answer loadlab exists for, on one core
//! (`taskset -c 0`: generator and server share it): a confirmed knee range for 2 and for 8
//! workers, a named why (the workers), the knob's measured effect, the pre-flight said once,
//! the next commands; in few enough steps to take under a minute.

mod util;

use std::process::Command;
use std::time::Duration;

use util::lab::lines;
use util::{loadlab_bin, output_within, temp_path};

/// Runs the demo on CPU 0: its bundle directory, exit status, stdout and stderr.
fn demo_on_one_core() -> (std::path::PathBuf, Option<i32>, String, String) {
    let out = temp_path("demo");
    let (o, _) = output_within(
        Command::new("taskset")
            .args(["-c", "0", loadlab_bin(), "demo", "--out"])
            .arg(&out),
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    (out, o.status.code(), stdout, stderr)
}

/// An end is confirmed when its step gives the same verdict twice. On one core of a virtual
/// machine whose host steals, what 8 workers serve moved from ~155 to ~134 req/s between
/// runs, and a step near it was sustained in one run of two: the demo then says "not
/// confirmed", which is true of that run. The demo is run again, three times at most, and
/// the assertions below are read on the first run that confirmed both ends. On one core of
/// a debug build, 2 workers serve about 36 of their nominal 40 req/s, and the step at 36
/// (90 %) went both ways in each of three runs once: a run that never confirms is then
/// judged honest, not wrong, when every step that went both ways lies within 15 % of the
/// pool's capacity (there, whether it holds is the machine's, not the server's) and the demo
/// said so.
const ATTEMPTS: usize = 3;

/// `workers` × 20 req/s (50 ms per request).
fn capacity(workers: u32) -> f64 {
    20.0 * f64::from(workers)
}

/// The loads the demo's stdout says went both ways (`note: non-monotonic: 36: sustained in 1
/// of 2 runs`), with the worker count of the search they belong to.
fn flipped(stdout: &str) -> Vec<(u32, f64)> {
    let mut workers = 0;
    let mut out = Vec::new();
    for line in stdout.lines() {
        if let Some(w) = line
            .strip_prefix("workers=")
            .and_then(|r| r.split(' ').next())
        {
            workers = w.parse().unwrap();
        } else if let Some(rest) = line.trim().strip_prefix("note: non-monotonic: ") {
            let load = rest.split(':').next().unwrap().parse().unwrap();
            out.push((workers, load));
        }
    }
    out
}

/// Both ends confirmed in each search, or an end left unconfirmed only where a step went
/// both ways within 15 % of the pool's capacity.
fn confirmed_or_unresolvable(stdout: &str) -> bool {
    let unconfirmed = stdout.matches(", not confirmed").count();
    unconfirmed == 0
        || (!flipped(stdout).is_empty()
            && flipped(stdout)
                .iter()
                .all(|&(w, load)| (load - capacity(w)).abs() <= 0.15 * capacity(w)))
}

#[test]
fn the_demo_ends_on_a_confirmed_knee_its_why_and_the_knob_on_one_core() {
    let mut attempt = 1;
    let (out, stdout, stderr) = loop {
        let (out, code, stdout, stderr) = demo_on_one_core();
        assert_eq!(code, Some(0), "{stdout}\n{stderr}");
        if stdout.matches("both ends confirmed").count() == 2 || attempt == ATTEMPTS {
            break (out, stdout, stderr);
        }
        // What a run that could not confirm says of it: that it could not.
        assert_eq!(
            stdout.matches("both ends confirmed").count()
                + stdout.matches(", not confirmed").count(),
            2,
            "{stdout}"
        );
        eprintln!("demo attempt {attempt}: an end not confirmed, run again:\n{stdout}");
        attempt += 1;
    };
    for workers in ["2", "8"] {
        assert!(
            stdout.contains(&format!("workers={workers} / sleep: knee between")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("the {workers} `workers` are the limit")),
            "{stdout}"
        );
    }
    assert!(confirmed_or_unresolvable(&stdout), "{stdout}");
    assert_eq!(
        stdout.matches("why: concurrency-bound").count(),
        2,
        "{stdout}"
    );
    // The knob's effect, as the ratio of the knees: 8 workers serve 4 times as many.
    let knob = stdout
        .lines()
        .find(|l| l.starts_with("The knob: workers 2 → 8: knee ×"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let ratio: f64 = knob["The knob: workers 2 → 8: knee ×".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3.2..=4.8).contains(&ratio), "{knob}");
    assert!(stdout.contains("Next:\n  loadlab knee http://"), "{stdout}");
    // The full report stays in the bundle, not on the terminal.
    assert!(!stdout.contains("| offered req/s |"), "{stdout}");
    assert_eq!(
        stderr.matches("checked this machine first").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("document 000"), "{stderr}");

    let configs = lines(&out.join("configs.jsonl"));
    let range = |i: usize| {
        let r = &configs[i]["knees"][0]["outcome"];
        assert!(
            r["confirmed"] == true || confirmed_or_unresolvable(&stdout),
            "{r}"
        );
        [
            r["range"][0].as_f64().unwrap(),
            r["range"][1].as_f64().unwrap(),
        ]
    };
    let [a, b] = range(0);
    assert!(
        a >= 30.0 && b <= 50.0,
        "2 workers × 50 ms: 40 req/s, knee {a}..{b}"
    );
    let [a, b] = range(1);
    assert!(
        a >= 120.0 && b <= 200.0,
        "8 workers × 50 ms: 160 req/s, knee {a}..{b}"
    );
    // Under a minute: each step is 0.3 s of warm-up, 1.5 s measured and 0.1 s of pause, so
    // the number of steps bounds the time the demo takes, whatever the machine's speed.
    let steps = lines(&out.join("steps.jsonl")).len();
    assert!(
        steps as f64 * 1.9 <= 50.0,
        "{steps} steps: more than a minute with the targets' starts"
    );
}

/// The rule that accepts an unconfirmed end, on the demo's own words.
#[test]
fn an_end_is_unresolvable_only_where_a_step_flipped_near_the_capacity() {
    let near = "workers=2 / sleep: knee between 30 and 36 req/s, not confirmed\n  note: non-monotonic: 36: sustained in 1 of 2 runs\n  why: concurrency-bound\nworkers=8 / sleep: knee between 144 and 168 req/s, both ends confirmed\n";
    assert_eq!(flipped(near), [(2, 36.0)]);
    assert!(confirmed_or_unresolvable(near));
    // A flip far below the capacity is the server's (or loadlab's) doing: not accepted.
    let far = near.replace("non-monotonic: 36:", "non-monotonic: 24:");
    assert!(!confirmed_or_unresolvable(&far));
    // Unconfirmed without saying why: not accepted.
    let silent = near.replace("  note: non-monotonic: 36: sustained in 1 of 2 runs\n", "");
    assert!(!confirmed_or_unresolvable(&silent));
    let both = "workers=2 / sleep: knee between 36 and 42 req/s, both ends confirmed\n";
    assert!(confirmed_or_unresolvable(both));
}
