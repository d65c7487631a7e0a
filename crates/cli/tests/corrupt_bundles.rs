//! `loadlab report` and `loadlab compare` on corrupt bundles: a copy of the committed
//! fixture bundle, damaged as a crash, a disk or another loadlab would damage it. Each
//! either renders what is intact with a warning, or fails with an error naming the file and
//! the line; never a panic, always in bounded time.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use util::{loadlab_bin, output_within, temp_path};

/// A generous hang bound, not a performance threshold.
const HANG_BOUND: Duration = Duration::from_secs(60);

/// What a bounded run of loadlab gave.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs loadlab with `args`, killing it (and failing) if it outlives [`HANG_BOUND`].
fn loadlab(args: &[&Path]) -> Ran {
    let (out, _) = output_within(Command::new(loadlab_bin()).args(args), HANG_BOUND);
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh copy of the committed fixture bundle.
fn bundle(name: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/queue");
    let dir = temp_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

/// The lines of the bundle's `steps.jsonl`, each with its newline.
fn step_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("steps.jsonl"))
        .unwrap()
        .split_inclusive('\n')
        .map(str::to_string)
        .collect()
}

fn write_steps(dir: &Path, lines: &[String]) {
    std::fs::write(dir.join("steps.jsonl"), lines.concat()).unwrap();
}

/// Rewrites line `n` (from 0) of `steps.jsonl` through `edit`.
fn edit_step(dir: &Path, n: usize, edit: impl FnOnce(&mut Value)) {
    let mut lines = step_lines(dir);
    let mut v: Value = serde_json::from_str(&lines[n]).unwrap();
    edit(&mut v);
    lines[n] = format!("{v}\n");
    write_steps(dir, &lines);
}

/// A report rendered: exit 0, the report on stdout, no panic.
fn assert_ok_report(r: &Ran) {
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert!(r.stdout.starts_with("# loadlab report: "), "{}", r.stdout);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

fn assert_failed(r: &Ran, code: i32, needles: &[&str]) {
    assert_eq!(
        r.code,
        Some(code),
        "stdout: {}\nstderr: {}",
        r.stdout,
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    for n in needles {
        assert!(r.stderr.contains(n), "expected `{n}` in: {}", r.stderr);
    }
}

/// The last line cut mid-way (a run killed while writing it): the three intact steps are
/// rendered, and the report and stderr say which line was skipped.
#[test]
fn a_torn_last_line_is_skipped_with_a_warning() {
    let whole = bundle("whole");
    let full = loadlab(&[Path::new("report"), &whole]);
    assert_ok_report(&full);
    assert!(!full.stdout.contains("Warning"), "{}", full.stdout);

    let dir = bundle("torn");
    let mut lines = step_lines(&dir);
    let last = lines.pop().unwrap();
    lines.push(last[..last.len() / 2].to_string());
    write_steps(&dir, &lines);
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_ok_report(&r);
    let warning = "steps.jsonl line 4 is cut short (the run stopped while writing it): skipped";
    assert!(r.stdout.contains("**Warning**: "), "{}", r.stdout);
    assert!(r.stdout.contains(warning), "{}", r.stdout);
    assert!(r.stderr.contains("loadlab: warning: "), "{}", r.stderr);
    assert!(r.stderr.contains(warning), "{}", r.stderr);
    // The configuration whose steps are intact is reported as in the whole bundle.
    assert!(r.stdout.contains("capacity=150"), "{}", r.stdout);

    // compare renders it too, with the same warning.
    let c = loadlab(&[Path::new("compare"), &whole, &dir]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    assert!(c.stderr.contains(warning), "{}", c.stderr);
}

/// A line cut in the middle of the file is not a crash's trace but damage: an error naming
/// the file and the line, exit 1 (report) or 2 (compare: a bad input).
#[test]
fn a_torn_middle_line_is_an_error_naming_file_and_line() {
    let dir = bundle("torn-middle");
    let mut lines = step_lines(&dir);
    lines[1] = format!("{}\n", &lines[1][..100]);
    write_steps(&dir, &lines);
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 1, &["steps.jsonl line 2: EOF while parsing"]);
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(&c, 2, &["steps.jsonl line 2: EOF while parsing"]);
}

/// Bytes that are not UTF-8 (a line cut inside a character, then more lines): the error
/// names the line, not just "stream did not contain valid UTF-8".
#[test]
fn a_line_that_is_not_utf8_is_named() {
    let dir = bundle("not-utf8");
    let mut bytes = std::fs::read(dir.join("steps.jsonl")).unwrap();
    let second = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    bytes.splice(second..second + 10, [0xff, 0xfe, b'\n']);
    std::fs::write(dir.join("steps.jsonl"), bytes).unwrap();
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 1, &["steps.jsonl line 2:"]);
}

/// A step written by another bundle version: named with its line and the version this
/// loadlab reads, never taken for a step of this version.
#[test]
fn a_line_of_another_bundle_version_is_named() {
    for (n, line) in [(1, 2), (3, 4)] {
        let dir = bundle("version");
        edit_step(&dir, n, |v| {
            v["bundle_version"] = 99.into();
            v["verdict"] = "renamed in version 99".into();
        });
        let r = loadlab(&[Path::new("report"), &dir]);
        let needle = format!(
            "steps.jsonl line {line}: a record of bundle version 99, but this loadlab reads version 1"
        );
        assert_failed(&r, 1, &[&needle]);
        let c = loadlab(&[Path::new("compare"), &dir, &dir]);
        assert_failed(&c, 2, &[&needle]);
    }
    // Same fields, other version: still refused, not read as version 1.
    let dir = bundle("version-same-shape");
    edit_step(&dir, 0, |v| v["bundle_version"] = 2.into());
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 1, &["steps.jsonl line 1: a record of bundle version 2"]);
}

