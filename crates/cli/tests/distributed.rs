//! Distributed load end to end: `loadlab agent` processes and a coordinator inside
//! `loadlab run`/`loadlab lab --agents N`. The agents run in network namespaces of their own
//! (each its own address), the coordinator and the target in a hub namespace, so the
//! server sees who sent what. One test at a time: they measure.

mod util;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use util::fabric::{Fabric, HUB_IP};
use util::lab::{fixture, lines};
use util::{loadlab_bin, temp_path};

static SERIAL: Mutex<()> = Mutex::new(());

const TOKEN: &str = "dGVzdC10b2tlbi1mb3ItbG9hZGxhYg==";

fn token_file() -> std::path::PathBuf {
    let p = temp_path("token");
    std::fs::write(&p, format!("{TOKEN}\n")).unwrap();
    p
}

/// A command inside namespace `ns`, or here when `None`.
fn command(ns: Option<&str>, program: &str) -> Command {
    match ns {
        Some(ns) => Fabric::command(ns, program),
        None => Command::new(program),
    }
}

/// Starts the fixture server on `host:port`, counting requests per peer into `counts`;
/// returns once it listens.
fn server(ns: Option<&str>, host: &str, port: u16, counts: &Path, extra: &[&str]) -> Child {
    let mut child = command(ns, &fixture())
        .args(["--bind", host, "--port", &port.to_string(), "--count-file"])
        .arg(counts)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "fixture said {line:?}");
    child
}

/// `loadlab agent` on CPU 1 (servers that are pinned go to CPU 0).
fn agent(ns: Option<&str>, coordinator: &str, token: &Path, name: &str, threads: u32) -> Child {
    command(ns, "taskset")
        .args(["-c", "1", loadlab_bin()])
        .args(["agent", "--coordinator", coordinator, "--token-file"])
        .arg(token)
        .args([
            "--name",
            name,
            "--threads",
            &threads.to_string(),
            "--wait",
            "60s",
        ])
        .stderr(std::fs::File::create(temp_path(&format!("{name}.log"))).unwrap())
        .spawn()
        .unwrap()
}

