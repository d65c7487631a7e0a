//! The lab under faults: a target whose descendants leave its process group, loadlab
//! itself killed with SIGKILL, two runs writing to one bundle, and the bundle's disk
//! filling up mid-run. Each ends in bounded time, with nothing left running and every
//! finished step readable.

mod util;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use util::lab::{fixture, lab, lines, pids, running, write_plan};
use util::{loadlab_bin, output_within, temp_path};

/// How a target's descendant escapes its process group.
#[derive(Clone, Copy)]
enum Escape {
    /// A child of the target in a session of its own (`setsid`).
    Setsid,
    /// A daemon: `setsid` in a subshell that exits at once, so its parent link to the
    /// target is gone (loadlab, the subreaper, adopts it).
    DoubleFork,
}

/// A target that ignores SIGTERM and, before it starts serving, forks a `sleep` into a
/// session of its own (out of the target's process group), writing that pid to
/// `{bundle}/escapee.pids` and its own to `{bundle}/target.pids`.
fn escaping_plan(steps: usize, escape: Escape) -> std::path::PathBuf {
    let steps = vec!["50"; steps].join(", ");
    let fork = match escape {
        Escape::Setsid => "setsid sleep 300 & echo $! > {bundle}/escapee.pids",
        Escape::DoubleFork => "(setsid sleep 300 & echo $! > {bundle}/escapee.pids)",
    };
    write_plan(
        "escape",
        &format!(
            r#"name = "escape"
[[target]]
name = "fx"
shell = true
command = ["{fork}; exec FIXTURE --port {{port}} --ignore-sigterm --pid-file {{bundle}}/target.pids"]
ready = {{ http = "http://127.0.0.1:{{port}}/", status = 200 }}
ready_timeout = "5s"
stop_grace = "500ms"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{{port}}/"
timeout = "1s"
[load]
steps = [{steps}]
step_duration = "1s"
connections = 2
threads = 1
"#
        ),
    )
}

