//! The servers under test: started in their own process groups with their output captured,
//! waited for until ready, watched for exits, and stopped (SIGTERM, grace, SIGKILL to the
//! whole group). loadlab makes itself a child subreaper, so processes a target forks are
//! reaped by loadlab too, and a panic hook kills every group still running: no orphan
//! survives a stop, a Ctrl-C, or a panic.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::ToSocketAddrs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loadlab_system::os::{self, GroupSignal};
use loadlab_system::procfs;
use serde::{Deserialize, Serialize};

use crate::plan::{Ready, TargetSpec};
use crate::template;

/// Process groups started and not yet stopped (for the panic hook).
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Makes loadlab reap orphaned descendants of its targets, and kill all target groups if
/// loadlab panics. Call once at start.
pub fn install_cleanup() {
    let _ = os::become_child_subreaper();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        kill_all_groups();
        previous(info);
    }));
}

/// Sends SIGKILL to every target group still registered.
pub fn kill_all_groups() {
    let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for pgid in groups {
        let _ = os::signal_group(pgid, GroupSignal::Kill);
    }
}

fn register(pgid: i32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.push(pgid);
    }
}

fn unregister(pgid: i32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.retain(|&p| p != pgid);
    }
}

/// Registers a process group loadlab started that is not a target's (a build, see
/// [`crate::build`]): it is killed if loadlab panics, and the keeper follows its leader's
/// tree if loadlab is killed. [`untrack_group`] once it is stopped.
pub(crate) fn track_group(pgid: i32) {
    register(pgid);
    tell_keeper(pgid as u32);
}

/// Forgets a group [`track_group`] registered, once it is stopped.
pub(crate) fn untrack_group(pgid: i32) {
    unregister(pgid);
}

/// How a target ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetExit {
    /// Target name.
    pub target: String,
    /// `exit status 101`, `killed by signal 9 (SIGKILL)`, ...
    pub status: String,
    /// The exit code, if it exited (rather than being killed by a signal).
    #[serde(default)]
    pub code: Option<i32>,
    /// The last lines of its log.
    pub log_tail: String,
}

/// Why targets could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The program could not be started at all.
    #[error("target `{target}`: cannot start `{program}`: {source}")]
    Spawn {
        /// Target.
        target: String,
        /// Program.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The readiness probe never passed.
    #[error(
        "target `{target}` was not ready after {timeout:?} ({probe}); last log lines:\n{log_tail}"
    )]
    NotReady {
        /// Target.
        target: String,
        /// Timeout.
        timeout: Duration,
        /// The probe and its last answer.
        probe: String,
        /// Log tail.
        log_tail: String,
    },
    /// The target exited before it was ready.
    #[error("target `{}` exited before it was ready: {}; last log lines:\n{}", .0.target, .0.status, .0.log_tail)]
    Exited(TargetExit),
    /// The log file or a target file could not be written.
    #[error("cannot write {path}: {source}")]
    Log {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// One running target.
struct Running {
    name: String,
    child: Child,
    pgid: i32,
    log: PathBuf,
    grace: Duration,
    exit: Option<ExitStatus>,
    /// Bytes of output dropped from its log past [`LOG_CAP`].
    dropped: Arc<AtomicU64>,
    /// Set when its log thread has written everything (every holder of the pipe exited).
    log_done: Arc<AtomicBool>,
}

/// The most bytes of a target's output its log keeps from the start; past it, output is
/// still read (the target never blocks on it) but dropped, except the last [`LOG_KEEP_END`]
/// bytes, written after a line that says how much was dropped.
pub const LOG_CAP: u64 = 16 << 20;
/// The end of a capped log that is kept (where a crash's last words are).
pub const LOG_KEEP_END: usize = 64 << 10;

/// Copies a target's output from `pipe` to `log` until every holder of the pipe has
/// exited, keeping at most [`LOG_CAP`] bytes and then the last [`LOG_KEEP_END`].
fn pump_log(
    mut pipe: std::io::PipeReader,
    mut log: File,
    dropped: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
) {
    let spawned = std::thread::Builder::new()
        .name("loadlab-log".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            let mut written = 0u64;
            let mut end: Vec<u8> = Vec::new();
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let keep = (LOG_CAP - written).min(n as u64) as usize;
                if keep > 0 {
                    // A full disk is the bundle's problem, reported when steps are written.
                    let _ = log.write_all(&buf[..keep]);
                    written += keep as u64;
                }
                if keep < n {
                    dropped.fetch_add((n - keep) as u64, Ordering::Relaxed);
                    end.extend_from_slice(&buf[keep..n]);
                    if end.len() > 2 * LOG_KEEP_END {
                        end.drain(..end.len() - LOG_KEEP_END);
                    }
                }
            }
            let lost = dropped.load(Ordering::Relaxed);
            if lost > 0 {
                let end = &end[end.len().saturating_sub(LOG_KEEP_END)..];
                let _ = write!(
                    log,
                    "\n[loadlab: this log is capped at {} MiB: {} bytes of output were dropped; the last {} follow]\n",
                    LOG_CAP >> 20,
                    lost,
                    end.len()
                );
                let _ = log.write_all(end);
            }
            done.store(true, Ordering::Release);
        });
    if let Err(e) = spawned {
        eprintln!("loadlab: warning: cannot start a log thread ({e}): a target's output is lost");
    }
}

