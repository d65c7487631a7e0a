//! The cgroup source: the processes of a cgroup (listed again at every sample, so workers
//! that come and go are counted), the kernel counters of their network namespace, and the
//! cgroup's own figures.

use super::{
    describe_pid, sample_kernel_of_any, sample_processes, ProbeInfo, ProbeKind, ProbeSource,
    SourceError, SourceSample, TargetLimits, ThreadCpu,
};
use crate::cgroup::{Cgroup, CgroupLimits};

/// Probes a cgroup: a path given by the user or a container's.
pub struct CgroupSource {
    cgroup: Cgroup,
    threads: ThreadCpu,
    kind: ProbeKind,
    found: String,
}

impl CgroupSource {
    /// Probes `cgroup`, named as `kind`, found as `found` says (one sentence).
    pub fn new(cgroup: Cgroup, kind: ProbeKind, found: impl Into<String>) -> CgroupSource {
        CgroupSource {
            cgroup,
            threads: ThreadCpu::default(),
            kind,
            found: found.into(),
        }
    }

    /// The cgroup at `path`: a directory under a cgroup mount or a cgroup path (see
    /// [`Cgroup::for_path`]).
    pub fn for_path(path: &str) -> Result<CgroupSource, SourceError> {
        let cgroup = Cgroup::for_path(path)?;
        let found = format!("cgroup {cgroup}, given by path");
        Ok(CgroupSource::new(cgroup, ProbeKind::Cgroup, found))
    }

    /// The cgroup of a running container, by name or ID prefix (see
    /// [`Cgroup::for_container`]).
    pub fn for_container(name_or_id: &str) -> Result<CgroupSource, SourceError> {
        let c = crate::cgroup::locate_container(
            &crate::cgroup::CgroupFs::discover()?,
            &crate::cgroup::ContainerState::default(),
            name_or_id,
        )?;
        Ok(CgroupSource::new(c.cgroup, ProbeKind::Container, c.found))
    }

    /// The cgroup probed.
    pub fn cgroup(&self) -> &Cgroup {
        &self.cgroup
    }
}

impl ProbeSource for CgroupSource {
    fn info(&self) -> Option<ProbeInfo> {
        let first = self.cgroup.procs().first().copied();
        let mut found = self.found.clone();
        if let Some(p) = first {
            found = format!("{found}; first process {}", describe_pid(p));
        }
        Some(ProbeInfo::new(self.kind, first, Some(&self.cgroup), found))
    }

    fn limits(&self) -> Option<TargetLimits> {
        // The cgroup's own quota binds all its processes.
        TargetLimits::with_quota(&self.cgroup.procs(), self.cgroup.limits().cpu)
    }

    fn cgroup_limits(&self) -> Option<CgroupLimits> {
        Some(self.cgroup.limits())
    }

    fn sample(&mut self) -> SourceSample {
        let procs = self.cgroup.procs();
        SourceSample {
            process: sample_processes(&procs, &mut self.threads),
            kernel: sample_kernel_of_any(&procs),
            cgroup: Some(self.cgroup.sample()),
            age: std::time::Duration::ZERO,
        }
    }
}
