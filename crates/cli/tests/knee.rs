//! `loadlab knee URL` against servers the test starts, not loadlab: found by the port they
//! listen on, by pid and by cgroup, with the same knee and why as a plan that starts the
//! same server; a pool of N synchronous slots named at the knee itself for N = 1, 2, 4, 16;
//! a CPU quota in a real cgroup named as the limit with its throttling figures. One at a
//! time: they measure. The server runs on CPU 0, loadlab's workers on CPU 1.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use util::lab::{lines, write_plan};
use util::server::{gunicorn, serve, Server};
use util::{loadlab_bin, output_within, temp_path};

static SERIAL: Mutex<()> = Mutex::new(());

/// `loadlab knee -q URL ARGS --out OUT` with the tests' short steps; must succeed. A search
/// whose knee step says a VM's host took a fifth or more of the CPUs' time (`host_steal`:
/// the server's figures there are the host's as much as its own) is run again, three runs
/// at most; the last is returned whatever it says, for the test to judge.
fn knee(url: &str, args: &[&str]) -> PathBuf {
    for attempt in 1.. {
        let out = knee_once(url, args);
        let configs = lines(&out.join("configs.jsonl"));
        let stolen = configs[0]["knees"][0]["diagnosis"]["findings"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["bottleneck"] == "host_steal"))
            .map(|f| f["evidence"].clone());
        match stolen {
            Some(why) if attempt < 3 => eprintln!("knee search {attempt} run again: {why}"),
            _ => return out,
        }
    }
    unreachable!()
}

fn knee_once(url: &str, args: &[&str]) -> PathBuf {
    let out = temp_path("knee-bundle");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", url, "--cpus", "1", "--threads", "1"])
            .args(["--step", "2s", "--warmup", "500ms", "--pause", "300ms"])
            .args(args)
            .arg("--out")
            .arg(&out),
        Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.starts_with("knee ") || stdout.contains("\nknee "),
        "{stdout}"
    );
    out
}

/// The search's knee, `[highest sustained, lowest not sustained]`, and its diagnosis.
fn knee_of(bundle: &Path) -> ([f64; 2], Value) {
    let configs = lines(&bundle.join("configs.jsonl"));
    let k = &configs[0]["knees"][0];
    let range = &k["outcome"]["range"];
    (
        [range[0].as_f64().unwrap(), range[1].as_f64().unwrap()],
        k["diagnosis"].clone(),
    )
}

/// The search ended on loadlab's own limit, with no knee range measured, or loadlab's limit
/// stopped its narrowing inside the range (not narrowed to its precision).
fn generator_limited(bundle: &Path) -> bool {
    let configs = lines(&bundle.join("configs.jsonl"));
    let o = &configs[0]["knees"][0]["outcome"];
    o["limited_by"] == "generator_limited" || !o["stopped"].is_null()
}

/// The concurrency the first unsustained step names, which must be `concurrency_bound`.
fn named_concurrency(d: &Value) -> f64 {
    let f = util::lab::server_finding(d);
    assert_eq!(f["bottleneck"], "concurrency_bound", "{d}");
    f["figures"]["in_service"].as_f64().unwrap()
}

/// What the steps' probes said they watched.
fn probed(bundle: &Path) -> Value {
    lines(&bundle.join("steps.jsonl"))[0]["probes"]["source"].clone()
}

/// The search flags for a pool of `n` slots of 50 ms: capacity 20 × n req/s.
fn pool_search(n: usize) -> Vec<String> {
    let cap = 20.0 * n as f64;
    vec![
        "--slo".into(),
        "p99<1s".into(),
        "--start".into(),
        format!("{}", cap / 4.0),
        "--max".into(),
        format!("{}", cap * 4.0),
        "--confirm".into(),
        "0".into(),
        "--timeout".into(),
        "10s".into(),
    ]
}

