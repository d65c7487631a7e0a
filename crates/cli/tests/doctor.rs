//! `loadlab doctor`: predicts, before any load, that a plan will fail because of the
//! machine, and names the fix.

mod util;

use std::os::unix::process::CommandExt;
use std::process::Command;

use util::loadlab_bin;
use util::netns::Netns;

fn plan(name: &str) -> String {
    format!("{}/../../plans/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Inside a namespace with 200 ports and no TIME_WAIT reuse, connection-per-request load at
/// 500 req/s runs out of ports within a second: the doctor says so and exits 1.
#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn doctor_predicts_port_exhaustion_in_a_narrow_namespace() {
    let ns = Netns::create(&format!("loadlab-doctor-{}", std::process::id()));
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, loadlab_bin(), "doctor"])
        .arg(plan("ephemeral-ports.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.contains("ephemeral_ports"))
        .expect("an ephemeral_ports finding");
    assert!(line.starts_with("[FAIL]"), "{text}");
    assert!(text.contains("tcp_tw_reuse=1"), "the fix is named: {text}");
    assert!(
        text.contains("40000") && text.contains("40199"),
        "the range is reported: {text}"
    );

    // The same plan with keep-alive on only (the narrow range still holds 200 reused
    // connections less than the 1024 the pool may grow to, so check a smaller plan).
    let ka = util::temp_path("ka.toml");
    std::fs::write(
        &ka,
        "name = \"ka\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nsteps = [500]\nconnections = 16\nmax_connections = 64\n",
    )
    .unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, loadlab_bin(), "doctor"])
        .arg(&ka)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("ephemeral_ports"))
        .unwrap();
    assert!(
        line.starts_with("[OK]"),
        "keep-alive reuses its connections: {text}"
    );
}

/// A hard nofile limit below the connections planned is a failure with the fix named.
#[test]
fn doctor_fails_when_nofile_cannot_be_raised() {
    let plan_path = util::temp_path("many.toml");
    std::fs::write(
        &plan_path,
        "name = \"many\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nmodel = \"closed\"\nsteps = [5000]\n",
    )
    .unwrap();
    let mut cmd = Command::new(loadlab_bin());
    cmd.arg("doctor").arg(&plan_path);
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: 1024,
                rlim_max: 1024,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
            Ok(())
        });
    }
    let (out, _) = util::output_within(&mut cmd, std::time::Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text.lines().find(|l| l.contains("nofile")).unwrap();
    assert!(line.starts_with("[FAIL]"), "{text}");
    assert!(text.contains("limits.conf"), "{text}");
}

/// A machine that wakes sleeping threads late is warned of before any load: here CPU 0
/// is taken for 4 ms in every 8 by a real-time process (SCHED_FIFO, which no ordinary
/// thread pre-empts), as a busy neighbour or a virtual machine's host takes it, and the
/// doctor, pinned there, measures its own sleeps woken milliseconds late.
#[test]
#[ignore = "needs root and python3, for a real-time thread (./test.sh)"]
fn doctor_warns_of_a_machine_that_wakes_sleepers_late() {
    // Spins 4 ms, sleeps 4 ms, for at most 4 s: it ends by itself whatever happens here.
    let hog = r#"
import time
end = time.monotonic() + 4.0
print("spinning", flush=True)
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.004:
        pass
    time.sleep(0.004)
"#;
    let mut child = Command::new("chrt")
        .args(["-f", "10", "taskset", "-c", "0", "python3", "-c", hog])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("chrt and python3 run");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "spinning");
    let _hog = Kill(child);
    let (out, _) = util::output_within(
        Command::new("taskset").args(["-c", "0", loadlab_bin(), "doctor"]),
        std::time::Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("wakeups: "))
        .unwrap_or_else(|| panic!("a wakeups finding: {text}"));
    assert!(
        line.starts_with("[WARN] wakeups: this machine woke a sleeping thread "),
        "{text}"
    );
    let p99 = util::number_after(line, "woke a sleeping thread ");
    // Half the deadlines fall in a 4 ms spin: the late ones are late by up to 4 ms.
    assert!((2.0..=50.0).contains(&p99), "{line}");
    assert!(text.contains("load.cpus"), "the fix is named: {text}");
    // A warning, not a failure: the run can go ahead.
    assert_eq!(out.status.code(), Some(0), "{text}");
}
