//! The process-tree source: the trees under some root processes (a server loadlab started,
//! a pid, a pid file, the process listening on a port), the kernel counters of the first
//! root's network namespace, and the cgroup of the first root.

use std::path::Path;

use super::{
    describe_pid, sample_kernel_of_any, sample_trees, ProbeInfo, ProbeKind, ProbeSource,
    SourceError, SourceSample, TargetLimits, ThreadCpu,
};
use crate::cgroup::{Cgroup, CgroupLimits};
use crate::discover;
use crate::procfs;

/// Probes the process trees under its roots (the roots and all their descendants).
///
/// The cgroup of the first root is sampled too. When that cgroup also holds loadlab (the
/// server was started from the same shell, service or container), its figures include
/// loadlab's own; [`ProbeInfo::shares_cgroup_with_loadlab`] says so.
pub struct ProcessSource {
    roots: Vec<u32>,
    threads: ThreadCpu,
    cgroup: Option<Cgroup>,
    kind: ProbeKind,
    found: String,
}

impl ProcessSource {
    /// The trees under `roots` (those that do not exist are left out of the figures).
    pub fn new(roots: Vec<u32>) -> ProcessSource {
        let found = match roots.as_slice() {
            [] => "no process given".to_string(),
            [one] => format!("{}, given by pid", describe_pid(*one)),
            [first, rest @ ..] => format!(
                "{} and {} more, given by pid",
                describe_pid(*first),
                rest.len()
            ),
        };
        let cgroup = roots.first().and_then(|&p| Cgroup::of_pid(p).ok());
        ProcessSource {
            roots,
            threads: ThreadCpu::default(),
            cgroup,
            kind: ProbeKind::Pid,
            found,
        }
    }

    /// The tree under process `pid`; errs when it does not exist.
    pub fn for_pid(pid: u32) -> Result<ProcessSource, SourceError> {
        if !procfs::process_running(pid) {
            return Err(SourceError::NoProcess(pid));
        }
        Ok(ProcessSource::new(vec![pid]))
    }

    /// The tree of the process in the pid file `path`.
    pub fn for_pidfile(path: &Path) -> Result<ProcessSource, SourceError> {
        let pid = discover::read_pidfile(path)?;
        Ok(ProcessSource::for_pid(pid)?.found(format!(
            "{}, read from {}",
            describe_pid(pid),
            path.display()
        )))
    }

    /// The tree of the process listening on TCP `port` in this network namespace (the
    /// root of the tree of processes holding the socket: see
    /// [`discover::listener_root`]).
    pub fn for_listener(port: u16) -> Result<ProcessSource, SourceError> {
        let (pid, comm) = discover::listener_root(port).ok_or(SourceError::NoListener(port))?;
        let mut s = ProcessSource::new(vec![pid]);
        s.kind = ProbeKind::Listener;
        s.found = format!("pid {pid} ({comm}), found listening on :{port}");
        Ok(s)
    }

    /// Replaces the sentence saying how the target was found.
    #[must_use]
    pub fn found(mut self, how: impl Into<String>) -> ProcessSource {
        self.found = how.into();
        self
    }

    /// The cgroup sampled beside the trees: the first root's, when it could be read.
    pub fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_ref()
    }
}

impl ProbeSource for ProcessSource {
    fn info(&self) -> Option<ProbeInfo> {
        Some(ProbeInfo::new(
            self.kind,
            self.roots.first().copied(),
            self.cgroup.as_ref(),
            self.found.clone(),
        ))
    }

    fn limits(&self) -> Option<TargetLimits> {
        TargetLimits::read(&self.roots)
    }

    fn cgroup_limits(&self) -> Option<CgroupLimits> {
        self.cgroup.as_ref().map(Cgroup::limits)
    }

    fn sample(&mut self) -> SourceSample {
        SourceSample {
            process: sample_trees(&self.roots, &mut self.threads),
            kernel: sample_kernel_of_any(&self.roots),
            cgroup: self.cgroup.as_ref().map(Cgroup::sample),
            age: std::time::Duration::ZERO,
        }
    }
}