#[test]
fn a_pool_of_n_slots_is_named_at_the_knee_itself() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A pool of 2 is searched three times over in the next test.
    for n in [1usize, 4, 16] {
        let server = Server::start(&["--pool", &n.to_string(), "--service-ms", "50"]);
        let args = pool_search(n);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // A search that loadlab's own lateness stopped (a scheduling hiccup of this shared
        // machine, twice at one step: "the server's knee is at least ...") says nothing
        // of the server: it is run once more, and must then measure the knee.
        let mut bundle = knee(&server.url(), &args);
        if generator_limited(&bundle) {
            bundle = knee(&server.url(), &args);
        }
        let cap = 20.0 * n as f64;
        let ([lo, hi], d) = knee_of(&bundle);
        assert!(
            lo >= 0.6 * cap && hi <= 1.3 * cap,
            "pool of {n}: knee between {lo} and {hi}, capacity {cap}"
        );
        let named = named_concurrency(&d);
        assert!(
            (named - n as f64).abs() <= 0.2 * n as f64,
            "pool of {n}: ≈{named} named: {d}"
        );
        // Found by its port, without being told.
        let src = probed(&bundle);
        assert_eq!(src["kind"], "listener", "{src}");
        assert_eq!(src["pid"], server.pid(), "{src}");
        assert!(
            src["found"]
                .as_str()
                .unwrap()
                .ends_with(&format!("found listening on :{}", server.port)),
            "{src}"
        );
    }
}

/// A v2 cgroup for the test (this machine mounts v2 beside v1), removed when dropped.
struct TestCgroup {
    dirs: Vec<PathBuf>,
}

