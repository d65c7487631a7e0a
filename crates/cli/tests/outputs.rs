//! Outputs other tools read (an HdrHistogram interval log read back by the Java HdrHistogram
//! library, CSV, JUnit XML parsed as CI servers parse it, `-` for standard output) and the
//! flags of other tools loadlab accepts (wrk2's -R and --latency, hey's -z, vegeta's
//! --rate N/s, ghz's -D FILE, --data-file, -i and --rps).

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use util::server::serve;
use util::{
    assert_schema_valid, helloworld_proto, loadlab_bin, num, output_within, run, temp_path,
    Behavior, TestServer,
};

/// The Java HdrHistogram library's jar (Maven Central; `.ci/run` fetches it with
/// `mvn dependency:get`).
fn hdrhistogram_jar() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let jar = Path::new(&home)
        .join(".m2/repository/org/hdrhistogram/HdrHistogram/2.2.2/HdrHistogram-2.2.2.jar");
    assert!(
        jar.is_file(),
        "{} is missing: fetch it with `mvn -q -B dependency:get -Dartifact=org.hdrhistogram:HdrHistogram:2.2.2` (.ci/run does)",
        jar.display()
    );
    jar
}

/// `intervals`, `count`, `max` (µs) and `start` (s) of an interval log, as Java's
/// `HistogramLogReader` reads it.
fn java_reads(hlog: &Path) -> (u64, u64, u64, f64) {
    let reader = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/util/HlogRead.java");
    let o = Command::new("java")
        .arg("-cp")
        .arg(hdrhistogram_jar())
        .arg(reader)
        .arg(hlog)
        .output()
        .expect("java runs (a JDK: .ci/run installs default-jdk-headless)");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let field = |k: &str| -> String {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {out}"))
            .to_string()
    };
    (
        field("intervals").parse().unwrap(),
        field("count").parse().unwrap(),
        field("max").parse().unwrap(),
        field("start").parse().unwrap(),
    )
}

/// A CSV file as header names and rows of fields (no quoted fields in loadlab's run CSV).
fn read_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines
        .next()
        .expect("a header row")
        .split(',')
        .map(String::from)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

fn column(header: &[String], rows: &[Vec<String>], name: &str) -> Vec<String> {
    let i = header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"));
    rows.iter().map(|r| r[i].clone()).collect()
}

fn sum(col: &[String]) -> u64 {
    col.iter().map(|v| v.parse::<u64>().unwrap()).sum()
}

