//! Plans that work the first time (issue 35): path placeholders are absolute whatever
//! `--out` and the current directory are, and a target's `build` runs once before the
//! first configuration (shared by targets with the same command, skipped by `--no-build`,
//! stopped by its timeout and by Ctrl-C, its failure a clear stop before any load), and
//! `loadlab doctor` names it.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use util::lab::{fixture, lines, running, LAB_BOUND};
use util::{loadlab_bin, output_within, temp_path};

/// A directory of its own for a plan (its `{plan_dir}`), with `text` as `plan.toml`
/// (`FIXTURE` replaced by the fixture server).
fn plan_in_own_dir(name: &str, text: &str) -> PathBuf {
    let dir = temp_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, text.replace("FIXTURE", &fixture())).unwrap();
    plan
}

/// `loadlab lab ARGS...` run in `cwd`, killed (and the test failed) past the lab bound.
fn lab_in(cwd: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(loadlab_bin())
            .current_dir(cwd)
            .arg("lab")
            .args(args),
        LAB_BOUND,
    )
    .0
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One short step against the first target: a plan runs in a second or two.
const SCENARIO_AND_LOAD: &str = r#"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/"
timeout = "1s"

[load]
steps = [20]
step_duration = "1s"
connections = 2
threads = 1
"#;

/// The fixture server as target `NAME`, started by `sh -c` so that it can check something
/// first (`CHECK`, a shell command: the target exits 8 if it fails).
fn checked_target(name: &str, check: &str, extra: &str) -> String {
    format!(
        r#"
[[target]]
name = "{name}"
shell = true
command = ["{check} || exit 8; exec FIXTURE --port {{{name}_port}}"]
ready = {{ http = "http://127.0.0.1:{{{name}_port}}/", status = 200 }}
ready_timeout = "5s"
stop_grace = "1s"
{extra}
"#
    )
}