impl TestCgroup {
    /// Directories named `name` under each of `mounts`, with `pid` moved into each.
    fn new(mounts: &[PathBuf], name: &str, pid: u32) -> TestCgroup {
        let dirs: Vec<PathBuf> = mounts.iter().map(|m| m.join(name)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            std::fs::write(d.join("cgroup.procs"), pid.to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        TestCgroup { dirs }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for d in &self.dirs {
            // Its processes go back to the root of the hierarchy before it can be removed.
            let root = d.parent().unwrap();
            for pid in std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
            {
                let _ = std::fs::write(root.join("cgroup.procs"), pid);
            }
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The cgroup mounts of this machine: the v2 tree, and the v1 hierarchies by controller.
fn mounts() -> (Option<PathBuf>, Vec<(String, PathBuf)>) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut v2 = None;
    let mut v1 = Vec::new();
    for l in info.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let point = PathBuf::from(left.split_whitespace().nth(4).unwrap());
        let mut r = right.split_whitespace();
        match r.next() {
            Some("cgroup2") => v2 = Some(point),
            Some("cgroup") => {
                let opts = r.nth(1).unwrap_or("");
                for c in opts.split(',') {
                    if ["cpu", "cpuacct", "memory", "pids"].contains(&c) {
                        v1.push((c.to_string(), point.clone()));
                    }
                }
            }
            _ => {}
        }
    }
    (v2, v1)
}

#[test]
#[ignore = "needs root, for cgroups (./test.sh)"]
fn found_by_pid_by_cgroup_and_by_a_plan_the_knee_and_why_agree() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The three searches run one after another on a shared host: a server pinned to a CPU
    // that the rest of the suite crowded during one of them broke lower there (CI: 33.75
    // against 40 for the other two, ≈1.7 in service). Ranges that disagree are measured
    // once more, all three, before the test judges them.
    let mut runs = knee_by_pid_by_cgroup_and_by_a_plan();
    if !lower_ends_agree(&runs) {
        eprintln!("the three knees disagree, measured once more: {runs:?}");
        runs = knee_by_pid_by_cgroup_and_by_a_plan();
    }
    for (how, [lo, hi], named) in &runs {
        assert!(
            *lo >= 0.75 * 40.0 && *hi <= 1.25 * 40.0,
            "{how}: knee between {lo} and {hi}: {runs:?}"
        );
        assert!((named - 2.0).abs() <= 0.4, "{how}: ≈{named}: {runs:?}");
    }
    assert!(lower_ends_agree(&runs), "{runs:?}");
}

/// Each lower end within 15 % of the others'.
fn lower_ends_agree(runs: &[(&str, [f64; 2], f64)]) -> bool {
    let lows: Vec<f64> = runs.iter().map(|r| r.1[0]).collect();
    let (min, max) = lows
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    max <= 1.15 * min
}

/// The knee of the fixture's pool of 2 (50 ms each) probed by its pid, by its cgroup, and
/// started by a plan: (how, range, the concurrency its why named).
fn knee_by_pid_by_cgroup_and_by_a_plan() -> Vec<(&'static str, [f64; 2], f64)> {
    let args = pool_search(2);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut runs: Vec<(&str, [f64; 2], f64)> = Vec::new();
    let server = Server::start(&["--pool", "2", "--service-ms", "50"]);
    let pid = server.pid().to_string();
    let bundle = knee(&server.url(), &[&args[..], &["--probe-pid", &pid]].concat());
    assert_eq!(probed(&bundle)["kind"], "pid");
    let (r, d) = knee_of(&bundle);
    runs.push(("pid", r, named_concurrency(&d)));

    // The same server moved into a cgroup of its own, probed by the cgroup's path.
    let (v2, _) = mounts();
    let v2 = v2.expect("a cgroup v2 mount");
    let name = format!("loadlab-knee-test-{}", std::process::id());
    let _cg = TestCgroup::new(std::slice::from_ref(&v2), &name, server.pid());
    let bundle = knee(
        &server.url(),
        &[&args[..], &["--probe-cgroup", &format!("/{name}")]].concat(),
    );
    let src = probed(&bundle);
    assert_eq!(src["kind"], "cgroup", "{src}");
    assert_eq!(src["cgroup"], format!("/{name}"), "{src}");
    assert_eq!(src["pid"], server.pid(), "{src}");
    let steps = lines(&bundle.join("steps.jsonl"));
    assert!(
        steps[0]["probes"]["samples"][0]["cgroup"].is_object(),
        "the cgroup is sampled: {}",
        steps[0]["probes"]["samples"][0]
    );
    let (r, d) = knee_of(&bundle);
    runs.push(("cgroup", r, named_concurrency(&d)));
    drop(server);

    // A plan that starts the same server itself.
    let plan = write_plan(
        "pool2",
        "name = \"pool2\"\n[[target]]\nname = \"fx\"\ncommand = [\"FIXTURE\", \"--port\", \"{port}\", \"--pool\", \"2\", \"--service-ms\", \"50\"]\nready = { tcp = \"127.0.0.1:{port}\" }\ncpus = \"0\"\n\
             [[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:{port}/\"\ntimeout = \"10s\"\n\
             [load]\nknee = { start = 10, max = 160, confirm = 0 }\nstep_duration = \"2s\"\nwarmup = \"500ms\"\npause = \"300ms\"\nthreads = 1\ncpus = \"1\"\n[slo]\ngates = [\"p99<1s\"]\n",
    );
    let out = temp_path("pool2-plan");
    util::lab::lab_ok(&plan, &out);
    let (r, d) = knee_of(&out);
    runs.push(("plan", r, named_concurrency(&d)));

    runs
}

#[test]
#[ignore = "needs root, for cgroups (./test.sh)"]
fn a_cpu_quota_is_named_as_the_limit_with_its_throttling() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 2 ms of CPU per request under a quota of a quarter of a CPU: 125 req/s at most,
    // with the machine's other CPUs idle.
    let server = Server::start(&["--burn-us", "2000"]);
    let name = format!("loadlab-knee-quota-{}", std::process::id());
    let (v2, v1) = mounts();
    let v2_cpu = v2.as_ref().filter(|m| {
        std::fs::read_to_string(m.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
    });
    let _cg = match v2_cpu {
        Some(root) => {
            // Pure v2: enable the cpu controller below the root, then cpu.max.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            let cg = TestCgroup::new(std::slice::from_ref(root), &name, server.pid());
            std::fs::write(root.join(&name).join("cpu.max"), "25000 100000").unwrap();
            cg
        }
        None => {
            // v1 (this machine): cpu for the quota, cpuacct for the usage.
            let dirs: Vec<PathBuf> = v1
                .iter()
                .filter(|(c, _)| c == "cpu" || c == "cpuacct")
                .map(|(_, m)| m.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let cg = TestCgroup::new(&dirs, &name, server.pid());
            let cpu = v1.iter().find(|(c, _)| c == "cpu").expect("a v1 cpu mount");
            std::fs::write(cpu.1.join(&name).join("cpu.cfs_period_us"), "100000").unwrap();
            std::fs::write(cpu.1.join(&name).join("cpu.cfs_quota_us"), "25000").unwrap();
            cg
        }
    };
    let bundle = knee(
        &server.url(),
        &[
            "--slo",
            "p99<500ms",
            "--start",
            "30",
            "--max",
            "500",
            "--confirm",
            "0",
            "--timeout",
            "10s",
        ],
    );
    let ([lo, hi], d) = knee_of(&bundle);
    let cap = 125.0;
    assert!(
        lo >= 0.85 * cap && hi <= 1.15 * cap,
        "knee between {lo} and {hi}, quota ÷ CPU per request = {cap}"
    );
    let f = util::lab::server_finding(&d);
    assert_eq!(f["bottleneck"], "cpu_throttled", "{d}");
    let t = &f["figures"];
    assert_eq!(t["quota_cpus"], 0.25, "{f}");
    assert!(t["throttled_periods"].as_f64().unwrap() > 0.0, "{f}");
    assert!(t["throttled_s"].as_f64().unwrap() > 0.0, "{f}");
    let used = t["used_cpus"].as_f64().unwrap();
    assert!((0.2..=0.3).contains(&used), "{f}");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("against a quota of 25.0 %: throttled in"),
        "{f}"
    );
}

/// Python's own `http.server` (a server nobody here wrote) in an empty directory: every
/// path is a 404 with an HTML page saying so.
fn python_http_server() -> Server {
    let dir = temp_path("empty-docroot");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new("python3");
    cmd.args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
        .current_dir(&dir)
        .stderr(Stdio::null());
    // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
    Server::spawn(cmd, |l| {
        l.split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)?
            .parse()
            .ok()
    })
}

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn a_request_the_server_rejects_ends_the_search_at_its_first_step() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let py = python_http_server();
    let url = format!("http://127.0.0.1:{}/no-such-page", py.port);
    let out = temp_path("rejected-knee");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", &url, "--start", "20", "--step", "1s"])
            .arg("--out")
            .arg(&out),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    // No knee is measured: exit 1, one step, and the why names the status and the page.
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("knee not measured: the server rejected the request at 20 req/s"),
        "{stdout}"
    );
    assert_eq!(util::lab::steps(&out).len(), 1);
    let d = knee_of_rejected(&out);
    let f = util::lab::server_finding(&d);
    assert_eq!(f["bottleneck"], "rejected", "{d}");
    let e = f["evidence"].as_str().unwrap();
    for said in [
        "the server answered 404 to",
        "answered 404 File not found with an HTML body reading \"Error response Error code: 404",
        "the request is wrong (its URL, method, headers or body), not the load",
    ] {
        assert!(e.contains(said), "{said} not in {e}");
    }

    // A plan of fixed steps with the same wrong path ends at its first step too.
    let plan = write_plan(
        "wrong-path",
        &format!(
            "name = \"wrong-path\"\n[[scenario]]\nname = \"s\"\nurl = \"{url}\"\n[load]\nsteps = [20, 40, 80]\nstep_duration = \"1s\"\n"
        ),
    );
    let out = temp_path("rejected-plan");
    util::lab::lab_ok(&plan, &out);
    let steps = util::lab::steps(&out);
    assert_eq!(steps.len(), 1, "the steps after the first are skipped");
    assert_eq!(
        steps[0]["diagnosis"]["findings"][0]["bottleneck"],
        "rejected"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("request rejected (4xx)"), "{report}");

    // Nothing listening at all: the same, with the address named.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = temp_path("unreachable-knee");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", &format!("http://127.0.0.1:{port}/")])
            .args(["--start", "20", "--step", "1s", "--out"])
            .arg(&out),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("knee not measured: nothing answered at the address"),
        "{stdout}"
    );
    assert_eq!(util::lab::steps(&out).len(), 1);
    let configs = lines(&out.join("configs.jsonl"));
    let k = &configs[0]["knees"][0];
    assert_eq!(k["outcome"]["limited_by"], "unreachable", "{k}");
    let f = util::lab::server_finding(&k["diagnosis"]);
    assert_eq!(f["bottleneck"], "unreachable", "{f}");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains(&format!("every connection to 127.0.0.1:{port} was refused")),
        "{f}"
    );
}

