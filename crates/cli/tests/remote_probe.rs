//! A probe on another host end to end: `loadlab probe` beside the server in one network
//! namespace (the server's host), the coordinator (`loadlab knee` or `loadlab lab` with
//! `--remote-probe`) in the hub, and, where the load is distributed, a `loadlab agent` in a
//! third namespace. The server is the fixture's pool of 2 slots held 50 ms each: 40 req/s at
//! most with its CPU idle, so every run must find the same concurrency bound as a local
//! probe does. One test at a time: they measure.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::fabric::{Fabric, HUB_IP};
use util::lab::{fixture, lines};
use util::{loadlab_bin, output_within, temp_path};

static SERIAL: Mutex<()> = Mutex::new(());

const TOKEN: &str = "cmVtb3RlLXByb2JlLXRva2Vu";
/// The server's port on its host.
const PORT: u16 = 8080;

fn token_file() -> PathBuf {
    let p = temp_path("token");
    std::fs::write(&p, format!("{TOKEN}\n")).unwrap();
    p
}

fn hub_coordinator() -> String {
    format!("{HUB_IP}:7878")
}

/// The server's URL, on its host (leaf 0).
fn server_url() -> String {
    format!("http://{}:{PORT}/", Fabric::leaf_ip(0))
}

/// The pool fixture in `ns` (2 slots of 50 ms); returns once it listens.
fn pool_server(ns: &str) -> Child {
    let mut child = Fabric::command(ns, &fixture())
        .args(["--bind", &Fabric::leaf_ip(0), "--port", &PORT.to_string()])
        .args(["--pool", "2", "--service-ms", "50"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("listening on"), "fixture said {line:?}");
    child
}

/// `loadlab probe --listen PORT` in `ns`, its stderr in a file (returned).
fn probe(ns: &str, token: &Path, name: &str) -> (Child, PathBuf) {
    let log = temp_path(&format!("{name}.log"));
    let child = Fabric::command(ns, loadlab_bin())
        .args(["probe", "--coordinator", &hub_coordinator(), "--token-file"])
        .arg(token)
        .args([
            "--listen",
            &PORT.to_string(),
            "--name",
            name,
            "--wait",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

/// `loadlab agent` in `ns`, on CPU 1.
fn agent(ns: &str, token: &Path, name: &str) -> Child {
    Fabric::command(ns, "taskset")
        .args(["-c", "1", loadlab_bin()])
        .args(["agent", "--coordinator", &hub_coordinator(), "--token-file"])
        .arg(token)
        .args(["--name", name, "--threads", "1", "--wait", "60s"])
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
            let _ = child.wait();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The knee search of these tests: short steps from 10 to 160 req/s.
const KNEE: [&str; 12] = [
    "--slo",
    "p99<200ms",
    "--step",
    "2s",
    "--warmup",
    "500ms",
    "--start",
    "10",
    "--max",
    "160",
    "-q",
    "--out",
];

/// `loadlab knee URL ...KNEE OUT extra` in `ns`, bounded; its output and how long it took.
fn knee(ns: &str, out: &Path, extra: &[&str]) -> (std::process::Output, Duration) {
    output_within(
        Fabric::command(ns, loadlab_bin())
            .args(["knee", &server_url()])
            .args(KNEE)
            .arg(out)
            .args(extra),
        Duration::from_secs(240),
    )
}

/// The first step not sustained.
fn first_unsustained(steps: &[Value]) -> &Value {
    steps
        .iter()
        .find(|s| s["verdict"]["sustained"] == false)
        .unwrap_or_else(|| panic!("every step was sustained"))
}

/// The bottleneck and the requests in service of a step's first finding.
fn bottleneck(step: &Value) -> (String, f64) {
    let f = &step["diagnosis"]["findings"][0];
    (
        f["bottleneck"].as_str().unwrap_or("none").to_string(),
        f["figures"]["in_service"].as_f64().unwrap_or(f64::NAN),
    )
}

fn text(o: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn a_knee_with_an_agent_and_a_remote_probe_finds_what_a_local_run_finds() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(2);
    let (server_ns, agent_ns) = (&f.leaves[0], &f.leaves[1]);
    let mut srv = pool_server(server_ns);
    // The same search run on the server's host, probed locally (the listener on the URL's
    // port), to compare with.
    // A search whose first unsustained step was loadlab's own lateness (`generator`, on a
    // busy machine) says nothing about the server: it is run again, twice at most.
    let local = temp_path("knee-local");
    let mut local_took = Duration::ZERO;
    for attempt in 1..=3 {
        let _ = std::fs::remove_dir_all(&local);
        let (out, took) = knee(server_ns, &local, &[]);
        assert!(out.status.success(), "{}", text(&out));
        local_took = took;
        let steps = lines(&local.join("steps.jsonl"));
        let (name, _) = bottleneck(first_unsustained(&steps));
        if name != "generator" {
            break;
        }
        assert!(
            attempt < 3,
            "the local search was generator-limited 3 times"
        );
        eprintln!("local knee: first unsustained step was loadlab's own lateness; again");
    }
    let token = token_file();
    let (mut probe, probe_log) = probe(server_ns, &token, "srv-probe");
    let mut agent = agent(agent_ns, &token, "gen-1");
    let dist = temp_path("knee-remote");
    let mut extra = vec!["--agents", "1", "--remote-probe", "--listen"];
    let coordinator = hub_coordinator();
    extra.push(&coordinator);
    extra.push("--token-file");
    let token_arg = token.display().to_string();
    extra.push(&token_arg);
    let (out, remote_took) = knee(&f.hub, &dist, &extra);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        wait(&mut agent, Duration::from_secs(5), "the agent").success(),
        "the agent leaves on the goodbye"
    );
    let probe_st = wait(&mut probe, Duration::from_secs(5), "the probe");
    let plog = std::fs::read_to_string(&probe_log).unwrap();
    assert!(
        probe_st.success(),
        "the probe exits 0 on the goodbye: {plog}"
    );
    assert!(plog.contains("the coordinator ended the run"), "{plog}");
    let _ = srv.kill();
    let _ = srv.wait();
    eprintln!("local knee {local_took:?}, remote knee {remote_took:?}");

    let outcome = &lines(&dist.join("configs.jsonl"))[0]["knees"][0]["outcome"];
    let (lo, hi) = (
        outcome["knee"].as_f64().unwrap_or(0.0),
        outcome["first_unsustained"].as_f64().unwrap_or(f64::MAX),
    );
    assert!(
        lo >= 30.0 && hi <= 50.0,
        "knee {lo}..{hi} for 40 req/s: {outcome}"
    );
    let steps = lines(&dist.join("steps.jsonl"));
    let (name, in_service) = bottleneck(first_unsustained(&steps));
    assert_eq!(name, "concurrency_bound", "{}", first_unsustained(&steps));
    assert!(
        (1.6..=2.4).contains(&in_service),
        "≈{in_service} in service for a pool of 2"
    );
    // The same as the local probe found.
    let local_steps = lines(&local.join("steps.jsonl"));
    let (local_name, local_in_service) = bottleneck(first_unsustained(&local_steps));
    assert_eq!(name, local_name, "remote and local runs disagree");
    assert!(
        (in_service - local_in_service).abs() <= 0.2 * local_in_service,
        "in service: remote {in_service}, local {local_in_service}"
    );
    // Every step was probed by the remote probe, with its limits, none lost; the load came
    // from the agent.
    for s in &steps {
        let p = &s["probes"];
        let found = p["source"]["found"].as_str().unwrap_or_default();
        assert!(
            found.contains(&format!("found listening on :{PORT}"))
                && found.contains("via loadlab probe srv-probe"),
            "{found}"
        );
        assert!(p["limits"]["cpus"].as_f64().is_some(), "{p}");
        assert!(p.get("lost").is_none(), "{}", p["lost"]);
        assert!(p["samples"].as_array().unwrap().len() >= 2, "{p}");
        assert_eq!(s["result"]["agents"].as_array().map(Vec::len), Some(1));
    }
    assert!(
        said.contains("probed: pid") && said.contains("via loadlab probe srv-probe"),
        "{said}"
    );
}

/// A plan of three fixed 2 s steps at 20 req/s against the server on leaf 0, which loadlab
/// does not start.
fn fixed_plan() -> PathBuf {
    let text = format!(
        r#"name = "remote-probe-fixed"
[[scenario]]
name = "s"
url = "{url}"
timeout = "2s"

[load]
model = "open"
steps = [20, 20, 20]
step_duration = "2s"
pause = "100ms"
connections = 4
"#,
        url = server_url()
    );
    let p = temp_path("fixed.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn a_probe_killed_mid_step_is_a_warning_and_the_run_goes_on() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(1);
    let server_ns = &f.leaves[0];
    let mut srv = pool_server(server_ns);
    let token = token_file();
    let (mut probe, _) = probe(server_ns, &token, "doomed-probe");
    let out = temp_path("lost-probe-bundle");
    // No agents: the coordinator only waits for the probe, and the load runs here.
    let started = Instant::now();
    let mut lab = Fabric::command(&f.hub, loadlab_bin())
        .args(["lab", "-q"])
        .arg(fixed_plan())
        .arg("--out")
        .arg(&out)
        .args([
            "--remote-probe",
            "--listen",
            &hub_coordinator(),
            "--token-file",
        ])
        .arg(&token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first step is written, the second runs: kill the probe a second into it.
    let end = Instant::now() + Duration::from_secs(60);
    while lines(&out.join("steps.jsonl")).is_empty() {
        assert!(Instant::now() < end, "the first step never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1000));
    probe.kill().unwrap();
    let _ = probe.wait();
    let st = wait(&mut lab, Duration::from_secs(60), "the coordinator");
    let took = started.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut lab.stderr.take().unwrap(), &mut err).unwrap();
    let _ = srv.kill();
    let _ = srv.wait();
    eprintln!("lab with a lost probe: {took:?}");
    assert!(st.success(), "{err}");
    // Said even with -q, naming the probe.
    assert!(
        err.contains("the probe was lost during the step") && err.contains("doomed-probe"),
        "{err}"
    );
    let steps = lines(&out.join("steps.jsonl"));
    // Every step recorded (one loadlab limited on a busy host is recorded twice: its repeat).
    assert_eq!(
        util::lab::steps(&out).len(),
        3,
        "every step recorded: {err}"
    );
    assert!(steps[0]["probes"].get("lost").is_none(), "{}", steps[0]);
    let at = steps
        .iter()
        .position(|s| s["probes"]["lost"].is_string())
        .unwrap_or_else(|| panic!("no step lost the probe: {steps:?}"));
    let lost = steps[at]["probes"]["lost"].as_str().unwrap();
    assert!(lost.contains("remote probe doomed-probe"), "{}", steps[at]);
    // Its samples up to the loss are kept.
    assert!(!steps[at]["probes"]["samples"]
        .as_array()
        .unwrap()
        .is_empty());
    // The steps after it: the probe is lost at once, the load measured as usual.
    assert!(at < steps.len() - 1, "{steps:?}");
    for s in &steps[at + 1..] {
        assert!(s["probes"]["lost"].as_str().is_some(), "{}", s["probes"]);
    }
    // The report says so in the step's note.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("probe lost (") && report.contains("the server's figures end there"),
        "{report}"
    );
    for s in &steps {
        assert!(s["result"]["requests"].as_u64().unwrap() >= 38, "{s}");
        assert!(
            s["result"].get("agents").is_none(),
            "the load ran here: {s}"
        );
    }
}

/// `loadlab probe` in `ns` expected to be refused: its exit status and stderr, quickly.
fn refused_probe(ns: &str, token: &Path, name: &str) -> (Option<i32>, String) {
    let (out, took) = output_within(
        Fabric::command(ns, loadlab_bin())
            .args(["probe", "--coordinator", &hub_coordinator(), "--token-file"])
            .arg(token)
            .args([
                "--listen",
                &PORT.to_string(),
                "--name",
                name,
                "--wait",
                "10s",
            ]),
        Duration::from_secs(60),
    );
    assert!(took < Duration::from_secs(15), "refused after {took:?}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn a_wrong_token_and_a_second_probe_are_refused_by_name_and_a_vanished_coordinator_ends_the_probe()
{
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(1);
    let server_ns = &f.leaves[0];
    let mut srv = pool_server(server_ns);
    let token = token_file();
    // The coordinator waits for an agent that never comes, and the probe.
    let mut coordinator = Fabric::command(&f.hub, loadlab_bin())
        .args(["knee", &server_url(), "-q", "--out"])
        .arg(temp_path("never"))
        .args(["--agents", "1", "--remote-probe", "--agent-wait", "12s"])
        .args(["--listen", &hub_coordinator(), "--token-file"])
        .arg(&token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bad = temp_path("bad-token");
    std::fs::write(&bad, "not-the-token").unwrap();
    let (code, err) = refused_probe(server_ns, &bad, "stranger");
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("refused this probe: wrong or missing token"),
        "{err}"
    );
    let (mut first, first_log) = probe(server_ns, &token, "first");
    let end = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&first_log)
        .unwrap_or_default()
        .contains("joined the coordinator")
    {
        assert!(Instant::now() < end, "the first probe did not join");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, err) = refused_probe(server_ns, &token, "second");
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("one probe too many")
            && err.contains("one remote probe is supported")
            && err.contains("first"),
        "{err}"
    );
    // The coordinator vanishes mid-run (killed: no goodbye): the probe says so and exits 1.
    coordinator.kill().unwrap();
    let _ = coordinator.wait();
    let st = wait(&mut first, Duration::from_secs(10), "the orphaned probe");
    let plog = std::fs::read_to_string(&first_log).unwrap_or_default();
    assert_eq!(st.code(), Some(1), "{plog}");
    assert!(
        plog.contains(&format!(
            "lost the coordinator at {} during the run",
            hub_coordinator()
        )),
        "{plog}"
    );
    let _ = srv.kill();
    let _ = srv.wait();
}

#[test]
fn an_unknown_target_and_a_probe_for_a_single_run_are_bad_input() {
    // No coordinator anywhere: the pid is refused before anything is dialed.
    let token = token_file();
    let (out, took) = output_within(
        Command::new(loadlab_bin())
            .args(["probe", "--coordinator", "127.0.0.1:9", "--token-file"])
            .arg(&token)
            .args(["--pid", "999999999"]),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--pid 999999999: no process 999999999"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let (out, _) = output_within(
        Command::new(loadlab_bin())
            .args(["run", "http://127.0.0.1:9/", "-d", "1s", "--remote-probe"])
            .args(["--token-file"])
            .arg(&token),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--remote-probe: a single run has no probes"),
        "{err}"
    );
    // Without a target, clap says which flags give one.
    let (out, _) = output_within(
        Command::new(loadlab_bin())
            .args(["probe", "--coordinator", "127.0.0.1:9", "--token-file"])
            .arg(&token),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}
