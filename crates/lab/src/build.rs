//! Targets' `build` commands: what makes a target runnable (`cargo build`, `mvn package`,
//! `npm ci`), run once per plan before the first configuration.
//!
//! Each build runs in the plan's directory with loadlab's environment, its placeholders
//! (only [`BUILD_PLACEHOLDERS`]) rendered, stdin closed, and its stdout and stderr written
//! to `logs/build-TARGET.log` in the bundle. Targets whose builds are the same command share
//! one run (and the first one's log). A build runs in a process group of its own, like a
//! target: a build past its `build_timeout`, or stopped by the run's cancellation (Ctrl-C),
//! has its whole group stopped (SIGTERM, a grace, SIGKILL), and so has what a build leaves
//! running in its group once it exits. A build that fails, cannot start or times out stops
//! the plan before any target starts: [`BuildError`] says which, with the last lines of its
//! output.
//!
//! [`BUILD_PLACEHOLDERS`]: crate::plan::BUILD_PLACEHOLDERS

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use loadlab_engine::CancellationToken;
use loadlab_system::os::{self, GroupSignal};

use crate::plan::Plan;
use crate::target::{self, describe_status, log_tail};
use crate::template;

/// The lines of a failed build's output its error quotes.
pub const TAIL_LINES: usize = 20;

/// How long a stopped build's group is given between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// One build to run: a command and the targets that share it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBuild {
    /// The targets whose `build` this is, in plan order (the first names the log).
    pub targets: Vec<String>,
    /// The program and its arguments as run, placeholders rendered (`/bin/sh -c STRING`
    /// for a `build_shell` build).
    pub argv: Vec<String>,
    /// The longest `build_timeout` of the targets sharing it.
    pub timeout: Duration,
}

impl PlannedBuild {
    /// The command as a shell would read it (arguments quoted where they need it).
    pub fn command_line(&self) -> String {
        self.argv
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The log's file name in the bundle's `logs/`: `build-FIRSTTARGET.log`.
    pub fn log_name(&self) -> String {
        format!("build-{}.log", self.targets[0])
    }

    /// The timeout as a plan writes it (`30m`).
    pub fn timeout_text(&self) -> String {
        humantime::format_duration(self.timeout).to_string()
    }

    /// "target `app`", or "targets `a`, `b`" for a shared build.
    pub fn who(&self) -> String {
        let names = self
            .targets
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if self.targets.len() == 1 {
            format!("target {names}")
        } else {
            format!("targets {names}")
        }
    }
}

/// Quotes `arg` for a POSIX shell when it holds anything but plain characters.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The builds of `plan` in plan order, one per distinct command, with `{plan_dir}` and
/// `{loadlab}` rendered, and `{bundle}` too when `bundle` is given (`loadlab doctor` has
/// none: it is left as written).
pub fn planned(plan: &Plan, bundle: Option<&Path>) -> Vec<PlannedBuild> {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "loadlab".into());
    let mut lookup = |name: &str| match name {
        "plan_dir" => Some(plan.dir.display().to_string()),
        "loadlab" => Some(exe.clone()),
        "bundle" => bundle.map(|b| b.display().to_string()),
        _ => None,
    };
    let mut builds: Vec<PlannedBuild> = Vec::new();
    for t in &plan.targets {
        let Some(b) = &t.build else { continue };
        let rendered: Vec<String> = b
            .command
            .iter()
            .map(|a| template::render(a, &mut lookup))
            .collect();
        let argv = if b.shell {
            vec!["/bin/sh".into(), "-c".into(), rendered[0].clone()]
        } else {
            rendered
        };
        match builds.iter_mut().find(|p| p.argv == argv) {
            Some(same) => {
                same.targets.push(t.name.clone());
                same.timeout = same.timeout.max(b.timeout);
            }
            None => builds.push(PlannedBuild {
                targets: vec![t.name.clone()],
                argv,
                timeout: b.timeout,
            }),
        }
    }
    builds
}

