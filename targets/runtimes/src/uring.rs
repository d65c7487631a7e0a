//! Whether io_uring can start here, and if not, why and how to fix it.
//!
//! [`probe`] makes one `io_uring_setup` system call (then closes the ring) and reads the
//! kernel version, `RLIMIT_MEMLOCK`, `kernel.io_uring_disabled` and the process's seccomp
//! mode, so that a refusal names its cause: a kernel too old or built without io_uring, a
//! memlock limit too low, the sysctl, or a seccomp filter (containers' default profiles
//! block io_uring). The io_uring binaries exit with [`EXIT_UNAVAILABLE`] and the message of
//! [`Unavailable`]; a comparison marks that runtime's row unavailable.

use std::fmt;
use std::io;

/// Exit status of a binary whose runtime cannot start on this machine's io_uring.
pub const EXIT_UNAVAILABLE: u8 = 3;

/// A kernel version, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion {
    /// For example 6 in 6.8.
    pub major: u32,
    /// For example 8 in 6.8.
    pub minor: u32,
}

impl KernelVersion {
    /// The first kernel with `io_uring_setup` (5.1).
    pub const FIRST_IO_URING: KernelVersion = KernelVersion::new(5, 1);

    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        KernelVersion { major, minor }
    }

    /// Parses the start of a `uname -r` release such as `6.8.0-45-generic`.
    pub fn parse(release: &str) -> Option<Self> {
        let mut parts = release.split(['.', '-', '+']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What one io_uring runtime needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirements {
    /// The runtime's name, for messages.
    pub runtime: &'static str,
    /// The oldest kernel the runtime supports.
    pub min_kernel: KernelVersion,
    /// Submission queue entries of the runtime's ring, used for the probe ring too.
    pub entries: u32,
    /// The smallest `RLIMIT_MEMLOCK` (bytes) the runtime starts with; 0 if it checks none.
    pub min_memlock: u64,
}

/// glommio 0.9: Linux 5.8 or newer, 128-entry rings, and it refuses to start below
/// 512 KiB of `RLIMIT_MEMLOCK`.
pub const GLOMMIO: Requirements = Requirements {
    runtime: "glommio",
    min_kernel: KernelVersion::new(5, 8),
    entries: 128,
    min_memlock: 512 * 1024,
};

/// monoio 0.2: Linux 5.6 or newer for its io_uring driver, 1024-entry rings.
pub const MONOIO: Requirements = Requirements {
    runtime: "monoio",
    min_kernel: KernelVersion::new(5, 6),
    entries: 1024,
    min_memlock: 0,
};

/// The minimal runtime of this crate (`greeter-minimal` in an io_uring mode): Linux 5.6
/// or newer for `IORING_OP_ACCEPT`, `RECV` and `SEND`, 1024-entry rings.
pub const MINIMAL: Requirements = Requirements {
    runtime: "greeter-minimal",
    min_kernel: KernelVersion::new(5, 6),
    entries: 1024,
    min_memlock: 0,
};

/// The facts about this process and kernel that decide whether io_uring starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Host {
    /// From `uname -r`; `None` if it does not parse.
    pub kernel: Option<KernelVersion>,
    /// Soft `RLIMIT_MEMLOCK` in bytes; `None` means unlimited.
    pub memlock: Option<u64>,
    /// `/proc/sys/kernel/io_uring_disabled` (Linux 6.6+): 0 allowed, 1 only for
    /// `kernel.io_uring_group` and `CAP_SYS_ADMIN`, 2 disabled. `None` if absent.
    pub io_uring_disabled: Option<u8>,
    /// The `Seccomp:` mode of `/proc/self/status`: 0 none, 1 strict, 2 filter.
    pub seccomp: Option<u8>,
}

impl Host {
    /// Reads the facts of the current process.
    pub fn current() -> Self {
        Host {
            kernel: kernel_release().as_deref().and_then(KernelVersion::parse),
            memlock: memlock_limit(),
            io_uring_disabled: read_number("/proc/sys/kernel/io_uring_disabled"),
            seccomp: std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|status| seccomp_mode(&status)),
        }
    }
}