/// The targets of one configuration, in start order.
pub struct TargetSet {
    running: Vec<Running>,
}

/// Describes an exit status in words.
pub fn describe_status(st: ExitStatus) -> String {
    if let Some(code) = st.code() {
        return format!("exit status {code}");
    }
    match st.signal() {
        Some(sig) => format!("killed by signal {sig} ({})", os::signal_name(sig)),
        None => "ended".into(),
    }
}

/// The last `lines` lines of a file.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn probe_ready(ready: &Ready, vars: &mut dyn FnMut(&str) -> Option<String>) -> Result<(), String> {
    match ready {
        Ready::Tcp { addr } => {
            let addr = template::render(addr, vars);
            let addrs: Vec<_> = addr
                .to_socket_addrs()
                .map_err(|e| format!("tcp {addr}: {e}"))?
                .collect();
            loadlab_system::net::connect_first(addrs, Duration::from_millis(500))
                .map(|_| ())
                .map_err(|e| format!("tcp {addr}: {e}"))
        }
        Ready::Http { url, status } => {
            let url = template::render(url, vars);
            let got = crate::http_once::request(&url, "GET", &[], b"", Duration::from_secs(2), 0)
                .map(|a| a.status)
                .map_err(|e| format!("http {e}"))?;
            if got == *status {
                Ok(())
            } else {
                Err(format!("http {url}: status {got}, expected {status}"))
            }
        }
    }
}

impl TargetSet {
    /// Starts `specs` in order, each waited for until ready. On failure, the targets already
    /// started are stopped before the error returns.
    pub fn start(
        specs: &[TargetSpec],
        vars: &BTreeMap<String, String>,
        log_dir: &Path,
        log_prefix: &str,
    ) -> Result<TargetSet, StartError> {
        let mut set = TargetSet {
            running: Vec::new(),
        };
        for spec in specs {
            if let Err(e) = set.start_one(spec, vars, log_dir, log_prefix) {
                set.stop();
                return Err(e);
            }
        }
        Ok(set)
    }