/// The knee record of a search that stopped on a rejection: no range, a diagnosis.
fn knee_of_rejected(bundle: &Path) -> Value {
    let configs = lines(&bundle.join("configs.jsonl"));
    let k = &configs[0]["knees"][0];
    assert_eq!(k["outcome"]["limited_by"], "rejected", "{k}");
    assert!(k["outcome"]["range"].is_null(), "{k}");
    k["diagnosis"].clone()
}

/// A Node.js server (nobody here wrote its HTTP stack) whose one event loop spins 2 ms per
/// request: about 500 req/s, and the process never uses more than one of its two CPUs.
fn node_server() -> Server {
    let js = "const http = require('http');\
        const s = http.createServer((q, r) => {\
          const end = process.hrtime.bigint() + 2000000n;\
          while (process.hrtime.bigint() < end) {}\
          r.end('ok');\
        });\
        s.listen(0, '127.0.0.1', () => console.log('port ' + s.address().port));";
    let mut cmd = Command::new("node");
    cmd.args(["-e", js]);
    Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok())
}

#[test]
#[ignore = "needs Node.js (./test.sh installs it)"]
fn a_node_event_loop_is_named_as_one_thread_with_the_cpus_half_idle() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = node_server();
    let bundle = knee(
        &format!("http://127.0.0.1:{}/", node.port),
        &[
            "--slo",
            "p99<200ms",
            "--start",
            "100",
            "--max",
            "3200",
            "--confirm",
            "0",
        ],
    );
    let ([lo, hi], d) = knee_of(&bundle);
    assert!(lo >= 200.0 && hi <= 600.0, "knee between {lo} and {hi}");
    let f = util::lab::server_finding(&d);
    assert_eq!(f["bottleneck"], "thread_bound", "{d}");
    // The loop ran (or waited to run) nearly all the time, doing nearly all the process's
    // work, while the process used under 90 % of its two CPUs: its CPU time read against
    // what a VM's host left the CPUs (a thread's CPU time counts none of the stolen time).
    let figure = |k: &str| f["figures"][k].as_f64().unwrap();
    let left = 1.0 - f["figures"]["steal_share"].as_f64().unwrap_or(0.0);
    let (thread, waited) = (
        figure("busiest_thread_cpu") / left,
        figure("busiest_thread_wait"),
    );
    let process = figure("utilization") * figure("cpus") / left;
    assert!(
        thread + waited >= 0.9 || (thread >= 0.8 && thread >= 0.9 * process),
        "{f}"
    );
    assert!(figure("utilization") < 0.9, "{f}");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("its busiest thread (`node`)"),
        "{f}"
    );
    let kinds: Vec<&str> = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["bottleneck"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"cpu_bound"), "{kinds:?}");
    assert!(!kinds.contains(&"concurrency_bound"), "{kinds:?}");
}

