//! The JVM actor target of document 003 (`targets/jvm-actors`), started as the plans start
//! it, through `run.sh`: the ready line, `/health`, a `/page` answered within its work time,
//! an ask timeout answered 503 and counted in `/stats`, SIGTERM with a request in flight
//! (answered, exit 0), bad flags named, and the launcher's "unavailable" exit when Java or
//! the jar is missing, with the command that builds it; and `loadlab lab` reporting such a
//! configuration unavailable instead of failing the run.
//!
//! Java and Maven must be there (`.ci/run` installs them); the tests build the jar with
//! `mvn -q -B -f targets/jvm-actors/pom.xml package -DskipTests` when it is missing. Without
//! them the serving tests fail naming what to install, they do not skip.

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::lab::{lab, lines};
use util::temp_path;

/// The exit status `run.sh` uses for "cannot run here" (the plan's `unavailable_exit`).
const EXIT_UNAVAILABLE: i32 = 3;
/// Longest wait for the JVM's ready line (a JVM on a busy 2-core machine is slow to start).
const READY_LIMIT: Duration = Duration::from_secs(60);

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../targets/jvm-actors")
}

fn launcher() -> PathBuf {
    target_dir().join("run.sh")
}

const BUILD: &str = "mvn -q -B -f targets/jvm-actors/pom.xml package -DskipTests";

/// Builds the jar if it is missing (once per test binary; Maven caches its dependencies in
/// `~/.m2`), so that `cargo test --workspace` needs only a JDK and Maven. Fails (never
/// skips) when they are missing or the build fails, naming the command that builds it.
fn require_jar() {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let jar = target_dir().join("target/jvm-actors.jar");
    if !jar.exists() {
        let built = Command::new("mvn")
            .args(["-q", "-B", "-f"])
            .arg(target_dir().join("pom.xml"))
            .args(["package", "-DskipTests"])
            .stdin(Stdio::null())
            .status();
        match built {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("`{BUILD}` failed ({s}); its output is above"),
            Err(e) => panic!(
                "cannot run Maven ({e}): install a JDK 11+ and Maven (Debian: apt-get install \
                 default-jdk-headless maven), or build the jar with `{BUILD}`"
            ),
        }
    }
    assert!(
        jar.exists(),
        "{} is not built: run `{BUILD}` first (.ci/run does; it needs a JDK 11+ and Maven)",
        jar.display()
    );
}

/// The running target, killed when dropped if the test did not stop it.
struct Jvm {
    child: Child,
    addr: SocketAddr,
    /// What the target wrote on stdout after its ready line, once stdout closes.
    rest: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Jvm {
    fn start(args: &[&str]) -> Jvm {
        require_jar();
        let mut child = Command::new(launcher())
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start run.sh");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let rest = std::thread::spawn(move || {
            let mut first = String::new();
            let mut r = BufReader::new(stdout);
            let _ = r.read_line(&mut first);
            let _ = tx.send(first);
            // Anything more on stdout breaks the contract: kept for the check at exit.
            let mut rest = String::new();
            let _ = r.read_to_string(&mut rest);
            rest
        });
        let Ok(line) = rx.recv_timeout(READY_LIMIT) else {
            let _ = child.kill();
            panic!("no ready line within {READY_LIMIT:?}");
        };
        let addr = line
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("ready line is {line:?}"))
            .parse()
            .unwrap_or_else(|e| panic!("ready line {line:?}: {e}"));
        Jvm {
            child,
            addr,
            rest: Some(rest),
        }
    }

    /// Waits for the exit, at most `limit`.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "still running after {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stats(&self) -> Value {
        let (status, body, _) = get(self.addr, "/stats");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("/stats {body:?}: {e}"))
    }
}

/// `GET path` on a fresh connection: status, body and the time it took.
fn get(addr: SocketAddr, path: &str) -> (u16, String, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read the response");
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {raw:?}"));
    let body = raw
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body, start.elapsed())
}

/// Waits until `/stats` shows no ask in flight and no routee busy.
fn settle(jvm: &Jvm) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = jvm.stats();
        if s["asks_in_flight"] == 0 && s["dispatcher"]["busy"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "never settled: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs a JDK and Maven (./test.sh installs them and builds the jar)"]