/// Why a build stopped the plan.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The build's program could not be started (not installed, not executable...).
    #[error("{who}: the build cannot start: `{program}`: {reason}; the build is: {command}")]
    Spawn {
        /// "target `app`".
        who: String,
        /// The program, as rendered.
        program: String,
        /// The whole command.
        command: String,
        /// Why, in words: a missing program says so, and where it was looked for.
        reason: String,
    },
    /// The build exited unsuccessfully (or was killed by a signal).
    #[error(
        "{who}: the build failed ({status}), so no target was started: {command}\nthe end of its output ({}):\n{tail}", log.display()
    )]
    Failed {
        /// "target `app`".
        who: String,
        /// The command as run.
        command: String,
        /// How it ended and when: `exit status 7, after 0.1 s`, `killed by signal 9
        /// (SIGKILL), after 2.0 s`.
        status: String,
        /// The build log, as the bundle directory was given.
        log: PathBuf,
        /// Its last [`TAIL_LINES`] lines, indented.
        tail: String,
    },
    /// The build ran past its timeout and was stopped.
    #[error(
        "{who}: the build was stopped after its build_timeout of {timeout}, so no target was started: {command}\nthe end of its output ({}):\n{tail}", log.display()
    )]
    TimedOut {
        /// "target `app`".
        who: String,
        /// The command as run.
        command: String,
        /// The timeout, as humans write it (`30m`).
        timeout: String,
        /// The build log, as the bundle directory was given.
        log: PathBuf,
        /// Its last [`TAIL_LINES`] lines, indented.
        tail: String,
    },
    /// The build log could not be created.
    #[error("cannot write the build log {path}: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// How the builds ended, when none failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildsOutcome {
    /// Every build succeeded (or there was none).
    Done,
    /// The run was cancelled during a build; it was stopped, and nothing is to run.
    Interrupted,
}

/// Runs the builds of `plan`, in plan order, each until it succeeds; the first that does
/// not stops them. `bundle` is the bundle directory (absolute: the logs go to its `logs/`);
/// `shown` is the same directory as the user gave it, for messages. `say` gets the progress
/// lines.
pub fn run_all(
    plan: &Plan,
    bundle: &Path,
    shown: &Path,
    stop: &CancellationToken,
    say: &dyn Fn(&str),
) -> Result<BuildsOutcome, BuildError> {
    for b in planned(plan, Some(bundle)) {
        if stop.is_cancelled() {
            return Ok(BuildsOutcome::Interrupted);
        }
        let log = bundle.join("logs").join(b.log_name());
        let shown_log = shown.join("logs").join(b.log_name());
        say(&format!(
            "building {}: {} (log: {})",
            b.who(),
            b.command_line(),
            shown_log.display()
        ));
        let started = Instant::now();
        match run_one(&b, &plan.dir, &log, &shown_log, stop)? {
            BuildsOutcome::Done => say(&format!(
                "built {} in {:.1} s",
                b.who(),
                started.elapsed().as_secs_f64()
            )),
            BuildsOutcome::Interrupted => {
                say(&format!(
                    "the build of {} was stopped after {:.1} s: interrupted",
                    b.who(),
                    started.elapsed().as_secs_f64()
                ));
                return Ok(BuildsOutcome::Interrupted);
            }
        }
    }
    Ok(BuildsOutcome::Done)
}

