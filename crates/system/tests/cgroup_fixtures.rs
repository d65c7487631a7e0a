//! The cgroup layouts this machine does not have, read from fixture trees through explicit
//! roots: pure cgroup v2 with controllers (systemd, docker with the systemd driver, a
//! kubelet pod) and pure cgroup v1 (docker with the cgroupfs driver, `cpu,cpuacct`
//! mounted together). The files are written as the kernel writes them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loadlab_system::cgroup::{
    locate_container, Cgroup, CgroupFs, CgroupLimit, CgroupSample, CgroupVersion, ContainerState,
    CpuQuota,
};

const ID: &str = "4f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";
/// Shares its first 12 characters with `ID`.
const ID2: &str = "4f1e2d3c4b5a0000000000000000000000000000000000000000000000000abc";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn v2_fs() -> CgroupFs {
    CgroupFs {
        v2: Some(fixtures().join("cgroup/v2")),
        v1: BTreeMap::new(),
    }
}

fn v1_fs() -> CgroupFs {
    let root = fixtures().join("cgroup/v1");
    let cpu = root.join("cpu,cpuacct");
    CgroupFs {
        v2: None,
        v1: BTreeMap::from([
            ("cpu".to_string(), cpu.clone()),
            ("cpuacct".to_string(), cpu),
            ("memory".to_string(), root.join("memory")),
            ("pids".to_string(), root.join("pids")),
        ]),
    }
}

fn state() -> ContainerState {
    ContainerState {
        docker: fixtures().join("containers/docker"),
        podman: fixtures().join("containers/podman"),
    }
}

#[test]
fn pure_v2_limits_and_sample() {
    let path = format!("/system.slice/docker-{ID}.scope");
    let cg = Cgroup::for_path_in(&v2_fs(), &path).unwrap();
    assert_eq!(cg.path(), path);
    assert_eq!(cg.versions(), "v2");
    assert_eq!(cg.to_string(), path);
    assert_eq!(cg.procs(), vec![4242, 4243]);

    let l = cg.limits();
    // The scope's 0.5 CPUs beat system.slice's 1.5.
    assert_eq!(
        l.cpu,
        Some(CpuQuota {
            cpus: 0.5,
            quota_us: 50_000,
            period_us: 100_000,
            version: CgroupVersion::V2,
            path: path.clone(),
        })
    );
    // system.slice's 256 MiB beat the scope's 512 MiB.
    assert_eq!(
        l.memory,
        Some(CgroupLimit {
            value: 268_435_456,
            version: CgroupVersion::V2,
            path: "/system.slice".into(),
        })
    );
    assert_eq!(
        l.pids,
        Some(CgroupLimit {
            value: 100,
            version: CgroupVersion::V2,
            path: path.clone(),
        })
    );

    assert_eq!(
        cg.sample(),
        CgroupSample {
            cpu_usage_s: Some(8.123456),
            nr_periods: Some(420),
            nr_throttled: Some(311),
            throttled_s: Some(2.5),
            memory_current_bytes: Some(104_857_600),
            oom: Some(1),
            oom_kill: Some(1),
            memory_max_events: Some(12),
            pids_current: Some(7),
            pids_max_events: Some(2),
            psi_cpu_some_us: Some(4_000_000),
            psi_cpu_full_us: Some(1_500_000),
            psi_memory_some_us: Some(25_000),
            psi_memory_full_us: Some(5_000),
            psi_io_some_us: Some(600_000),
            psi_io_full_us: Some(400_000),
        }
    );
}

#[test]
fn pure_v2_without_limits_and_resolutions() {
    let fs = v2_fs();
    // No quota anywhere (`max`), nothing in its files but what it has.
    let ssh = Cgroup::for_path_in(&fs, "/system.slice/ssh.service").unwrap();
    let l = ssh.limits();
    assert_eq!(
        l.cpu.map(|c| c.cpus),
        Some(1.5),
        "system.slice's quota applies"
    );
    assert_eq!(l.memory.map(|m| m.value), Some(268_435_456));
    assert_eq!(l.pids, None);
    assert_eq!(ssh.sample(), CgroupSample::default());
    assert_eq!(ssh.procs(), vec![600]);

    // A directory under the mount names the same cgroup.
    let dir = fixtures().join("cgroup/v2/system.slice/ssh.service");
    let by_dir = Cgroup::for_path_in(&fs, dir.to_str().unwrap()).unwrap();
    assert_eq!(by_dir, ssh);
    assert_eq!(by_dir.dirs(), vec![dir]);

    // A parent counts its descendants' processes.
    let slice = Cgroup::for_path_in(&fs, "system.slice").unwrap();
    assert_eq!(slice.procs(), vec![600, 4242, 4243]);

    // /proc/PID/cgroup of a process in the scope.
    let text = format!("0::/system.slice/docker-{ID}.scope\n");
    let of_pid = Cgroup::from_proc_cgroup(&fs, &text).unwrap();
    assert_eq!(of_pid.path(), format!("/system.slice/docker-{ID}.scope"));

    // The root is the machine: its figures are whole-machine ones.
    let root = Cgroup::for_path_in(&fs, "/").unwrap();
    let s = root.sample();
    assert_eq!(s.cpu_usage_s, Some(9876.54321));
    assert_eq!(
        (s.psi_io_some_us, s.memory_current_bytes),
        (Some(33_333), None)
    );
    assert_eq!(root.limits(), Default::default());
}

