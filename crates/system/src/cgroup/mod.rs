//! The control groups of a process, read and parsed here and nowhere else: where the
//! hierarchies are mounted (`/proc/self/mountinfo`), which cgroup a process is in
//! (`/proc/PID/cgroup`), what a cgroup may use ([`CgroupLimits`]) and what it used
//! ([`CgroupSample`]), in cgroup v2 (the files in `v2.rs`) and v1 (`v1.rs`) alike.
//!
//! # Hierarchies
//! A machine has one v2 hierarchy (`cgroup2`), v1 hierarchies (`cgroup`, one per group of
//! controllers), or both (hybrid: v1 controllers and a v2 tree without controllers, which
//! still counts CPU use and pressure). Their mount points are read from mountinfo, never
//! assumed ([`CgroupFs`]).
//!
//! A [`Cgroup`] names one directory in each hierarchy it was resolved in (a process is in
//! one cgroup per hierarchy). Hierarchies where it is the root (`/`) are left out of its
//! figures and its processes unless it is the root everywhere: the root's figures are the
//! whole machine's, not the group's. When a figure is kept by several hierarchies (CPU use
//! in v2's `cpu.stat` and v1's `cpuacct.usage`), the deepest directory gives it, v2 on a
//! tie.
//!
//! Containers are found by their ID in the cgroup tree, without any daemon ([`container`]).

pub mod container;
mod v1;
mod v2;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use container::{locate_container, ContainerCgroup, ContainerState};

/// The cgroup version a figure came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CgroupVersion {
    /// cgroup v1: one hierarchy per group of controllers.
    #[serde(rename = "v1")]
    V1,
    /// cgroup v2: the unified hierarchy.
    #[serde(rename = "v2")]
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        })
    }
}

/// Why a cgroup could not be found or read.
#[derive(Debug, Error)]
pub enum CgroupError {
    /// mountinfo lists no `cgroup` or `cgroup2` file system.
    #[error("no cgroup file system is mounted (no cgroup or cgroup2 line in {0})")]
    NoMounts(PathBuf),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// `/proc/PID/cgroup` names no hierarchy that is mounted here.
    #[error("process {pid} is in no mounted cgroup hierarchy ({cgroups})")]
    NotInMountedHierarchy {
        /// The process.
        pid: u32,
        /// Its `/proc/PID/cgroup`, lines joined by `; `.
        cgroups: String,
    },
    /// A path the user gave names no cgroup directory.
    #[error(
        "no cgroup {path}: no directory {}{}",
        join_paths(.searched, " nor "),
        nearest_listing(.nearest.as_ref(), .children)
    )]
    PathNotFound {
        /// The path as given.
        path: String,
        /// The directories looked for.
        searched: Vec<PathBuf>,
        /// The deepest existing ancestor of the first directory looked for.
        nearest: Option<PathBuf>,
        /// The cgroups in `nearest` (at most 20 names).
        children: Vec<String>,
    },
    /// A path with `..`, or empty.
    #[error("{0:?} is not a cgroup path (give /a/b or a directory under a cgroup mount)")]
    BadPath(String),
    /// A container name or ID that names no running container's cgroup.
    #[error("{0}")]
    Container(String),
}

fn join_paths(paths: &[PathBuf], sep: &str) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

fn nearest_listing(nearest: Option<&PathBuf>, children: &[String]) -> String {
    match nearest {
        Some(n) if children.is_empty() => format!("; {} holds no cgroup", n.display()),
        Some(n) => format!("; {} holds {}", n.display(), children.join(", ")),
        None => String::new(),
    }
}

/// The v1 controllers (and named hierarchies, `name=systemd`) told apart from the other
/// super options of a `cgroup` mount (`rw`, `xattr`, `release_agent=...`).
const V1_CONTROLLERS: [&str; 15] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
    "debug",
];

/// Where the cgroup hierarchies are mounted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupFs {
    /// The v2 hierarchy (`/sys/fs/cgroup` on a pure v2 machine, `/sys/fs/cgroup/unified`
    /// on a hybrid one).
    pub v2: Option<PathBuf>,
    /// Each v1 controller (`cpu`, `memory`, `name=systemd`) → its hierarchy's mount point.
    /// Controllers mounted together (`cpu,cpuacct`) share one.
    pub v1: BTreeMap<String, PathBuf>,
}

/// One hierarchy: its version, its v1 controllers (empty for v2), its mount point.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hierarchy {
    version: CgroupVersion,
    controllers: Vec<String>,
    mount: PathBuf,
}

