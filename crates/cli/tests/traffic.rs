//! Requests that vary, end to end, with a server nobody here wrote as the truth: nginx's
//! own access log says what arrived. CSV rows in order and wrapping around, `${seq}`
//! distinct for every request, `unique` ending at the row count (also split between two
//! agents, no row sent twice), a targets file's requests in proportion with their headers
//! and bodies, a plan's weighted requests; mistakes in data files, templates and targets
//! files refused before any load with their file, line and column; per-name results that
//! add up to the whole, a slow request failing only its own gate, and a knee search of a
//! mix that names the request that broke. One test at a time: they measure.

mod util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use util::h2::{H2Behavior, H2Server};
use util::lab::{lines, write_plan};
use util::nginx::{free_port, Nginx};
use util::server::serve;
use util::{
    grpc, helloworld_proto, loadlab_bin, output_within, run, temp_path, Behavior, TestServer,
};

static SERIAL: Mutex<()> = Mutex::new(());

/// nginx logging every request as `METHOD|URI|X-Kind|BODY` (the body of `/post`, which it
/// reads to proxy it to a sink location on itself).
fn logging_nginx() -> Nginx {
    Nginx::with_servers(
        "log_format t escape=none '$request_method|$request_uri|$http_x_kind|$request_body';\n  \
         server { listen 127.0.0.1:{port}; access_log {d}/logs/t.log t;\n    \
         location /post { proxy_pass http://127.0.0.1:{port}/sink; }\n    \
         location /sink { access_log off; return 200 \"ok\"; }\n    \
         location / { return 200 \"ok\"; }\n  }",
    )
}

/// One logged request.
#[derive(Debug)]
struct Logged {
    method: String,
    uri: String,
    kind: String,
    body: String,
}

fn logged(n: &Nginx) -> Vec<Logged> {
    std::fs::read_to_string(n.dir.join("logs/t.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '|').collect();
            Logged {
                method: f[0].into(),
                uri: f[1].into(),
                kind: f[2].into(),
                body: f[3].into(),
            }
        })
        .collect()
}