/// JUnit XML as a CI server reads it (Python's ElementTree, as the junit reporters of
/// GitLab and many GitHub Actions do): `tests failures [(classname, name, failure message)]`.
fn parse_junit(xml: &Path) -> String {
    let script = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1, suites
s = suites[0]
cases = s.findall("testcase")
assert int(s.get("tests")) == len(cases), (s.get("tests"), len(cases))
failed = [c for c in cases if c.find("failure") is not None]
assert int(s.get("failures")) == len(failed)
assert int(root.get("failures")) == len(failed)
print(len(cases), len(failed))
for c in cases:
    f = c.find("failure")
    print(c.get("classname"), "|", c.get("name"), "|", "" if f is None else f.get("message"))
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(xml)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "JUnit XML does not parse as CI servers read it: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[ignore = "needs a JDK and Maven (./test.sh installs them and the HdrHistogram jar)"]
fn interval_log_csv_and_junit_agree_with_the_result() {
    let s = TestServer::start(Behavior::Ok);
    let hlog = temp_path("run.hlog");
    let csv = temp_path("run.csv");
    let junit = temp_path("run.xml");
    let unix_s = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let before = unix_s();
    let r = run(&[
        &s.url("/"),
        "--rate",
        "300",
        "-d",
        "3s",
        "-q",
        "--hlog",
        hlog.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--slo",
        "p99<10s",
        "--slo",
        "p95<1us",
    ]);
    // One gate cannot pass (p95 under a microsecond): exit 3, every output written.
    assert_eq!(r.code(), Some(3), "{}", r.stderr);
    let j = r.json();
    let requests = num(j, &["requests"]) as u64;
    let seconds = j["per_second"].as_array().unwrap().len() as u64;
    assert!(requests > 0);
    // p95 is in the JSON, between p90 and p99, and in the summary.
    let (p90, p95, p99) = (
        num(j, &["latency_ms", "p90"]),
        num(j, &["latency_ms", "p95"]),
        num(j, &["latency_ms", "p99"]),
    );
    assert!(p90 <= p95 && p95 <= p99, "{p90} {p95} {p99}");
    assert!(r.stdout.contains(" p95 "), "{}", r.stdout);
    assert!(r.stdout.contains("Written: "), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("--hlog: {}", hlog.display())));

    // The interval log, read by the Java HdrHistogram library: a histogram per second,
    // every response counted once, its largest value the run's (within the interval
    // histograms' precision), its start in this century.
    let (intervals, count, max_us, start) = java_reads(&hlog);
    assert_eq!(intervals, seconds);
    assert_eq!(count, requests, "hlog counts against the result's requests");
    let max_ms = num(j, &["latency_ms", "max"]);
    assert!(
        (max_us as f64 / 1000.0 - max_ms).abs() <= max_ms * 0.02 + 0.01,
        "hlog max {max_us} µs, result max {max_ms} ms"
    );
    // Its start is the measured window's, to the millisecond (not the run's start to the
    // second): after the command began, and before it ended by at least the window.
    let after = unix_s();
    let window = num(j, &["window_start_unix_ms"]) / 1e3;
    assert!(
        (start - window).abs() < 0.001,
        "StartTime {start}, window {window}"
    );
    assert!(
        before <= window && window + num(j, &["duration_s"]) <= after,
        "window from {window} s, the command from {before} to {after}"
    );
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(
        text.contains("#[Histogram log format version 1.3]"),
        "{text}"
    );
    assert!(text.contains("values in microseconds"), "{text}");

    // The CSV: a row per second, its counts adding up to the result's.
    let (header, rows) = read_csv(&std::fs::read_to_string(&csv).unwrap());
    assert_eq!(rows.len() as u64, seconds);
    assert!(rows.iter().all(|r| r.len() == header.len()));
    assert_eq!(sum(&column(&header, &rows, "completed")), requests);
    assert_eq!(
        sum(&column(&header, &rows, "successful")),
        num(j, &["successful"]) as u64
    );
    assert!(column(&header, &rows, "offered_rps")
        .iter()
        .all(|v| v == "300"));
    for (i, p) in column(&header, &rows, "p95_ms").iter().enumerate() {
        let p95: f64 = p.parse().unwrap();
        let p50: f64 = column(&header, &rows, "p50_ms")[i].parse().unwrap();
        let max: f64 = column(&header, &rows, "max_ms")[i].parse().unwrap();
        assert!(p50 <= p95 && p95 <= max, "second {i}: {p50} {p95} {max}");
    }

    // JUnit: the run and both gates, the impossible one failed with its figure.
    let parsed = parse_junit(&junit);
    let mut lines = parsed.lines();
    assert_eq!(lines.next(), Some("3 1"), "{parsed}");
    let cases: Vec<&str> = lines.collect();
    assert!(cases[0].starts_with("loadlab.run | some requests succeeded | "));
    assert!(cases[0].ends_with("| "), "{parsed}");
    assert_eq!(cases[1], "loadlab.slo | p99<10s | ", "{parsed}");
    assert!(
        cases[2].starts_with("loadlab.slo | p95<1us | p95<1us failed: p95 "),
        "{parsed}"
    );
}

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn errors_by_class_per_second_in_the_csv_and_the_json() {
    let s = TestServer::start(Behavior::Status(503));
    let csv = temp_path("errors.csv");
    let junit = temp_path("errors.xml");
    let r = run(&[
        &s.url("/"),
        "--rate",
        "200",
        "-d",
        "2s",
        "-q",
        "--csv",
        csv.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(r.code(), Some(1), "every request failed: {}", r.stderr);
    let j = r.json();
    let errors = num(j, &["errors", "http_5xx"]) as u64;
    assert!(errors > 0);
    let by_second: u64 = j["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["errors_by_class"]["http_5xx"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(by_second, errors);
    let (header, rows) = read_csv(&std::fs::read_to_string(&csv).unwrap());
    assert_eq!(sum(&column(&header, &rows, "errors_http_5xx")), errors);
    assert_eq!(sum(&column(&header, &rows, "errors")), errors);
    assert_eq!(sum(&column(&header, &rows, "errors_connect_refused")), 0);
    // No request succeeded: the run's own test case fails, as the exit status does.
    let parsed = parse_junit(&junit);
    assert!(parsed.starts_with("1 1\n"), "{parsed}");
    assert!(parsed.contains("no request succeeded"), "{parsed}");
}

/// Runs `loadlab ARGS` (no `--json` added) and returns (status, stdout, stderr).
fn loadlab(args: &[&str]) -> (Option<i32>, String, String) {
    let (o, _) = output_within(
        Command::new(loadlab_bin()).args(args),
        Duration::from_secs(120),
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_dash_writes_each_output_to_standard_output_and_the_summary_to_standard_error() {
    let s = TestServer::start(Behavior::Ok);
    let url = s.url("/");
    let base = [url.as_str(), "--rate", "100", "-d", "1s", "-q"];
    let with = |extra: &[&str]| {
        let args: Vec<&str> = ["run"].iter().chain(&base).chain(extra).copied().collect();
        let (code, out, err) = loadlab(&args);
        assert_eq!(code, Some(0), "{extra:?}: {err}");
        assert!(err.contains("requests "), "summary on stderr: {err}");
        out
    };
    let json: Value = serde_json::from_str(&with(&["--json", "-"])).expect("stdout is JSON");
    assert_schema_valid(&json);
    assert_eq!(json["offered_rps"], 100.0);
    // One row per second of the run in which responses completed: one for a 1 s run, a
    // second when the last responses came back after its end (a loaded host); together they
    // count every completed request, as the run's JSON does (`requests`).
    let beside = temp_path("beside.json");
    let csv = with(&["--csv", "-", "--json", beside.to_str().unwrap()]);
    assert!(csv.starts_with("second,offered_rps,completed,"), "{csv}");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(!rows.is_empty(), "{csv}");
    let completed: u64 = rows
        .iter()
        .map(|r| r.split(',').nth(2).unwrap().parse::<u64>().unwrap())
        .sum();
    let run: Value = serde_json::from_slice(&std::fs::read(&beside).unwrap()).unwrap();
    assert_eq!(Some(completed), run["requests"].as_u64(), "{csv}");
    let hlog = with(&["--hlog", "-"]);
    assert!(hlog.starts_with("#[Logged with loadlab"), "{hlog}");
    let junit = with(&["--junit", "-", "--slo", "p99<10s"]);
    assert!(junit.starts_with("<?xml"), "{junit}");
    assert!(junit.contains("name=\"p99&lt;10s\""), "{junit}");

    // Two on standard output, or two to one file: refused before any load.
    let before = s.requests();
    let (code, _, err) = loadlab(&["run", &url, "-d", "1s", "--json", "-", "--csv", "-"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--json and --csv: only one output"), "{err}");
    let same = temp_path("same.out");
    let same = same.to_str().unwrap();
    let (code, _, err) = loadlab(&["run", &url, "--json", same, "--hlog", same]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--json and --hlog both write"), "{err}");
    let (code, _, err) = loadlab(&["run", &url, "--csv", "/nonexistent-dir/x.csv"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--csv /nonexistent-dir/x.csv: the directory /nonexistent-dir does not exist"),
        "{err}"
    );
    assert_eq!(s.requests(), before, "no load for refused runs");
}

/// An output path that is not a regular file (a FIFO here; `/dev/null` or `/dev/stderr` for
/// users) is written in place, never replaced: a temporary file renamed onto `/dev/null` by
/// root once turned the machine's /dev/null into a regular file, which every other program
/// then read its input from.
#[test]
fn an_output_to_a_fifo_or_a_device_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let s = TestServer::start(Behavior::Ok);
    let fifo = temp_path("out.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let url = s.url("/");
    let path = fifo.to_str().unwrap();
    let (code, _, err) = loadlab(&["run", &url, "--rate", "50", "-d", "1s", "-q", "--csv", path]);
    assert_eq!(code, Some(0), "{err}");
    // Before the reader is joined: a replaced FIFO leaves it waiting for a writer forever.
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
    assert!(!fifo.with_extension("fifo.tmp").exists());
    let csv = reader.join().unwrap();
    assert!(csv.starts_with("second,offered_rps,"), "{csv}");
}

#[test]
fn flags_of_wrk2_hey_oha_and_vegeta() {
    let s = TestServer::start(Behavior::Ok);
    let url = s.url("/");
    // wrk2's -R, hey's and oha's -z, wrk2's --latency.
    let r = run(&[&url, "-R", "150", "-z", "2s", "--latency", "-q"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(num(r.json(), &["offered_rps"]), 150.0);
    assert_eq!(num(r.json(), &["duration_s"]), 2.0);
    assert!(
        r.stdout.contains("Latency Distribution (HdrHistogram"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Detailed Percentile spectrum:"));
    assert!(r.stdout.contains(" 99.900% "), "{}", r.stdout);
    // The spectrum's last line counts every response.
    let total = format!("Total count    = {:>12}", num(r.json(), &["requests"]));
    assert!(r.stdout.contains(&total), "{total} in {}", r.stdout);
    // vegeta's rates, and ghz's --rps.
    for (rate, offered) in [("120/s", 120.0), ("6000/1m", 100.0), ("5/50ms", 100.0)] {
        let r = run(&[&url, "--rate", rate, "-d", "1s", "-q"]);
        assert_eq!(r.code(), Some(0), "{rate}: {}", r.stderr);
        assert_eq!(num(r.json(), &["offered_rps"]), offered, "{rate}");
    }
    let r = run(&[&url, "--rps", "80", "-d", "1s", "-q"]);
    assert_eq!(num(r.json(), &["offered_rps"]), 80.0);
    let (code, _, err) = loadlab(&["run", &url, "--rate", "100/0s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the duration after `/` is zero"), "{err}");
    let (code, _, err) = loadlab(&["run", &url, "--rate", "fast/s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not a rate"), "{err}");
}

#[test]
fn ghz_forms_of_the_call_are_accepted() {
    let hello = serve(&["hello", "--bind", "127.0.0.1:0"]);
    let addr = format!("127.0.0.1:{}", hello.port);
    let proto = helloworld_proto();
    let proto_dir = Path::new(&proto).parent().unwrap().to_str().unwrap();
    let data = temp_path("message.json");
    std::fs::write(&data, r#"{"name":"from a file"}"#).unwrap();
    let data = data.to_str().unwrap();
    // ghz's -D FILE (its data file), -i (import paths), --insecure on a plaintext address,
    // -z and --rps.
    let common = [
        addr.as_str(),
        "--proto",
        proto.as_str(),
        "-i",
        proto_dir,
        "--call",
        "helloworld.Greeter/SayHello",
        "--insecure",
        "-z",
        "1s",
        "--rps",
        "50",
        "-q",
    ];
    for form in [["-D", data], ["--data-file", data]] {
        let args: Vec<&str> = common.iter().chain(&form).copied().collect();
        let r = util::grpc(&args);
        assert_eq!(r.code(), Some(0), "{form:?}: {}", r.stderr);
        assert!(num(r.json(), &["grpc_status", "OK"]) >= 45.0, "{form:?}");
    }
    // ghz's -d (inline JSON) where loadlab's -d is the duration: named.
    let (code, _, err) = loadlab(&[
        "grpc",
        &addr,
        "--proto",
        &proto,
        "--call",
        "helloworld.Greeter/SayHello",
        "-d",
        r#"{"name":"x"}"#,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("ghz's `-d`"), "{err}");
}

#[test]
fn serve_passes_help_to_the_server() {
    let (code, out, err) = loadlab(&["serve", "scenario", "--help"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("--workers"),
        "the scenario server's own help: {out}"
    );
    let (code, out, _) = loadlab(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("greeter-tokio"), "serve's own help: {out}");
}

#[test]
#[ignore = "needs a JDK and Maven (./test.sh installs them and the HdrHistogram jar)"]
fn a_bundle_keeps_each_steps_interval_log_and_every_second_in_seconds_csv() {
    let s = TestServer::start(Behavior::Ok);
    let out = temp_path("knee-bundle");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", &s.url("/"), "--no-probe", "--threads", "1"])
            .args(["--start", "100", "--max", "200", "--step", "1s"])
            .args(["--warmup", "200ms", "--pause", "100ms"])
            .arg("--out")
            .arg(&out),
        Duration::from_secs(300),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let steps: Vec<Value> = std::fs::read_to_string(out.join("steps.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(steps.len() >= 2, "{steps:?}");
    let (header, rows) = read_csv(&std::fs::read_to_string(out.join("seconds.csv")).unwrap());
    assert_eq!(
        &header[..6],
        ["config", "scenario", "step", "phase", "load", "second"]
    );
    let mut hlogs = 0;
    for st in &steps {
        let index = st["index"].as_u64().unwrap().to_string();
        let mine: Vec<Vec<String>> = rows.iter().filter(|r| r[2] == index).cloned().collect();
        let seconds = st["result"]["per_second"].as_array().unwrap().len();
        assert_eq!(mine.len(), seconds, "step {index}");
        let requests = st["result"]["requests"].as_u64().unwrap();
        assert_eq!(sum(&column(&header, &mine, "completed")), requests);
        let config = st["config"].as_str().unwrap();
        let scenario = st["scenario"].as_str().unwrap();
        let hlog = out.join("hlog").join(config).join(format!(
            "{scenario}-step{:03}.hlog",
            st["index"].as_u64().unwrap()
        ));
        let (intervals, count, _, _) = java_reads(&hlog);
        assert_eq!(intervals as usize, seconds, "{}", hlog.display());
        assert_eq!(count, requests, "{}", hlog.display());
        hlogs += 1;
    }
    assert_eq!(hlogs, steps.len());
}

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn lab_junit_has_each_configuration_each_knee_and_the_baseline() {
    use util::lab::{plan_text, write_plan};
    // Capacity 300/s (503 above it), and a configuration whose target cannot start (the
    // fixture refuses `--capacity x`): a failed case.
    let plan = write_plan(
        "junit",
        &plan_text(
            "\"--capacity\", \"{capacity}\"",
            "capacity = [\"300\", \"x\"]\nmode = [\"junit\"]",
            "knee = { start = 150, max = 600, precision = 0.25, confirm = 0 }\nstep_duration = \"1s\"\nwarmup = \"200ms\"\nconnections = 8\nthreads = 1",
        ),
    );
    let lab_junit = |out: &Path, junit: &Path, extra: &[&str]| {
        let (o, _) = output_within(
            Command::new(loadlab_bin())
                .args(["lab", "-q"])
                .arg(&plan)
                .arg("--out")
                .arg(out)
                .arg("--junit")
                .arg(junit)
                .args(extra),
            Duration::from_secs(300),
        );
        assert!(
            matches!(o.status.code(), Some(0 | 3)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        parse_junit(junit)
    };
    let first = temp_path("junit-lab-1");
    let parsed = lab_junit(&first, &temp_path("lab-1.xml"), &[]);
    assert!(parsed.starts_with("3 1\n"), "{parsed}");
    assert!(
        parsed.contains("loadlab.config | capacity=300,mode=junit | \n"),
        "{parsed}"
    );
    assert!(
        parsed.contains("loadlab.config | capacity=x,mode=junit | the target never became ready"),
        "{parsed}"
    );
    assert!(
        parsed.contains("loadlab.knee | capacity=300,mode=junit / s | \n"),
        "{parsed}"
    );
    // Against itself as the baseline: one more case, passed or naming a regression.
    let parsed = lab_junit(
        &temp_path("junit-lab-2"),
        &temp_path("lab-2.xml"),
        &["--baseline", first.to_str().unwrap()],
    );
    assert!(parsed.starts_with("4 "), "{parsed}");
    assert!(parsed.contains("loadlab.baseline | "), "{parsed}");
}

#[test]
#[ignore = "needs python3 (./test.sh installs it)"]
fn knee_junit_has_the_knee_and_fails_when_none_was_measured() {
    let s = TestServer::start(Behavior::Ok);
    let knee = |url: &str, junit: &str| {
        let out = temp_path("junit-knee");
        let (o, _) = output_within(
            Command::new(loadlab_bin())
                .args([
                    "knee",
                    url,
                    "-q",
                    "--no-probe",
                    "--start",
                    "50",
                    "--max",
                    "100",
                ])
                .args(["--step", "1s", "--warmup", "200ms", "--confirm", "0"])
                .args(["--junit", junit, "--out"])
                .arg(&out),
            Duration::from_secs(120),
        );
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // Sustained to the maximum: a passed case with the search's summary; the XML alone on
    // standard output, the closing lines on standard error.
    let (code, out, err) = knee(&s.url("/"), "-");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim_start().starts_with("<?xml"), "{out}");
    assert!(err.contains("knee at least 100 req/s"), "{err}");
    let xml = temp_path("knee-stdout.xml");
    std::fs::write(&xml, &out).unwrap();
    let parsed = parse_junit(&xml);
    assert!(parsed.starts_with("2 0\n"), "{parsed}");
    assert!(
        parsed.contains("loadlab.knee | default / knee | \n"),
        "{parsed}"
    );
    // Nothing listens: the knee case fails, naming why.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let file = temp_path("knee-refused.xml");
    let (code, _, err) = knee(&url, file.to_str().unwrap());
    assert_ne!(code, Some(0), "{err}");
    let parsed = parse_junit(&file);
    assert!(parsed.starts_with("2 1\n"), "{parsed}");
    assert!(
        parsed.contains("loadlab.knee | default / knee | no knee measured: search stopped at 50"),
        "{parsed}"
    );
    // A directory that does not exist is refused before any load.
    let (code, _, err) = knee(&s.url("/"), "/nonexistent-dir/k.xml");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--junit /nonexistent-dir/k.xml: the directory"),
        "{err}"
    );
}

#[test]
fn compare_html_to_standard_output() {
    let s = TestServer::start(Behavior::Ok);
    let url = s.url("/");
    let results: Vec<String> = (0..2)
        .map(|i| {
            let p = temp_path(&format!("cmp-{i}.json"));
            let p = p.to_str().unwrap().to_string();
            let (code, _, err) =
                loadlab(&["run", &url, "--rate", "100", "-d", "1s", "-q", "--json", &p]);
            assert_eq!(code, Some(0), "{err}");
            p
        })
        .collect();
    let (code, out, err) = loadlab(&["compare", &results[0], &results[1], "--html", "-"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.trim_start().starts_with("<!DOCTYPE html>"),
        "{}",
        &out[..out.len().min(200)]
    );
    assert!(out.trim_end().ends_with("</html>"));
    assert!(!err.is_empty(), "the text on stderr");
    let (code, _, err) = loadlab(&["compare", &results[0], &results[1], "--html", "-", "--json"]);
    assert_eq!(code, Some(2), "{err}");
}