impl CgroupFs {
    /// Reads the mounts of this mount namespace from `/proc/self/mountinfo`. Errs when it
    /// cannot be read or lists no cgroup file system.
    pub fn discover() -> Result<CgroupFs, CgroupError> {
        let path = PathBuf::from("/proc/self/mountinfo");
        let text = std::fs::read_to_string(&path).map_err(|source| CgroupError::Read {
            path: path.clone(),
            source,
        })?;
        let fs = CgroupFs::from_mountinfo(&text);
        if fs.is_empty() {
            return Err(CgroupError::NoMounts(path));
        }
        Ok(fs)
    }

    /// The cgroup mounts of a mountinfo text: the first `cgroup2` mount, and the first
    /// mount of each v1 controller (the `cgroup` mounts' super options name them).
    pub fn from_mountinfo(text: &str) -> CgroupFs {
        let mut fs = CgroupFs::default();
        for line in text.lines() {
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let Some(mount) = before.split_whitespace().nth(4) else {
                continue;
            };
            let mut after = after.split_whitespace();
            let (Some(fstype), Some(_source), Some(opts)) =
                (after.next(), after.next(), after.next())
            else {
                continue;
            };
            let mount = PathBuf::from(unescape_mount(mount));
            match fstype {
                "cgroup2" => {
                    fs.v2.get_or_insert(mount);
                }
                "cgroup" => {
                    for opt in opts.split(',') {
                        if V1_CONTROLLERS.contains(&opt) || opt.starts_with("name=") {
                            fs.v1
                                .entry(opt.to_string())
                                .or_insert_with(|| mount.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        fs
    }

    /// Whether no hierarchy is known.
    pub fn is_empty(&self) -> bool {
        self.v2.is_none() && self.v1.is_empty()
    }

    /// Every hierarchy: v2 first, then each v1 mount once with all its controllers.
    fn hierarchies(&self) -> Vec<Hierarchy> {
        let mut out: Vec<Hierarchy> = self
            .v2
            .iter()
            .map(|m| Hierarchy {
                version: CgroupVersion::V2,
                controllers: Vec::new(),
                mount: m.clone(),
            })
            .collect();
        let mut by_mount: BTreeMap<&PathBuf, Vec<String>> = BTreeMap::new();
        for (c, m) in &self.v1 {
            by_mount.entry(m).or_default().push(c.clone());
        }
        out.extend(by_mount.into_iter().map(|(m, controllers)| Hierarchy {
            version: CgroupVersion::V1,
            controllers,
            mount: m.clone(),
        }));
        out
    }

    /// The hierarchy of a v1 controller.
    fn v1_hierarchy(&self, controller: &str) -> Option<Hierarchy> {
        let mount = self.v1.get(controller)?;
        self.hierarchies()
            .into_iter()
            .find(|h| h.version == CgroupVersion::V1 && &h.mount == mount)
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        let value = octal.map(|d| d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0')));
        if let (b'\\', Some(v @ 0..=255)) = (b[i], value) {
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/PID/cgroup`: `0::/path` (v2) or `N:ctrl1,ctrl2:/path` (v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcCgroup {
    /// The hierarchy ID (0 for v2).
    pub id: u32,
    /// The v1 controllers (empty for v2).
    pub controllers: Vec<String>,
    /// The cgroup path, from the hierarchy's root.
    pub path: String,
}

/// Parses `/proc/PID/cgroup`. A cgroup removed while the process is in it shows as
/// `/path (deleted)`; the suffix is dropped.
pub(crate) fn parse_proc_cgroup(text: &str) -> Vec<ProcCgroup> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let id = it.next()?.parse().ok()?;
            let controllers = it
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = it.next()?;
            let path = path.strip_suffix(" (deleted)").unwrap_or(path);
            Some(ProcCgroup {
                id,
                controllers,
                path: normalize(path)?,
            })
        })
        .collect()
}

/// A cgroup path as `/a/b` (`/` for the root); `None` with a `..` component.
fn normalize(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// `/a/b/c` → `/a/b/c`, `/a/b`, `/a`, `/`.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = vec![path.to_string()];
    let mut p = path;
    while let Some((parent, _)) = p.rsplit_once('/') {
        let parent = if parent.is_empty() { "/" } else { parent };
        if parent == p {
            break;
        }
        out.push(parent.to_string());
        p = parent;
    }
    out
}

/// Whether cgroup path `p` is `base` or under it.
fn at_or_under(p: &str, base: &str) -> bool {
    base == "/" || p == base || p.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
}

/// The directory of cgroup path `path` in the hierarchy mounted at `mount`.
fn dir_of(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim_start_matches('/'))
}

/// Reads a small file; `None` when it cannot be read.
pub(crate) fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A file holding one unsigned number.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A file holding a limit or `max` (no limit); `None` for `max` or an unreadable text.
pub(crate) fn parse_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A flat-keyed file (`key value` lines: `cpu.stat`, `memory.events`, `pids.events`,
/// `memory.oom_control`). Lines whose value is not an unsigned number are left out.
pub(crate) fn parse_keyed(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

/// `pids.current` and the `max` of `pids.events`: the same files in v1 and v2.
pub(crate) fn read_pids(dir: &Path) -> (Option<u64>, Option<u64>) {
    let current = read(&dir.join("pids.current")).and_then(|t| parse_u64(&t));
    let max_events =
        read(&dir.join("pids.events")).and_then(|t| parse_keyed(&t).get("max").copied());
    (current, max_events)
}

/// `pids.max`: `None` without the file or without a limit (`max`).
pub(crate) fn read_pids_max(dir: &Path) -> Option<u64> {
    parse_max(&read(&dir.join("pids.max"))?)
}

/// CFS throttling counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Throttling {
    /// Enforcement periods that had runnable tasks.
    pub periods: u64,
    /// Periods in which the quota ran out.
    pub throttled: u64,
    /// Time throttled, seconds.
    pub throttled_s: f64,
}

/// Memory events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemoryEvents {
    /// Times the OOM killer was about to run (v2 `oom`).
    pub oom: Option<u64>,
    /// Processes killed by the OOM killer.
    pub oom_kill: Option<u64>,
    /// Times usage went over the limit (v2 `max`, v1 `memory.failcnt`).
    pub max: Option<u64>,
}

/// Pressure totals of one resource, microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pressure {
    /// Time at least one task was stalled on the resource.
    pub some_us: u64,
    /// Time all non-idle tasks were stalled at once.
    pub full_us: Option<u64>,
}

/// A CPU quota and where it was set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CpuQuota {
    /// CPUs the quota allows: quota / period (0.25 = a quarter of one CPU).
    pub cpus: f64,
    /// The quota, microseconds of CPU per period.
    pub quota_us: u64,
    /// The enforcement period, microseconds.
    pub period_us: u64,
    /// The version of the file it was read from (`cpu.max` or `cpu.cfs_quota_us`).
    pub version: CgroupVersion,
    /// The cgroup it is set on: the target's own, or an ancestor's.
    pub path: String,
}

/// A limit (bytes or processes) and where it was set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CgroupLimit {
    /// The limit.
    pub value: u64,
    /// The version of the file it was read from.
    pub version: CgroupVersion,
    /// The cgroup it is set on: the target's own, or an ancestor's.
    pub path: String,
}

/// What a cgroup may use: the smallest limit on the way from it up to the root, in
/// whichever hierarchy sets it. `None` where nothing limits it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CgroupLimits {
    /// The CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuQuota>,
    /// The memory limit, bytes (v2 `memory.max`, v1 `memory.limit_in_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<CgroupLimit>,
    /// The process (task) limit (`pids.max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<CgroupLimit>,
}

/// What a cgroup used, cumulative since it was created (except the `current` figures).
/// Each figure is `None` when its file is missing (its controller is not enabled, or the
/// version has no such file).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CgroupSample {
    /// CPU seconds used by the cgroup and its descendants (v2 `cpu.stat` `usage_usec`, v1
    /// `cpuacct.usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usage_s: Option<f64>,
    /// CFS enforcement periods that had runnable tasks (`cpu.stat` `nr_periods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_periods: Option<u64>,
    /// Periods in which the quota ran out and its tasks were stopped (`nr_throttled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_throttled: Option<u64>,
    /// Seconds its tasks were throttled (v2 `throttled_usec`, v1 `throttled_time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_s: Option<f64>,
    /// Memory charged now, bytes (v2 `memory.current`, v1 `memory.usage_in_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_current_bytes: Option<u64>,
    /// Times the kernel was about to OOM-kill in the cgroup (v2 `memory.events` `oom`; v1
    /// has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom: Option<u64>,
    /// Processes killed by the OOM killer (v2 `memory.events` `oom_kill`, v1
    /// `memory.oom_control` `oom_kill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kill: Option<u64>,
    /// Times usage hit the memory limit (v2 `memory.events` `max`, v1 `memory.failcnt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_events: Option<u64>,
    /// Processes (tasks) now (`pids.current`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_current: Option<u64>,
    /// Forks refused at the process limit (`pids.events` `max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max_events: Option<u64>,
    /// Microseconds at least one task waited for a CPU (`cpu.pressure` `some total`; v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_cpu_some_us: Option<u64>,
    /// Microseconds all tasks waited for a CPU at once (`cpu.pressure` `full total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_cpu_full_us: Option<u64>,
    /// Microseconds at least one task stalled on memory (reclaim, swap-in, refaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_some_us: Option<u64>,
    /// Microseconds all tasks stalled on memory at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_full_us: Option<u64>,
    /// Microseconds at least one task waited for I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io_some_us: Option<u64>,
    /// Microseconds all tasks waited for I/O at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_io_full_us: Option<u64>,
}

/// The directory of a cgroup in one hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    version: CgroupVersion,
    /// The hierarchy's v1 controllers (empty for v2).
    controllers: Vec<String>,
    mount: PathBuf,
    /// The cgroup path from the hierarchy's root (`/` or `/a/b`).
    path: String,
}

impl Member {
    fn new(h: Hierarchy, path: String) -> Member {
        Member {
            version: h.version,
            controllers: h.controllers,
            mount: h.mount,
            path,
        }
    }

    fn dir(&self) -> PathBuf {
        dir_of(&self.mount, &self.path)
    }

    fn depth(&self) -> usize {
        self.path.split('/').filter(|c| !c.is_empty()).count()
    }

    fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }

    fn is_root(&self) -> bool {
        self.path == "/"
    }

    /// `v2 /a` or `v1 cpu,cpuacct /a`.
    fn label(&self) -> String {
        match self.version {
            CgroupVersion::V2 => format!("v2 {}", self.path),
            CgroupVersion::V1 => format!("v1 {} {}", self.controllers.join(","), self.path),
        }
    }

    /// The line of a process's `/proc/PID/cgroup` for this hierarchy.
    fn find<'a>(&self, lines: &'a [ProcCgroup]) -> Option<&'a ProcCgroup> {
        lines.iter().find(|l| match self.version {
            CgroupVersion::V2 => l.id == 0 && l.controllers.is_empty(),
            CgroupVersion::V1 => l.controllers.iter().any(|c| self.has(c)),
        })
    }
}

/// A cgroup: its directory in each hierarchy it was resolved in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// v2 first, then v1 hierarchies; one per hierarchy.
    members: Vec<Member>,
}

impl Cgroup {
    /// The cgroup of process `pid` (`/proc/PID/cgroup`), in every mounted hierarchy.
    pub fn of_pid(pid: u32) -> Result<Cgroup, CgroupError> {
        Cgroup::of_pid_in(&CgroupFs::discover()?, pid)
    }

    /// The cgroup of process `pid` in the hierarchies of `fs`.
    pub fn of_pid_in(fs: &CgroupFs, pid: u32) -> Result<Cgroup, CgroupError> {
        let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
        let text =
            std::fs::read_to_string(&path).map_err(|source| CgroupError::Read { path, source })?;
        Cgroup::from_proc_cgroup(fs, &text).ok_or_else(|| CgroupError::NotInMountedHierarchy {
            pid,
            cgroups: text.trim().lines().collect::<Vec<_>>().join("; "),
        })
    }

    /// The cgroup named by a `/proc/PID/cgroup` text in the hierarchies of `fs`; `None`
    /// when it names none of them.
    pub fn from_proc_cgroup(fs: &CgroupFs, text: &str) -> Option<Cgroup> {
        let mut members: Vec<Member> = Vec::new();
        for line in parse_proc_cgroup(text) {
            let h = if line.id == 0 && line.controllers.is_empty() {
                fs.v2.as_ref().map(|m| Hierarchy {
                    version: CgroupVersion::V2,
                    controllers: Vec::new(),
                    mount: m.clone(),
                })
            } else {
                line.controllers.iter().find_map(|c| fs.v1_hierarchy(c))
            };
            if let Some(h) = h {
                if !members.iter().any(|m| m.mount == h.mount) {
                    members.push(Member::new(h, line.path));
                }
            }
        }
        Cgroup::from_members(members)
    }

    /// The cgroup a user named: a directory under a cgroup mount
    /// (`/sys/fs/cgroup/cpu/docker/ID`: that hierarchy only), or a cgroup path
    /// (`/system.slice/x.scope`: every hierarchy that has it).
    pub fn for_path(path: &str) -> Result<Cgroup, CgroupError> {
        Cgroup::for_path_in(&CgroupFs::discover()?, path)
    }

    /// [`Cgroup::for_path`] in the hierarchies of `fs`.
    pub fn for_path_in(fs: &CgroupFs, given: &str) -> Result<Cgroup, CgroupError> {
        let hierarchies = fs.hierarchies();
        let p = Path::new(given);
        let bad = || CgroupError::BadPath(given.to_string());
        if p.components().any(|c| c == Component::ParentDir) || given.trim().is_empty() {
            return Err(bad());
        }
        // A directory under a mount: the hierarchy of the longest mount it is under.
        let under = hierarchies
            .iter()
            .filter(|h| p.is_absolute() && p.starts_with(&h.mount))
            .max_by_key(|h| h.mount.components().count());
        if let Some(h) = under {
            let rel = p.strip_prefix(&h.mount).map_err(|_| bad())?;
            let rel = normalize(&rel.to_string_lossy()).ok_or_else(bad)?;
            let dir = dir_of(&h.mount, &rel);
            if !dir.is_dir() {
                return Err(not_found(given, vec![dir]));
            }
            return Ok(Cgroup {
                members: vec![Member::new(h.clone(), rel)],
            });
        }
        let rel = normalize(given).ok_or_else(bad)?;
        let members: Vec<Member> = hierarchies
            .iter()
            .filter(|h| dir_of(&h.mount, &rel).is_dir())
            .map(|h| Member::new(h.clone(), rel.clone()))
            .collect();
        Cgroup::from_members(members).ok_or_else(|| {
            not_found(
                given,
                hierarchies.iter().map(|h| dir_of(&h.mount, &rel)).collect(),
            )
        })
    }

    /// The cgroup of a running container, by its name or an ID prefix of at least 12 hex
    /// characters, found in this machine's cgroup tree and the runtimes' state under
    /// `/var/lib` (see [`locate_container`]).
    pub fn for_container(name_or_id: &str) -> Result<Cgroup, CgroupError> {
        locate_container(
            &CgroupFs::discover()?,
            &ContainerState::default(),
            name_or_id,
        )
        .map(|c| c.cgroup)
    }

    fn from_members(mut members: Vec<Member>) -> Option<Cgroup> {
        if members.is_empty() {
            return None;
        }
        // v2 first; v1 in a stable order.
        members.sort_by(|a, b| {
            (a.version != CgroupVersion::V2, &a.mount)
                .cmp(&(b.version != CgroupVersion::V2, &b.mount))
        });
        Some(Cgroup { members })
    }

    /// The directories whose figures count: those where it is not the root, or all of them
    /// when it is the root everywhere.
    fn used(&self) -> Vec<&Member> {
        let specific: Vec<&Member> = self.members.iter().filter(|m| !m.is_root()).collect();
        if specific.is_empty() {
            self.members.iter().collect()
        } else {
            specific
        }
    }

    /// Its path: the deepest of its directories' (on a tie, v2's, then the first v1
    /// hierarchy's by mount point), `/` for the root.
    pub fn path(&self) -> &str {
        &self.deepest().path
    }

    fn deepest(&self) -> &Member {
        let used = self.used();
        let mut best = used[0];
        for m in used {
            if m.depth() > best.depth() {
                best = m;
            }
        }
        best
    }

    /// The versions its figures come from: `v2`, `v1` or `v1+v2`.
    pub fn versions(&self) -> String {
        let used = self.used();
        let v1 = used.iter().any(|m| m.version == CgroupVersion::V1);
        let v2 = used.iter().any(|m| m.version == CgroupVersion::V2);
        match (v1, v2) {
            (true, true) => "v1+v2".into(),
            (true, false) => "v1".into(),
            _ => "v2".into(),
        }
    }

    /// Its directories, one per hierarchy it was resolved in (v2 first).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.members.iter().map(Member::dir).collect()
    }

    /// The processes in it and its descendants: those listed in `cgroup.procs` under each
    /// directory whose figures count (in all of them when there are several). Sorted.
    pub fn procs(&self) -> Vec<u32> {
        let mut common: Option<BTreeSet<u32>> = None;
        for m in self.used() {
            let mut set = BTreeSet::new();
            procs_under(&m.dir(), &mut set);
            common = Some(match common {
                None => set,
                Some(c) => c.intersection(&set).copied().collect(),
            });
        }
        common.unwrap_or_default().into_iter().collect()
    }

    /// Whether process `pid` is in it or its descendants, in each hierarchy whose figures
    /// count. `false` when the process is gone.
    pub fn contains(&self, pid: u32) -> bool {
        let Some(text) = read(Path::new(&format!("/proc/{pid}/cgroup"))) else {
            return false;
        };
        self.contains_lines(&parse_proc_cgroup(&text))
    }

    /// [`Cgroup::contains`] for the lines of a `/proc/PID/cgroup`.
    fn contains_lines(&self, lines: &[ProcCgroup]) -> bool {
        self.used()
            .iter()
            .all(|m| m.find(lines).is_some_and(|l| at_or_under(&l.path, &m.path)))
    }

    /// What it may use: the smallest CPU quota, memory limit and process limit set on it or
    /// an ancestor, in any of its hierarchies.
    pub fn limits(&self) -> CgroupLimits {
        let mut out = CgroupLimits::default();
        for m in &self.members {
            for path in ancestors(&m.path) {
                let dir = dir_of(&m.mount, &path);
                let (quota, memory, pids) = match m.version {
                    CgroupVersion::V2 => (
                        v2::cpu_quota(&dir),
                        v2::memory_max(&dir),
                        read_pids_max(&dir),
                    ),
                    CgroupVersion::V1 => (
                        m.has("cpu").then(|| v1::cpu_quota(&dir)).flatten(),
                        m.has("memory").then(|| v1::memory_limit(&dir)).flatten(),
                        m.has("pids").then(|| read_pids_max(&dir)).flatten(),
                    ),
                };
                if let Some((quota_us, period_us)) = quota {
                    let cpus = quota_us as f64 / period_us as f64;
                    if out.cpu.as_ref().is_none_or(|c| cpus < c.cpus) {
                        out.cpu = Some(CpuQuota {
                            cpus,
                            quota_us,
                            period_us,
                            version: m.version,
                            path: path.clone(),
                        });
                    }
                }
                let limit = |value| CgroupLimit {
                    value,
                    version: m.version,
                    path: path.clone(),
                };
                if let Some(v) = memory {
                    if out.memory.as_ref().is_none_or(|l| v < l.value) {
                        out.memory = Some(limit(v));
                    }
                }
                if let Some(v) = pids {
                    if out.pids.as_ref().is_none_or(|l| v < l.value) {
                        out.pids = Some(limit(v));
                    }
                }
            }
        }
        out
    }

    /// Its counters now. Each figure comes from the deepest of its directories that keeps
    /// it (v2 on a tie); `None` when none does.
    pub fn sample(&self) -> CgroupSample {
        let used = self.used();
        let v1_with = |m: &Member, c: &str| m.version == CgroupVersion::V1 && m.has(c);
        let is_v2 = |m: &Member| m.version == CgroupVersion::V2;
        let cpu_usage_s = pick(&used, |m, d| {
            if is_v2(m) {
                v2::cpu_usage_s(d)
            } else if v1_with(m, "cpuacct") {
                v1::cpu_usage_s(d)
            } else {
                None
            }
        });
        let throttling = pick(&used, |m, d| {
            if is_v2(m) {
                v2::throttling(d)
            } else if v1_with(m, "cpu") {
                v1::throttling(d)
            } else {
                None
            }
        });
        let memory_current_bytes = pick(&used, |m, d| {
            if is_v2(m) {
                v2::memory_current(d)
            } else if v1_with(m, "memory") {
                v1::memory_current(d)
            } else {
                None
            }
        });
        let events = pick(&used, |m, d| {
            if is_v2(m) {
                v2::memory_events(d)
            } else if v1_with(m, "memory") {
                v1::memory_events(d)
            } else {
                None
            }
        });
        let pids = pick(&used, |m, d| {
            let (current, max) = if is_v2(m) || v1_with(m, "pids") {
                read_pids(d)
            } else {
                (None, None)
            };
            (current.is_some() || max.is_some()).then_some((current, max))
        });
        let psi = |resource: &str| {
            pick(&used, |m, d| {
                is_v2(m).then(|| v2::pressure(d, resource)).flatten()
            })
        };
        let (cpu, memory, io) = (psi("cpu"), psi("memory"), psi("io"));
        CgroupSample {
            cpu_usage_s,
            nr_periods: throttling.map(|t| t.periods),
            nr_throttled: throttling.map(|t| t.throttled),
            throttled_s: throttling.map(|t| t.throttled_s),
            memory_current_bytes,
            oom: events.and_then(|e| e.oom),
            oom_kill: events.and_then(|e| e.oom_kill),
            memory_max_events: events.and_then(|e| e.max),
            pids_current: pids.and_then(|p| p.0),
            pids_max_events: pids.and_then(|p| p.1),
            psi_cpu_some_us: cpu.map(|p| p.some_us),
            psi_cpu_full_us: cpu.and_then(|p| p.full_us),
            psi_memory_some_us: memory.map(|p| p.some_us),
            psi_memory_full_us: memory.and_then(|p| p.full_us),
            psi_io_some_us: io.map(|p| p.some_us),
            psi_io_full_us: io.and_then(|p| p.full_us),
        }
    }
}

impl fmt::Display for Cgroup {
    /// Its path; when its directories' paths differ, each one with its hierarchy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let used = self.used();
        if used.iter().all(|m| m.path == used[0].path) {
            f.write_str(&used[0].path)
        } else {
            let labels: Vec<String> = used.iter().map(|m| m.label()).collect();
            write!(f, "{} ({})", self.path(), labels.join("; "))
        }
    }
}

/// The value `read` gives for the deepest member that has it (the first on a tie).
fn pick<T>(members: &[&Member], read: impl Fn(&Member, &Path) -> Option<T>) -> Option<T> {
    let mut best: Option<(usize, T)> = None;
    for m in members {
        if let Some(v) = read(m, &m.dir()) {
            if best.as_ref().is_none_or(|(d, _)| m.depth() > *d) {
                best = Some((m.depth(), v));
            }
        }
    }
    best.map(|(_, v)| v)
}

/// Adds the pids of `cgroup.procs` in `dir` and every directory under it.
fn procs_under(dir: &Path, out: &mut BTreeSet<u32>) {
    if let Some(text) = read(&dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    for sub in subdirs(dir) {
        procs_under(&sub, out);
    }
}

/// The directories in `dir` (not following symbolic links), sorted.
pub(crate) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_type().ok()?.is_dir().then(|| e.path())
        })
        .collect();
    out.sort();
    out
}