#[test]
#[ignore = "needs gunicorn (./test.sh installs it)"]
fn gunicorn_with_two_sync_workers_is_concurrency_bound_at_its_knee() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The issue's own case, on a server nobody here wrote: a pre-fork gunicorn with 2
    // synchronous workers, each request sleeping 50 ms: 40 req/s at most, the CPU idle.
    let dir = temp_path("gunicorn-app");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("app.py"),
        "import time\n\
         def app(environ, start_response):\n    \
             time.sleep(0.05)\n    \
             start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', '2')])\n    \
             return [b'ok']\n",
    )
    .unwrap();
    let gunicorn = gunicorn(&dir, &[]);
    // gunicorn's master.
    let child_pid = gunicorn.pid();
    let url = gunicorn.url();
    let args = pool_search(2);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bundle = knee(&url, &args);
    let ([lo, hi], d) = knee_of(&bundle);
    assert!(lo >= 30.0 && hi <= 50.0, "knee between {lo} and {hi}");
    let named = named_concurrency(&d);
    assert!((named - 2.0).abs() <= 0.4, "≈{named}: {d}");
    let src = probed(&bundle);
    assert_eq!(src["kind"], "listener", "{src}");
    // The master, not one of its workers (they all hold the listening socket).
    assert_eq!(src["pid"], child_pid, "{src}");
}

