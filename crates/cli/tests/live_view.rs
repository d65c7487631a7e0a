//! The live view: on a terminal (a pseudo-terminal made by `script`, from util-linux), one
//! status area redrawn in place with the step, offered, achieved, p99 and errors; through a
//! pipe, plain output without a control sequence.

mod util;

use std::process::Command;
use std::time::Duration;

use util::lab::{plan_text, write_plan};
use util::{loadlab_bin, temp_path, Behavior, TestServer};

/// The longest any command here may take (the runs last 3 s; the lab a few more).
const BOUND: Duration = Duration::from_secs(120);

/// Runs `argv` under a pseudo-terminal; returns everything it wrote (stdout and stderr
/// both go to the terminal).
fn on_a_terminal(argv: &[&str]) -> String {
    let cmd = argv
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    // Bounded: a hang fails the test instead of holding CI. Without `script` (util-linux's
    // bsdutils) it fails to start, naming it.
    let (out, _) = util::output_within(
        Command::new("script").args(["-qefc", &cmd, "/dev/null"]),
        BOUND,
    );
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What each redraw of the status line (every part after a clear-line sequence) that
/// contains `marker` says was achieved.
fn status_achieved(tty: &str, marker: &str) -> Vec<f64> {
    tty.split("\x1b[2K")
        .filter(|line| line.contains(marker) && line.contains(" achieved "))
        .filter(|line| !line.contains("(sustained)") && !line.contains("(unsustained)"))
        .map(|line| util::number_after(line, " achieved "))
        .collect()
}

#[test]
fn run_redraws_one_status_line_on_a_terminal_and_none_through_a_pipe() {
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    let args = [loadlab_bin(), "run", &url, "--rate", "50", "-d", "3s"];
    let tty = on_a_terminal(&args);
    assert!(tty.contains("offered 50 req/s"), "{tty}");
    let achieved = status_achieved(&tty, "offered 50 req/s");
    assert!(
        achieved.iter().any(|a| (40.0..=60.0).contains(a)),
        "{achieved:?}: {tty}"
    );
    assert!(tty.contains(" req/s · 0 errors · p99 "), "{tty}");
    // Redrawn in place (carriage return, clear line), then cleared before the summary.
    assert!(tty.contains("\r\x1b[2K"), "{tty:?}");
    assert!(tty.contains("successful"), "the summary follows: {tty}");

    let (piped, _) = util::output_within(Command::new(loadlab_bin()).args(&args[1..]), BOUND);
    let err = String::from_utf8_lossy(&piped.stderr);
    let out = String::from_utf8_lossy(&piped.stdout);
    assert!(!err.contains('\x1b') && !out.contains('\x1b'), "{err}{out}");
    assert!(!err.contains("achieved 50 req/s ·"), "{err}");
}

#[test]
fn lab_shows_the_running_step_and_keeps_its_log_lines() {
    let plan = write_plan(
        "live",
        &plan_text(
            "",
            "mode = [\"ok\"]",
            "steps = [20, 40]\nstep_duration = \"2s\"\nconnections = 4\nthreads = 1",
        ),
    );
    let out = temp_path("live-bundle");
    let plan = plan.display().to_string();
    let out = out.display().to_string();
    let tty = on_a_terminal(&[loadlab_bin(), "lab", &plan, "--out", &out]);
    assert!(
        tty.contains("config 1/1 mode=ok · s at 20 req/s · step 1 of 2"),
        "{tty}"
    );
    assert!(tty.contains("step 2 of 2"), "{tty}");
    // The first step's status line says what its seconds achieved (20 a second, or 19 and
    // 21 when a response lands just past a second's end: a busy CI host drew both).
    let achieved = status_achieved(&tty, "step 1 of 2");
    assert!(
        achieved.iter().any(|a| (15.0..=25.0).contains(a)),
        "{achieved:?}: {tty}"
    );
    // The lab's own lines are printed above the status area, not lost.
    assert!(tty.contains("(sustained)"), "{tty}");
}

/// Through a pipe, a line every five measured seconds; the second after the window, which
/// holds only the responses still in flight when it closed, is not one of them (it read
/// "achieved 10 req/s" at the end of a 4 s run).
#[test]
fn plain_lines_show_the_measured_seconds_and_not_the_drain_after_them() {
    let server = TestServer::start(Behavior::Delay(Duration::from_millis(50)));
    let url = server.url("/");
    let plain = |secs: &str| {
        let json = temp_path("drain").with_extension("json");
        let args = [
            "run",
            &url,
            "--rate",
            "200",
            "-d",
            secs,
            "--connections",
            "16",
        ];
        let (out, _) = util::output_within(
            Command::new(loadlab_bin())
                .args(args)
                .args(["--json", json.to_str().unwrap()]),
            BOUND,
        );
        assert!(out.status.success(), "{out:?}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (String::from_utf8_lossy(&out.stderr).into_owned(), j)
    };
    // A 4 s run: its fifth second is the drain (responses sent in the window's last 50 ms).
    let (err, j) = plain("4s");
    let seconds = j["per_second"].as_array().unwrap();
    assert_eq!(seconds.len(), 5, "the drain is recorded: {j}");
    assert!(seconds[4]["completed"].as_u64().unwrap() > 0, "{j}");
    assert!(!err.contains("loadlab: 5s"), "{err}");
    // A 5 s run: its fifth second is measured, and said. What one second achieved is not
    // exactly the rate: a response that lands just past the second's end counts in the next
    // (199 on a slow CI host).
    let (err, _) = plain("5s");
    let line = err
        .lines()
        .find(|l| l.contains("loadlab: 5s · achieved "))
        .unwrap_or_else(|| panic!("no line for the fifth second: {err}"));
    let achieved = util::number_after(line, "achieved ");
    assert!((180.0..=220.0).contains(&achieved), "{line}");
    assert!(line.contains(" req/s · 0 errors"), "{line}");
}