#[test]
fn a_path_that_does_not_resolve_says_what_exists() {
    let fs = v2_fs();
    let e = Cgroup::for_path_in(&fs, "/system.slice/nginx.service")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("no cgroup /system.slice/nginx.service: no directory "),
        "{e}"
    );
    assert!(e.contains("system.slice/nginx.service"), "{e}");
    assert!(
        e.contains(&format!("holds docker-{ID}.scope, ssh.service")),
        "{e}"
    );
    let dir = fixtures().join("cgroup/v2/nothing/here");
    let e = Cgroup::for_path_in(&fs, dir.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds kubepods.slice, system.slice"), "{e}");
    assert!(Cgroup::for_path_in(&fs, "/system.slice/../etc").is_err());
}

#[test]
fn pure_v1_limits_and_sample() {
    let path = format!("/docker/{ID}");
    let cg = Cgroup::for_path_in(&v1_fs(), &path).unwrap();
    assert_eq!(cg.path(), path);
    assert_eq!(cg.versions(), "v1");
    assert_eq!(
        cg.dirs().len(),
        3,
        "cpu,cpuacct, memory, pids: {:?}",
        cg.dirs()
    );
    assert_eq!(cg.procs(), vec![4242, 4243]);

    let l = cg.limits();
    assert_eq!(
        l.cpu,
        Some(CpuQuota {
            cpus: 0.25,
            quota_us: 25_000,
            period_us: 100_000,
            version: CgroupVersion::V1,
            path: path.clone(),
        })
    );
    assert_eq!(
        l.memory,
        Some(CgroupLimit {
            value: 536_870_912,
            version: CgroupVersion::V1,
            path: path.clone(),
        })
    );
    assert_eq!(
        l.pids,
        Some(CgroupLimit {
            value: 200,
            version: CgroupVersion::V1,
            path: path.clone(),
        })
    );

    assert_eq!(
        cg.sample(),
        CgroupSample {
            cpu_usage_s: Some(2.604123456),
            nr_periods: Some(104),
            nr_throttled: Some(97),
            throttled_s: Some(7.312412345),
            memory_current_bytes: Some(104_857_600),
            oom: None,
            oom_kill: Some(2),
            memory_max_events: Some(37),
            pids_current: Some(7),
            pids_max_events: Some(0),
            // v1 has no pressure files.
            ..CgroupSample::default()
        }
    );

    // The root of every v1 hierarchy: "no limit" is the huge number, and -1.
    let root = Cgroup::for_path_in(&v1_fs(), "/").unwrap();
    assert_eq!(root.limits(), Default::default());
    // A process's /proc/PID/cgroup with cpu and cpuacct on one line.
    let text = format!(
        "11:pids:/docker/{ID}\n4:cpu,cpuacct:/docker/{ID}\n3:memory:/docker/{ID}\n1:name=systemd:/docker/{ID}\n0::/\n"
    );
    assert_eq!(Cgroup::from_proc_cgroup(&v1_fs(), &text).unwrap(), cg);
}

#[test]
fn containers_by_id_prefix_and_name() {
    let (v1, v2, st) = (v1_fs(), v2_fs(), state());
    // v1: the bare ID under /docker.
    let c = locate_container(&v1, &st, &ID[..12]).unwrap();
    assert_eq!(c.id, ID);
    assert_eq!(c.cgroup.path(), format!("/docker/{ID}"));
    assert_eq!(c.cgroup.dirs().len(), 3);
    assert!(c.found.contains("found by its ID"), "{}", c.found);

    // v2: 12 characters match the docker scope and the CRI pod's container.
    let e = locate_container(&v2, &st, &ID[..12])
        .unwrap_err()
        .to_string();
    assert!(e.contains("matches 2 containers"), "{e}");
    assert!(e.contains(ID) && e.contains(ID2), "{e}");
    let c = locate_container(&v2, &st, &ID[..13]).unwrap();
    assert_eq!(c.cgroup.path(), format!("/system.slice/docker-{ID}.scope"));
    let c = locate_container(&v2, &st, &ID2.to_uppercase()[..20]).unwrap();
    assert!(c
        .cgroup
        .path()
        .ends_with(&format!("/cri-containerd-{ID2}.scope")));

    // By name: docker's config.v2.json and podman's containers.json.
    let c = locate_container(&v2, &st, "web").unwrap();
    assert_eq!((c.id.as_str(), c.name.as_deref()), (ID, Some("web")));
    assert!(
        c.found
            .starts_with("container web (id 4f1e2d3c4b5a), named in "),
        "{}",
        c.found
    );
    assert!(c.found.contains("config.v2.json"), "{}", c.found);
    let c = locate_container(&v2, &st, "api").unwrap();
    assert_eq!(c.id, ID2);
    assert!(c.found.contains("containers.json"), "{}", c.found);

    // A stopped container has no cgroup; an unknown name says where it looked.
    let e = locate_container(&v2, &st, "stopped")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is it running?"), "{e}");
    let e = locate_container(&v2, &st, "nope").unwrap_err().to_string();
    assert!(
        e.contains("config.v2.json") && e.contains("containers.json"),
        "{e}"
    );
    assert!(e.contains("docker inspect -f '{{.Id}}' nope"), "{e}");
}