#[test]
#[ignore = "needs root, for cgroups (./test.sh)"]
fn grpc_and_named_probes_pidfile_and_container_and_no_knee_below_max_is_an_answer() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // gRPC, with grpc's flags: the hello backend sustains far more than 40 calls/s, so the
    // search ends at --max with "at least 40", exit 0.
    let hello = serve(&["hello", "--bind", "127.0.0.1:0"]);
    let addr = format!("127.0.0.1:{}", hello.port);
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/helloworld.proto");
    let pidfile = temp_path("hello.pid");
    std::fs::write(&pidfile, format!("{}\n", hello.pid())).unwrap();
    let pidfile = pidfile.display().to_string();
    let bundle = knee(
        &addr,
        &[
            "--proto",
            proto,
            "--call",
            "helloworld.Greeter/SayHello",
            "-D",
            "{\"name\":\"knee\"}",
            "--start",
            "20",
            "--max",
            "40",
            "--probe-pidfile",
            &pidfile,
        ],
    );
    let configs = lines(&bundle.join("configs.jsonl"));
    let o = &configs[0]["knees"][0]["outcome"];
    assert_eq!(o["knee"], 40.0, "{o}");
    assert!(o["first_unsustained"].is_null(), "{o}");
    let steps = lines(&bundle.join("steps.jsonl"));
    assert_eq!(steps[0]["result"]["protocol"], "grpc");
    assert!(steps[0]["result"]["grpc_status"]["OK"].as_u64().unwrap() > 0);
    let src = probed(&bundle);
    assert_eq!(src["pid"], hello.pid(), "{src}");
    assert!(
        src["found"]
            .as_str()
            .unwrap()
            .contains(&format!("read from {pidfile}")),
        "{src}"
    );
    let plan = std::fs::read_to_string(bundle.join("plan.toml")).unwrap();
    assert!(plan.contains("protocol = \"grpc\""), "{plan}");

    // A container's cgroup, found by an ID prefix the way docker names its scopes.
    let server = Server::start(&[]);
    let (v2, _) = mounts();
    let id = format!(
        "{:0>64x}",
        0xfeed_0000_0000u64 + u64::from(std::process::id())
    );
    let _cg = TestCgroup::new(
        std::slice::from_ref(&v2.expect("a cgroup v2 mount")),
        &format!("docker-{id}.scope"),
        server.pid(),
    );
    let bundle = knee(
        &server.url(),
        &[
            "--start",
            "20",
            "--max",
            "40",
            "--probe-container",
            &id[..12],
        ],
    );
    let src = probed(&bundle);
    assert_eq!(src["kind"], "container", "{src}");
    assert_eq!(src["pid"], server.pid(), "{src}");
    assert!(src["cgroup"].as_str().unwrap().contains(&id), "{src}");
}

/// The knee of the server at `port` searched from `start` to `max` req/s: its first
/// unsustained step must be named by the limit `bottleneck` first, its evidence saying
/// `says`, and a pool named after it must be said to be the consequence of `limit`.
fn limit_named_first(port: u16, start: &str, max: &str, bottleneck: &str, says: &str, limit: &str) {
    let url = format!("http://127.0.0.1:{port}/");
    let args = [
        "--slo",
        "p99<1s",
        "--start",
        start,
        "--max",
        max,
        "--confirm",
        "0",
        "--timeout",
        "3s",
    ];
    let (_, d) = knee_of(&knee(&url, &args));
    let f = util::lab::server_finding(&d);
    assert_eq!(f["bottleneck"], bottleneck, "{d}");
    let evidence = f["evidence"].as_str().unwrap();
    assert!(evidence.contains(says), "{evidence}");
    let pools = d["findings"].as_array().unwrap().iter();
    for c in pools.filter(|f| f["bottleneck"] == "concurrency_bound") {
        let consequence = format!("consequence of the {limit} reached above");
        assert!(
            c["evidence"].as_str().unwrap().contains(&consequence),
            "{c}"
        );
    }
}

#[test]
#[ignore = "needs Node (./test.sh)"]
fn a_server_out_of_descriptors_is_named_by_its_nofile_before_the_concurrency_it_capped() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Node's http server, which nobody here wrote, under `prlimit --nofile=64`, each
    // answer 100 ms later: a few dozen connections at once use up its descriptors (it
    // holds about 20 of its own; open loop at 20 req/s already reaches the limit).
    let js = "const http = require('http');\n\
        const s = http.createServer((q, r) => setTimeout(() => r.end('ok'), 100));\n\
        s.listen(0, '127.0.0.1', () => console.log('port ' + s.address().port));";
    let mut cmd = Command::new("prlimit");
    cmd.args(["--nofile=64", "taskset", "-c", "0", "node", "-e", js]);
    let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    limit_named_first(
        server.port,
        "10",
        "640",
        "descriptors",
        "against its nofile limit of 64",
        "descriptor limit (nofile)",
    );
}