/// A histogram that does not decode: `report` renders the rest and names the step;
/// `compare`, which needs it, refuses the bundle naming the file, the step and the field.
#[test]
fn a_histogram_that_does_not_decode_is_named() {
    let dir = bundle("histogram");
    edit_step(&dir, 1, |v| {
        v["result"]["histograms"]["latency"] = "not base64!".into();
    });
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_ok_report(&r);
    assert!(
        r.stdout.contains(
            "steps.jsonl: capacity=150 / queue step 1: the latency histogram does not decode"
        ),
        "{}",
        r.stdout
    );
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(
        &c,
        2,
        &["steps.jsonl: capacity=150 / queue step 1: histograms.latency: bad base64"],
    );
}

/// An empty `steps.jsonl` (a run stopped before its first step): `report` renders the plan
/// with no step; `compare` says there is nothing to compare.
#[test]
fn an_empty_steps_file() {
    let dir = bundle("empty");
    std::fs::write(dir.join("steps.jsonl"), "").unwrap();
    std::fs::write(dir.join("configs.jsonl"), "").unwrap();
    assert_ok_report(&loadlab(&[Path::new("report"), &dir]));
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(&c, 2, &["no step finished (steps.jsonl is empty)"]);
}

/// Missing or empty files: each error names the file.
#[test]
fn missing_and_empty_files_are_named() {
    let dir = bundle("no-steps");
    std::fs::remove_file(dir.join("steps.jsonl")).unwrap();
    assert_ok_report(&loadlab(&[Path::new("report"), &dir]));
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(&c, 2, &["no steps.jsonl"]);

    let dir = bundle("no-plan");
    std::fs::remove_file(dir.join("plan.json")).unwrap();
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 2, &["is not a loadlab result bundle (no plan.json)"]);
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(&c, 2, &["no plan.json"]);

    let dir = bundle("empty-plan");
    std::fs::write(dir.join("plan.json"), "").unwrap();
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 1, &["plan.json"]);
    let c = loadlab(&[Path::new("compare"), &dir, &dir]);
    assert_failed(&c, 2, &["plan.json"]);

    let dir = bundle("configs");
    std::fs::write(dir.join("configs.jsonl"), "{\"bundle_version\": 1}\n{}\n").unwrap();
    let r = loadlab(&[Path::new("report"), &dir]);
    assert_failed(&r, 1, &["configs.jsonl line 1: missing field"]);
}