/// Why io_uring cannot start, with the fix. The `Display` text is the binary's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The kernel is older than the runtime supports.
    #[error(
        "io_uring unavailable: Linux {found} is older than {needed}, the oldest {runtime} \
         supports; fix: run on Linux {needed} or newer"
    )]
    KernelTooOld {
        /// The runtime's name, e.g. `glommio`.
        runtime: &'static str,
        /// This kernel.
        found: KernelVersion,
        /// The oldest supported.
        needed: KernelVersion,
    },
    /// `io_uring_setup` does not exist (ENOSYS).
    #[error(
        "io_uring unavailable: io_uring_setup failed with ENOSYS (kernel built without \
         CONFIG_IO_URING, or a seccomp filter answering ENOSYS); fix: use a kernel with \
         io_uring, or allow io_uring_setup, io_uring_enter and io_uring_register in the \
         seccomp profile"
    )]
    NotInKernel,
    /// `kernel.io_uring_disabled=2`.
    #[error(
        "io_uring unavailable: io_uring_setup failed with EPERM because \
         kernel.io_uring_disabled=2; fix: sysctl -w kernel.io_uring_disabled=0"
    )]
    DisabledBySysctl,
    /// `kernel.io_uring_disabled=1` and the process is not in `kernel.io_uring_group`.
    #[error(
        "io_uring unavailable: io_uring_setup failed with EPERM because \
         kernel.io_uring_disabled=1 allows io_uring only to CAP_SYS_ADMIN and the group \
         kernel.io_uring_group; fix: sysctl -w kernel.io_uring_disabled=0, or run in that group"
    )]
    RestrictedBySysctl,
    /// A seccomp filter refuses `io_uring_setup`.
    #[error(
        "io_uring unavailable: io_uring_setup failed with EPERM under a seccomp filter \
         (container runtimes' default profiles block io_uring); fix: allow io_uring_setup, \
         io_uring_enter and io_uring_register (docker/podman: --security-opt seccomp=unconfined)"
    )]
    Seccomp,
    /// EPERM with neither the sysctl nor seccomp visible (for example an LSM).
    #[error(
        "io_uring unavailable: io_uring_setup failed with EPERM (seccomp, an LSM policy or \
         kernel.io_uring_disabled); fix: sysctl -w kernel.io_uring_disabled=0 and allow the \
         io_uring syscalls in the seccomp/LSM policy"
    )]
    Denied,
    /// `RLIMIT_MEMLOCK` below what the runtime checks for, or the ring's memory did not fit
    /// it (kernels before 5.12 charge io_uring rings to the memlock limit).
    #[error(
        "io_uring unavailable: RLIMIT_MEMLOCK too low ({limit_kib} KiB; {runtime} needs {need}); \
         fix: raise with ulimit -l unlimited (systemd: LimitMEMLOCK=infinity; \
         docker: --ulimit memlock=-1)"
    )]
    MemlockTooLow {
        /// The runtime's name, e.g. `glommio`.
        runtime: &'static str,
        /// The soft limit, KiB.
        limit_kib: u64,
        /// What it needs, in words.
        need: String,
    },
    /// Another error from `io_uring_setup` or the runtime's ring setup.
    #[error("io_uring unavailable: {runtime} could not set up its ring: {error}")]
    Setup {
        /// The runtime's name, e.g. `glommio`.
        runtime: &'static str,
        /// The operating system's error.
        error: String,
    },
}

/// Checks that `requirements` hold here and that an io_uring ring can be created.
pub fn probe(requirements: &Requirements) -> Result<(), Unavailable> {
    check(
        requirements,
        &Host::current(),
        setup_ring(requirements.entries),
    )
}