#[test]
#[ignore = "needs root and gunicorn, for cgroups (./test.sh)"]
fn a_gunicorn_whose_workers_leak_into_their_memory_limit_is_named_by_it_first() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // gunicorn's 2 synchronous workers, each request kept in memory (2 MB, written so
    // that its pages are resident) for 20 ms, in a cgroup of 128 MB: the OOM killer kills a
    // worker every few dozen requests and its master starts another.
    let dir = temp_path("gunicorn-leak");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("app.py"),
        "import time\n\
         kept = []\n\
         def app(environ, start_response):\n\
         \x20   kept.append(b'x' * (2 << 20))\n\
         \x20   time.sleep(0.02)\n\
         \x20   start_response('200 OK', [('Content-Length', '2')])\n\
         \x20   return [b'ok']\n",
    )
    .unwrap();
    let gunicorn = gunicorn(&dir, &[]);
    let name = format!("loadlab-knee-memory-{}", std::process::id());
    let (v2, v1) = mounts();
    let (mount, limit_file) = match v1.iter().find(|(c, _)| c == "memory") {
        Some((_, mount)) => (mount.clone(), "memory.limit_in_bytes"),
        None => {
            let root = v2.expect("a cgroup mount with the memory controller");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
            (root, "memory.max")
        }
    };
    let cg = TestCgroup::new(std::slice::from_ref(&mount), &name, gunicorn.pid());
    std::fs::write(
        mount.join(&name).join(limit_file),
        (128u64 << 20).to_string(),
    )
    .unwrap();
    // Its workers, forked before the master moved: the ones it forks later are born in it.
    for worker in util::children_of(gunicorn.pid()) {
        std::fs::write(mount.join(&name).join("cgroup.procs"), worker.to_string()).unwrap();
    }
    limit_named_first(
        gunicorn.port,
        "10",
        "320",
        "memory_limit",
        "OOM kill",
        "memory limit (memory.max)",
    );
    drop(gunicorn);
    drop(cg);
}

#[test]
#[ignore = "needs root, for cgroups (./test.sh)"]
fn a_forking_server_at_its_cgroups_pids_max_is_named_by_it_first() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Python's forking server (socketserver.ForkingMixIn), a process per request for 50
    // ms, in a cgroup of at most 10 tasks: 9 requests at once, then forks are refused.
    let py = "import time, socketserver, http.server\n\
        class H(http.server.BaseHTTPRequestHandler):\n\
        \x20   def do_GET(self):\n\
        \x20       time.sleep(0.05)\n\
        \x20       self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n\
        \x20       self.wfile.write(b'ok')\n\
        \x20   def log_message(self, *a): pass\n\
        class S(socketserver.ForkingMixIn, http.server.HTTPServer):\n\
        \x20   request_queue_size = 1024\n\
        s = S(('127.0.0.1', 0), H)\n\
        print('port', s.server_address[1], flush=True)\n\
        s.serve_forever()\n";
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "/usr/bin/python3", "-c", py]);
    let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    let name = format!("loadlab-knee-pids-{}", std::process::id());
    let (v2, v1) = mounts();
    let _cg = match v1.iter().find(|(c, _)| c == "pids") {
        Some((_, mount)) => {
            let cg = TestCgroup::new(std::slice::from_ref(mount), &name, server.pid());
            std::fs::write(mount.join(&name).join("pids.max"), "10").unwrap();
            cg
        }
        None => {
            let root = v2.expect("a cgroup mount with the pids controller");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+pids");
            let cg = TestCgroup::new(std::slice::from_ref(&root), &name, server.pid());
            std::fs::write(root.join(&name).join("pids.max"), "10").unwrap();
            cg
        }
    };
    limit_named_first(
        server.port,
        "40",
        "1280",
        "pids_limit",
        "of its 10 tasks",
        "process limit (pids.max)",
    );
}