/// Waits for a child at most `limit`; kills it and fails if it is still running.
fn wait(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's own per-peer counts.
fn served_counts(path: &Path) -> Value {
    // The file is rewritten every 50 ms.
    std::thread::sleep(Duration::from_millis(200));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn three_agents_drive_a_fixed_rate_step_and_the_server_counts_what_they_report() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(3);
    let token = token_file();
    let count_file = temp_path("counts.json");
    let mut srv = server(Some(&f.hub), HUB_IP, 8080, &count_file, &[]);
    let coordinator = format!("{HUB_IP}:7878");
    // Weights 1, 1 and 2: shares of 150, 150 and 300 req/s.
    let threads = [1, 1, 2];
    let mut agents: Vec<Child> = (0..3)
        .map(|i| {
            agent(
                Some(&f.leaves[i]),
                &coordinator,
                &token,
                &format!("a{i}"),
                threads[i],
            )
        })
        .collect();
    let json = temp_path("dist.json");
    let csv = temp_path("dist.csv");
    let hlog = temp_path("dist.hlog");
    let mut run = command(Some(&f.hub), loadlab_bin())
        .args([
            "run",
            &format!("http://{HUB_IP}:8080/"),
            "--rate",
            "600",
            "-d",
            "3s",
        ])
        .args([
            "-c",
            "8",
            "--agents",
            "3",
            "--listen",
            &coordinator,
            "--token-file",
        ])
        .arg(&token)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--hlog")
        .arg(&hlog)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait(&mut run, Duration::from_secs(60), "the coordinator");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut run.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(st.success(), "{stdout}");
    for (i, a) in agents.iter_mut().enumerate() {
        let st = wait(a, Duration::from_secs(5), "an agent after the goodbye");
        assert!(st.success(), "agent a{i}: {st}");
    }
    let served = served_counts(&count_file);
    let _ = srv.kill();
    let _ = srv.wait();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    util::assert_schema_valid(&r);
    let agents = r["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 3);
    let mut total = 0;
    let mut firsts = Vec::new();
    for a in agents {
        let i: usize = a["name"].as_str().unwrap()[1..].parse().unwrap();
        // The split rule: the rate by threads, connections one each then by threads.
        let share = 600.0 * f64::from(threads[i]) / 4.0;
        assert_eq!(a["offered_rps"].as_f64(), Some(share), "{a}");
        assert_eq!(a["connections"].as_u64(), Some([2, 2, 4][i]), "{a}");
        assert_eq!(a["threads"].as_u64(), Some(u64::from(threads[i])), "{a}");
        let ip = Fabric::leaf_ip(i);
        assert!(a["address"].as_str().unwrap().starts_with(&ip), "{a}");
        let reported = a["requests"].as_u64().unwrap();
        let seen = served[&ip]["requests"].as_u64().unwrap();
        // The server saw exactly what the agent reports (no warm-up; every request
        // intended in the window is waited for).
        assert_eq!(
            seen, reported,
            "agent a{i} from {ip}: server {seen}, agent {reported}"
        );
        let expected = share * 3.0;
        assert!(
            (reported as f64 - expected).abs() <= expected * 0.02,
            "agent a{i}: {reported} requests for {expected}"
        );
        assert!(a["lost"].is_null());
        total += reported;
        firsts.push(served[&ip]["first_unix_ns"].as_u64().unwrap());
        // Its measured window began when planned, by its own account.
        assert!(a["start_skew_ms"].as_f64().unwrap().abs() < 50.0, "{a}");
    }
    assert_eq!(r["requests"].as_u64(), Some(total));
    assert_eq!(
        r["latency_ms"]["count"].as_u64(),
        Some(total),
        "merged histogram"
    );
    assert_eq!(r["offered_rps"].as_f64(), Some(600.0));
    assert_eq!(r["errors_total"].as_u64(), Some(0));
    // The agents' first requests reached the server within 50 ms of each other.
    let spread = firsts.iter().max().unwrap() - firsts.iter().min().unwrap();
    assert!(spread < 50_000_000, "first requests {spread} ns apart");
    // Per-second series merged: three full seconds of 600.
    let seconds: Vec<u64> = r["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .collect();
    // (Responses are counted in the second they complete: the last requests of the window
    // may complete just after it.)
    assert!(
        seconds.len() == 3 || seconds.len() == 4 && seconds[3] <= 10,
        "{seconds:?}"
    );
    assert_eq!(seconds.iter().sum::<u64>(), total, "{seconds:?}");
    assert!(
        seconds[..3].iter().all(|&n| (585..=615).contains(&n)),
        "{seconds:?}"
    );
    assert!(stdout.contains("agents          3"), "{stdout}");
    // The outputs other tools read hold the merged run: a CSV row and an interval-log
    // histogram per merged second, the CSV's counts adding up to the agents' total.
    let csv = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let completed = header.iter().position(|h| *h == "completed").unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), seconds.len(), "{csv}");
    let csv_total: u64 = rows
        .iter()
        .map(|r| r[completed].parse::<u64>().unwrap())
        .sum();
    assert_eq!(csv_total, total, "{csv}");
    let hlog = std::fs::read_to_string(&hlog).unwrap();
    let histograms = hlog
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
        .count();
    assert_eq!(histograms, seconds.len(), "{hlog}");
}

/// A knee-search plan against the token-bucket fixture (503 above 200 req/s) on the hub,
/// pinned to CPU 0; loadlab (and the agents, see [`agent`]) on CPU 1, so that the
/// generators stay on schedule on a 2-core machine.
fn knee_plan() -> std::path::PathBuf {
    let text = format!(
        r#"name = "distributed-knee"
[[target]]
name = "fixture"
command = ["{fixture}", "--bind", "{HUB_IP}", "--port", "{{port}}", "--capacity", "200"]
ready = {{ http = "http://{HUB_IP}:{{port}}/", status = 200 }}
stop_grace = "1s"
cpus = "0"

[[scenario]]
name = "s"
url = "http://{HUB_IP}:{{port}}/"
timeout = "1s"

[load]
model = "open"
knee = {{ start = 50, max = 1600, precision = 0.05 }}
step_duration = "2s"
warmup = "200ms"
pause = "200ms"
connections = 8
threads = 1
cpus = "1"

[slo]
p99_ms = 100
max_error_rate = 0.01
min_achieved_ratio = 0.9
"#,
        fixture = fixture()
    );
    let p = temp_path("knee.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn knee_of(bundle: &Path) -> f64 {
    let configs = lines(&bundle.join("configs.jsonl"));
    let outcome = &configs[0]["knees"][0]["outcome"];
    outcome["knee"]
        .as_f64()
        .unwrap_or_else(|| panic!("no knee: {outcome}"))
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn a_knee_search_with_three_agents_finds_the_knee_of_one_local_run() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(3);
    let plan = knee_plan();
    let local = temp_path("knee-local");
    let (out, _) = util::output_within(
        command(Some(&f.hub), loadlab_bin())
            .args(["lab", "-q"])
            .arg(&plan)
            .arg("--out")
            .arg(&local),
        util::lab::LAB_BOUND,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = token_file();
    let coordinator = format!("{HUB_IP}:7878");
    let mut agents: Vec<Child> = (0..3)
        .map(|i| {
            agent(
                Some(&f.leaves[i]),
                &coordinator,
                &token,
                &format!("k{i}"),
                1,
            )
        })
        .collect();
    let dist = temp_path("knee-dist");
    let mut lab = command(Some(&f.hub), loadlab_bin())
        .args(["lab", "-q"])
        .arg(&plan)
        .arg("--out")
        .arg(&dist)
        .args(["--agents", "3", "--listen", &coordinator, "--token-file"])
        .arg(&token)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait(
        &mut lab,
        Duration::from_secs(240),
        "the distributed knee search",
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut lab.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{err}");
    for a in &mut agents {
        assert!(wait(a, Duration::from_secs(5), "an agent").success());
    }
    let (k1, k3) = (knee_of(&local), knee_of(&dist));
    assert!(
        (k3 - k1).abs() <= 0.10 * k1,
        "three agents found {k3}, one local run {k1}"
    );
    assert!(
        (180.0..=220.0).contains(&k3),
        "knee {k3} for a capacity of 200"
    );
    // Every step was driven by all three, merged, and its shares add up.
    for step in lines(&dist.join("steps.jsonl")) {
        let r = &step["result"];
        util::assert_schema_valid(r);
        let agents = r["agents"].as_array().unwrap();
        assert_eq!(agents.len(), 3);
        let offered: f64 = agents
            .iter()
            .map(|a| a["offered_rps"].as_f64().unwrap())
            .sum();
        assert!((offered - r["offered_rps"].as_f64().unwrap()).abs() < 1e-6);
        let requests: u64 = agents.iter().map(|a| a["requests"].as_u64().unwrap()).sum();
        assert_eq!(r["requests"].as_u64().unwrap(), requests);
    }
    let report = std::fs::read_to_string(dist.join("report.md")).unwrap();
    assert!(report.contains("## Agents"), "{report}");
    assert!(report.contains("| k2 |"), "{report}");
}

/// A plan of `steps` fixed 2 s steps at 200 req/s against the fixture on the hub, which
/// counts requests per peer into `counts`.
fn fixed_plan(steps: usize, counts: &Path) -> std::path::PathBuf {
    let text = format!(
        r#"name = "distributed-fixed"
[[target]]
name = "fixture"
command = ["{fixture}", "--bind", "{HUB_IP}", "--port", "{{port}}", "--count-file", "{counts}"]
ready = {{ http = "http://{HUB_IP}:{{port}}/", status = 200 }}
stop_grace = "1s"

[[scenario]]
name = "s"
url = "http://{HUB_IP}:{{port}}/"

[load]
model = "open"
steps = [{steps}]
step_duration = "2s"
pause = "100ms"
connections = 4

[slo]
p99_ms = 100
"#,
        fixture = fixture(),
        counts = counts.display(),
        steps = vec!["200"; steps].join(", ")
    );
    let p = temp_path("fixed.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The coordinator's address on the hub.
fn hub_coordinator() -> String {
    format!("{HUB_IP}:7878")
}

/// `loadlab lab PLAN --agents 2 --on-agent-loss POLICY` on the hub, quiet, its stderr piped.
fn lab_with_two_agents(f: &Fabric, plan: &Path, out: &Path, token: &Path, policy: &str) -> Child {
    let mut c = command(Some(&f.hub), loadlab_bin());
    c.args(["lab", "-q"]).arg(plan).arg("--out").arg(out);
    coordinating(&mut c, 2, token)
        .args(["--on-agent-loss", policy])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `cmd` as the coordinator of `agents` agents, on the hub, holding `token`.
fn coordinating<'a>(cmd: &'a mut Command, agents: usize, token: &Path) -> &'a mut Command {
    cmd.args([
        "--agents",
        &agents.to_string(),
        "--listen",
        &hub_coordinator(),
        "--token-file",
    ])
    .arg(token)
}

/// The stderr a finished child wrote to its pipe.
fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
    }
    err
}

/// `loadlab lab PLAN --agents 2` on the hub with two agents in their leaves; the second is
/// killed once the first step is under way.
fn lab_losing_an_agent(policy: &str) -> (std::path::PathBuf, ExitStatus, String) {
    let f = Fabric::new(2);
    let counts = temp_path("counts.json");
    let plan = fixed_plan(3, &counts);
    let token = token_file();
    let mut keep = agent(Some(&f.leaves[0]), &hub_coordinator(), &token, "keep", 1);
    let mut doomed = agent(Some(&f.leaves[1]), &hub_coordinator(), &token, "doomed", 1);
    let out = temp_path("lost-bundle");
    let mut lab = lab_with_two_agents(&f, &plan, &out, &token, policy);
    // Once the server has answered the doomed agent's first requests, kill it.
    let doomed_ip = Fabric::leaf_ip(1);
    wait_for_load_from(&counts, &doomed_ip);
    std::thread::sleep(Duration::from_millis(700));
    doomed.kill().unwrap();
    let _ = doomed.wait();
    let st = wait(&mut lab, Duration::from_secs(60), "the coordinator");
    let err = stderr_of(&mut lab);
    assert!(
        wait(&mut keep, Duration::from_secs(5), "the agent left").success(),
        "the agent left is released"
    );
    (out, st, err)
}

/// Waits until the server has counted requests from `ip`.
fn wait_for_load_from(counts: &Path, ip: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    let served = || {
        std::fs::read_to_string(counts)
            .ok()
            .and_then(|c| serde_json::from_str::<Value>(&c).ok())
            .and_then(|v| v[ip]["requests"].as_u64())
            .unwrap_or(0)
    };
    while served() == 0 {
        assert!(Instant::now() < end, "no load from {ip} reached the server");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn an_agent_killed_mid_step_is_agent_lost_and_the_run_goes_on_without_it() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (out, st, err) = lab_losing_an_agent("continue");
    assert!(st.success(), "{err}");
    let steps = lines(&out.join("steps.jsonl"));
    // Every step ran, the one that lost an agent twice: it said nothing of the server, and the
    // lab tried it once more on the agent left.
    assert_eq!(steps.len(), 4, "every step ran, the first again");
    assert_eq!(steps[0]["load"], steps[1]["load"]);
    let first = &steps[0];
    // (On two shared cores under load the step may also be generator-limited: listed too.)
    assert!(
        first["verdict"]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "agent_lost"),
        "{}",
        first["verdict"]
    );
    let agents = first["result"]["agents"].as_array().unwrap();
    let doomed = agents.iter().find(|a| a["name"] == "doomed").unwrap();
    let keep = agents.iter().find(|a| a["name"] == "keep").unwrap();
    assert!(doomed["lost"].as_str().is_some(), "{doomed}");
    assert!(
        doomed["address"]
            .as_str()
            .unwrap()
            .starts_with(&Fabric::leaf_ip(1)),
        "{doomed}"
    );
    assert_eq!(
        first["result"]["requests"], keep["requests"],
        "the step holds what the agent left measured"
    );
    // Its whole share: 100 req/s for 2 s.
    assert!(keep["requests"].as_u64().unwrap() >= 195, "{keep}");
    // The merged step is generator-limited exactly when the agent left was (a lost agent is
    // not the generator's limit), and the loss is a warning, not a generator note.
    assert_eq!(
        first["result"]["generator_limited"],
        keep["generator_limited"]
    );
    assert!(
        first["result"]["warnings"]
            .to_string()
            .contains("agent doomed was lost during the step"),
        "{}",
        first["result"]["warnings"]
    );
    // The rest ran on the agent left, with the whole load.
    for s in &steps[1..] {
        let a = s["result"]["agents"].as_array().unwrap();
        assert_eq!(a.len(), 1, "{s}");
        assert_eq!(a[0]["offered_rps"].as_f64(), Some(200.0));
        let limits = s["verdict"]["limits"].as_array().unwrap();
        assert!(!limits.iter().any(|l| l == "agent_lost"), "{s}");
        // All of it: 200 req/s for 2 s.
        assert!(s["result"]["requests"].as_u64().unwrap() >= 392, "{s}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("agent lost (doomed)"), "{report}");
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn with_on_agent_loss_stop_the_run_stops_and_keeps_what_it_measured() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (out, st, err) = lab_losing_an_agent("stop");
    // The run stopped on purpose after a measured step: not a failure of loadlab.
    assert!(st.success(), "{err}");
    // Said even with -q: the run ended early, and why.
    assert!(
        err.contains("stopping the run") && err.contains("(--on-agent-loss stop)"),
        "{err}"
    );
    let steps = lines(&out.join("steps.jsonl"));
    assert_eq!(
        steps.len(),
        1,
        "stopped after the step that lost an agent: {err}"
    );
    assert!(steps[0]["result"]["requests"].as_u64().unwrap() > 0);
    assert!(
        steps[0]["verdict"]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "agent_lost"),
        "{}",
        steps[0]["verdict"]
    );
    assert!(out.join("report.md").exists());
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn ctrl_c_on_the_coordinator_stops_the_agents_within_a_second() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(2);
    let counts = temp_path("counts.json");
    let plan = fixed_plan(3, &counts);
    let token = token_file();
    let mut agents: Vec<Child> = ["c0", "c1"]
        .iter()
        .enumerate()
        .map(|(i, n)| agent(Some(&f.leaves[i]), &hub_coordinator(), &token, n, 1))
        .collect();
    let out = temp_path("ctrlc-bundle");
    let mut lab = lab_with_two_agents(&f, &plan, &out, &token, "continue");
    // Interrupt one second into the second step.
    let end = Instant::now() + Duration::from_secs(30);
    while lines_or_empty(&out.join("steps.jsonl")) < 1 {
        assert!(Instant::now() < end, "the first step never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let interrupted = unix_ns();
    // SAFETY: signalling our own child (`ip netns exec` became loadlab).
    unsafe { libc::kill(lab.id() as i32, libc::SIGINT) };
    let st = wait(
        &mut lab,
        Duration::from_secs(20),
        "the interrupted coordinator",
    );
    let err = stderr_of(&mut lab);
    for a in &mut agents {
        assert!(
            wait(a, Duration::from_secs(5), "an agent").success(),
            "{err}"
        );
    }
    // Interrupted after a finished step: the bundle holds it, and loadlab exits 130 (128 +
    // SIGINT: an interrupted plan is not a verdict).
    assert_eq!(st.code(), Some(130), "{err}");
    // The server saw nothing from either agent more than a second after Ctrl-C.
    assert!(counts.exists(), "the fixture wrote no counts");
    let served = served_counts(&counts);
    for i in 0..2 {
        let ip = Fabric::leaf_ip(i);
        let last = served[&ip]["last_unix_ns"].as_u64().unwrap();
        assert!(
            u128::from(last) < interrupted + 1_000_000_000,
            "load from {ip} went on {} ms after Ctrl-C",
            (u128::from(last) - interrupted) / 1_000_000
        );
    }
    // Every finished step is in the bundle, the interrupted one marked so.
    let steps = lines(&out.join("steps.jsonl"));
    assert!(!steps.is_empty());
    // (On two shared cores a step may be generator-limited; that is the verdict's business.)
    assert_eq!(
        steps[0]["result"]["stop_reason"], "duration",
        "{}",
        steps[0]
    );
    assert!(
        steps[0]["result"]["requests"].as_u64().unwrap() >= 392,
        "{}",
        steps[0]
    );
    if let Some(s) = steps.get(1) {
        assert_eq!(s["result"]["stop_reason"], "interrupted", "{s}");
    }
    assert!(out.join("report.md").exists());
}

fn lines_or_empty(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// A `loadlab agent` in `ns` that is expected to be refused: its exit status and stderr,
/// within 20 s (it retries until the coordinator answers, then stops at the refusal).
fn refused_agent(ns: &str, token: &Path) -> (Option<i32>, String) {
    let (out, took) = util::output_within(
        command(Some(ns), loadlab_bin())
            .args(["agent", "--coordinator", &hub_coordinator(), "--token-file"])
            .arg(token)
            .args(["--name", "stranger", "--wait", "10s"]),
        Duration::from_secs(60),
    );
    assert!(took < Duration::from_secs(20), "refused after {took:?}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn a_wrong_token_is_refused_with_its_message() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(1);
    let token = token_file();
    let mut run = command(Some(&f.hub), loadlab_bin())
        .args([
            "run",
            &format!("http://{HUB_IP}:9/"),
            "--rate",
            "10",
            "-d",
            "1s",
        ])
        .args([
            "--agents",
            "1",
            "--listen",
            &hub_coordinator(),
            "--agent-wait",
            "3s",
            "--token-file",
        ])
        .arg(&token)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bad = temp_path("bad-token");
    std::fs::write(&bad, "not-the-token").unwrap();
    // The agent may start before the coordinator listens: it retries until it answers.
    let (code, err) = refused_agent(&f.leaves[0], &bad);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("refused this agent: wrong or missing token"),
        "{err}"
    );
    let st = wait(&mut run, Duration::from_secs(10), "the coordinator");
    let cerr = stderr_of(&mut run);
    assert_eq!(st.code(), Some(1), "{cerr}");
    assert!(
        cerr.contains(&format!(
            "refused an agent or probe from {}",
            Fabric::leaf_ip(0)
        )),
        "{cerr}"
    );
    assert!(cerr.contains("0 of 1 agents joined within 3s"), "{cerr}");
}

/// An agent of another loadlab version is refused at join, both versions named on both
/// sides: a real `loadlab agent` dials a coordinator (the real one, in an example program)
/// that claims another version.
#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn an_agent_of_another_version_is_refused_naming_both() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(1);
    let token = token_file();
    let other = "0.0.1 (fleet protocol 0)";
    let mut coordinator = command(
        Some(&f.hub),
        &util::lab::example("other_version_coordinator"),
    )
    .args(["--listen", &hub_coordinator(), "--token-file"])
    .arg(&token)
    .args(["--version", other, "--wait", "3"])
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let (code, err) = refused_agent(&f.leaves[0], &token);
    let ours = loadlab_fleet::version();
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "runs loadlab {ours}, but this coordinator runs loadlab {other}"
        )),
        "{err}"
    );
    let st = wait(&mut coordinator, Duration::from_secs(10), "the coordinator");
    let cerr = stderr_of(&mut coordinator);
    assert_eq!(st.code(), Some(1), "{cerr}");
    assert!(
        cerr.contains(&format!(
            "refused agent stranger from {}",
            Fabric::leaf_ip(0)
        )) && cerr.contains(&format!(
            "it runs loadlab {ours}, this coordinator runs loadlab {other}"
        )),
        "{cerr}"
    );
}

/// The coordinator is killed (`SIGKILL`: its connections close at once) or frozen
/// (`SIGSTOP`: it goes silent, and only the agent's keep-alive pings notice): either way the
/// agent's load stops within a second, by the server's own count.
fn an_agent_stops_within_a_second_when_its_coordinator(signal: i32) {
    let f = Fabric::new(1);
    let counts = temp_path("counts.json");
    let mut srv = server(Some(&f.hub), HUB_IP, 8080, &counts, &[]);
    let token = token_file();
    let mut run = command(Some(&f.hub), loadlab_bin())
        .args([
            "run",
            &format!("http://{HUB_IP}:8080/"),
            "--rate",
            "200",
            "-d",
            "20s",
        ])
        .args([
            "--agents",
            "1",
            "--listen",
            &hub_coordinator(),
            "--token-file",
        ])
        .arg(&token)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut a = command(Some(&f.leaves[0]), loadlab_bin())
        .args(["agent", "--coordinator", &hub_coordinator(), "--token-file"])
        .arg(&token)
        .args(["--name", "orphan", "--wait", "2s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ip = Fabric::leaf_ip(0);
    wait_for_load_from(&counts, &ip);
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child (`ip netns exec` became loadlab).
    unsafe { libc::kill(run.id() as i32, signal) };
    let gone = unix_ns();
    // The agent stops, tries to reconnect for its --wait, and gives up.
    let st = wait(&mut a, Duration::from_secs(10), "the orphaned agent");
    let err = stderr_of(&mut a);
    let _ = run.kill();
    let _ = run.wait();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("lost the coordinator"), "{err}");
    assert!(err.contains("no coordinator answered"), "{err}");
    let served = served_counts(&counts);
    let _ = srv.kill();
    let _ = srv.wait();
    let last = served[&ip]["last_unix_ns"].as_u64().unwrap();
    assert!(
        u128::from(last) < gone + 1_000_000_000,
        "load went on {} ms after signal {signal} to the coordinator",
        (u128::from(last) - gone) / 1_000_000
    );
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn an_agent_stops_the_load_within_a_second_when_the_coordinator_is_gone() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    an_agent_stops_within_a_second_when_its_coordinator(libc::SIGKILL);
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn an_agent_stops_the_load_within_a_second_when_the_coordinator_goes_silent() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    an_agent_stops_within_a_second_when_its_coordinator(libc::SIGSTOP);
}

/// `loadlab grpc --agents 2` over TLS: the coordinator has a certificate from a private CA
/// (`--tls-cert`, `--tls-key`), the agents trust that CA (`--tls-ca`) and reach it by its
/// name (`--tls-domain`); an agent that does not trust it never joins. The gRPC calls are
/// split and merged like HTTP requests.
#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn grpc_load_from_two_agents_over_a_tls_control_channel() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(3);
    let token = token_file();
    let ca = util::tls::Ca::new();
    let (cert, key) = ca.issue_pem(&["coordinator.test"]);
    let (cert_file, key_file, ca_file) = (
        temp_path("coord.pem"),
        temp_path("coord.key"),
        temp_path("ca.pem"),
    );
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let mut greeter = command(Some(&f.hub), "taskset")
        .args(["-c", "0", loadlab_bin(), "serve", "greeter-tokio"])
        .args(["--bind", &format!("{HUB_IP}:50051"), "--threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tls_agent = |i: usize| {
        command(Some(&f.leaves[i]), "taskset")
            .args(["-c", "1", loadlab_bin()])
            .args(["agent", "--coordinator", &hub_coordinator(), "--token-file"])
            .arg(&token)
            .args([
                "--name",
                &format!("g{i}"),
                "--threads",
                "1",
                "--wait",
                "60s",
            ])
            .arg("--tls-ca")
            .arg(&ca_file)
            .args(["--tls-domain", "coordinator.test"])
            .stderr(std::fs::File::create(temp_path(&format!("g{i}.log"))).unwrap())
            .spawn()
            .unwrap()
    };
    let mut agents: Vec<Child> = (0..2).map(tls_agent).collect();
    // Without the CA it cannot join: it gives up after its --wait.
    let (untrusting, _) = util::output_within(
        command(Some(&f.leaves[2]), loadlab_bin())
            .args(["agent", "--coordinator", &hub_coordinator(), "--token-file"])
            .arg(&token)
            .args(["--name", "untrusting", "--wait", "2s"]),
        Duration::from_secs(60),
    );
    let json = temp_path("grpc-dist.json");
    let mut grpc = command(Some(&f.hub), loadlab_bin());
    grpc.args(["grpc", &format!("{HUB_IP}:50051"), "--proto"])
        .arg(util::helloworld_proto())
        .args([
            "--call",
            "helloworld.Greeter/SayHello",
            "-D",
            r#"{"name":"d"}"#,
        ])
        .args(["--rate", "200", "-d", "2s", "-c", "2", "-q"]);
    coordinating(&mut grpc, 2, &token)
        .arg("--tls-cert")
        .arg(&cert_file)
        .arg("--tls-key")
        .arg(&key_file)
        .arg("--json")
        .arg(&json);
    let (out, took) = util::output_within(&mut grpc, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    for a in &mut agents {
        assert!(wait(a, Duration::from_secs(5), "an agent").success());
    }
    // A bidirectional stream through two new agents: each holds its share of the streams
    // and sends its share of the messages, each message rendered there (`${seq}`), and the
    // merged result counts every message once.
    let mut agents: Vec<Child> = (0..2).map(tls_agent).collect();
    let chat_json = temp_path("grpc-dist-chat.json");
    let mut chat = command(Some(&f.hub), loadlab_bin());
    chat.args(["grpc", &format!("{HUB_IP}:50051"), "--proto"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../proto/ticker.proto"
        ))
        .args([
            "--call",
            "ticker.Ticker/Chat",
            "-D",
            r#"{"seq":"${seq}","text":"d"}"#,
        ])
        .args(["--rate", "200", "-d", "2s", "-c", "2", "--concurrency", "8"])
        .arg("-q");
    coordinating(&mut chat, 2, &token)
        .arg("--tls-cert")
        .arg(&cert_file)
        .arg("--tls-key")
        .arg(&key_file)
        .arg("--json")
        .arg(&chat_json);
    let (out, _) = util::output_within(&mut chat, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for a in &mut agents {
        assert!(wait(a, Duration::from_secs(5), "an agent").success());
    }
    let _ = greeter.kill();
    let _ = greeter.wait();
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&chat_json).unwrap()).unwrap();
    util::assert_schema_valid(&c);
    assert_eq!(c["protocol"], "grpc_bidi_stream", "{c}");
    assert_eq!(c["errors_total"].as_u64(), Some(0), "{c}");
    let mut messages = 0;
    for a in c["agents"].as_array().expect("agents") {
        assert_eq!(a["offered_rps"].as_f64(), Some(100.0), "{a}");
        let n = a["requests"].as_u64().unwrap();
        assert!((195..=205).contains(&n), "{a}");
        messages += n;
    }
    assert_eq!(c["successful"].as_u64(), Some(messages), "{c}");
    assert_eq!(c["latency_ms"]["count"].as_u64(), Some(messages), "{c}");
    // Every stream held by one agent or the other: 8 in all, 4 each.
    assert_eq!(c["connections_held"].as_u64(), Some(8), "{c}");
    let uerr = String::from_utf8_lossy(&untrusting.stderr);
    assert_eq!(untrusting.status.code(), Some(1), "{uerr}");
    assert!(uerr.contains("no coordinator answered"), "{uerr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    util::assert_schema_valid(&r);
    assert_eq!(r["protocol"], "grpc", "{r}");
    let agents = r["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 2, "{r}");
    let mut total = 0;
    for a in agents {
        // One thread each: half the rate, one connection each.
        assert_eq!(a["offered_rps"].as_f64(), Some(100.0), "{a}");
        assert_eq!(a["connections"].as_u64(), Some(1), "{a}");
        let n = a["requests"].as_u64().unwrap();
        assert!((195..=205).contains(&n), "{a}");
        total += n;
    }
    assert_eq!(r["requests"].as_u64(), Some(total));
    assert_eq!(r["successful"].as_u64(), Some(total), "{r}");
    assert_eq!(r["grpc_status"]["OK"].as_u64(), Some(total), "{r}");
    assert_eq!(r["latency_ms"]["count"].as_u64(), Some(total));
}