/// The bug: with `--out b` relative, `{files}` and `{bundle}` were relative, and a target
/// whose `cwd` is elsewhere (nginx: the plan's directory) looked for its files in the wrong
/// place. Here loadlab runs in another directory than the plan's, with `--out rel/b`, and
/// the target in `/`: it checks its paths are absolute and its file is there, and writes
/// what it received.
#[test]
fn a_relative_out_from_another_directory_gives_absolute_paths() {
    let cwd = temp_path("elsewhere");
    std::fs::create_dir_all(cwd.join("plans")).unwrap();
    let check = "for p in '{files}' '{bundle}' '{plan_dir}'; do case $p in /*) ;; *) exit 9;; esac; done; \
                 test -f '{files}/probe.txt' && echo '{files} {bundle} {plan_dir}' > '{bundle}/seen.txt'";
    let plan = format!(
        "name = \"rel\"\n{}{SCENARIO_AND_LOAD}",
        checked_target(
            "fx",
            check,
            "cwd = \"/\"\n[target.files]\n\"probe.txt\" = \"written into {files}\""
        )
    );
    std::fs::write(
        cwd.join("plans/plan.toml"),
        plan.replace("FIXTURE", &fixture()),
    )
    .unwrap();
    // The plan too is named relative to loadlab's directory.
    let out = lab_in(&cwd, &["-q", "plans/plan.toml", "--out", "rel/b"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let bundle = cwd.join("rel/b");
    let configs = lines(&bundle.join("configs.jsonl"));
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(configs[0]["status"], "completed", "{configs:?}");
    let seen = std::fs::read_to_string(bundle.join("seen.txt")).unwrap();
    let seen: Vec<&str> = seen.split_whitespace().collect();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(
        seen.iter().map(|p| canon(Path::new(p))).collect::<Vec<_>>(),
        [
            canon(&bundle.join("files/default")),
            canon(&bundle),
            canon(&cwd.join("plans"))
        ],
        "{seen:?}"
    );
    assert!(seen.iter().all(|p| p.starts_with('/')), "{seen:?}");
    // Messages still name the bundle as it was given.
    assert!(stderr.contains("bundle rel/b;"), "{stderr}");
}

/// A build that makes what the targets need: run once for two targets sharing its command
/// and two configurations, in the plan's directory, its output in the bundle's log, its
/// progress said.
#[test]
fn a_shared_build_runs_once_before_the_first_configuration() {
    let build = "build = [\"sh\", \"-c\", \"echo ran >> count; echo jar > artifact; echo compiling in $PWD\"]";
    let plan = plan_in_own_dir(
        "build-ok",
        &format!(
            "name = \"build-ok\"\n{}{}[matrix]\nn = [1, 2]\n{}",
            checked_target("a", "test -f '{plan_dir}/artifact'", build),
            checked_target("b", "test -f '{plan_dir}/artifact'", build),
            SCENARIO_AND_LOAD.replace("/\"\ntimeout", "/?n={n}\"\ntimeout"),
        ),
    );
    let dir = plan.parent().unwrap().to_path_buf();
    let bundle = temp_path("build-ok-bundle");
    let started = Instant::now();
    // Without -q: the progress lines are said.
    let out = lab_in(
        &dir,
        &[plan.to_str().unwrap(), "--out", bundle.to_str().unwrap()],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let configs = lines(&bundle.join("configs.jsonl"));
    assert_eq!(configs.len(), 2, "{configs:?}");
    assert!(
        configs.iter().all(|c| c["status"] == "completed"),
        "{configs:?}"
    );
    assert_eq!(util::lab::steps(&bundle).len(), 2);
    // Once in all: not per target, not per configuration.
    let count = std::fs::read_to_string(dir.join("count")).unwrap();
    assert_eq!(count.lines().count(), 1, "{count}");
    let log = std::fs::read_to_string(bundle.join("logs/build-a.log")).unwrap();
    let here = std::fs::canonicalize(&dir).unwrap();
    assert!(
        log.contains(&format!("compiling in {}", here.display())),
        "the build runs in the plan's directory: {log}"
    );
    assert!(!bundle.join("logs/build-b.log").exists());
    assert!(
        stderr.contains(&format!(
            "building targets `a`, `b`: sh -c 'echo ran >> count; echo jar > artifact; echo compiling in $PWD' (log: {}/logs/build-a.log)",
            bundle.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("built targets `a`, `b` in "), "{stderr}");
    // It comes before the first configuration.
    let building = stderr.find("building targets").unwrap();
    let first = stderr
        .find("[1/2] configuration")
        .expect("a configuration line");
    assert!(building < first, "{stderr}");
}

/// The plan of the failing build (`sh -c 'echo compiling; echo error: boom >&2; exit 7'`)
/// whose target needs nothing it builds.
fn failing_build_plan(name: &str) -> PathBuf {
    plan_in_own_dir(
        name,
        &format!(
            "name = \"{name}\"\n{}{SCENARIO_AND_LOAD}",
            checked_target(
                "app",
                "true",
                "build = [\"sh\", \"-c\", \"echo compiling; echo error: boom >&2; exit 7\"]"
            )
        ),
    )
}

/// A failing build stops the plan before any load: exit 1, the target, the status and the
/// build's last words on stderr; the bundle keeps the plan, the environment and the log.
#[test]
fn a_failing_build_stops_the_plan_before_any_load() {
    let plan = failing_build_plan("build-fails");
    let bundle = temp_path("build-fails-bundle");
    let started = Instant::now();
    let out = lab_in(
        Path::new("/"),
        &[
            "-q",
            plan.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    for needle in [
        "target `app`: the build failed (exit status 7",
        "sh -c 'echo compiling; echo error: boom >&2; exit 7'",
        "  compiling\n",
        "  error: boom",
        "logs/build-app.log",
    ] {
        assert!(stderr.contains(needle), "`{needle}` in {stderr}");
    }
    assert!(lines(&bundle.join("steps.jsonl")).is_empty());
    assert!(lines(&bundle.join("configs.jsonl")).is_empty());
    for kept in [
        "plan.json",
        "plan.toml",
        "environment.json",
        "logs/build-app.log",
    ] {
        assert!(bundle.join(kept).exists(), "{kept} in the bundle");
    }
    let log = std::fs::read_to_string(bundle.join("logs/build-app.log")).unwrap();
    assert!(
        log.contains("compiling") && log.contains("error: boom"),
        "{log}"
    );
    // No target was started: its log is not there.
    let logs: Vec<String> = std::fs::read_dir(bundle.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(logs, ["build-app.log"]);
    // The bundle holds no result: once the cause is fixed (here: skipped), the same --out
    // works.
    let again = lab_in(
        Path::new("/"),
        &[
            "-q",
            plan.to_str().unwrap(),
            "--no-build",
            "--out",
            bundle.to_str().unwrap(),
        ],
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(util::lab::steps(&bundle).len(), 1);

    // A program that is not there says so.
    let missing = plan_in_own_dir(
        "build-missing",
        &format!(
            "name = \"missing\"\n{}{SCENARIO_AND_LOAD}",
            checked_target(
                "app",
                "true",
                "build = [\"no-such-build-tool-here\", \"package\"]"
            )
        ),
    );
    let out = lab_in(
        Path::new("/"),
        &[
            "-q",
            missing.to_str().unwrap(),
            "--out",
            temp_path("build-missing-bundle").to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("target `app`: the build cannot start: `no-such-build-tool-here`: not found (is it installed, and on PATH?"),
        "{stderr}"
    );
}

/// `--no-build` skips the build, says so once, and the plan runs.
#[test]
fn no_build_skips_it() {
    let plan = failing_build_plan("no-build");
    let bundle = temp_path("no-build-bundle");
    let out = lab_in(
        Path::new("/"),
        &[
            plan.to_str().unwrap(),
            "--no-build",
            "--out",
            bundle.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr
            .matches("not building target `app` (--no-build)")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("boom"), "{stderr}");
    assert!(!bundle.join("logs/build-app.log").exists());
    assert_eq!(util::lab::steps(&bundle).len(), 1);
}

/// A build that hangs is stopped at its `build_timeout`, and by Ctrl-C: its whole process
/// group, whatever it started.
#[test]
fn a_build_is_stopped_by_its_timeout_and_by_ctrl_c() {
    // The build starts a child of its own (the sleep) and records both pids.
    let hang = |name: &str, timeout: &str| {
        plan_in_own_dir(
            name,
            &format!(
                "name = \"{name}\"\n{}{SCENARIO_AND_LOAD}",
                checked_target(
                    "app",
                    "true",
                    &format!("build = [\"sh\", \"-c\", \"sleep 60 & echo $$ $! > pids; wait\"]\nbuild_timeout = \"{timeout}\"")
                )
            ),
        )
    };
    let pids = |plan: &Path| -> Vec<u32> {
        std::fs::read_to_string(plan.parent().unwrap().join("pids"))
            .unwrap_or_default()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    };

    let plan = hang("build-timeout", "1s");
    let started = Instant::now();
    let out = lab_in(
        Path::new("/"),
        &[
            "-q",
            plan.to_str().unwrap(),
            "--out",
            temp_path("build-timeout-bundle").to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
    assert!(
        stderr.contains("target `app`: the build was stopped after its build_timeout of 1s"),
        "{stderr}"
    );
    let seen = pids(&plan);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|p| !running(*p)), "left running: {seen:?}");

    let plan = hang("build-ctrl-c", "10m");
    let bundle = temp_path("build-ctrl-c-bundle");
    let mut child = Command::new(loadlab_bin())
        .args(["lab", "-q"])
        .arg(&plan)
        .arg("--out")
        .arg(&bundle)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids(&plan).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = pids(&plan);
    assert_eq!(seen.len(), 2, "the build started: {seen:?}");
    let sent = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = output_within_child(&mut child);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(sent.elapsed() < Duration::from_secs(15));
    assert!(seen.iter().all(|p| !running(*p)), "left running: {seen:?}");
    assert!(lines(&bundle.join("steps.jsonl")).is_empty());
}

/// Waits (bounded) for a spawned loadlab and collects its stderr.
fn output_within_child(child: &mut std::process::Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("loadlab did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = Vec::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr,
    }
}

/// `loadlab doctor PLAN` says whether a build will run, and which command.
#[test]
fn doctor_names_the_build() {
    let plan = failing_build_plan("doctor-build");
    let out = Command::new(loadlab_bin())
        .arg("doctor")
        .arg(&plan)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let dir = plan.parent().unwrap().display().to_string();
    assert!(
        stdout.contains(&format!(
            "build: target `app` is built once before the first configuration, in {dir} (at most 30m; `loadlab lab --no-build` skips it):\n       sh -c 'echo compiling; echo error: boom >&2; exit 7'\n"
        )),
        "{stdout}"
    );
    let none = plan_in_own_dir(
        "doctor-no-build",
        &format!(
            "name = \"nb\"\n{}{SCENARIO_AND_LOAD}",
            checked_target("app", "true", "")
        ),
    );
    let out = Command::new(loadlab_bin())
        .arg("doctor")
        .arg(&none)
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("build: none (no target has a `build`)"),
        "{}",
        text(&out.stdout)
    );
}