fn pages_ask_timeouts_stats_and_a_graceful_stop() {
    // One routee on a one-thread dispatcher: pages run one at a time.
    let mut jvm = Jvm::start(&[
        "--routees",
        "1",
        "--parallelism-min",
        "1",
        "--parallelism-max",
        "1",
        "--ask-timeout-ms",
        "1500",
        "--shutdown-timeout",
        "10",
    ]);
    let addr = jvm.addr;
    assert_eq!(get(addr, "/health").0, 200);
    assert_eq!(get(addr, "/health").1, "ok");

    // A page is answered after its work, and well before the ask timeout.
    let (status, body, took) = get(addr, "/page?work_ms=200&kind=sleep");
    assert_eq!((status, body.as_str()), (200, "page: sleep 200 ms"));
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    let (status, _, took) = get(addr, "/page?work_ms=100&kind=cpu");
    assert_eq!(status, 200);
    assert!(took >= Duration::from_millis(100), "{took:?}");

    // Two 1,000 ms pages at once on one thread: the first is answered, the second waits
    // behind it past the 1,500 ms ask timeout and is answered 503 at the timeout.
    let pages: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150 * i));
                get(addr, "/page?work_ms=1000")
            })
        })
        .collect();
    let mut answers: Vec<_> = pages.into_iter().map(|t| t.join().unwrap()).collect();
    answers.sort_by_key(|a| a.0);
    assert_eq!(answers[0].0, 200, "{answers:?}");
    assert_eq!(answers[1].0, 503, "{answers:?}");
    assert!(answers[1].1.contains("AskTimeoutException"), "{answers:?}");
    assert!(
        answers[1].2 >= Duration::from_millis(1400) && answers[1].2 < Duration::from_millis(3000),
        "{answers:?}"
    );
    settle(&jvm);
    let stats = jvm.stats();
    assert_eq!(stats["ask_timeouts"], 1, "{stats}");
    assert_eq!(stats["pages"]["sleep:1000"]["requests"], 2, "{stats}");
    assert_eq!(stats["pages"]["sleep:1000"]["ok"], 1, "{stats}");
    assert_eq!(stats["pages"]["sleep:1000"]["timeouts"], 1, "{stats}");
    assert_eq!(stats["pages"]["sleep:200"]["ok"], 1, "{stats}");
    assert_eq!(stats["pages"]["cpu:100"]["ok"], 1, "{stats}");
    assert_eq!(stats["pool_size"], 1, "{stats}");
    assert_eq!(stats["routees"], 1, "{stats}");
    assert_eq!(stats["asks_in_flight"], 0, "{stats}");
    // The timed-out page's work still ran (the actor never knew): wasted work, counted.
    assert_eq!(stats["dispatcher"]["completed_after_timeout"], 1, "{stats}");
    assert_eq!(stats["requests"]["/page"], 4, "{stats}");

    // Bad page parameters are refused, not run.
    assert_eq!(get(addr, "/page?work_ms=60001").0, 400);
    assert_eq!(get(addr, "/page?work_ms=5&kind=io").0, 400);
    assert_eq!(get(addr, "/nope").0, 404);

    // SIGTERM with a page in flight: the page is answered, then the JVM exits 0.
    let in_flight = std::thread::spawn(move || get(addr, "/page?work_ms=800"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while jvm.stats()["asks_in_flight"] != 1 {
        assert!(Instant::now() < deadline, "the page never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the child's pid, which this test owns and has not reaped.
    assert_eq!(
        unsafe { libc::kill(jvm.child.id() as i32, libc::SIGTERM) },
        0
    );
    let (status, body, _) = in_flight.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "page: sleep 800 ms"));
    let exit = jvm.wait(Duration::from_secs(20));
    assert_eq!(exit.code(), Some(0), "{exit}");
    let rest = jvm.rest.take().unwrap().join().unwrap();
    assert_eq!(rest, "", "stdout carries the ready line only");
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "still accepting after exit"
    );
}

