//! Real cgroups of this machine: a v1 cpu cgroup with a quota throttling a busy loop, a v2
//! cgroup, and a faux container in both, found by an ID prefix and by its name. Needs root
//! and the hierarchies (found in mountinfo): ignored by a plain `cargo test`, run by
//! `./test.sh` (`--include-ignored`), where a test without root fails, and one whose
//! hierarchy this machine does not mount (no v1 cpu controller on a cgroup2-only machine)
//! is listed as skipped in the file `LOADLAB_SKIPPED` names, never passed silently.
//!
//! The tests share the cgroup trees, so each holds [`LOCK`]; every directory they create
//! has a unique name (pid + counter) and is removed by a guard, processes moved back to the
//! hierarchy's root first, even when an assertion fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use loadlab_system::cgroup::{locate_container, Cgroup, CgroupFs, CgroupVersion, ContainerState};
use loadlab_system::probe::{ProbeKind, Prober};

static LOCK: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `loadlab-test-PID-N`: unique to this test process and call.
fn unique() -> String {
    format!(
        "loadlab-test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The mounts: the test fails without root or without any cgroup mount.
fn mounts(needs: &str) -> CgroupFs {
    assert!(
        is_root(),
        "{needs} needs root: run ./test.sh (or `cargo test -- --ignored`) as root"
    );
    CgroupFs::discover().unwrap_or_else(|e| panic!("{needs}: {e}"))
}

/// A check this machine cannot run (a hierarchy it does not mount): appended to the file
/// `LOADLAB_SKIPPED` names (./test.sh lists them in its tally), or a failure without it.
fn skipped(reason: &str) {
    let Some(path) = std::env::var_os("LOADLAB_SKIPPED") else {
        panic!("{reason}\nSet LOADLAB_SKIPPED=FILE (as ./test.sh does) to count this as skipped.");
    };
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("the LOADLAB_SKIPPED file");
    writeln!(log, "crates/system cgroup: {reason}").expect("writing the skip log");
    eprintln!("SKIPPED: {reason}");
}

/// Kills and reaps a child's process group when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // SAFETY: kill with a negative pid signals the process group we created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A busy loop in a process group of its own; bash's `$SECONDS` ends it after 20 s even
/// if this test process is killed before its guard runs.
fn spinner() -> Reaped {
    use std::os::unix::process::CommandExt;
    Reaped(
        Command::new("bash")
            .args(["-c", "while [ $SECONDS -lt 20 ]; do :; done"])
            .process_group(0)
            .spawn()
            .expect("spawn bash"),
    )
}

fn sleeper() -> Reaped {
    use std::os::unix::process::CommandExt;
    Reaped(
        Command::new("sleep")
            .arg("20")
            .process_group(0)
            .spawn()
            .expect("spawn sleep"),
    )
}

/// Cgroup directories created by a test, removed when dropped (deepest first): their
/// processes are moved back to the hierarchy's root, then the directory is removed.
#[derive(Default)]
struct Created(Vec<(PathBuf, PathBuf)>);

impl Created {
    /// Creates `dir` (in the hierarchy mounted at `mount`) and registers it.
    fn mkdir(&mut self, mount: &Path, dir: PathBuf) -> PathBuf {
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        self.0.push((mount.to_path_buf(), dir.clone()));
        dir
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        for (mount, dir) in self.0.iter().rev() {
            let end = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                    for pid in procs.lines() {
                        let _ = std::fs::write(mount.join("cgroup.procs"), pid);
                    }
                }
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if Instant::now() > end => {
                        eprintln!("could not remove {}: {e}", dir.display());
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
    }
}

fn move_into(dir: &Path, pid: u32) {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
}

#[test]
#[ignore = "needs root and the machine's cgroups (./test.sh)"]
fn v1_cpu_quota_throttles_a_busy_loop() {
    let _l = lock();
    let fs = mounts("a v1 cpu cgroup");
    let Some(cpu) = fs.v1.get("cpu").cloned() else {
        return skipped("v1_cpu_quota_throttles_a_busy_loop: no v1 cpu hierarchy in mountinfo");
    };
    let name = unique();
    let mut created = Created::default();
    let dir = created.mkdir(&cpu, cpu.join(&name));
    std::fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
    std::fs::write(dir.join("cpu.cfs_quota_us"), "25000").unwrap();
    // CPU use is counted by cpuacct: mounted with cpu, or a hierarchy of its own.
    let acct = fs
        .v1
        .get("cpuacct")
        .filter(|m| **m != cpu)
        .cloned()
        .map(|m| (m.clone(), created.mkdir(&m, m.join(&name))));

    let child = spinner();
    let pid = child.0.id();
    move_into(&dir, pid);
    if let Some((_, d)) = &acct {
        move_into(d, pid);
    }

    let cg = Cgroup::of_pid(pid).unwrap();
    assert!(cg.dirs().contains(&dir), "{:?}", cg.dirs());
    assert!(cg.procs().contains(&pid), "{:?}", cg.procs());
    assert!(cg.contains(pid));
    assert!(!cg.contains(std::process::id()));

    let quota = cg.limits().cpu.expect("a quota");
    assert_eq!(
        (
            quota.cpus,
            quota.period_us,
            quota.version,
            quota.path.as_str()
        ),
        (
            0.25,
            100_000,
            CgroupVersion::V1,
            format!("/{name}").as_str()
        )
    );

    // Let the loop reach the quota, then measure one second.
    std::thread::sleep(Duration::from_millis(200));
    let (t0, s0) = (Instant::now(), cg.sample());
    std::thread::sleep(Duration::from_secs(1));
    let (t1, s1) = (Instant::now(), cg.sample());
    let wall = (t1 - t0).as_secs_f64();
    let used = (s1.cpu_usage_s.unwrap() - s0.cpu_usage_s.unwrap()) / wall;
    assert!((0.15..=0.35).contains(&used), "{used} CPUs\n{s0:?}\n{s1:?}");
    let periods = s1.nr_periods.unwrap() - s0.nr_periods.unwrap();
    let throttled = s1.nr_throttled.unwrap() - s0.nr_throttled.unwrap();
    assert!(
        periods > 0 && throttled * 2 > periods,
        "{throttled} of {periods} periods throttled"
    );
    assert!(s1.throttled_s.unwrap() > s0.throttled_s.unwrap());
    eprintln!(
        "{used:.3} CPUs, {throttled} of {periods} periods throttled, {:.3} s throttled in {wall:.3} s",
        s1.throttled_s.unwrap() - s0.throttled_s.unwrap()
    );

    // The probe judges it against its quota, and says it is not loadlab's cgroup.
    let report = Prober::start(vec![pid], Duration::from_secs(3600)).stop();
    let limits = report.limits.unwrap();
    assert_eq!(limits.cpus, 0.25);
    assert_eq!(
        limits.cpus_from,
        format!("cgroup v1 quota of 0.25 CPUs at /{name}")
    );
    let source = report.source.unwrap();
    assert_eq!((source.kind, source.pid), (ProbeKind::Pid, Some(pid)));
    assert!(!source.shares_cgroup_with_loadlab, "{source:?}");
    assert!(source.cgroup.unwrap().contains(&name));
    assert_eq!(report.cgroup_limits.unwrap().cpu.unwrap().cpus, 0.25);
    assert!(report.samples.iter().all(|s| s.cgroup.is_some()));
    let d = report.delta.cgroup.unwrap();
    assert_eq!(d.cpu_quota_cpus, Some(0.25));
    drop(child);
}

#[test]
#[ignore = "needs root and the machine's cgroups (./test.sh)"]
fn v2_cgroup_of_a_process_and_its_pressure() {
    let _l = lock();
    let fs = mounts("a v2 cgroup");
    let Some(v2) = fs.v2.clone() else {
        return skipped("v2_cgroup_of_a_process_and_its_pressure: no cgroup2 mount in mountinfo");
    };
    let name = unique();
    let mut created = Created::default();
    let dir = created.mkdir(&v2, v2.join(&name));
    let child = sleeper();
    let pid = child.0.id();
    move_into(&dir, pid);

    let cg = Cgroup::of_pid(pid).unwrap();
    assert!(cg.dirs().contains(&dir), "{:?}", cg.dirs());
    assert_eq!(cg.procs(), vec![pid]);
    assert!(cg.contains(pid) && !cg.contains(std::process::id()));
    // By its cgroup path and by its directory: the v2 directory alone.
    let by_path = Cgroup::for_path(&format!("/{name}")).unwrap();
    assert_eq!(by_path.dirs(), vec![dir.clone()]);
    assert_eq!(by_path.path(), format!("/{name}"));
    assert_eq!(by_path.versions(), "v2");
    assert_eq!(by_path.procs(), vec![pid]);
    let by_dir = Cgroup::for_path(dir.to_str().unwrap()).unwrap();
    assert_eq!(by_dir, by_path);

    let s = by_path.sample();
    assert!(s.cpu_usage_s.is_some(), "{s:?}");
    for (resource, some) in [
        ("cpu", s.psi_cpu_some_us),
        ("memory", s.psi_memory_some_us),
        ("io", s.psi_io_some_us),
    ] {
        if dir.join(format!("{resource}.pressure")).exists() {
            assert!(some.is_some(), "{resource}: {s:?}");
        }
    }
    let e = Cgroup::for_path(&format!("/{name}-not-there"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{name}-not-there")) && e.contains(&name),
        "{e}"
    );

    // A cgroup source lists its processes each sample.
    let src = loadlab_system::probe::CgroupSource::for_path(&format!("/{name}")).unwrap();
    let report = Prober::start_source(Box::new(src), Duration::from_secs(3600)).stop();
    let info = report.source.unwrap();
    assert_eq!((info.kind, info.pid), (ProbeKind::Cgroup, Some(pid)));
    assert_eq!(info.cgroup_version.as_deref(), Some("v2"));
    assert!(report
        .samples
        .iter()
        .all(|s| s.process.as_ref().is_some_and(|p| p.processes == 1)));
    drop(child);
}

#[test]
#[ignore = "needs root and the machine's cgroups (./test.sh)"]
fn a_process_in_loadlabs_own_cgroup_is_flagged() {
    let _l = lock();
    mounts("reading cgroups");
    // A child left where it was started shares every cgroup with this process.
    let child = sleeper();
    let report = Prober::start(vec![child.0.id()], Duration::from_secs(3600)).stop();
    let info = report.source.unwrap();
    assert!(info.shares_cgroup_with_loadlab, "{info:?}");
    assert!(info.found.contains("given by pid"), "{}", info.found);
    assert_eq!(info.comm.as_deref(), Some("sleep"));
}

#[test]
#[ignore = "needs root and the machine's cgroups (./test.sh)"]
fn a_faux_container_found_by_id_prefix_and_by_name() {
    let _l = lock();
    let fs = mounts("a faux container");
    let (Some(v2), Some(cpu)) = (fs.v2.clone(), fs.v1.get("cpu").cloned()) else {
        return skipped(
            "a_faux_container_found_by_id_prefix_and_by_name: needs a v2 mount and a v1 cpu \
             hierarchy (a hybrid machine)",
        );
    };
    // 64 hex characters whose first 12 are this test's own.
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let id = format!(
        "e5{:08x}{:02x}{}",
        std::process::id(),
        n % 256,
        "0123456789abcdef".repeat(4)
    )[..64]
        .to_string();
    let mut created = Created::default();
    let scope = created.mkdir(&v2, v2.join(format!("docker-{id}.scope")));
    let docker = cpu.join("docker");
    if !docker.exists() {
        created.mkdir(&cpu, docker.clone());
    }
    let v1_dir = created.mkdir(&cpu, docker.join(&id));
    let child = sleeper();
    let pid = child.0.id();
    move_into(&scope, pid);
    move_into(&v1_dir, pid);

    // By a 12-character prefix, with the default (absent here) runtime state.
    let cg = Cgroup::for_container(&id[..12]).unwrap();
    let mut dirs = cg.dirs();
    dirs.sort();
    let mut want = vec![scope.clone(), v1_dir.clone()];
    want.sort();
    assert_eq!(dirs, want);
    assert_eq!(cg.procs(), vec![pid]);
    assert!(cg.contains(pid));
    assert_eq!(cg.versions(), "v1+v2");

    // By name, from a docker state root holding its config.v2.json.
    let state_root = std::env::temp_dir().join(unique());
    let config = state_root.join("containers").join(&id);
    std::fs::create_dir_all(&config).unwrap();
    let name = format!("faux-web-{n}");
    let mut f = std::fs::File::create(config.join("config.v2.json")).unwrap();
    write!(
        f,
        r#"{{"State":{{"Running":true,"Pid":{pid}}},"ID":"{id}","Name":"/{name}","Driver":"overlay2"}}"#
    )
    .unwrap();
    drop(f);
    let state = ContainerState {
        docker: state_root.clone(),
        podman: state_root.join("no-podman"),
    };
    let found = locate_container(&fs, &state, &name);
    let _ = std::fs::remove_dir_all(&state_root);
    let found = found.unwrap();
    assert_eq!(found.id, id);
    assert_eq!(found.cgroup, cg);
    assert!(
        found
            .found
            .starts_with(&format!("container {name} (id {}), named in ", &id[..12])),
        "{}",
        found.found
    );
    drop(child);
}