    fn start_one(
        &mut self,
        spec: &TargetSpec,
        vars: &BTreeMap<String, String>,
        log_dir: &Path,
        log_prefix: &str,
    ) -> Result<(), StartError> {
        let mut lookup = |k: &str| vars.get(k).cloned();
        if !spec.files.is_empty() {
            let dir = PathBuf::from(vars.get("files").cloned().unwrap_or_default());
            std::fs::create_dir_all(&dir).map_err(|e| StartError::Log {
                path: dir.clone(),
                source: e,
            })?;
            for (name, text) in &spec.files {
                let path = dir.join(name);
                std::fs::write(&path, template::render(text, &mut lookup))
                    .map_err(|e| StartError::Log { path, source: e })?;
            }
        }
        let argv: Vec<String> = spec
            .command
            .iter()
            .map(|a| template::render(a, &mut lookup))
            .collect();
        let mut cmd = if spec.shell {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(&argv[0]);
            c
        } else {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        };
        let log = log_dir.join(format!("{log_prefix}{}.log", spec.name));
        let log_err = |e| StartError::Log {
            path: log.clone(),
            source: e,
        };
        let file = File::create(&log).map_err(log_err)?;
        // Output goes through a pipe that a thread always drains, into a capped log.
        let (pipe, out) = std::io::pipe().map_err(log_err)?;
        let err_out = out.try_clone().map_err(log_err)?;
        let dropped = Arc::new(AtomicU64::new(0));
        let log_done = Arc::new(AtomicBool::new(false));
        pump_log(pipe, file, dropped.clone(), log_done.clone());
        cmd.current_dir(&spec.cwd)
            .envs(
                spec.env
                    .iter()
                    .map(|(k, v)| (k, template::render(v, &mut lookup))),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err_out)
            .process_group(0);
        // If loadlab dies without cleaning up, the target's leader is killed (its group is
        // still cleaned by `stop` otherwise).
        let cpus = usable_cpus(&spec.cpus);
        // SAFETY: the closure only makes async-signal-safe system calls (prctl,
        // sched_setaffinity) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                let _ = os::kill_me_with_parent();
                if let Some(cpus) = &cpus {
                    os::pin_current_thread(cpus)?;
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| StartError::Spawn {
            target: spec.name.clone(),
            program: argv[0].clone(),
            source: e,
        })?;
        // The command holds the pipe's write ends: only the target's processes may, or its
        // log would never see the end.
        drop(cmd);
        let pgid = child.id() as i32;
        register(pgid);
        tell_keeper(child.id());
        self.running.push(Running {
            name: spec.name.clone(),
            child,
            pgid,
            log: log.clone(),
            grace: spec.stop_grace,
            exit: None,
            dropped,
            log_done,
        });
        let deadline = Instant::now() + spec.ready_timeout;
        loop {
            if let Some(exit) = self.exited() {
                return Err(StartError::Exited(exit));
            }
            let last = match probe_ready(&spec.ready, &mut lookup) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(StartError::NotReady {
                    target: spec.name.clone(),
                    timeout: spec.ready_timeout,
                    probe: last,
                    log_tail: log_tail(&log, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Process ids of the group leaders (for probes).
    pub fn pids(&self) -> Vec<u32> {
        self.running
            .iter()
            .filter(|r| r.exit.is_none())
            .map(|r| r.child.id())
            .collect()
    }

    /// The first target found to have exited, if any.
    pub fn exited(&mut self) -> Option<TargetExit> {
        for r in &mut self.running {
            if r.exit.is_none() {
                if let Ok(Some(st)) = r.child.try_wait() {
                    r.exit = Some(st);
                    // Its last words may still be in the pipe: let the log thread catch up
                    // (unless a descendant keeps the pipe open).
                    let deadline = Instant::now() + Duration::from_millis(500);
                    while !r.log_done.load(Ordering::Acquire) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    return Some(TargetExit {
                        target: r.name.clone(),
                        status: describe_status(st),
                        code: st.code(),
                        log_tail: log_tail(&r.log, 20),
                    });
                }
            }
        }
        None
    }

    /// Targets whose output went past [`LOG_CAP`], with the bytes dropped so far.
    pub fn capped_logs(&self) -> Vec<(String, u64)> {
        self.running
            .iter()
            .map(|r| (r.name.clone(), r.dropped.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Stops every target, last started first: SIGTERM to its group, up to its grace for
    /// the group to empty, then SIGKILL to the group; descendants are reaped.
    ///
    /// Descendants that left the group (`setsid`, `setpgid`) are found by their parent
    /// links, before the SIGTERM and again before the SIGKILL, and killed one by one; so
    /// are those whose parent died (a daemon's double fork), which loadlab adopted as the
    /// subreaper: every child of this process that is not a target's leader or the keeper
    /// (a program using this library must start no other children while targets run).
    pub fn stop(&mut self) {
        while let Some(mut r) = self.running.pop() {
            let root = r.child.id();
            let mut tree = procfs::descendants(root);
            tree.extend(adopted());
            let _ = os::signal_group(r.pgid, GroupSignal::Term);
            let deadline = Instant::now() + r.grace;
            while Instant::now() < deadline && group_alive(r.pgid, &mut r.child) {
                std::thread::sleep(Duration::from_millis(20));
            }
            tree.extend(procfs::descendants(root));
            tree.extend(adopted());
            let _ = os::signal_group(r.pgid, GroupSignal::Kill);
            let _ = r.child.wait();
            // Members orphaned by the leader's death are reparented to loadlab: reap them
            // until the group is empty.
            let deadline = Instant::now() + Duration::from_secs(5);
            while group_alive(r.pgid, &mut r.child) && Instant::now() < deadline {
                let _ = os::signal_group(r.pgid, GroupSignal::Kill);
                std::thread::sleep(Duration::from_millis(10));
            }
            kill_tree(&tree, deadline);
            unregister(r.pgid);
        }
    }
}

impl Drop for TargetSet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The processes loadlab adopted as the subreaper of its targets (a descendant whose parent
/// died, typically a daemon that double-forked out of its target's group) and their trees.
/// Every child of loadlab is a target leader or the keeper; any other was a target's.
fn adopted() -> Vec<(u32, u64)> {
    let mut known: Vec<u32> = GROUPS
        .lock()
        .map(|g| g.iter().map(|&p| p as u32).collect())
        .unwrap_or_default();
    known.push(KEEPER_PID.load(Ordering::Relaxed));
    procfs::adopted(std::process::id(), &known)
}

/// SIGKILLs every process of `tree` (pid, start time) still running, until none is or
/// `deadline` passes, and reaps those that were reparented to loadlab.
fn kill_tree(tree: &[(u32, u64)], deadline: Instant) {
    loop {
        let alive: Vec<&(u32, u64)> = tree
            .iter()
            .filter(|(pid, start)| procfs::start_time(*pid) == Some(*start))
            .collect();
        for &&(pid, start) in &alive {
            os::kill_process(pid, start);
        }
        if alive.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for &(pid, start) in tree {
        // Reaps the zombies among them (the kill is skipped: they are not running).
        os::kill_process(pid, start);
    }
}

/// The keeper (`loadlab __keeper`): a process of its own that outlives loadlab. loadlab
/// tells it each target's pid on a pipe; it follows their process trees (every
/// [`KEEPER_SCAN`]) and, when the pipe closes because loadlab died (even by SIGKILL),
/// kills every process it saw in them that still runs. Parent-death signals alone cannot
/// do this: they are not inherited by a target's own children.
static KEEPER: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);
/// The keeper's pid (0 when there is none): a child of loadlab that is not a target's.
static KEEPER_PID: AtomicU32 = AtomicU32::new(0);

/// The hidden argument that makes the loadlab binary run [`keeper_main`].
pub const KEEPER_ARG: &str = "__keeper";

/// How often the keeper follows the targets' process trees: a grandchild that escapes
/// less than this before loadlab dies may be missed.
pub const KEEPER_SCAN: Duration = Duration::from_millis(250);

/// Starts the keeper from `program` (the loadlab binary). Best effort: without it, targets
/// still die with loadlab (parent-death signal), their escaped descendants may not.
pub fn start_keeper(program: &Path) -> std::io::Result<()> {
    let mut child = Command::new(program)
        .arg(KEEPER_ARG)
        .arg(std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()?;
    KEEPER_PID.store(child.id(), Ordering::Relaxed);
    if let Ok(mut k) = KEEPER.lock() {
        *k = child.stdin.take();
    }
    Ok(())
}

fn tell_keeper(pid: u32) {
    if let Ok(mut k) = KEEPER.lock() {
        if let Some(pipe) = k.as_mut() {
            let _ = writeln!(pipe, "{pid}");
        }
    }
}

/// The keeper's loop: reads target pids from stdin until it closes, then kills what is
/// left of their trees, and of the processes loadlab adopted from them (loadlab's pid is
/// the argument after [`KEEPER_ARG`]). Returns the number of processes it killed.
pub fn keeper_main() -> usize {
    // loadlab, if it is still our parent: its other children are targets' adopted orphans
    // (a pid that is not our parent any more could be anyone's).
    let loadlab = std::env::args()
        .nth(2)
        .and_then(|a| a.parse::<u32>().ok())
        .filter(|&p| p == std::os::unix::process::parent_id());
    let me = std::process::id();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        while stdin.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Ok(pid) = line.trim().parse() {
                let _ = tx.send(pid);
            }
            line.clear();
        }
    });
    let mut roots: Vec<(u32, u64)> = Vec::new();
    let mut seen: BTreeMap<u32, u64> = BTreeMap::new();
    let follow = |roots: &mut Vec<(u32, u64)>, seen: &mut BTreeMap<u32, u64>| {
        roots.retain(|(pid, start)| procfs::start_time(*pid) == Some(*start));
        for &(root, _) in roots.iter() {
            seen.extend(procfs::descendants(root));
        }
        if let Some(loadlab) = loadlab {
            let known: Vec<u32> = roots.iter().map(|r| r.0).chain([me]).collect();
            seen.extend(procfs::adopted(loadlab, &known));
        }
        seen.retain(|pid, start| procfs::start_time(*pid) == Some(*start));
    };
    loop {
        match rx.recv_timeout(KEEPER_SCAN) {
            Ok(pid) => {
                if let Some(start) = procfs::start_time(pid) {
                    roots.push((pid, start));
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !roots.is_empty() {
            follow(&mut roots, &mut seen);
        }
    }
    // loadlab is gone: its targets die by their parent-death signal; their trees do here.
    follow(&mut roots, &mut seen);
    let killed = seen.len();
    let tree: Vec<(u32, u64)> = seen.into_iter().collect();
    kill_tree(&tree, Instant::now() + Duration::from_secs(5));
    killed
}

/// Whether any process of the group is still running (zombies are reaped on the way).
fn group_alive(pgid: i32, leader: &mut Child) -> bool {
    let _ = leader.try_wait();
    // Members reparented to loadlab (the subreaper) are reaped here.
    os::reap_group(pgid);
    os::group_exists(pgid)
}

/// `cpus` if loadlab may run on all of them (plans stay portable: on a smaller machine, or
/// outside the CPUs `taskset` or a cpuset gave loadlab, the pinning is skipped with a
/// warning); `None` for an empty list.
pub fn usable_cpus(cpus: &[usize]) -> Option<Vec<usize>> {
    if cpus.is_empty() {
        return None;
    }
    let allowed = procfs::cpu_list_allowed(std::process::id())
        .unwrap_or_else(|| (0..loadlab_engine::config::available_cores()).collect());
    let out = out_of_reach(cpus, &allowed);
    if out.is_empty() {
        return Some(cpus.to_vec());
    }
    let list = |l: &[usize]| l.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    eprintln!(
        "loadlab: warning: loadlab may run on CPU{} {} here (its affinity), so the plan's CPU{} {} \
         {} out of reach: not pinning (generator and server share the CPUs)",
        if allowed.len() == 1 { "" } else { "s" },
        list(&allowed),
        if out.len() == 1 { "" } else { "s" },
        list(&out),
        if out.len() == 1 { "is" } else { "are" },
    );
    None
}

/// The CPUs of `cpus` that are not among `allowed` (the process's affinity mask): a CPU in
/// the mask is always within reach, whatever its number or the mask's size.
fn out_of_reach(cpus: &[usize], allowed: &[usize]) -> Vec<usize> {
    cpus.iter()
        .copied()
        .filter(|c| !allowed.contains(c))
        .collect()
}

/// A free TCP port on 127.0.0.1 (bound and released: a small race with other programs).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_in_the_affinity_mask_is_within_reach() {
        // `taskset -c 1 loadlab knee --cpus 1`: one CPU allowed, and it is CPU 1.
        assert!(out_of_reach(&[1], &[1]).is_empty());
        assert!(out_of_reach(&[2, 3], &[2, 3]).is_empty());
        assert!(out_of_reach(&[3], &[0, 1, 2, 3]).is_empty());
        // Outside the mask, whatever the mask's size.
        assert_eq!(out_of_reach(&[0, 1], &[1]), [0]);
        assert_eq!(out_of_reach(&[4], &[0, 1, 2, 3]), [4]);
        assert_eq!(out_of_reach(&[1, 5, 9], &[0, 2, 4, 6, 8, 10]), [1, 5, 9]);
        // This process may run on the CPUs of its own mask.
        let mine = procfs::cpu_list_allowed(std::process::id()).expect("this process's affinity");
        assert_eq!(usable_cpus(&mine), Some(mine.clone()));
        assert_eq!(
            usable_cpus(&mine[mine.len() - 1..]),
            Some(vec![mine[mine.len() - 1]])
        );
        assert_eq!(usable_cpus(&[]), None);
    }
}
