//! `--prometheus-rw` against a real Prometheus (Debian's `prometheus` package, 2.42: its
//! remote write receiver on), started by each test on a free port with its own storage:
//! what a run pushed is read back through Prometheus' query API. Without the `prometheus`
//! binary these tests fail, saying to install it.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{loadlab_bin, output_within, run, temp_path, Behavior, TestServer};

/// One Prometheus and one load at a time: each test's run has the machine to itself.
static SERIAL: Mutex<()> = Mutex::new(());

/// A Prometheus server of this test's own.
struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus with the remote write receiver, and native histograms when
    /// `native`; returns once it is ready.
    fn start(native: bool) -> Prometheus {
        let bin = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "no prometheus binary: install Debian's package \
                     (apt-get install prometheus; .ci/run does) to run these tests"
                )
            });
        let dir = temp_path("prometheus");
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            "global:\n  scrape_interval: 1m\nscrape_configs: []\n",
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver");
        if native {
            cmd.arg("--enable-feature=native-histograms");
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        let mut p = Prometheus { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if get(port, "/-/ready").is_some_and(|(code, _)| code == 200) {
                return p;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", p.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready after 30 s:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn write_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// The instant query's result vector.
    fn query(&self, q: &str) -> Vec<Value> {
        let (code, body) = get(self.port, &format!("/api/v1/query?query={}", encode(q)))
            .unwrap_or_else(|| panic!("prometheus did not answer {q}"));
        assert_eq!(code, 200, "{q}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of the query's single series, waiting up to 10 s for it to appear.
    fn value(&self, q: &str) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.query(q);
            if let Some(v) = r.first() {
                assert_eq!(r.len(), 1, "{q}: {r:?}");
                return v["value"][1].as_str().unwrap().parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "{q}: no series after 10 s\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A GET over HTTP/1.0 (a whole body, no chunks): status and body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.get(9..12)?.parse().ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some((code, body.to_string()))
}

/// Percent-encodes a query parameter.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn a_run_pushes_its_counts_and_a_native_histogram() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(true);
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "3s",
        "-q",
        "--prometheus-rw",
        &prom.write_url(),
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("--prometheus-rw"), "{}", r.stderr);
    let requests = r.json()["requests"].as_u64().unwrap();
    assert!(requests > 500, "{requests}");
    assert_eq!(
        prom.value("max(loadlab_requests_total)"),
        requests as f64,
        "loadlab_requests_total against the result's `requests`"
    );
    assert_eq!(
        prom.value("sum(loadlab_errors_total)"),
        r.json()["errors_total"].as_u64().unwrap() as f64
    );
    // Every class has its series, zeros included.
    for class in ["http_5xx", "request_timeout", "connect_refused"] {
        assert_eq!(
            prom.value(&format!(r#"sum(loadlab_errors_total{{class="{class}"}})"#)),
            r.json()["errors"][class].as_u64().unwrap() as f64,
            "{class}"
        );
    }
    assert_eq!(prom.value("loadlab_offered_rps"), 200.0);
    // The native histogram: every response's latency, and quantiles Prometheus computes.
    assert_eq!(
        prom.value("histogram_count(loadlab_latency_seconds)"),
        requests as f64
    );
    // Prometheus's p99 of the run's histogram (the cumulative one pushed with the last
    // second) is the result's, within one bucket of schema 3 (9 %) and HdrHistogram's own
    // rounding. Its whole counts rank exactly; over `rate()` they are scaled by its
    // extrapolation, and where the rank falls on a bucket's last observation (600
    // responses, rank 594.0) a rounding of the scaled sum can take the next bucket's lower
    // edge, the 595th observation: Prometheus's arithmetic, not the histogram's contents.
    let p99 = prom.value("histogram_quantile(0.99, loadlab_latency_seconds)");
    let json_p99 = r.json()["latency_ms"]["p99"].as_f64().unwrap() / 1000.0;
    assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99} s");
    assert!(
        p99 <= json_p99 * 1.1 + 1e-5 && p99 >= json_p99 / 1.1 - 1e-5,
        "Prometheus p99 {p99} s, the result's {json_p99} s"
    );
    // `rate()` sees the run whole: its first point is the zeros a second before the first
    // second, and the rate's median is the run's (dense there, so no rank sits on an edge).
    assert_eq!(prom.value("min_over_time(loadlab_requests_total[1m])"), 0.0);
    let median = prom.value("histogram_quantile(0.5, loadlab_latency_seconds)");
    let rate_median = prom.value("histogram_quantile(0.5, rate(loadlab_latency_seconds[1m]))");
    assert!(
        (rate_median / median - 1.0).abs() < 0.01,
        "median over rate() {rate_median} s, of the run's histogram {median} s"
    );
    // One point per second (and the zeros before the first), not one at the end.
    let points = prom.query("count_over_time(loadlab_requests_total[1m])");
    let n: f64 = points[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(n >= 4.0, "{n} points");
    // No classic buckets when native ones are taken.
    assert!(prom.query("loadlab_latency_seconds_count").is_empty());
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn without_native_histograms_latency_goes_as_classic_buckets() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(false);
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "2s",
        "-q",
        "--prometheus-rw",
        &prom.write_url(),
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("refused a native histogram").count(),
        1,
        "warned once: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("pushes failed"), "{}", r.stderr);
    let requests = r.json()["requests"].as_u64().unwrap() as f64;
    assert_eq!(prom.value("max(loadlab_requests_total)"), requests);
    assert_eq!(prom.value("loadlab_latency_seconds_count"), requests);
    assert_eq!(
        prom.value(r#"loadlab_latency_seconds_bucket{le="+Inf"}"#),
        requests
    );
    let p99 = prom
        .value("histogram_quantile(0.99, sum by (le) (rate(loadlab_latency_seconds_bucket[1m])))");
    assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99} s");
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn prometheus_stopped_mid_run_is_a_warning_and_the_result_is_whole() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(true);
    let pid = prom.child.id();
    let s = TestServer::start(Behavior::Ok);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let ok = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "killing prometheus");
    });
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "4s",
        "-q",
        "--prometheus-rw",
        &prom.write_url(),
    ]);
    killer.join().unwrap();
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("pushes failed") && r.stderr.contains("--prometheus-rw"),
        "{}",
        r.stderr
    );
    // The result is whole (`run` checked it against the schema): four seconds, every
    // response counted, as many as the server answered.
    let j = r.json();
    assert_eq!(j["stop_reason"], "duration");
    let per_second = j["per_second"].as_array().unwrap();
    assert!(per_second.len() >= 4, "{}", per_second.len());
    let summed: u64 = per_second
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .sum();
    let requests = j["requests"].as_u64().unwrap();
    assert_eq!(summed, requests);
    assert!((requests as f64 - 800.0).abs() <= 16.0, "{requests}");
    // The run did not wait on the dead endpoint beyond the 2 s flush.
    assert!(r.took < Duration::from_secs(12), "took {:?}", r.took);
}