/// The error for a cgroup path found in none of `searched`, with what the nearest existing
/// ancestor of the first holds.
fn not_found(given: &str, searched: Vec<PathBuf>) -> CgroupError {
    let nearest = searched.first().and_then(|d| {
        d.ancestors()
            .skip(1)
            .find(|a| a.is_dir())
            .map(Path::to_path_buf)
    });
    let children = nearest
        .as_deref()
        .map(|n| {
            let names: Vec<String> = subdirs(n)
                .iter()
                .filter_map(|d| Some(d.file_name()?.to_string_lossy().into_owned()))
                .collect();
            let mut shown: Vec<String> = names.iter().take(20).cloned().collect();
            if names.len() > 20 {
                shown.push(format!("and {} more", names.len() - 20));
            }
            shown
        })
        .unwrap_or_default();
    CgroupError::PathNotFound {
        path: given.to_string(),
        searched,
        nearest,
        children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout: v1 controllers and a v2 tree at `unified`.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// A systemd machine with only cgroup v2.
    const PURE_V2: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw,discard,errors=remount-ro
25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 25 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    /// An older machine with only cgroup v1, `cpu,cpuacct` and `net_cls,net_prio` together.
    const PURE_V1: &str = "\
24 18 0:20 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:6 - tmpfs tmpfs ro,mode=755
25 24 0:21 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:7 - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
28 24 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct
29 24 0:25 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory
30 24 0:26 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,net_cls,net_prio
31 24 0:27 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids
";

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn mountinfo_hybrid() {
        let fs = CgroupFs::from_mountinfo(HYBRID);
        assert_eq!(fs.v2, Some(p("/sys/fs/cgroup/unified")));
        assert_eq!(fs.v1.get("cpu"), Some(&p("/sys/fs/cgroup/cpu")));
        assert_eq!(fs.v1.get("cpuacct"), Some(&p("/sys/fs/cgroup/cpuacct")));
        assert_eq!(fs.v1.get("memory"), Some(&p("/sys/fs/cgroup/memory")));
        assert_eq!(
            fs.v1.get("name=systemd"),
            Some(&p("/sys/fs/cgroup/systemd"))
        );
        assert!(!fs.v1.contains_key("rw") && !fs.v1.contains_key("xattr"));
        assert_eq!(fs.v1.len(), 6);
    }

    #[test]
    fn mountinfo_pure_v2() {
        let fs = CgroupFs::from_mountinfo(PURE_V2);
        assert_eq!(fs.v2, Some(p("/sys/fs/cgroup")));
        assert!(fs.v1.is_empty());
        assert!(!fs.is_empty());
    }

    #[test]
    fn mountinfo_pure_v1() {
        let fs = CgroupFs::from_mountinfo(PURE_V1);
        assert_eq!(fs.v2, None);
        assert_eq!(fs.v1.get("cpu"), Some(&p("/sys/fs/cgroup/cpu,cpuacct")));
        assert_eq!(fs.v1.get("cpuacct"), Some(&p("/sys/fs/cgroup/cpu,cpuacct")));
        assert_eq!(
            fs.v1.get("net_prio"),
            Some(&p("/sys/fs/cgroup/net_cls,net_prio"))
        );
        assert!(fs.v1.keys().all(|k| !k.starts_with("release_agent")));
        let h = fs.hierarchies();
        assert_eq!(h.len(), 5, "{h:?}");
        let cpu = fs.v1_hierarchy("cpuacct").unwrap();
        assert_eq!(
            cpu.controllers,
            vec!["cpu".to_string(), "cpuacct".to_string()]
        );
        assert!(CgroupFs::from_mountinfo("").is_empty());
    }

    #[test]
    fn mountinfo_escapes_and_first_mount_wins() {
        let text = "\
50 22 0:40 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw
51 22 0:40 / /other rw - cgroup2 cgroup2 rw
";
        let fs = CgroupFs::from_mountinfo(text);
        assert_eq!(fs.v2, Some(p("/mnt/my cgroups")));
        assert_eq!(unescape_mount("a\\134b\\011c"), "a\\b\tc");
        assert_eq!(unescape_mount("trailing\\04"), "trailing\\04");
    }

    #[test]
    fn proc_cgroup_lines() {
        let text = "\
12:pids:/docker/abc
4:cpu,cpuacct:/docker/abc
1:name=systemd:/docker/abc
0::/system.slice/docker-abc.scope (deleted)
";
        let lines = parse_proc_cgroup(text);
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[1],
            ProcCgroup {
                id: 4,
                controllers: vec!["cpu".into(), "cpuacct".into()],
                path: "/docker/abc".into()
            }
        );
        assert_eq!(
            lines[3],
            ProcCgroup {
                id: 0,
                controllers: vec![],
                path: "/system.slice/docker-abc.scope".into()
            }
        );
        assert_eq!(parse_proc_cgroup("0::/\n")[0].path, "/");
        assert!(parse_proc_cgroup("garbage\n").is_empty());
    }

    #[test]
    fn handle_of_a_hybrid_process() {
        let fs = CgroupFs::from_mountinfo(HYBRID);
        let text = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/bc75
2:cpuacct:/lab/x
1:cpu:/lab/x
0::/
";
        let cg = Cgroup::from_proc_cgroup(&fs, text).unwrap();
        assert_eq!(cg.members[0].version, CgroupVersion::V2);
        assert_eq!(cg.members.len(), 6);
        // The root directories do not count; of the deepest, the first by mount point.
        assert_eq!(cg.path(), "/lab/x");
        assert_eq!(cg.versions(), "v1");
        assert_eq!(
            cg.to_string(),
            "/lab/x (v1 cpu /lab/x; v1 cpuacct /lab/x; v1 memory /process_api/bc75)"
        );
        // A process in /lab/x/y (cpu, cpuacct) and the same memory cgroup is in it.
        let inside = parse_proc_cgroup(
            "4:memory:/process_api/bc75\n2:cpuacct:/lab/x/y\n1:cpu:/lab/x/y\n0::/\n",
        );
        assert!(cg.contains_lines(&inside));
        let outside = parse_proc_cgroup(
            "4:memory:/process_api/bc75\n2:cpuacct:/lab/xy\n1:cpu:/lab/x\n0::/\n",
        );
        assert!(!cg.contains_lines(&outside));
        // Unmounted hierarchies are skipped; none mounted is None.
        assert!(Cgroup::from_proc_cgroup(&fs, "5:blkio:/a\n").is_none());
        let root = Cgroup::from_proc_cgroup(&fs, "1:cpu:/\n0::/\n").unwrap();
        assert_eq!((root.path(), root.versions().as_str()), ("/", "v1+v2"));
        assert_eq!(root.to_string(), "/");
    }

    #[test]
    fn paths_and_ancestors() {
        assert_eq!(normalize("/a//b/./c/"), Some("/a/b/c".into()));
        assert_eq!(normalize(""), Some("/".into()));
        assert_eq!(normalize("/a/../b"), None);
        assert_eq!(ancestors("/a/b"), vec!["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/"), vec!["/"]);
        assert!(at_or_under("/a/b", "/a") && at_or_under("/a", "/a") && at_or_under("/x", "/"));
        assert!(!at_or_under("/ab", "/a"));
    }

    #[test]
    fn keyed_numbers_and_max() {
        let k = parse_keyed("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n");
        assert_eq!((k["max"], k["oom"], k["oom_kill"]), (12, 1, 1));
        assert_eq!(parse_keyed("a b\nc\n").len(), 0);
        assert_eq!(parse_max("max\n"), None);
        assert_eq!(parse_max("512\n"), Some(512));
        assert_eq!(parse_max("x\n"), None);
        assert_eq!(parse_u64(" 42\n"), Some(42));
    }

    #[test]
    fn error_messages_name_the_path_and_what_exists() {
        let e = CgroupError::PathNotFound {
            path: "/system.slice/x.scope".into(),
            searched: vec![p("/sys/fs/cgroup/system.slice/x.scope")],
            nearest: Some(p("/sys/fs/cgroup/system.slice")),
            children: vec!["a.service".into(), "b.scope".into()],
        };
        assert_eq!(
            e.to_string(),
            "no cgroup /system.slice/x.scope: no directory /sys/fs/cgroup/system.slice/x.scope; \
             /sys/fs/cgroup/system.slice holds a.service, b.scope"
        );
    }
}
