//! `loadlab demo`, the first run: it must end on the answer loadlab exists for, on one core
//! (`taskset -c 0`: generator and server share it): a confirmed knee range for 2 and for 8
//! workers, a named why (the workers), the knob's measured effect, the pre-flight said once,
//! the next commands; in few enough steps to take under a minute.

mod util;

use std::process::Command;
use std::time::Duration;

use util::lab::lines;
use util::{loadlab_bin, output_within, temp_path};

#[test]
fn the_demo_ends_on_a_confirmed_knee_its_why_and_the_knob_on_one_core() {
    let out = temp_path("demo");
    let (o, _) = output_within(
        Command::new("taskset")
            .args(["-c", "0", loadlab_bin(), "demo", "--out"])
            .arg(&out),
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
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
    assert_eq!(stdout.matches("both ends confirmed").count(), 2, "{stdout}");
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
        assert_eq!(r["confirmed"], true, "{r}");
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