#[test]
fn a_bad_url_is_refused_before_any_load() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = TestServer::start(Behavior::Ok);
    for bad in [
        "https://127.0.0.1:9090/api/v1/write",
        "127.0.0.1:9090/api/v1/write",
        "http://127.0.0.1:99999/api/v1/write",
    ] {
        for cmd in [
            vec!["run", &s.url("/"), "--rate", "10", "-d", "1s"],
            vec!["knee", &s.url("/"), "--step", "1s"],
        ] {
            let (o, _) = output_within(
                Command::new(loadlab_bin())
                    .args(&cmd)
                    .args(["--prometheus-rw", bad]),
                Duration::from_secs(60),
            );
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {bad}: {stderr}");
            assert!(stderr.contains("--prometheus-rw"), "{stderr}");
        }
    }
    assert_eq!(s.requests(), 0);
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn a_knee_search_pushes_each_step_labelled() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(true);
    // Every request rejected: the search ends at its first step (20 req/s).
    let s = TestServer::start(Behavior::Status(404));
    let out = temp_path("knee-bundle");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", &s.url("/"), "--start", "20", "--step", "2s"])
            .args(["--no-probe", "--prometheus-rw", &prom.write_url(), "--out"])
            .arg(&out),
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "no knee measured: {stderr}");
    assert!(!stderr.contains("--prometheus-rw"), "{stderr}");
    // Every step's responses (one step, or more if the search went on).
    let steps = std::fs::read_to_string(out.join("steps.jsonl")).unwrap();
    let requests: f64 = steps
        .lines()
        .map(|l| {
            let step: Value = serde_json::from_str(l).unwrap();
            step["result"]["requests"].as_f64().unwrap()
        })
        .sum();
    assert!(requests > 0.0, "{steps}");
    assert_eq!(
        prom.value(r#"loadlab_requests_total{scenario="knee"}"#),
        requests
    );
    assert_eq!(
        prom.value(r#"sum(loadlab_errors_total{scenario="knee"})"#),
        requests
    );
    assert_eq!(prom.value(r#"loadlab_offered_rps{scenario="knee"}"#), 20.0);
    assert_eq!(
        prom.value(r#"histogram_count(loadlab_latency_seconds{scenario="knee"})"#),
        requests
    );
}

/// A targets file of two named requests on `s`, half the mix each.
fn two_names(s: &TestServer) -> PathBuf {
    let path = temp_path("targets.txt");
    std::fs::write(
        &path,
        format!(
            "# @name home\nGET {}\n\n# @name cart\nGET {}\n",
            s.url("/"),
            s.url("/cart")
        ),
    )
    .unwrap();
    path
}

/// The `requests` of the entry named `name` in a result's list (`by_name`, `agents`).
fn requests_of(list: &Value, name: &str) -> f64 {
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))["requests"]
        .as_u64()
        .unwrap() as f64
}

/// Each `label` value's `loadlab_requests_total`, from Prometheus.
fn requests_by(prom: &Prometheus, label: &str) -> Vec<(String, f64)> {
    // Wait for the last push to land (the sum is the run's once it has).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut out: Vec<(String, f64)> = prom
            .query(&format!("sum by ({label}) (loadlab_requests_total)"))
            .iter()
            .map(|v| {
                (
                    v["metric"][label].as_str().unwrap_or("").to_string(),
                    v["value"][1].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if !out.is_empty() || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn a_mix_of_named_requests_is_pushed_per_name() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(true);
    let s = TestServer::start(Behavior::Ok);
    let targets = two_names(&s);
    let r = run(&[
        "--targets",
        targets.to_str().unwrap(),
        "--rate",
        "200",
        "-d",
        "3s",
        "-q",
        "--prometheus-rw",
        &prom.write_url(),
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("--prometheus-rw"), "{}", r.stderr);
    let j = r.json();
    let of = |name: &str| requests_of(&j["by_name"], name);
    // One series per name, each the name's own count; together the run's, no whole
    // counted beside them.
    assert_eq!(
        requests_by(&prom, "name"),
        [
            ("cart".to_string(), of("cart")),
            ("home".to_string(), of("home"))
        ]
    );
    assert_eq!(
        prom.value("sum(loadlab_requests_total)"),
        j["requests"].as_u64().unwrap() as f64
    );
    assert_eq!(
        prom.value(r#"histogram_count(loadlab_latency_seconds{name="cart"})"#),
        of("cart")
    );
    assert_eq!(prom.value(r#"sum(loadlab_errors_total{name="home"})"#), 0.0);
    // The offered load once, for the run.
    assert_eq!(prom.value("loadlab_offered_rps"), 200.0);
    // Each second's parts are in the result too, adding up to the second.
    for sec in j["per_second"].as_array().unwrap() {
        let parts: u64 = sec["by_name"]
            .as_array()
            .map(|a| a.iter().map(|n| n["completed"].as_u64().unwrap()).sum())
            .unwrap_or(0);
        assert_eq!(parts, sec["completed"].as_u64().unwrap(), "{sec}");
    }
}

#[test]
#[ignore = "needs Prometheus (./test.sh installs it)"]
fn a_distributed_run_pushes_each_agents_seconds() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let prom = Prometheus::start(true);
    let s = TestServer::start(Behavior::Ok);
    let targets = two_names(&s);
    let token = temp_path("token");
    std::fs::write(&token, "prometheus-test-token-0123456789\n").unwrap();
    let token = token.display().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let hub = format!("127.0.0.1:{port}");
    let mut agents: Vec<Child> = ["east", "west"]
        .iter()
        .map(|name| {
            Command::new(loadlab_bin())
                .args(["agent", "--coordinator", &hub, "--token-file", &token])
                .args(["--name", name, "--wait", "30", "-q"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let r = run(&[
        "--targets",
        targets.to_str().unwrap(),
        "--agents",
        "2",
        "--listen",
        &hub,
        "--token-file",
        &token,
        "--rate",
        "200",
        "-d",
        "3s",
        "-q",
        "--prometheus-rw",
        &prom.write_url(),
    ]);
    for a in &mut agents {
        let _ = a.kill();
        let _ = a.wait();
    }
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("--prometheus-rw"), "{}", r.stderr);
    let j = r.json();
    let requests = j["requests"].as_u64().unwrap() as f64;
    // Each agent's own series, its own count, the last second included; together the
    // run's.
    let of_agent = |name: &str| requests_of(&j["agents"], name);
    assert_eq!(
        requests_by(&prom, "agent"),
        [
            ("east".to_string(), of_agent("east")),
            ("west".to_string(), of_agent("west"))
        ]
    );
    assert_eq!(prom.value("sum(loadlab_requests_total)"), requests);
    assert_eq!(
        prom.value("sum(histogram_count(loadlab_latency_seconds))"),
        requests
    );
    // Within each agent, per name: four series, the names adding up to the run's names.
    assert_eq!(prom.query("loadlab_requests_total").len(), 4);
    let by_name = requests_by(&prom, "name");
    let total_of = |name: &str| requests_of(&j["by_name"], name);
    assert_eq!(
        by_name,
        [
            ("cart".to_string(), total_of("cart")),
            ("home".to_string(), total_of("home"))
        ]
    );
    // The merged result's seconds keep their names' parts, added over the agents.
    let mut named = 0;
    for sec in j["per_second"].as_array().unwrap() {
        let parts = sec["by_name"].as_array().cloned().unwrap_or_default();
        let sum: u64 = parts.iter().map(|n| n["completed"].as_u64().unwrap()).sum();
        assert_eq!(sum, sec["completed"].as_u64().unwrap(), "{sec}");
        named += parts.len();
    }
    assert!(named >= 4, "{}", j["per_second"]);
}