fn spawn_lab(plan: &Path, out: &Path) -> Child {
    Command::new(loadlab_bin())
        .args(["lab", "-q"])
        .arg(plan)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `cond` holds (panics after `limit`).
fn wait_for(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_all_gone(out: &Path, within: Duration) {
    let all: Vec<u32> = ["escapee.pids", "target.pids"]
        .iter()
        .flat_map(|f| pids(&out.join(f)))
        .collect();
    assert!(
        all.len() >= 2,
        "pids of the target and its escapee: {all:?}"
    );
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<u32> = all.iter().copied().filter(|p| running(*p)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes left behind: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn descendants_that_left_the_group_are_stopped_with_their_target() {
    stopped_with_their_target(Escape::Setsid, "escape-stop");
}

#[test]
fn a_double_forked_daemon_is_stopped_with_its_target() {
    stopped_with_their_target(Escape::DoubleFork, "daemon-stop");
}

/// A one-step lab over [`escaping_plan`]: exit 0, and no process of the target's tree
/// left once loadlab has exited.
fn stopped_with_their_target(escape: Escape, name: &str) {
    let plan = escaping_plan(1, escape);
    let out = temp_path(name);
    let started = Instant::now();
    let o = lab(&plan, &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(util::lab::steps(&out).len(), 1);
    // Stopped by the lab itself: gone by the time it exits.
    assert_all_gone(&out, Duration::ZERO);
}

#[test]
fn a_bundle_in_use_is_refused_and_sigkill_of_loadlab_leaves_no_process() {
    let plan = escaping_plan(20, Escape::Setsid);
    let out = temp_path("escape-kill");
    let mut first = spawn_lab(&plan, &out);
    // The keeper has seen the escapee once a step has finished.
    wait_for("a first step", Duration::from_secs(30), || {
        !lines(&out.join("steps.jsonl")).is_empty() && out.join("escapee.pids").exists()
    });
    std::thread::sleep(Duration::from_millis(600));

    // A second run on the same directory is refused at once, naming the first.
    let started = Instant::now();
    let second = lab(&plan, &out);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "is being written by another loadlab run (pid {})",
            first.id()
        )),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // SIGKILL: loadlab can clean nothing up itself.
    first.kill().unwrap();
    first.wait().unwrap();
    assert_all_gone(&out, Duration::from_secs(5));
    assert!(!lines(&out.join("steps.jsonl")).is_empty());

    // Its lock died with it: the next run is refused for the bundle already there, not for
    // a run that no longer exists.
    let third = lab(&plan, &out);
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert_eq!(third.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already holds a bundle"), "{stderr}");
    assert!(!stderr.contains("another loadlab run"), "{stderr}");
}

#[test]
fn sigkill_of_loadlab_leaves_no_double_forked_daemon() {
    let plan = escaping_plan(20, Escape::DoubleFork);
    let out = temp_path("daemon-kill");
    let mut run = spawn_lab(&plan, &out);
    wait_for("a first step", Duration::from_secs(30), || {
        !lines(&out.join("steps.jsonl")).is_empty() && out.join("escapee.pids").exists()
    });
    // The keeper follows the trees every 250 ms: let it see the adopted daemon.
    std::thread::sleep(Duration::from_millis(600));
    let daemon = pids(&out.join("escapee.pids"));
    assert!(
        daemon.iter().all(|&p| running(p)),
        "the daemon runs before the kill: {daemon:?}"
    );
    let killed = Instant::now();
    run.kill().unwrap();
    run.wait().unwrap();
    assert_all_gone(&out, Duration::from_secs(5));
    assert!(killed.elapsed() < Duration::from_secs(10));
}

/// Lines of a JSON-lines file that parse.
fn intact_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        .count()
}

/// A small tmpfs mounted for the test and unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = temp_path("tmpfs");
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(
            ok.success(),
            "mount tmpfs on {} (this test needs root)",
            dir.display()
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A lab run whose bundle directory fails after two steps (`break_disk`) stops within 30 s
/// with exit 1 and the cause (`cause`) and the bundle's path; every step written before is
/// intact and, once `repair` ran, `loadlab report` renders it; its target was stopped.
fn a_failing_bundle_disk_keeps_the_finished_steps(
    name: &str,
    break_disk: impl Fn(&Tmpfs),
    cause: &str,
    repair: impl Fn(&Tmpfs),
) {
    let disk = Tmpfs::mount("8m");
    let out = disk.0.join("bundle");
    let plan = write_plan(
        name,
        &format!(
            r#"name = "{name}"
[[target]]
name = "fx"
command = ["FIXTURE", "--port", "{{port}}", "--pid-file", "{{bundle}}/fx.pids"]
ready = {{ http = "http://127.0.0.1:{{port}}/", status = 200 }}
[[scenario]]
name = "s"
url = "http://127.0.0.1:{{port}}/"
timeout = "1s"
[load]
steps = [50, 50, 50, 50, 50, 50, 50, 50, 50, 50]
step_duration = "1s"
connections = 2
threads = 1
"#
        ),
    );
    let _ = fixture();
    let mut run = spawn_lab(&plan, &out);
    wait_for("two steps", Duration::from_secs(30), || {
        intact_lines(&out.join("steps.jsonl")) >= 2
    });
    break_disk(&disk);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = run.kill();
            repair(&disk);
            panic!("the run did not stop within 30 s of its disk failing ({cause})");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    repair(&disk);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(cause), "{stderr}");
    assert!(stderr.contains(&out.display().to_string()), "{stderr}");
    // Every step written before the disk failed is intact and the report renders it (a
    // line torn by the failure is the last, and only, one that does not parse).
    let text = std::fs::read_to_string(out.join("steps.jsonl")).unwrap();
    let all: Vec<&str> = text.lines().collect();
    let intact = intact_lines(&out.join("steps.jsonl"));
    assert!(intact >= 2, "{intact} steps");
    assert!(
        all.len() - intact <= 1,
        "{} lines, {intact} intact",
        all.len()
    );
    let (report, _) = output_within(
        Command::new(loadlab_bin()).arg("report").arg(&out),
        Duration::from_secs(60),
    );
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(String::from_utf8_lossy(&report.stdout).contains("| 50 |"));
    // And its target was stopped.
    assert!(!pids(&out.join("fx.pids")).iter().any(|p| running(*p)));
}

#[test]
#[ignore = "needs root, to mount a tmpfs (./test.sh)"]
fn a_full_disk_stops_the_run_with_its_cause_and_keeps_the_finished_steps() {
    let filler = |disk: &Tmpfs| disk.0.join("filler");
    a_failing_bundle_disk_keeps_the_finished_steps(
        "full",
        // What is left goes to a filler file.
        |disk| {
            let _ = Command::new("dd")
                .args(["if=/dev/zero", "bs=64k"])
                .arg(format!("of={}", filler(disk).display()))
                .stderr(Stdio::null())
                .status();
        },
        "No space left on device",
        |disk| {
            let _ = std::fs::remove_file(filler(disk));
        },
    );
}

/// Root ignores permission bits, so the bundle directory stops being writable by the
/// immutable attribute (files already open can still be appended to, as on a real disk whose
/// directory was locked: the run goes on until it needs a new file).
#[test]
#[ignore = "needs root and chattr (e2fsprogs), to mount a tmpfs and lock it (./test.sh)"]
fn a_bundle_directory_that_stops_being_writable_stops_the_run_and_keeps_the_finished_steps() {
    let chattr = |flag: &str, disk: &Tmpfs| {
        let ok = Command::new("chattr")
            .arg(flag)
            .arg(disk.0.join("bundle"))
            .status()
            .expect("chattr (e2fsprogs)");
        assert!(ok.success(), "chattr {flag}");
    };
    a_failing_bundle_disk_keeps_the_finished_steps(
        "locked",
        |disk| chattr("+i", disk),
        "Operation not permitted",
        |disk| chattr("-i", disk),
    );
}

#[test]
fn a_target_that_floods_its_output_gets_a_capped_log_and_the_run_goes_on() {
    // 40 MB of output before it serves, then a normal step.
    let plan = write_plan(
        "flood",
        r#"name = "flood"
[[target]]
name = "fx"
shell = true
command = ["head -c 40000000 /dev/zero | tr '\\0' x; echo; echo last words; exec FIXTURE --port {port}"]
ready = { http = "http://127.0.0.1:{port}/", status = 200 }
ready_timeout = "30s"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/"
timeout = "1s"
[load]
steps = [50]
step_duration = "1s"
connections = 2
threads = 1
"#,
    );
    let out = temp_path("flood");
    let started = Instant::now();
    let o = lab(&plan, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(90));
    assert!(
        stderr.contains("target `fx` wrote more than 16 MiB")
            && stderr.contains("bytes of its output were dropped"),
        "{stderr}"
    );
    assert_eq!(util::lab::steps(&out).len(), 1);
    let log = std::fs::read_dir(out.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("the target's log");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < (16 << 20) + (65 << 10), "log of {size} bytes");
    let text = std::fs::read(&log).unwrap();
    let end = String::from_utf8_lossy(&text[text.len() - (64 << 10)..]).into_owned();
    assert!(end.contains("last words"), "the end of the output is kept");
    assert!(String::from_utf8_lossy(&text).contains("[loadlab: this log is capped at 16 MiB: "));
    // The cap is in the bundle (configs.jsonl) and in the report, not only on stderr:
    // 40,000,012 bytes of output and a few of the fixture's, less the 16 MiB kept.
    let configs = lines(&out.join("configs.jsonl"));
    let capped = &configs[0]["capped_logs"][0];
    assert_eq!(capped["target"], "fx", "{}", configs[0]);
    let dropped = capped["dropped_bytes"].as_u64().unwrap();
    assert!(
        (23_000_000..23_300_000).contains(&dropped),
        "{dropped} bytes dropped"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains(&format!(
            "target `fx` wrote more than the 16 MiB log cap: {dropped} bytes of its output were dropped"
        )),
        "{report}"
    );
}

#[test]
fn a_target_that_exits_before_ready_is_shown_with_its_message() {
    let plan = write_plan(
        "exits",
        r#"name = "exits"
[[target]]
name = "bad"
command = ["sh", "-c", "echo 'bind: address 127.0.0.1:{port} already in use' >&2; exit 4"]
ready = { tcp = "127.0.0.1:{port}" }
ready_timeout = "10s"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/"
[load]
steps = [10]
step_duration = "1s"
"#,
    );
    let out = temp_path("exits");
    let started = Instant::now();
    let o = lab(&plan, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // It exited at once: no waiting for the readiness timeout.
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(o.status.code(), Some(1), "no step finished: {stderr}");
    assert!(
        stderr.contains("exited before it was ready: exit status 4"),
        "{stderr}"
    );
    assert!(stderr.contains("already in use"), "{stderr}");
    let configs = lines(&out.join("configs.jsonl"));
    assert_eq!(configs[0]["status"], "not_ready");
    assert!(configs[0]["message"]
        .as_str()
        .unwrap()
        .contains("already in use"));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("already in use"), "{report}");
}

#[test]
fn shell_metacharacters_in_a_command_are_passed_literally() {
    // Markers a shell would create if it saw these arguments as a command line.
    let marks = temp_path("argv-marks");
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    let literal = format!("a; touch {m}/one $(touch {m}/two) `touch {m}/three` && touch {m}/four");
    let value = format!("b; touch {m}/five | touch {m}/six");
    // The target prints its own arguments, one a line, then serves; `{word}` is a matrix
    // value rendered into its argument list.
    let plan = write_plan(
        "argv",
        &format!(
            r#"name = "argv"
[matrix]
word = [{value:?}]
[[target]]
name = "fx"
command = ["sh", "-c", "printf '%s\n' \"$1\" \"$2\" > {{bundle}}/argv.txt; exec FIXTURE --port {{port}}", "sh", {literal:?}, "{{word}}"]
ready = {{ http = "http://127.0.0.1:{{port}}/", status = 200 }}
ready_timeout = "10s"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{{port}}/"
timeout = "1s"
[load]
steps = [20]
step_duration = "1s"
connections = 1
threads = 1
"#
        ),
    );
    let out = temp_path("argv");
    let started = Instant::now();
    let o = lab(&plan, &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let argv = std::fs::read_to_string(out.join("argv.txt")).unwrap();
    assert_eq!(argv, format!("{literal}\n{value}\n"));
    let made: Vec<_> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(made.is_empty(), "a shell ran the arguments: {made:?}");
}
