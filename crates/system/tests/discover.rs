//! Finding a server by the port it listens on: a Python listener, alone and pre-forked.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use loadlab_system::discover::{listener_root, listening_pids};
use loadlab_system::probe::{ProbeKind, ProbeSource, ProcessSource};

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

/// Runs a Python script that prints the port it listens on; returns the child and port.
/// The tests that need it are ignored by a plain `cargo test` and run by `./test.sh`, which
/// installs python3: without it they fail.
fn python(script: &str) -> (Reaped, u16) {
    use std::os::unix::process::CommandExt;
    let child = Command::new("python3")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = child.unwrap_or_else(|e| panic!("python3 (./test.sh installs it): {e}"));
    let out = child.stdout.take().unwrap();
    let child = Reaped(child);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    let port = line.trim().parse().expect("the port");
    (child, port)
}

const LISTEN: &str = "import socket, time
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen()
";

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn a_listener_is_found_by_its_port() {
    let script = format!("{LISTEN}print(s.getsockname()[1], flush=True)\ntime.sleep(30)\n");
    let (child, port) = python(&script);
    let pid = child.0.id();
    assert_eq!(listener_root(port), Some((pid, "python3".to_string())));
    let l = listening_pids(port);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].addr.to_string(), format!("127.0.0.1:{port}"));

    let src = ProcessSource::for_listener(port).unwrap();
    let info = src.info().unwrap();
    assert_eq!(info.kind, ProbeKind::Listener);
    assert_eq!(
        info.found,
        format!("pid {pid} (python3), found listening on :{port}")
    );
    drop(child);
    // Nothing listens there any more.
    assert_eq!(listener_root(port), None);
    assert!(ProcessSource::for_listener(port).is_err());
}

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn a_pre_fork_server_is_found_by_its_master() {
    // The master listens, then forks two workers that inherit the socket; all sleep.
    let script = format!(
        "{LISTEN}import os
for _ in range(2):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
print(s.getsockname()[1], flush=True)
time.sleep(30)
"
    );
    let (child, port) = python(&script);
    let master = child.0.id();
    let l = listening_pids(port);
    assert_eq!(l.len(), 3, "{l:?}");
    assert!(l
        .iter()
        .all(|x| x.inode == l[0].inode && x.comm == "python3"));
    assert_eq!(listener_root(port), Some((master, "python3".to_string())));
    drop(child);
}