/// `--warmup-requests`: the server sends itself that many requests before its ready line
/// (and before `/health` answers 200); its counters start from zero afterwards.
#[test]
#[ignore = "needs a JDK and Maven (./test.sh installs them and builds the jar)"]
fn the_warm_up_comes_before_the_ready_line() {
    let jvm = Jvm::start(&["--warmup-requests", "400"]);
    let stats = jvm.stats();
    assert_eq!(stats["requests"]["/page"], 0, "{stats}");
    assert_eq!(stats["requests"]["/health"], 0, "{stats}");
    assert_eq!(stats["dispatcher"]["completed"], 0, "{stats}");
    assert_eq!(stats["pages"], serde_json::json!({}), "{stats}");
    assert_eq!(get(jvm.addr, "/health").0, 200);
}

#[test]
#[ignore = "needs a JDK and Maven (./test.sh installs them and builds the jar)"]
fn bad_flags_exit_non_zero_naming_the_flag() {
    require_jar();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 6] = [
        (&["--routees", "0"], "--routees"),
        (&["--warmup-requests", "-1"], "--warmup-requests"),
        (&["--parallelism-factor", "-1"], "--parallelism-factor"),
        (
            &["--parallelism-min", "9", "--parallelism-max", "2"],
            "--parallelism-min",
        ),
        (&["--frobnicate", "1"], "--frobnicate"),
        (&["--bind", &busy], "--bind"),
    ];
    for (args, needle) in cases {
        let out = Command::new(launcher())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(EXIT_UNAVAILABLE), "{args:?}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no ready line");
    }
}

/// No jar, or no Java: exit 3 (the plans' `unavailable_exit`) with the cause and the
/// command that fixes it. Needs neither Java nor the jar.
#[test]
fn without_java_or_the_jar_the_launcher_says_unavailable() {
    let missing = temp_path("no.jar");
    let cases = [
        (
            "LOADLAB_JVM_JAR",
            missing.display().to_string(),
            "is not built",
        ),
        ("JAVA", "/nonexistent/java".to_string(), "no Java here"),
    ];
    for (var, value, cause) in cases {
        let out = Command::new(launcher())
            .args(["--bind", "127.0.0.1:0"])
            .env(var, &value)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_UNAVAILABLE), "{var}: {stderr}");
        assert!(stderr.contains(cause), "{var}: {stderr}");
        assert!(
            stderr.contains("mvn -q -B -f") && stderr.contains("jvm-actors/pom.xml package"),
            "{var}: the build command: {stderr}"
        );
    }
}

/// `loadlab lab` with the JVM target missing its jar: the configuration is reported
/// unavailable with the build command, and the run still ends with its report (exit 1:
/// no request succeeded, as for any run whose every configuration could not run).
#[test]
fn lab_reports_a_missing_jar_unavailable() {
    let missing = temp_path("missing.jar");
    let plan = format!(
        r#"
name = "jvm-missing"
[[target]]
name = "app"
command = [{launcher:?}, "--bind", "127.0.0.1:{{port}}", "--routees", "{{routees}}"]
env = {{ LOADLAB_JVM_JAR = {missing:?} }}
ready = {{ http = "http://127.0.0.1:{{port}}/health", status = 200 }}
ready_timeout = "20s"
unavailable_exit = 3

[matrix]
routees = [4]

[[scenario]]
name = "page"
url = "http://127.0.0.1:{{port}}/page?work_ms=10"
rate = 10
requests = 5

[load]
together = true
"#,
        launcher = launcher().display().to_string(),
        missing = missing.display().to_string(),
    );
    let path = temp_path("jvm-missing.toml");
    std::fs::write(&path, plan).unwrap();
    let out = temp_path("jvm-missing-bundle");
    let o = lab(&path, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let configs = lines(&out.join("configs.jsonl"));
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(configs[0]["status"], "unavailable", "{configs:?}");
    let message = configs[0]["message"].as_str().unwrap();
    assert!(
        message.contains("is not built") && message.contains("package -DskipTests"),
        "{message}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("package -DskipTests"), "{report}");
}
