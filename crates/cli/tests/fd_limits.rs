//! File-descriptor limits: refused up front when the plan cannot fit, counted by name when
//! the process runs out during the run. (Own test binary: it spawns children with lowered
//! limits.)

mod util;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use util::{finish, loadlab_bin, output_within, temp_path, Behavior, TestServer};

/// Killed (and the test failed) past this: a refusal, or 300 requests to a local server.
const HANG_BOUND: Duration = Duration::from_secs(60);

fn limited(limit: u64, occupy_up_to: i32) -> Command {
    let devnull = std::fs::File::open("/dev/null").unwrap();
    let mut cmd = Command::new(loadlab_bin());
    // SAFETY: only async-signal-safe calls (dup2, setrlimit) between fork and exec; the
    // /dev/null descriptor stays open in the parent until the command is spawned.
    unsafe {
        cmd.pre_exec(move || {
            use std::os::fd::AsRawFd;
            for fd in 3..=occupy_up_to {
                libc::dup2(devnull.as_raw_fd(), fd);
            }
            let rl = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[test]
fn too_many_connections_for_nofile_is_refused_with_the_fix() {
    let (out, _) = output_within(
        limited(64, 0).args(["run", "http://127.0.0.1:1/", "-c", "100", "-n", "10"]),
        HANG_BOUND,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nofile limit is 64"), "{stderr}");
    assert!(stderr.contains("ulimit -n 132"), "{stderr}");
}

#[test]
fn running_out_of_descriptors_is_counted_as_fd_exhaustion() {
    let s = TestServer::start(Behavior::Ok);
    let json = temp_path("fd.json");
    // 64 allowed, about 50 taken before loadlab starts: 30 connections fit the up-front
    // check (30 + 32 reserved <= 64) but not the descriptors actually free.
    let mut cmd = limited(64, 50);
    cmd.args([
        "run",
        &s.url("/"),
        "-c",
        "30",
        "-t",
        "1",
        "-n",
        "300",
        "-q",
        "--json",
    ])
    .arg(&json);
    let (out, _) = output_within(&mut cmd, HANG_BOUND);
    let r = finish(out, &json);
    let j = r.json();
    assert!(
        r.error_count("fd_exhaustion") > 0,
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(j["successful"].as_u64().unwrap() > 0, "{}", r.stdout);
    let warning = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("EMFILE"));
    assert!(warning, "{:?}", j["warnings"]);
}