/// The decision of [`probe`], from the facts and the result of `io_uring_setup`.
pub fn check(
    requirements: &Requirements,
    host: &Host,
    setup: io::Result<()>,
) -> Result<(), Unavailable> {
    if let Err(error) = setup {
        return Err(classify(requirements, host, &error));
    }
    if let Some(found) = host.kernel.filter(|k| *k < requirements.min_kernel) {
        return Err(Unavailable::KernelTooOld {
            runtime: requirements.runtime,
            found,
            needed: requirements.min_kernel,
        });
    }
    match host.memlock {
        Some(limit) if limit < requirements.min_memlock => Err(Unavailable::MemlockTooLow {
            runtime: requirements.runtime,
            limit_kib: limit / 1024,
            need: format!("at least {} KiB", requirements.min_memlock / 1024),
        }),
        _ => Ok(()),
    }
}

/// Names the cause of an error from `io_uring_setup` (the probe's or the runtime's own).
pub fn classify(requirements: &Requirements, host: &Host, error: &io::Error) -> Unavailable {
    match error.raw_os_error() {
        Some(libc::ENOSYS) => match host.kernel {
            Some(found) if found < KernelVersion::FIRST_IO_URING => Unavailable::KernelTooOld {
                runtime: requirements.runtime,
                found,
                needed: requirements.min_kernel,
            },
            _ => Unavailable::NotInKernel,
        },
        Some(libc::EPERM | libc::EACCES) => match (host.io_uring_disabled, host.seccomp) {
            (Some(2), _) => Unavailable::DisabledBySysctl,
            (Some(1), _) => Unavailable::RestrictedBySysctl,
            (_, Some(mode)) if mode > 0 => Unavailable::Seccomp,
            _ => Unavailable::Denied,
        },
        Some(libc::ENOMEM) => Unavailable::MemlockTooLow {
            runtime: requirements.runtime,
            limit_kib: host.memlock.map_or(u64::MAX, |limit| limit / 1024),
            need: format!(
                "room for a {}-entry ring; kernels before 5.12 charge rings to it",
                requirements.entries
            ),
        },
        _ => Unavailable::Setup {
            runtime: requirements.runtime,
            error: error.to_string(),
        },
    }
}

/// Whether an error from a runtime's ring setup is io_uring being refused (no kernel
/// support, a policy, a memory limit) rather than something broken; [`classify`] names it.
pub fn is_refusal(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::EACCES | libc::ENOMEM)
    )
}

/// Creates and closes one io_uring ring with `entries` submission entries.
fn setup_ring(entries: u32) -> io::Result<()> {
    // `struct io_uring_params` is 120 bytes; the kernel reads the zeroed flags and writes
    // the offsets back.
    let mut params = [0u64; 15];
    // SAFETY: io_uring_setup(2) accesses exactly sizeof(struct io_uring_params) = 120 bytes
    // at the pointer, which `params` provides, aligned for its u32 and u64 fields.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, params.as_mut_ptr()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is the ring's descriptor, owned here and closed once.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

fn kernel_release() -> Option<String> {
    // SAFETY: utsname is plain old data; uname(2) fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return None;
    }
    let release: Vec<u8> = uts
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8(release).ok()
}

fn memlock_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(limit.rlim_cur)
}