/// Runs one build in `dir` with its output in `log`, until it exits, times out, or `stop`.
fn run_one(
    b: &PlannedBuild,
    dir: &Path,
    log: &Path,
    shown_log: &Path,
    stop: &CancellationToken,
) -> Result<BuildsOutcome, BuildError> {
    let log_err = |e| BuildError::Log {
        path: log.to_path_buf(),
        source: e,
    };
    let out = File::create(log).map_err(log_err)?;
    let err = out.try_clone().map_err(log_err)?;
    let mut cmd = Command::new(&b.argv[0]);
    cmd.args(&b.argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    // SAFETY: the closure only makes an async-signal-safe system call (prctl) and
    // allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let _ = os::kill_me_with_parent();
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| BuildError::Spawn {
        who: b.who(),
        program: b.argv[0].clone(),
        command: b.command_line(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!(
                    "not found (is it installed, and on PATH? the build runs in {})",
                    dir.display()
                )
            }
            std::io::ErrorKind::PermissionDenied => format!("not executable ({e})"),
            _ => e.to_string(),
        },
    })?;
    // The log's descriptors belong to the build alone now.
    drop(cmd);
    let pgid = child.id() as i32;
    target::track_group(pgid);
    let tail = || {
        let t = log_tail(log, TAIL_LINES);
        if t.trim().is_empty() {
            "  (no output)".to_string()
        } else {
            t.lines()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break (describe_status(st), st.success()),
            Ok(None) => {}
            // Not ours to wait for any more (nothing else reaps a build's leader): it counts
            // as failed, its group stopped below.
            Err(e) => break (format!("its exit was lost: {e}"), false),
        }
        if stop.is_cancelled() {
            stop_group(pgid, &mut child);
            target::untrack_group(pgid);
            return Ok(BuildsOutcome::Interrupted);
        }
        if started.elapsed() >= b.timeout {
            stop_group(pgid, &mut child);
            target::untrack_group(pgid);
            return Err(BuildError::TimedOut {
                who: b.who(),
                command: b.command_line(),
                timeout: b.timeout_text(),
                log: shown_log.to_path_buf(),
                tail: tail(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed().as_secs_f64();
    // What the build left running in its group stops with it.
    stop_group(pgid, &mut child);
    target::untrack_group(pgid);
    let (status, success) = status;
    if success {
        return Ok(BuildsOutcome::Done);
    }
    Err(BuildError::Failed {
        who: b.who(),
        command: b.command_line(),
        status: format!("{status}, after {elapsed:.1} s"),
        log: shown_log.to_path_buf(),
        tail: tail(),
    })
}

/// Stops every process of group `pgid`: SIGTERM, up to [`STOP_GRACE`] for the group to
/// empty, SIGKILL; the leader is waited for and the members loadlab adopted are reaped.
fn stop_group(pgid: i32, leader: &mut Child) {
    let alive = |leader: &mut Child| {
        let _ = leader.try_wait();
        os::reap_group(pgid);
        os::group_exists(pgid)
    };
    if !alive(leader) {
        return;
    }
    let _ = os::signal_group(pgid, GroupSignal::Term);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && alive(leader) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = os::signal_group(pgid, GroupSignal::Kill);
    let _ = leader.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(leader) && Instant::now() < deadline {
        let _ = os::signal_group(pgid, GroupSignal::Kill);
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(targets: &str) -> Plan {
        let text = format!(
            "name = \"b\"\n{targets}\n[matrix]\nw = [1, 2]\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:{{port}}/\"\n[load]\nsteps = [1]\n"
        );
        Plan::parse(&text, "b.toml", Path::new("/plans"), false).unwrap()
    }

    const TARGET: &str = "[[target]]\nname = \"NAME\"\ncommand = [\"x\", \"{w}\"]\nready = { tcp = \"127.0.0.1:{port}\" }\n";

    fn target(name: &str, build: &str) -> String {
        format!("{}{build}\n", TARGET.replace("NAME", name))
    }

    #[test]
    fn identical_builds_run_once_and_placeholders_are_the_run_s() {
        let p = plan(&[
            target("a", "build = [\"make\", \"-C\", \"{plan_dir}/src\", \"OUT={bundle}\"]"),
            target("b", "build = [\"make\", \"-C\", \"{plan_dir}/src\", \"OUT={bundle}\"]\nbuild_timeout = \"2h\""),
            target("c", "build = [\"cd {plan_dir} && npm ci\"]\nbuild_shell = true"),
            target("d", ""),
        ]
        .concat());
        let builds = planned(&p, Some(Path::new("/out/b")));
        assert_eq!(builds.len(), 2, "{builds:?}");
        assert_eq!(builds[0].targets, ["a", "b"]);
        assert_eq!(builds[0].argv, ["make", "-C", "/plans/src", "OUT=/out/b"]);
        assert_eq!(builds[0].timeout, Duration::from_secs(7200));
        assert_eq!(builds[0].who(), "targets `a`, `b`");
        assert_eq!(builds[0].log_name(), "build-a.log");
        assert_eq!(builds[1].argv, ["/bin/sh", "-c", "cd /plans && npm ci"]);
        assert_eq!(builds[1].timeout, crate::plan::DEFAULT_BUILD_TIMEOUT);
        assert_eq!(builds[1].command_line(), "/bin/sh -c 'cd /plans && npm ci'");
        // Without a bundle (the doctor), `{bundle}` stays as written.
        assert_eq!(planned(&p, None)[0].argv[3], "OUT={bundle}");
    }

    #[test]
    fn quoting_for_messages() {
        assert_eq!(shell_quote("a/b-c.d=1"), "a/b-c.d=1");
        assert_eq!(shell_quote("two words"), "'two words'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
