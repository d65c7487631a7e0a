//! Diagnoses end to end, against fixture servers built to break one way each: a fixed pool
//! of N slots (the diagnosis must name ≈N and the matrix parameter), a CPU-bound server
//! pinned to one CPU, one that leaks memory per request; and `plans/ephemeral-ports.toml`
//! at `--quick` inside a network namespace with 200 ports (document 002: the client's
//! ports). One at a time: they measure.

mod util;

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;
use util::lab::{lab_ok, lines, plan_text, write_plan};
use util::netns::{Netns, PORTS};
use util::{loadlab_bin, temp_path};

static SERIAL: Mutex<()> = Mutex::new(());

/// The findings of the step at `load`.
fn findings(steps: &[Value], load: f64) -> Vec<Value> {
    let step = steps
        .iter()
        .find(|s| s["load"].as_f64() == Some(load))
        .unwrap_or_else(|| panic!("no step at {load}"));
    assert_eq!(step["verdict"]["sustained"], false, "{}", step["verdict"]);
    step["diagnosis"]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnosis at {load}: {step}"))
        .clone()
}

/// The reason in a diagnosis's `ruled_out` that starts with `prefix`.
fn ruled_out(diagnosis: &Value, prefix: &str) -> String {
    diagnosis["ruled_out"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|r| r.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {diagnosis}"))
        .to_string()
}

fn kinds(f: &[Value]) -> Vec<&str> {
    f.iter()
        .map(|x| x["bottleneck"].as_str().unwrap())
        .collect()
}

#[test]
fn a_pool_of_n_slots_is_named_with_its_size() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 8 slots held 50 ms each: 160 req/s at most, CPU idle. 80 req/s is fine; 320 is not.
    let plan = write_plan(
        "pool",
        &plan_text(
            "\"--pool\", \"{pool}\", \"--service-ms\", \"50\"",
            "pool = [8]\nmode = [\"pool\"]",
            "steps = [80, 320]\nstep_duration = \"2s\"\nconnections = 16\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("pool-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let low = steps.iter().find(|s| s["load"] == 80.0).unwrap();
    assert_eq!(low["verdict"]["sustained"], true, "{}", low["verdict"]);
    assert!(
        low.get("diagnosis").is_none(),
        "a sustained step has no diagnosis"
    );
    let f = findings(&steps, 320.0);
    let c = f
        .iter()
        .find(|x| x["bottleneck"] == "concurrency_bound")
        .unwrap_or_else(|| panic!("not concurrency-bound: {f:?}"));
    let n = c["figures"]["in_service"].as_f64().unwrap();
    assert!((6.4..=9.6).contains(&n), "≈{n} in service for a pool of 8");
    assert_eq!(c["parameter"], "pool=8", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("the 8 `pool` are the limit"),
        "{c}"
    );
    assert!(!kinds(&f).contains(&"cpu_bound"), "{f:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| concurrency-bound (`pool=8`) |"),
        "{report}"
    );
    assert!(report.contains("### Why"), "{report}");
}

#[test]
fn a_cpu_bound_target_is_judged_against_its_one_cpu() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 2 ms of CPU per request on the one CPU the target may use (the plan pins it to CPU
    // 0): 500 req/s at most. 100 req/s is fine; 1000 is not. The fixture serves a thread
    // per connection, sharing its CPU between every request in progress, so past its
    // capacity it finishes them all near the end of the step: latency falls with the send
    // time and the throughput clause's trend may resolve nothing (seen once in CI). The
    // latency bound fails the step whatever the order it answers in.
    let plan = write_plan(
        "cpu",
        &plan_text(
            "\"--burn-us\", \"2000\"",
            "mode = [\"cpu\"]",
            "steps = [100, 1000]\nstep_duration = \"2s\"\nconnections = 8\nthreads = 1\ncpus = \"1\"\n[slo]\np99_ms = 1000",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("cpu-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let f = findings(&steps, 1000.0);
    let c = f
        .iter()
        .find(|x| x["bottleneck"] == "cpu_bound")
        .unwrap_or_else(|| panic!("not CPU-bound: {f:?}"));
    assert_eq!(c["figures"]["cpus"], 1.0, "{c}");
    // Used, or wanted and waited for behind other processes on a busy machine.
    assert!(c["figures"]["demand"].as_f64().unwrap() >= 0.9, "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("of its 1 CPU (affinity: 1 CPU)"),
        "{c}"
    );
    assert!(!kinds(&f).contains(&"concurrency_bound"), "{f:?}");
}

/// Half of CPU 0, taken in turns of 5 ms by a real-time thread of this test (SCHED_FIFO
/// preempts every ordinary thread, however many a target runs), for at most 300 s; stopped
/// when dropped.
struct Hog {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn half_of_cpu0() -> Hog {
        use std::sync::atomic::Ordering::Relaxed;
        use std::time::{Duration, Instant};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // SAFETY: plain calls on this thread's own affinity and policy.
            let set = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                (
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                    libc::sched_setscheduler(
                        0,
                        libc::SCHED_FIFO,
                        &libc::sched_param { sched_priority: 10 },
                    ),
                )
            };
            ready_tx.send(set).unwrap();
            let end = Instant::now() + Duration::from_secs(300);
            while !s.load(Relaxed) && Instant::now() < end {
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(5) {}
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let set = ready_rx.recv().unwrap();
        assert_eq!(
            set,
            (0, 0),
            "pinning a SCHED_FIFO thread to CPU 0 (needs root)"
        );
        Hog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `plan` with its `[matrix]` (after the plan's own lines): the fixture burning `{burn}` µs
/// of CPU per request, pinned to CPU `{cpu}`, loadlab on CPU 1, 100 then 400 req/s.
fn burn_plan(name: &str, matrix: &str) -> std::path::PathBuf {
    burn_plan_with(name, matrix, "", "steps = [100, 400]", "p99_ms = 300")
}

/// [`burn_plan`] with more of the fixture's arguments (`, "--flag", "value"`), its own
/// steps (and `[load]` lines) and `[slo]`.
fn burn_plan_with(
    name: &str,
    matrix: &str,
    args: &str,
    load: &str,
    slo: &str,
) -> std::path::PathBuf {
    write_plan(
        name,
        &format!(
            r#"
name = "{name}"
[[target]]
name = "fx"
command = ["taskset", "-c", "{{cpu}}", "FIXTURE", "--port", "{{port}}", "--burn-us", "{{burn}}", "--backlog", "4096"{args}]
ready = {{ http = "http://127.0.0.1:{{port}}/", status = 200 }}
ready_timeout = "5s"
stop_grace = "1s"

[matrix]
{matrix}

[[scenario]]
name = "s"
url = "http://127.0.0.1:{{port}}/"
timeout = "10s"

[load]
{load}
step_duration = "2s"
connections = 8
threads = 1
cpus = "1"

[slo]
{slo}
"#
        ),
    )
}

#[test]
#[ignore = "needs root, for a real-time thread (./test.sh)"]
fn a_cpu_bound_why_is_read_against_a_configuration_that_held_with_more_cpu() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 2 ms of CPU per request: 500 req/s on a CPU of its own. On CPU 0, which a real-time
    // thread outside the targets takes half of, the target gets the other half (250 req/s) and breaks at 400,
    // CPU-bound on a CPU it shares; on CPU 1 (loadlab's, light at these rates) it holds 400
    // using about 80 % of it. The CPU could give the first configuration's target more than
    // it got: its why says so, and names `cpu` as what differs.
    let hog = Hog::half_of_cpu0();
    let out = temp_path("cpu-shared-bundle");
    lab_ok(
        &burn_plan("cpu-shared", "burn = [2000]\ncpu = [0, 1]"),
        &out,
    );
    // Both on the shared CPU 0, at 0.5 and 2 ms per request: the cheaper one holds 400
    // using less CPU than the dearer one had when it broke. Nothing reads against its
    // CPU-bound why, which stays as it is.
    let dearer = temp_path("cpu-dearer-bundle");
    lab_ok(
        &burn_plan("cpu-dearer", "burn = [500, 2000]\ncpu = [0]"),
        &dearer,
    );
    drop(hog);

    let used = |s: &Value| s["probes"]["delta"]["cpu_percent"].as_f64().unwrap();
    let step = |bundle: &std::path::Path, config: &str, sustained: bool| -> Value {
        let s = lines(&bundle.join("steps.jsonl"))
            .into_iter()
            .find(|s| s["config"] == config && s["load"].as_f64() == Some(400.0))
            .unwrap_or_else(|| panic!("no step of {config} at 400"));
        assert_eq!(
            s["verdict"]["sustained"], sustained,
            "{config}: {}",
            s["verdict"]
        );
        if !sustained {
            assert_eq!(
                s["diagnosis"]["findings"][0]["bottleneck"], "cpu_bound",
                "{config}: {}",
                s["diagnosis"]
            );
        }
        s
    };
    let why = |bundle: &std::path::Path, config: &str| -> String {
        let report = std::fs::read_to_string(bundle.join("report.md")).unwrap();
        let head = format!("- **s** ({config}): knee ");
        let i = report
            .find(&head)
            .unwrap_or_else(|| panic!("no answer line for {config}: {report}"));
        let said = report[i..].lines().nth(1).unwrap_or_default().to_string();
        assert!(said.starts_with("  Why: CPU-bound: "), "{said}");
        said
    };

    let shared = step(&out, "burn=2000,cpu=0", false);
    let own = step(&out, "burn=2000,cpu=1", true);
    assert!(
        used(&own) >= 1.25 * used(&shared) && used(&own) - used(&shared) >= 10.0,
        "the target on CPU 1 used {} %, on the shared CPU 0 {} %",
        used(&own),
        used(&shared)
    );
    let said = why(&out, "burn=2000,cpu=0");
    assert!(
        said.contains(&format!(
            "; but `burn=2000,cpu=1` held 400 req/s with its target using {:.0} % of one CPU, against {:.0} % here, on no more CPUs: ",
            used(&own),
            used(&shared)
        )),
        "{said}"
    );
    assert!(
        said.ends_with("what differs between the two (cpu 0 here, 1 there) does, through what the target did with its CPU time or what else ran on its CPUs."),
        "{said}"
    );

    let broke = step(&dearer, "burn=2000,cpu=0", false);
    let cheap = step(&dearer, "burn=500,cpu=0", true);
    assert!(
        used(&cheap) < used(&broke),
        "{} % against {} %",
        used(&cheap),
        used(&broke)
    );
    let said = why(&dearer, "burn=2000,cpu=0");
    assert!(!said.contains("but `"), "{said}");
}

#[test]
fn threads_that_wait_behind_each_other_on_a_half_idle_cpu_are_not_cpu_bound() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Each request spins 4 threads at once for 500 µs of CPU each, on CPU 0 alone (as a
    // JIT's compiler threads or a parallel handler burst): at 250 Poisson arrivals a second
    // the CPU is busy half the time, and while it is, three of the four threads wait. A p99
    // bound of 3 ms (a request alone takes 2) fails. The waits were behind its own threads
    // while its CPU idled half the step: not CPU-bound, and the rule says why.
    let out = temp_path("bursts-bundle");
    lab_ok(
        &burn_plan_with(
            "bursts",
            "burn = [500]\ncpu = [0]",
            ", \"--burst-threads\", \"4\"",
            "steps = [250]\narrival = \"poisson\"",
            "p99_ms = 3",
        ),
        &out,
    );
    let steps = lines(&out.join("steps.jsonl"));
    let d = &steps[0]["probes"]["delta"];
    let (used, wait) = (
        d["cpu_percent"].as_f64().unwrap(),
        d["cpu_wait_percent"].as_f64().unwrap(),
    );
    let busy = d["cpus_busy_share"].as_f64().expect("its CPU's busy time");
    assert!((35.0..=65.0).contains(&used), "{d}");
    assert!((0.35..=0.75).contains(&busy), "{d}");
    // Used and waited for add up to the old rule's 90 %: the case it read as CPU-bound.
    assert!(used + wait >= 90.0 && wait >= 10.0, "{d}");
    let f = findings(&steps, 250.0);
    assert!(!kinds(&f).contains(&"cpu_bound"), "{f:?}");
    let why = ruled_out(&steps[0]["diagnosis"], "CPU-bound: ");
    assert!(
        why.contains("waiting for it, but its CPUs were idle")
            && why
                .ends_with("its threads waited behind each other in bursts, not behind full CPUs"),
        "{why}"
    );
}

#[test]
fn timeouts_behind_a_small_pool_with_its_cpu_half_used_are_the_pool() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A pool of 2 slots × 20 ms (100 req/s), and 6 ms of CPU per request after its slot, on
    // CPU 0 alone: at the pool's limit the target uses about 60 % of its CPU, which idles
    // the rest (as plans/proxy-pool-jvm.toml's JVM with 2 dispatcher threads). Offered 200
    // req/s with a 1 s timeout, requests queue for the pool into timeouts. Its CPU demand is
    // not low, but its CPU had room: the timeouts are the pool's, and the sentence says how
    // idle the CPU was. With 12 ms per request the CPU is full before the pool (83 req/s):
    // the same timeouts are not called a pool's.
    let plan = burn_plan_with(
        "pool-room",
        "burn = [6000, 12000]\ncpu = [0]",
        ", \"--pool\", \"2\", \"--service-ms\", \"20\"",
        "steps = [200]",
        "p99_ms = 500",
    );
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(
        &plan,
        text.replace("timeout = \"10s\"", "timeout = \"1s\"")
            .replace("connections = 8", "connections = 256"),
    )
    .unwrap();
    // A VM's host that took a fifth or more of CPU 0's time left it no room: the lab is run
    // again (three runs at most), and a last run the host stole from is judged as such.
    let mut attempt = 0;
    let (steps, stolen) = loop {
        attempt += 1;
        let out = temp_path("pool-room-bundle");
        lab_ok(&plan, &out);
        let steps = lines(&out.join("steps.jsonl"));
        let stolen = steps
            .iter()
            .filter(|s| s["config"].as_str().unwrap().contains("burn=6000,"))
            .flat_map(|s| {
                s["diagnosis"]["findings"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .find(|f| f["bottleneck"] == "host_steal");
        match stolen {
            Some(f) if attempt < 3 => eprintln!("lab run {attempt} run again: {}", f["evidence"]),
            stolen => break (steps, stolen),
        }
    };
    let of = |burn: &str| {
        let s: Vec<Value> = steps
            .iter()
            .filter(|s| {
                s["config"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("burn={burn},"))
            })
            .cloned()
            .collect();
        assert_eq!(s.len(), 1, "{burn}");
        let used = s[0]["probes"]["delta"]["cpu_percent"].as_f64().unwrap() / 100.0;
        (used, findings(&s, 200.0), s[0]["diagnosis"].clone())
    };
    let (used, f, d) = of("6000");
    if let Some(h) = stolen {
        // Three runs of three on a host that stole: CPU 0 had no room left, and the
        // diagnosis must not call the timeouts a pool's; it names the host's share instead.
        assert!(h["figures"]["steal_share"].as_f64().unwrap() >= 0.2, "{h}");
        assert!(
            h["figures"]["target_cpu_wanted"].as_f64().unwrap() >= 0.5,
            "{h}"
        );
        if !kinds(&f).contains(&"timeouts") {
            let why = ruled_out(&d, "timeouts with the CPU to spare: ");
            assert!(why.contains("timed-out requests waited, not 25 %"), "{why}");
        }
        return;
    }
    // The case: more than half of its CPU used (a demand below 50 % alone missed it).
    assert!((0.5..=0.8).contains(&used), "{used}");
    let t = f
        .iter()
        .find(|x| x["bottleneck"] == "timeouts")
        .unwrap_or_else(|| panic!("no timeouts finding: {f:?}"));
    let evidence = t["evidence"].as_str().unwrap();
    // Its CPU idled at least a quarter of the time the timed-out requests waited.
    let idle = t["figures"]["cpus_idle"].as_f64().unwrap();
    assert!((0.25..=0.5).contains(&idle), "{t}");
    assert!(
        evidence.contains(&format!(
            "while the target used {:.0} % of its CPUs, its CPUs idle {:.0} % of the time the timed-out requests waited: requests waited for a pool",
            (100.0 * used).round(),
            (100.0 * idle).round()
        )),
        "{evidence}"
    );
    assert!(t["figures"]["demand"].as_f64().unwrap() >= 0.5, "{t}");
    assert!(!kinds(&f).contains(&"cpu_bound"), "{f:?}");
    // The CPU full: CPU-bound, and the timeouts ruled out with the idle share.
    let (used, f, d) = of("12000");
    assert!(used >= 0.9, "{used}");
    assert!(kinds(&f).contains(&"cpu_bound"), "{f:?}");
    assert!(!kinds(&f).contains(&"timeouts"), "{f:?}");
    let why = ruled_out(&d, "timeouts with the CPU to spare: ");
    assert!(
        why.contains("of the time the timed-out requests waited, not 25 %"),
        "{why}"
    );
}

#[test]
fn memory_growth_is_reported_with_its_rate() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A pool of 4 slots × 20 ms (200 req/s) offered 400 req/s, every request leaking 256 KiB:
    // the step fails on the pool, and the target's memory grows ~50 MB/s while it does.
    let plan = write_plan(
        "leak",
        &plan_text(
            "\"--pool\", \"4\", \"--service-ms\", \"20\", \"--leak-kb\", \"256\"",
            "mode = [\"leak\"]",
            "steps = [400]\nstep_duration = \"3s\"\nconnections = 16\nthreads = 1\ncpus = \"1\"",
        )
        .replace("timeout = \"1s\"", "timeout = \"10s\""),
    );
    let out = temp_path("leak-bundle");
    lab_ok(&plan, &out);
    let steps = lines(&out.join("steps.jsonl"));
    let f = findings(&steps, 400.0);
    let m = f
        .iter()
        .find(|x| x["bottleneck"] == "memory_growth")
        .unwrap_or_else(|| panic!("no memory growth: {f:?}"));
    let per_s = m["figures"]["bytes_per_s"].as_f64().unwrap() / 1048576.0;
    // 200 answers/s × 256 KiB = 50 MiB/s (the probe's seconds blur the edges).
    assert!((25.0..=75.0).contains(&per_s), "{per_s} MiB/s");
}

/// `loadlab lab -q --quick PLAN --out OUT` inside `ns`, which must succeed.
fn lab_in(ns: &Netns, plan: impl AsRef<std::ffi::OsStr>, out: &std::path::Path) {
    let o = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            loadlab_bin(),
            "lab",
            "-q",
            "--quick",
        ])
        .arg(plan)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
#[ignore = "needs root and iproute2, for network namespaces (./test.sh)"]
fn the_ephemeral_ports_plan_names_the_clients_ports() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Document 002 on 200 ports without TIME_WAIT reuse: 1,000 new connections/s that
    // loadlab closes itself run the range dry in a fraction of a second; reused ones do not.
    let ns = Netns::create(&format!("loadlab-diag-ports-{}", std::process::id()));
    let plan = format!(
        "{}/../../plans/ephemeral-ports.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = temp_path("ports-bundle");
    lab_in(&ns, &plan, &out);
    // Ports held in TIME_WAIT run the 200 dry within a fifth of a second: thousands of
    // errors (as keep-alive off shows below). Connections in flight hold ports too, and a
    // stall of the server, or of a VM's host, long enough for 200 of them to wait at once
    // meets some: at most 1 % of the arrivals, plus those of the longest wait beyond what
    // 200 ports hold (a response that took `max` seconds at `rate` req/s had `max × rate`
    // arrivals behind it). 8 in one CI run on a host that stole half the CPU time; 66 in
    // another, whose step the host took 39 % of the generator's CPU and held a response
    // 379 ms (179 arrivals beyond 200 ports).
    let few_ports_missed = |s: &serde_json::Value| {
        let r = &s["result"];
        let missed = r["errors"]["local_port_exhaustion"].as_u64().unwrap();
        // `requests` counts responses: a request that found no port never had one.
        let arrivals = r["requests"].as_u64().unwrap() + missed;
        let stalled =
            r["latency_ms"]["max"].as_f64().unwrap() / 1e3 * r["offered_rps"].as_f64().unwrap();
        let beyond_ports = (stalled - PORTS as f64).max(0.0) as u64;
        assert!(
            missed <= arrivals / 100 + beyond_ports,
            "{}: {missed} of {arrivals} requests found no free local port (the longest \
             response held {stalled:.0} arrivals, {beyond_ports} beyond {PORTS} ports)",
            s["scenario"]
        );
    };
    let steps = lines(&out.join("steps.jsonl"));
    let on = steps
        .iter()
        .find(|s| s["scenario"] == "keep-alive-on")
        .expect("keep-alive-on ran");
    assert_eq!(on["verdict"]["sustained"], true, "{}", on["verdict"]);
    few_ports_missed(on);
    let off = steps
        .iter()
        .find(|s| s["scenario"] == "keep-alive-off")
        .expect("keep-alive-off ran");
    assert_eq!(off["result"]["close_by"], "client", "{}", off["result"]);
    let exhausted = off["result"]["errors"]["local_port_exhaustion"]
        .as_u64()
        .unwrap();
    assert!(
        exhausted > 1000,
        "{exhausted} port errors of ~5,000 requests"
    );
    assert_eq!(off["verdict"]["sustained"], false, "{}", off["verdict"]);
    // The failures were loadlab's own ports: not the server's errors (a knee search stops
    // there instead of reporting them as its knee).
    let limits = off["verdict"]["limits"].as_array().unwrap();
    assert!(
        limits.contains(&serde_json::json!("client_limited"))
            && !limits.contains(&serde_json::json!("errors")),
        "{}",
        off["verdict"]
    );
    let f = off["diagnosis"]["findings"]
        .as_array()
        .expect("a diagnosis");
    assert_eq!(f[0]["bottleneck"], "client_ports", "{f:?}");
    assert!(
        f[0]["evidence"]
            .as_str()
            .unwrap()
            .contains(&format!("no free local port {exhausted} times")),
        "{}",
        f[0]
    );
    assert!(
        !kinds(f).contains(&"cpu_bound") && !kinds(f).contains(&"accept_queue"),
        "the server is not blamed: {f:?}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains(
            "| default | keep-alive-off | unknown | loadlab-limited (its ports or descriptors) | client ports | fixed steps |"
        ),
        "{report}"
    );
    assert!(report.contains("[FAIL] ephemeral_ports"), "{report}");

    // The same plan with the server closing (the default close_by): its TIME_WAIT holds
    // none of loadlab's ports, and both scenarios hold, as the doctor predicts.
    let ns = Netns::create(&format!("loadlab-diag-srv-{}", std::process::id()));
    let text = std::fs::read_to_string(&plan).unwrap();
    let server_closes = write_plan(
        "ports-server-closes",
        &text.replace("close_by = \"client\"", "close_by = \"server\""),
    );
    assert_ne!(text, std::fs::read_to_string(&server_closes).unwrap());
    let out = temp_path("ports-server-bundle");
    lab_in(&ns, &server_closes, &out);
    for s in lines(&out.join("steps.jsonl")) {
        assert_eq!(
            s["verdict"]["sustained"], true,
            "{} {}",
            s["scenario"], s["verdict"]
        );
        few_ports_missed(&s);
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("[OK]   ephemeral_ports: keep-alive off at 1000 new connections/s, each closed by the server"),
        "{report}"
    );
}

/// One step below and one half again above the capacity (80 req/s) of gunicorn's 4 threads (one gthread
/// worker), probed by its port: the why of the step above, which names what the threads
/// waited on (the bundle's server finding).
fn gunicorn_pool_why(app: &str, name: &str) -> serde_json::Value {
    let dir = temp_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.py"), app).unwrap();
    let server = util::server::gunicorn_with(&dir, &["-w", "1", "--threads", "4"], &[]);
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"{name}\"\n[[scenario]]\nname = \"page\"\nurl = \"{}\"\ntimeout = \"2s\"\n\
             [load]\nmodel = \"open\"\nsteps = [20, 120]\nstep_duration = \"3s\"\nwarmup = \"500ms\"\npause = \"500ms\"\nthreads = 1\ncpus = \"1\"\n\
             [probe]\nlisten = {}\n",
            server.url(),
            server.port
        ),
    )
    .unwrap();
    let out = util::lab::lab_ok_unless_generator_limited(&plan, name);
    let steps = util::lab::steps(&out);
    let over = steps.last().unwrap();
    assert!(!over["verdict"]["sustained"].as_bool().unwrap(), "{over}");
    eprintln!("{name}: {}", over["diagnosis"]);
    util::lab::server_finding(&over["diagnosis"]).clone()
}

/// The same pool of 4 threads, held once by a slow downstream (an HTTP backend answering
/// each request in 50 ms, as many at once as asked) and once by a lock (each request holds
/// one lock for 12.5 ms): both cap it near 80 req/s with the CPU idle, and only what its
/// threads wait on tells them apart. The first why names the backend's address and sends
/// the user there; the second names one lock.
#[test]
#[ignore = "needs gunicorn (./test.sh installs it)"]
fn a_pool_held_by_its_downstream_and_one_held_by_a_lock_are_told_apart() {
    // Alone among this binary's tests: the rules read the pool's CPU as spare, which the
    // CPU-bound fixtures beside it would take.
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let backend = util::server::Server::python_sleeper(0.05);
    let downstream = format!("127.0.0.1:{}", backend.port);
    let f = gunicorn_pool_why(
        &format!(
            "import urllib.request\n\
             def app(environ, start_response):\n\
             \x20   urllib.request.urlopen('http://{downstream}/').read()\n\
             \x20   start_response('200 OK', [('Content-Length', '2')])\n\
             \x20   return [b'ok']\n"
        ),
        "pool-downstream",
    );
    let evidence = f["evidence"].as_str().unwrap();
    assert!(
        evidence.contains(&format!("waited on a socket to {downstream}")),
        "{f}"
    );
    assert!(
        f["figures"]["threads_on_downstream"].as_f64().unwrap() >= 3.0,
        "{f}"
    );
    assert!(
        f["advice"]
            .as_str()
            .unwrap()
            .starts_with(&format!("its threads wait on {downstream}")),
        "{f}"
    );
    let f = gunicorn_pool_why(
        "import threading, time\n\
         lock = threading.Lock()\n\
         def app(environ, start_response):\n\
         \x20   with lock: time.sleep(0.0125)\n\
         \x20   start_response('200 OK', [('Content-Length', '2')])\n\
         \x20   return [b'ok']\n",
        "pool-lock",
    );
    let evidence = f["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("on one lock (a futex, all on one address)"),
        "{f}"
    );
    assert!(!evidence.contains("on a socket to"), "{f}");
    assert!(
        f["figures"]["threads_on_one_lock"].as_f64().unwrap() >= 2.0,
        "{f}"
    );
    assert!(
        f["advice"]
            .as_str()
            .unwrap()
            .starts_with("its threads wait on one lock"),
        "{f}"
    );
}

/// A server whose every answer takes 62 ms, searched with `--slo p99<40ms`: its first step
/// fails, and the why says that no load meets the bound (the fastest answer above it),
/// not "no rule had its evidence".
#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn a_latency_floor_above_the_slo_is_said_as_such() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = util::server::Server::python_sleeper(0.062);
    let out = temp_path("latency-floor");
    let o = std::process::Command::new(loadlab_bin())
        .args(["knee", "-q", &format!("http://127.0.0.1:{}/", server.port)])
        .args(["--slo", "p99<40ms", "--step", "2s", "--warmup", "500ms"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let configs = lines(&out.join("configs.jsonl"));
    let d = &configs[0]["knees"][0]["diagnosis"];
    let f = &d["findings"][0];
    assert_eq!(f["bottleneck"], "latency_floor", "{d}");
    let e = f["evidence"].as_str().unwrap();
    assert!(
        e.starts_with("the fastest answer at the lowest load, ")
            && e.ends_with("is above the 40 ms bound of p99: no load meets it"),
        "{e}"
    );
    assert!(f["figures"]["fastest_ms"].as_f64().unwrap() >= 62.0, "{f}");
    assert!(stdout.contains("no load meets it"), "{stdout}");
}

/// A slow disk: an ext4 file system on a loop device, mounted under a temporary directory,
/// whose writes a cgroup of the v1 `blkio` controller throttles to `iops` per second for the
/// processes put in it. Unmounted and removed when dropped (after the processes in it).
struct SlowDisk {
    image: PathBuf,
    mount: PathBuf,
    device: String,
    cgroup: PathBuf,
}

impl SlowDisk {
    fn new(iops: u32) -> SlowDisk {
        let sh = |cmd: &str| {
            let o = std::process::Command::new("sh")
                .args(["-c", cmd])
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{cmd}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let blkio = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .find(|l| l.contains(" - cgroup ") && l.split_whitespace().last().is_some_and(|o| o.split(',').any(|c| c == "blkio")))
            .and_then(|l| l.split_whitespace().nth(4).map(PathBuf::from))
            .expect("the v1 blkio controller mounted (this machine mounts the v1 controllers beside the v2 tree)");
        let dir = temp_path("slow-disk");
        let (image, mount) = (dir.join("disk.img"), dir.join("mnt"));
        std::fs::create_dir_all(&mount).unwrap();
        sh(&format!("truncate -s 64M {}", image.display()));
        let device = sh(&format!("losetup -f --show {}", image.display()));
        sh(&format!(
            "mkfs.ext4 -q {device} && mount {device} {}",
            mount.display()
        ));
        let majmin = sh(&format!("lsblk -dno MAJ:MIN {device}"));
        let cgroup = blkio.join(format!("loadlab-slow-disk-{}", std::process::id()));
        std::fs::create_dir_all(&cgroup).unwrap();
        std::fs::write(
            cgroup.join("blkio.throttle.write_iops_device"),
            format!("{majmin} {iops}"),
        )
        .unwrap();
        SlowDisk {
            image,
            mount,
            device,
            cgroup,
        }
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.mount)
            .status();
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.device])
            .status();
        let _ = std::fs::remove_dir(&self.cgroup);
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A Python server that appends each request to a file and fsyncs it, on a disk whose
/// writes are throttled to 20 per second: its threads wait in the kernel for the disk
/// (uninterruptible sleep, in fsync), its CPU idle, and the why says the disk, with the
/// threads in fsync and the bytes written, before the pool that filled.
#[test]
#[ignore = "needs root, a loop device and the v1 blkio controller (./test.sh)"]
fn a_server_that_fsyncs_each_request_to_a_slow_disk_is_io_bound() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let disk = SlowDisk::new(20);
    let server = format!(
        "import os, threading\n\
        from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler\n\
        class H(BaseHTTPRequestHandler):\n\
        \x20   def do_GET(self):\n\
        \x20       with open('{}/log-%d' % threading.get_ident(), 'a') as f:\n\
        \x20           f.write('x' * 512 + '\\n'); f.flush(); os.fsync(f.fileno())\n\
        \x20       self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n\
        \x20       self.wfile.write(b'ok')\n\
        \x20   def log_message(self, *a): pass\n\
        class S(ThreadingHTTPServer):\n\
        \x20   request_queue_size = 1024\n\
        s = S(('127.0.0.1', 0), H)\n\
        print('port', s.server_address[1], flush=True)\n\
        s.serve_forever()\n",
        disk.mount.display()
    );
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        &format!(
            "echo $$ > {}/cgroup.procs && exec /usr/bin/python3 -c \"$0\"",
            disk.cgroup.display()
        ),
        &server,
    ]);
    let server = util::server::Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    let plan = temp_path("io-bound.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"io-bound\"\n[[scenario]]\nname = \"page\"\nurl = \"http://127.0.0.1:{}/\"\ntimeout = \"2s\"\n\
             [load]\nmodel = \"open\"\nsteps = [4, 80]\nstep_duration = \"3s\"\nwarmup = \"500ms\"\npause = \"500ms\"\nthreads = 1\ncpus = \"1\"\n\
             [probe]\nlisten = {}\n",
            server.port, server.port
        ),
    )
    .unwrap();
    let out = util::lab::lab_ok_unless_generator_limited(&plan, "io-bound");
    let steps = util::lab::steps(&out);
    assert!(
        steps[0]["verdict"]["sustained"].as_bool().unwrap(),
        "{}",
        steps[0]
    );
    let over = steps.last().unwrap();
    assert!(!over["verdict"]["sustained"].as_bool().unwrap(), "{over}");
    eprintln!("io-bound: {}", over["diagnosis"]);
    let f = util::lab::server_finding(&over["diagnosis"]);
    assert_eq!(f["bottleneck"], "io_bound", "{}", over["diagnosis"]);
    let e = f["evidence"].as_str().unwrap();
    assert!(
        e.contains("waited on the disk (uninterruptible sleep, ") && e.contains("in an fsync"),
        "{e}"
    );
    assert!(
        f["figures"]["threads_in_sync"].as_f64().unwrap() >= 1.0,
        "{f}"
    );
    assert!(
        f["figures"]["storage_write_bps"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    drop(server);
}