/// The value of query parameter `key` in `uri`.
fn query(uri: &str, key: &str) -> Option<String> {
    uri.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = temp_path(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A CSV of `n` rows: `id` is `row K` (with a space, to be percent-encoded in the URL).
fn ids_csv(n: usize) -> PathBuf {
    let mut text = String::from("id,name\n");
    for k in 0..n {
        text.push_str(&format!("row {k},name{k}\n"));
    }
    write("ids.csv", &text)
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn csv_rows_go_in_order_and_wrap_around_and_seq_counts_every_request() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nginx = logging_nginx();
    let data = ids_csv(10);
    let url = format!("http://127.0.0.1:{}/u/${{id}}?s=${{seq}}", nginx.http);
    let r = run(&[
        &url,
        "--data",
        data.to_str().unwrap(),
        "-n",
        "25",
        "-c",
        "1",
        "-t",
        "1",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let got = logged(&nginx);
    assert_eq!(got.len(), 25, "{got:?}");
    for (i, l) in got.iter().enumerate() {
        // One connection, one thread: the log is the send order.
        assert_eq!(
            l.uri,
            format!("/u/row%20{}?s={}", i % 10, i + 1),
            "request {i}"
        );
    }
    let t = &r.json()["traffic"];
    assert_eq!(t["data_rows"], 10, "{t}");
    assert_eq!(t["data_order"], "sequential", "{t}");
    assert_eq!(t["resume"]["next_row"], 25, "{t}");
    assert!(
        r.stdout
            .contains("10 rows, sequential; 25 taken so far (wrapped around 2 times)"),
        "{}",
        r.stdout
    );

    // Open loop on two threads: every request gets its own number, 1 to N, none twice.
    let before = got.len();
    let url = format!("http://127.0.0.1:{}/n?s=${{seq}}", nginx.http);
    let r = run(&[
        &url, "--rate", "400", "-d", "2s", "-t", "2", "-c", "4", "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let seqs: Vec<u64> = logged(&nginx)[before..]
        .iter()
        .map(|l| query(&l.uri, "s").unwrap().parse().unwrap())
        .collect();
    let distinct: BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(distinct.len(), seqs.len(), "a ${{seq}} sent twice");
    assert_eq!(
        distinct,
        (1..=seqs.len() as u64).collect::<BTreeSet<u64>>(),
        "${{seq}} skipped values"
    );
    assert_eq!(seqs.len() as u64, r.json()["requests"].as_u64().unwrap());
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn unique_rows_end_the_run_at_the_row_count() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nginx = logging_nginx();
    let data = ids_csv(50);
    let url = format!("http://127.0.0.1:{}/u/${{id}}", nginx.http);
    let r = run(&[
        &url,
        "--data",
        data.to_str().unwrap(),
        "--data-order",
        "unique",
        "--rate",
        "100",
        "-d",
        "10s",
        "-t",
        "2",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["stop_reason"], "rows_used_up", "{}", r.stdout);
    assert!(
        r.stdout.contains("every data row sent once"),
        "{}",
        r.stdout
    );
    // It ended when the rows did (half a second at 100 req/s), not at 10 s.
    assert!(
        j["duration_s"].as_f64().unwrap() < 2.0,
        "{}",
        j["duration_s"]
    );
    let got = logged(&nginx);
    let ids: BTreeSet<&str> = got.iter().map(|l| l.uri.as_str()).collect();
    assert_eq!(got.len(), 50, "{got:?}");
    assert_eq!(ids.len(), 50, "a row sent twice: {got:?}");
    assert_eq!(j["requests"], 50);
}

#[test]
#[ignore = "needs nginx, root and iproute2 (./test.sh)"]
fn two_agents_share_unique_rows_and_send_none_twice() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nginx = logging_nginx();
    let data = ids_csv(300);
    let token = write("token", "dHJhZmZpYy10ZXN0LXRva2Vu\n");
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://127.0.0.1:{}/u/${{id}}?s=${{seq}}", nginx.http);
    let agents: Vec<_> = (0..2)
        .map(|i| {
            util::spawn_agent(
                &mut Command::new(loadlab_bin()),
                &listen,
                &token,
                &format!("a{i}"),
            )
        })
        .collect();
    let r = run(&[
        &url,
        "--data",
        data.to_str().unwrap(),
        "--data-order",
        "unique",
        "--rate",
        "200",
        "-d",
        "20s",
        "--agents",
        "2",
        "--listen",
        &listen,
        "--token-file",
        token.to_str().unwrap(),
        "-q",
    ]);
    for mut a in agents {
        let _ = a.kill();
        let _ = a.wait();
    }
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["stop_reason"], "rows_used_up", "{}", r.stdout);
    let got = logged(&nginx);
    let ids: BTreeSet<String> = got
        .iter()
        .map(|l| l.uri.split('?').next().unwrap().to_string())
        .collect();
    let seqs: BTreeSet<String> = got.iter().filter_map(|l| query(&l.uri, "s")).collect();
    assert_eq!(got.len(), 300, "{} requests logged", got.len());
    assert_eq!(ids.len(), 300, "a row was sent twice");
    assert_eq!(seqs.len(), 300, "two agents sent the same ${{seq}}");
    let shares: Vec<u64> = j["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(shares, vec![150, 150], "{}", j["agents"]);
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn a_targets_file_is_sent_in_proportion_with_its_headers_and_bodies() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nginx = logging_nginx();
    let dir = temp_path("targets");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("order.json"), "{\"n\": ${seq}}").unwrap();
    let p = nginx.http;
    let targets = format!(
        "# the shop, as vegeta reads it\n\
         # @name home\n\
         GET http://127.0.0.1:{p}/\n\
         X-Kind: home\n\
         \n\
         # @name item\n\
         GET http://127.0.0.1:{p}/item/${{seq}}\n\
         X-Kind: item\n\
         \n\
         # @name order\n\
         POST http://127.0.0.1:{p}/post\n\
         X-Kind: order\n\
         Content-Type: application/json\n\
         @order.json\n"
    );
    std::fs::write(dir.join("t.txt"), targets).unwrap();
    let r = run(&[
        "--targets",
        dir.join("t.txt").to_str().unwrap(),
        "--rate",
        "300",
        "-d",
        "2s",
        "-t",
        "2",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let got = logged(&nginx);
    let mut per_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut seqs = BTreeSet::new();
    for l in &got {
        *per_kind.entry(l.kind.as_str()).or_default() += 1;
        match l.kind.as_str() {
            "home" => assert_eq!((l.method.as_str(), l.uri.as_str()), ("GET", "/")),
            "item" => {
                assert_eq!(l.method, "GET");
                seqs.insert(l.uri.strip_prefix("/item/").unwrap().to_string());
            }
            "order" => {
                assert_eq!((l.method.as_str(), l.uri.as_str()), ("POST", "/post"));
                let n = l
                    .body
                    .strip_prefix("{\"n\": ")
                    .and_then(|b| b.strip_suffix('}'))
                    .unwrap_or_else(|| panic!("body {:?}", l.body));
                seqs.insert(n.to_string());
            }
            other => panic!("unexpected X-Kind {other:?}: {l:?}"),
        }
    }
    let total = got.len() as u64;
    // In turn on each of two threads: each kind within a round of the exact third.
    for kind in ["home", "item", "order"] {
        let n = per_kind[kind];
        assert!(
            n.abs_diff(total / 3) <= 2,
            "{kind}: {n} of {total}: {per_kind:?}"
        );
    }
    assert_eq!(seqs.len() as u64, per_kind["item"] + per_kind["order"]);
    // The per-name results are nginx's counts, and add up to the whole exactly.
    let j = r.json();
    let names = j["by_name"].as_array().unwrap();
    let of = |k: &str| names.iter().find(|n| n["name"] == k).unwrap();
    for kind in ["home", "item", "order"] {
        assert_eq!(
            of(kind)["requests"].as_u64().unwrap(),
            per_kind[kind],
            "{kind}"
        );
        assert_eq!(
            of(kind)["status_codes"]["200"].as_u64().unwrap(),
            per_kind[kind]
        );
    }
    adds_up(j);
    for kind in ["home", "item", "order"] {
        assert!(r.stdout.contains(&format!("    {kind}")), "{}", r.stdout);
    }
}

/// Every count of the names adds up to the whole's.
fn adds_up(j: &Value) {
    let names = j["by_name"].as_array().unwrap();
    let sum = |key: &str| names.iter().map(|n| n[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("requests"), j["requests"].as_u64().unwrap());
    assert_eq!(sum("successful"), j["successful"].as_u64().unwrap());
    assert_eq!(sum("errors_total"), j["errors_total"].as_u64().unwrap());
    for (class, n) in j["errors"].as_object().unwrap() {
        let by: u64 = names
            .iter()
            .map(|x| x["errors"][class].as_u64().unwrap())
            .sum();
        assert_eq!(by, n.as_u64().unwrap(), "{class}");
    }
    for (code, n) in j["status_codes"].as_object().unwrap() {
        let by: u64 = names
            .iter()
            .map(|x| x["status_codes"][code].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(by, n.as_u64().unwrap(), "status {code}");
    }
    let counts: u64 = names
        .iter()
        .map(|n| n["latency_ms"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, j["latency_ms"]["count"].as_u64().unwrap());
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn a_plans_weighted_requests_and_its_data_file() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nginx = logging_nginx();
    let dir = temp_path("plan-dir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("skus.csv"), "sku\nA1\nB2\nC3\n").unwrap();
    let plan = dir.join("mix.toml");
    std::fs::write(
        &plan,
        format!(
            r#"name = "mix"
[[scenario]]
name = "shop"
url = "http://127.0.0.1:{}/"
headers = ["X-Kind: shop"]
data = "skus.csv"
[[scenario.request]]
name = "browse"
weight = 3
url = "/browse/${{sku}}"
[[scenario.request]]
name = "buy"
url = "/buy?sku=${{sku}}&n=${{seq}}"
[load]
steps = [200]
step_duration = "2s"
threads = 2
"#,
            nginx.http
        ),
    )
    .unwrap();
    let out = temp_path("mix-bundle");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["lab", "-q"])
            .arg(&plan)
            .arg("--out")
            .arg(&out),
        Duration::from_secs(120),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let got = logged(&nginx);
    let browse = got.iter().filter(|l| l.uri.starts_with("/browse/")).count();
    let buy = got.iter().filter(|l| l.uri.starts_with("/buy?")).count();
    assert_eq!(browse + buy, got.len());
    assert!(
        got.iter().all(|l| l.kind == "shop"),
        "the scenario's header on every request"
    );
    // 3 : 1, in turn on each thread.
    assert!(browse.abs_diff(3 * buy) <= 8, "browse {browse}, buy {buy}");
    // The rows in order across both requests: each takes the next one.
    let skus: BTreeSet<&str> = got
        .iter()
        .map(|l| {
            l.uri
                .trim_start_matches("/browse/")
                .trim_start_matches("/buy?sku=")
                .split('&')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(skus, BTreeSet::from(["A1", "B2", "C3"]));
    let steps = lines(&out.join("steps.jsonl"));
    let step = &steps[0];
    let names: Vec<&str> = step["result"]["by_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["browse", "buy"]);
    adds_up(&step["result"]);
    assert_eq!(
        step["result"]["requests"].as_u64().unwrap() as usize,
        got.len()
    );
}

/// `loadlab ARGS` must be refused with exit 2 before any load, naming `needle`.
fn refused(server: &TestServer, args: &[&str], needle: &str) {
    let (o, _) = output_within(
        Command::new(loadlab_bin()).args(args),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in: {err}"
    );
    assert_eq!(server.requests(), 0, "{args:?} sent load before refusing");
}

#[test]
fn bad_data_files_templates_and_targets_are_refused_before_any_load() {
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("/");
    let dir = temp_path("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let ragged = file("ragged.csv", "id,name\n1,a\n2\n3,c\n");
    let empty = file("empty.csv", "");
    let header_only = file("header.csv", "id\n");
    let jsonl = file("rows.jsonl", "{\"id\": 1}\n{\"id\": 2, \"x\": 3}\n");
    let ids = file("ids.csv", "id\n1\n");
    let with_id = format!("{url}u/${{id}}");
    for (args, needle) in [
        (
            vec!["run", with_id.as_str(), "--data", &ragged],
            format!("{ragged}:3:1"),
        ),
        (
            vec!["run", with_id.as_str(), "--data", &empty],
            format!("{empty}:1:1"),
        ),
        (
            vec!["run", with_id.as_str(), "--data", &header_only],
            "no rows".to_string(),
        ),
        (
            vec!["run", with_id.as_str(), "--data", &jsonl],
            format!("{jsonl}:2:"),
        ),
        // A column no data file has.
        (
            vec!["run", &format!("{url}u/${{nope}}"), "--data", &ids],
            "unknown name `${nope}`".into(),
        ),
        (
            vec!["run", &format!("{url}u/${{id}}")],
            "no data file".into(),
        ),
        // A template that does not parse, in a header: its flag, line and column.
        (
            vec!["run", &url, "-H", "X-A: ${seq"],
            "--header 1 (X-A):1:1".into(),
        ),
        (
            vec!["run", &url, "--body", "{\"a\": ${rand:9-1}}"],
            "--body:1:7".into(),
        ),
    ] {
        refused(&server, &args, &needle);
    }
    // A targets file: a header line without a colon, and a body file's bad template.
    std::fs::write(dir.join("b.json"), "{\n  \"x\": ${nope}\n}").unwrap();
    let t1 = file("t1.txt", &format!("GET {url}\nX-Bad header\n"));
    refused(&server, &["run", "--targets", &t1], &format!("{t1}:2:1"));
    let t2 = file("t2.txt", &format!("POST {url}\n@b.json\n"));
    refused(
        &server,
        &["run", "--targets", &t2],
        &format!("{}:2:8", dir.join("b.json").display()),
    );
    // The same mistakes in a plan, before its first step.
    let plan = write_plan(
        "bad-data",
        &format!(
            "name = \"bad\"\n[[scenario]]\nname = \"s\"\nurl = \"{with_id}\"\ndata = \"{ragged}\"\n[load]\nsteps = [10]\nstep_duration = \"1s\"\n"
        ),
    );
    refused(
        &server,
        &[
            "lab",
            plan.to_str().unwrap(),
            "--out",
            temp_path("bad-out").to_str().unwrap(),
        ],
        &format!("{ragged}:3:1"),
    );
    // A gate on a name the run does not have.
    let t3 = file("t3.txt", &format!("# @name a\nGET {url}\n"));
    refused(
        &server,
        &["run", "--targets", &t3, "-n", "5", "--slo", "b:p99<1s"],
        "no request is named `b`; the names are a",
    );
}

#[test]
fn a_slow_request_fails_only_its_own_gate() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // /f_sleep waits 300 ms without holding a worker; /health answers at once. The bound
    // sits between them with room on both sides: a shared host once stalled /health to
    // 66 ms at p99 (of 60 answers), which failed a 50 ms bound set below an 80 ms sleep.
    let server = serve(&[
        "scenario",
        "--bind",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--sleep-ms",
        "300",
    ]);
    let p = server.port;
    let targets = write(
        "mix.txt",
        &format!(
            "# @name fast\nGET http://127.0.0.1:{p}/health\n\n# @name slow\nGET http://127.0.0.1:{p}/f_sleep\n"
        ),
    );
    let r = run(&[
        "--targets",
        targets.to_str().unwrap(),
        "--rate",
        "60",
        "-d",
        "2s",
        "-q",
        "--slo",
        "fast:p99<200ms",
        "--slo",
        "slow:p99<200ms",
        "--slo",
        "errors<1%",
    ]);
    assert_eq!(r.code(), Some(3), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("[PASS] fast:p99<200ms"), "{}", r.stdout);
    assert!(r.stdout.contains("[FAIL] slow:p99<200ms"), "{}", r.stdout);
    assert!(r.stdout.contains("[PASS] errors<1%"), "{}", r.stdout);
    assert!(
        r.stderr.contains("1 of 3 gates failed: slow:p99<200ms"),
        "{}",
        r.stderr
    );
    adds_up(r.json());
}

#[test]
fn a_knee_search_of_a_mix_names_the_request_that_broke() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // `checkout` holds one of 2 pool threads for 50 ms (40 a second at most); `home` is
    // free. Half the mix each: the mix breaks near 80 req/s, by checkout alone. The search
    // starts at 15 so that no step of its doubling lands on that edge (15, 30, 60, 120),
    // where a loaded machine's few late sends would leave the step undecided.
    let server = serve(&[
        "scenario",
        "--bind",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--blocking-threads",
        "2",
    ]);
    let p = server.port;
    let targets = write(
        "shop.txt",
        &format!(
            "# @name checkout\nGET http://127.0.0.1:{p}/page?work_ms=50\n\n# @name home\nGET http://127.0.0.1:{p}/health\n"
        ),
    );
    // On a loaded host loadlab once sent late by 367 ms at p99 at the step that broke (the SLO
    // is 300 ms): `home`, which waits for nothing at the server, then failed its latency
    // too, by loadlab's lateness, and which request broke the mix cannot be read from that
    // step. A search whose first failed step lagged more than a third of the SLO is run
    // again, three runs at most; the last is judged whatever it says.
    let search = || {
        let out = temp_path("mix-knee");
        let (o, _) = output_within(
            Command::new(loadlab_bin())
                .args(["knee", "--targets"])
                .arg(&targets)
                .args([
                    "--slo",
                    "p99<300ms",
                    "--start",
                    "15",
                    "--max",
                    "480",
                    "--step",
                    "2s",
                    "--warmup",
                    "500ms",
                    "--pause",
                    "200ms",
                    "--confirm",
                    "0",
                    "--no-probe",
                    "--out",
                ])
                .arg(&out),
            Duration::from_secs(240),
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
        let steps = lines(&out.join("steps.jsonl"));
        let first = steps
            .iter()
            .filter(|s| !s["verdict"]["sustained"].as_bool().unwrap())
            .min_by(|a, b| {
                a["load"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["load"].as_f64().unwrap())
            })
            .unwrap_or_else(|| panic!("no step broke: {stdout}{stderr}"));
        let first = first.clone();
        (stdout.into_owned(), stderr.into_owned(), first, steps)
    };
    let (mut stdout, mut stderr, mut first, mut steps) = search();
    for attempt in 1..3 {
        let lag = first["result"]["schedule_lag_ms"]["p99"].as_f64().unwrap();
        if lag <= 100.0 {
            break;
        }
        eprintln!("search {attempt}: loadlab lagged {lag} ms at p99 where the mix broke; again");
        (stdout, stderr, first, steps) = search();
    }
    let failed: Vec<&str> = first["verdict"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["checkout"], "{}", first["verdict"]);
    let load = first["load"].as_f64().unwrap();
    assert!((60.0..=120.0).contains(&load), "the mix broke at {load}");
    assert!(stderr.contains("by checkout ("), "{stderr}");
    assert!(
        stdout.contains("  broke: checkout (")
            && stdout.contains("the other requests of the mix held"),
        "{stdout}"
    );
    for s in &steps {
        adds_up(&s["result"]);
    }
}

/// The `name` (field 1, a string) of a HelloRequest in its gRPC frame.
fn hello_name(frame: &[u8]) -> String {
    assert!(frame.len() >= 5 && frame[0] == 0, "{frame:?}");
    let msg = &frame[5..];
    assert_eq!(msg[0], 0x0a, "field 1, length-delimited: {msg:?}");
    let len = msg[1] as usize; // the names here are shorter than 128 bytes
    String::from_utf8(msg[2..2 + len].to_vec()).unwrap()
}

#[test]
fn grpc_messages_and_http2_paths_are_rendered_per_request() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let data = ids_csv(4);
    // gRPC: each call's message from the next row, with its own ${seq}.
    let server = H2Server::start(H2Behavior::Grpc {
        status: |_| 0,
        delay: Duration::ZERO,
    });
    let addr = server.addr.to_string();
    let r = grpc(&[
        &addr,
        "--proto",
        &helloworld_proto(),
        "--call",
        "helloworld.Greeter/SayHello",
        "-D",
        r#"{"name": "${id}/${seq}"}"#,
        "--data",
        data.to_str().unwrap(),
        "-n",
        "10",
        "-c",
        "1",
        "--concurrency",
        "1",
        "-t",
        "1",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let names: Vec<String> = server.seen().iter().map(|(_, b)| hello_name(b)).collect();
    let want: Vec<String> = (0..10)
        .map(|i| format!("row {}/{}", i % 4, i + 1))
        .collect();
    assert_eq!(names, want);
    assert!(server.counters.last_grpc_timeout.lock().unwrap().is_some());
    assert_eq!(r.json()["grpc_status"]["OK"], 10);
    // A column the data file does not have: refused before any call.
    let before = server.requests();
    let r = grpc(&[
        &addr,
        "--proto",
        &helloworld_proto(),
        "--call",
        "helloworld.Greeter/SayHello",
        "-D",
        r#"{"name": "${nope}"}"#,
        "--data",
        data.to_str().unwrap(),
        "-n",
        "1",
    ]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("unknown name `${nope}`"), "{}", r.stderr);
    assert_eq!(server.requests(), before);

    // HTTP/2: the path and query rendered per stream.
    let h2 = H2Server::start(H2Behavior::Ok);
    let url = format!("http://{}/u/${{id}}?s=${{seq}}", h2.addr);
    let r = run(&[
        "--http2",
        &url,
        "--data",
        data.to_str().unwrap(),
        "-n",
        "6",
        "-c",
        "1",
        "--concurrency",
        "1",
        "-t",
        "1",
        "-q",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let paths: Vec<String> = h2.seen().into_iter().map(|(p, _)| p).collect();
    let want: Vec<String> = (0..6)
        .map(|i| format!("/u/row%20{}?s={}", i % 4, i + 1))
        .collect();
    assert_eq!(paths, want);
}