fn read_number(path: &str) -> Option<u8> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn seccomp_mode(status: &str) -> Option<u8> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Seccomp:"))
        .and_then(|mode| mode.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        Host {
            kernel: Some(KernelVersion::new(6, 8)),
            memlock: Some(8 << 20),
            io_uring_disabled: Some(0),
            seccomp: Some(0),
        }
    }

    fn errno(code: i32) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(code))
    }

    #[test]
    fn parses_kernel_releases() {
        assert_eq!(
            KernelVersion::parse("6.18.44-fc-v669"),
            Some(KernelVersion::new(6, 18))
        );
        assert_eq!(
            KernelVersion::parse("5.4.0-150-generic"),
            Some(KernelVersion::new(5, 4))
        );
        assert_eq!(KernelVersion::parse("6.1+"), Some(KernelVersion::new(6, 1)));
        assert_eq!(KernelVersion::parse("linux"), None);
        assert!(KernelVersion::new(5, 10) > KernelVersion::new(5, 8));
        assert!(KernelVersion::new(4, 19) < KernelVersion::FIRST_IO_URING);
    }

    #[test]
    fn parses_seccomp_mode() {
        let status = "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(seccomp_mode(status), Some(2));
        assert_eq!(seccomp_mode("Name:\tx\n"), None);
    }

    #[test]
    fn a_working_ring_on_a_new_kernel_passes() {
        assert_eq!(check(&GLOMMIO, &host(), Ok(())), Ok(()));
        let unlimited = Host {
            memlock: None,
            ..host()
        };
        assert_eq!(check(&GLOMMIO, &unlimited, Ok(())), Ok(()));
    }

    #[test]
    fn eperm_names_the_sysctl_or_seccomp() {
        let disabled = Host {
            io_uring_disabled: Some(2),
            ..host()
        };
        let err = check(&MONOIO, &disabled, errno(libc::EPERM)).unwrap_err();
        assert_eq!(err, Unavailable::DisabledBySysctl);
        assert!(err
            .to_string()
            .contains("fix: sysctl -w kernel.io_uring_disabled=0"));

        let group = Host {
            io_uring_disabled: Some(1),
            ..host()
        };
        assert_eq!(
            check(&MONOIO, &group, errno(libc::EPERM)),
            Err(Unavailable::RestrictedBySysctl)
        );

        let filtered = Host {
            seccomp: Some(2),
            ..host()
        };
        let err = check(&MONOIO, &filtered, errno(libc::EPERM)).unwrap_err();
        assert_eq!(err, Unavailable::Seccomp);
        assert!(err.to_string().contains("seccomp=unconfined"));

        assert_eq!(
            check(&MONOIO, &host(), errno(libc::EPERM)),
            Err(Unavailable::Denied)
        );
    }

    #[test]
    fn memlock_limits() {
        let low = Host {
            memlock: Some(64 * 1024),
            ..host()
        };
        let err = check(&GLOMMIO, &low, Ok(())).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("RLIMIT_MEMLOCK too low (64 KiB"), "{text}");
        assert!(text.contains("ulimit -l unlimited"), "{text}");
        // monoio checks no limit itself; only an old kernel's ENOMEM trips it.
        assert_eq!(check(&MONOIO, &low, Ok(())), Ok(()));
        let err = check(&MONOIO, &low, errno(libc::ENOMEM)).unwrap_err();
        assert!(
            matches!(err, Unavailable::MemlockTooLow { limit_kib: 64, .. }),
            "{err}"
        );
    }

    #[test]
    fn old_or_missing_kernel_support() {
        let old = Host {
            kernel: Some(KernelVersion::new(5, 4)),
            ..host()
        };
        let err = check(&GLOMMIO, &old, Ok(())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "io_uring unavailable: Linux 5.4 is older than 5.8, the oldest glommio supports; \
             fix: run on Linux 5.8 or newer"
        );
        let ancient = Host {
            kernel: Some(KernelVersion::new(4, 19)),
            ..host()
        };
        assert!(matches!(
            check(&MONOIO, &ancient, errno(libc::ENOSYS)),
            Err(Unavailable::KernelTooOld { .. })
        ));
        assert_eq!(
            check(&MONOIO, &host(), errno(libc::ENOSYS)),
            Err(Unavailable::NotInKernel)
        );
        assert!(matches!(
            check(&MONOIO, &host(), errno(libc::EINVAL)),
            Err(Unavailable::Setup { .. })
        ));
    }
}
