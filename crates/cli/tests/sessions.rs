//! User sessions (`--flow`), end to end against the scenario server's `/flow`, which keeps
//! its own book of every session: the order of its requests, the token and cookie each
//! carried, and the gap it measured before each request. The server is the truth here:
//! every session's requests arrive in order with its own token and cookie, think times
//! measured at the server follow the planned distribution, and a failed extraction ends
//! only its own session, counted under its step. One test at a time: they measure.

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;
use util::{loadlab_bin, run, temp_path};

static SERIAL: Mutex<()> = Mutex::new(());

/// `loadlab serve scenario` on a free port, stopped when dropped.
struct Scenario {
    child: Child,
    addr: String,
}

impl Scenario {
    fn start(extra: &[&str]) -> Scenario {
        let mut child = Command::new(loadlab_bin())
            .args([
                "serve",
                "scenario",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the scenario server said {line:?}"))
            .to_string();
        Scenario { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// `GET /flow/stats`, parsed.
    fn stats(&self) -> Value {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "GET /flow/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1;
        // actix may answer chunked: take the JSON object whatever the framing.
        let start = body.find('{').unwrap();
        let end = body.rfind('}').unwrap();
        serde_json::from_str(&body[start..=end]).unwrap()
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write(name: &str, text: &str) -> String {
    let p = temp_path(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const PAGES: u64 = 10;

/// Login, `PAGES` pages by the links the server hands out, logout with the last csrf;
/// think time `think` after every step but the last.
fn login_browse(think: &str) -> String {
    format!(
        r#"
think = {think}

[[steps]]
name = "login"
method = "POST"
path = "/flow/login"
headers = {{ Content-Type = "application/json" }}
body = '{{"user": "u${{seq}}"}}'
extract = [{{ var = "token", json = "/token" }}, {{ var = "next", jsonpath = "$.next" }}]

[[steps]]
loop = {PAGES}
steps = [{{ name = "page", path = "${{next}}", headers = {{ Authorization = "Bearer ${{token}}" }}, extract = [
    {{ var = "csrf", regex = 'name="csrf" value="([^"]+)"' }},
    {{ var = "next", regex = 'rel="next" href="([^"]+)"' }},
] }}]

[[steps]]
name = "logout"
method = "POST"
path = "/flow/logout"
headers = {{ Authorization = "Bearer ${{token}}", Content-Type = "application/json" }}
body = '{{"csrf": "${{csrf}}"}}'
"#
    )
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A data file of 40 users, `ok0`, `ok1`, …; with `bad`, every second one is `badN`.
fn users_csv(name: &str, bad: bool) -> String {
    write(
        name,
        &std::iter::once("user".to_string())
            .chain((0..40).map(|i| match bad && i % 2 == 1 {
                true => format!("bad{i}"),
                false => format!("ok{i}"),
            }))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// A login whose check takes the user back from the reply only if it starts with "ok"
/// (an extraction that fails for a `badN` user), then a page as that user.
const LOGIN_CHECKED_THEN_PAGE: &str = r#"
[[steps]]
name = "login"
method = "POST"
path = "/flow/login"
headers = { Content-Type = "application/json" }
body = '{"user": "${user}"}'
extract = [{ var = "token", json = "/token" }, { var = "me", regex = '"user":"(ok[0-9]+)"' }]

[[steps]]
name = "page"
path = "/flow/page/1?me=${me}"
headers = { Authorization = "Bearer ${token}" }
"#;

#[test]
fn every_session_sends_its_steps_in_order_with_its_own_token_and_cookie_and_thinks_as_planned() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Scenario::start(&[]);
    // An exponential think time of mean 100 ms: 12 requests and 11 pauses per session, the
    // first (after the login) none: its gap at the server is the delays alone.
    let flow = write(
        "flow.toml",
        &login_browse(r#"{ exponential = "100ms" }"#)
            .replace("name = \"login\"\n", "name = \"login\"\nthink = \"0s\"\n"),
    );
    let r = run(&[
        &server.url(),
        "--flow",
        &flow,
        "--rate",
        "100",
        "-d",
        "6s",
        "--seed",
        "7",
    ]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    let s = &j["sessions"];
    assert_eq!(u(&s["requests_per_session"]), PAGES + 2);
    // 100 sessions per second over 6 s, each about 1 s long.
    let started = u(&s["started"]);
    assert!((550..=650).contains(&started), "{s}");
    assert_eq!(u(&s["aborted"]), 0, "{s}\n{}", r.stdout);
    assert_eq!(
        u(&s["completed"]) + u(&s["running_at_end"]),
        started,
        "every session started is completed or still running: {s}"
    );
    assert!(u(&s["completed"]) > started / 2, "{s}");
    assert!(
        r.stdout
            .contains("open loop at 100 sessions/s of 12 requests each"),
        "{}",
        r.stdout
    );
    // Steps are the names; the page's offered rate is ten per session.
    let names: Vec<&str> = j["by_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["login", "page", "logout"]);
    assert_eq!(j["by_name"][1]["offered_rps"].as_f64(), Some(1000.0));
    // Think time is left out of the time waiting for responses, not out of the duration:
    // a session's 10 pauses (mean 100 ms each, a median sum of about 970 ms) part them,
    // however slowly the responses came on a busy host.
    let with = s["duration_ms"]["p50"].as_f64().unwrap();
    let without = s["active_ms"]["p50"].as_f64().unwrap();
    assert!(with > 700.0 && with - without > 700.0, "{s}");

    // The server's own book.
    let stats = server.stats();
    let totals = &stats["totals"];
    assert_eq!(u(&totals["out_of_order"]), 0, "{totals}");
    assert_eq!(u(&totals["unattributed"]), 0, "{totals}");
    for (cause, n) in totals["rejected"].as_object().unwrap() {
        assert_eq!(u(n), 0, "{cause}: {totals}");
    }
    // Every login the server saw (warm-up none) came from a session loadlab counted
    // (sessions whose first request was still in flight at the end count as running).
    assert_eq!(u(&totals["sessions_started"]), started, "{totals}");
    assert_eq!(
        u(&totals["sessions_completed"]),
        u(&s["completed"]),
        "{totals}"
    );
    // The gaps at the server after a pause (`think`) and after none (`none`, page 1's).
    let (mut think, mut none): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for session in stats["sessions"].as_array().unwrap() {
        let paths: Vec<&str> = session["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["path"].as_str().unwrap())
            .collect();
        // In order: login, the pages by number, logout (a session cut by the end of the
        // run stops anywhere on that path).
        let mut expected = vec!["/flow/login".to_string()];
        expected.extend((1..=PAGES).map(|n| format!("/flow/page/{n}")));
        expected.push("/flow/logout".into());
        assert!(
            !paths.is_empty() && paths.len() <= expected.len(),
            "{paths:?}"
        );
        assert_eq!(paths, expected[..paths.len()], "{session}");
        for q in session["requests"].as_array().unwrap() {
            assert_eq!(u(&q["status"]), 200, "{session}");
            if let Some(g) = q["gap_us"].as_u64() {
                match q["path"] == "/flow/page/1" {
                    true => none.push(g as f64 / 1000.0),
                    false => think.push(g as f64 / 1000.0),
                }
            }
        }
    }
    // Think times at the server: exponential with mean 100 ms. Each gap also holds the
    // network and every wake-up between the reply and the next request's arrival: how late
    // loadlab woke for the step (its schedule lag) and how late the server's worker woke to
    // read it, under a millisecond on a quiet machine but milliseconds on a virtual machine
    // whose host is busy (a mean gap of 106.6 ms there, of which loadlab's lag was only
    // 1.6 ms). Delays only add, so the plain mean is at least 95 ms; and an exponential
    // forgets: whatever delay `d` a gap carries, the gaps longer than `T > d` exceed `T` by
    // 100 ms on average. `T` is set above the delays this run had: the gaps after no pause
    // are the delays alone (and loadlab's own turnaround, which a pause hides), and `T`
    // clears all but the longest 0.5 % of them, 40 ms at least. A fixed `T` of 40 ms failed
    // on 7 December, when CI's other tests beside it delayed the server's wake-ups by 11 ms
    // on average and by more than 40 ms often enough to make the excess 107.4 ms. The band
    // is 3.5 standard errors of the excess's mean (100 ms over the root of the count), 5 ms
    // at least: a fixed pause or a mean 10 % off fails it, and the spread is an
    // exponential's (standard deviation equal to the mean).
    assert!(
        think.len() > 3000 && none.len() > 300,
        "{} gaps after a pause, {} after none",
        think.len(),
        none.len()
    );
    let n = think.len() as f64;
    let mean = think.iter().sum::<f64>() / n;
    let sd = (think.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let late = j["schedule_lag_ms"]["mean"].as_f64().unwrap();
    assert!(
        mean >= 95.0,
        "mean gap {mean:.2} ms (loadlab's mean lateness {late:.3} ms)"
    );
    none.sort_by(f64::total_cmp);
    let delays = none[(none.len() * 995 / 1000).min(none.len() - 1)];
    let t = (delays + 5.0).clamp(40.0, 150.0);
    let over: Vec<f64> = think.iter().filter(|&&g| g > t).map(|g| g - t).collect();
    let excess = over.iter().sum::<f64>() / over.len() as f64;
    let band = (3.5 * 100.0 / (over.len() as f64).sqrt()).max(5.0);
    assert!(
        over.len() > 1000 && (excess - 100.0).abs() <= band,
        "{} gaps over {t:.1} ms exceed it by {excess:.2} ms on average, not 100 ± {band:.1} \
         (mean gap {mean:.2} ms, the delays' 99.5th percentile {delays:.2} ms, loadlab's \
         mean lateness {late:.3} ms)",
        over.len()
    );
    assert!(
        (0.85..=1.15).contains(&(sd / mean)),
        "sd {sd:.2} of mean {mean:.2}"
    );
    // None shorter than the pause can be: an exponential draw is ≥ 0, and the server
    // measures from its reply to the next request.
    assert!(think.iter().chain(&none).all(|&g| g >= 0.0));
}

#[test]
fn a_failed_extraction_ends_only_its_own_session_and_counts_under_its_step() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Scenario::start(&[]);
    // Users in turn ok0, bad1, ok2, …: the login's check takes the user back from the
    // reply only if it starts with "ok", so every second session fails at login.
    let data = users_csv("users.csv", true);
    let flow = write(
        "flow.toml",
        &(LOGIN_CHECKED_THEN_PAGE.to_string()
            + r#"think = "20ms"

[[steps]]
name = "logout"
method = "POST"
path = "/flow/logout"
headers = { Authorization = "Bearer ${token}", Content-Type = "application/x-www-form-urlencoded" }
body = "csrf=none"
"#),
    );
    let r = run(&[
        &server.url(),
        "--flow",
        &flow,
        "--data",
        &data,
        "--data-order",
        "unique",
        "--rate",
        "40",
        "-d",
        "3s",
    ]);
    let j = r.json();
    let s = &j["sessions"];
    assert_eq!(u(&s["started"]), 40, "{s}\n{}", r.stdout);
    // The bad users' logins fail their extraction; the good users' logouts are refused
    // (403: the csrf is wrong on purpose), so every session is aborted by one of two steps.
    let aborted: Vec<(String, u64)> = s["aborted_by_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["step"].as_str().unwrap().to_string(), u(&a["sessions"])))
        .collect();
    assert_eq!(
        aborted,
        [("login".to_string(), 20), ("logout".to_string(), 20)],
        "{s}"
    );
    let login = &j["by_name"][0];
    assert_eq!(login["name"], "login");
    assert_eq!(u(&login["errors"]["extract_failed"]), 20, "{login}");
    // The response itself arrived, and is counted with its status.
    assert_eq!(u(&login["status_codes"]["200"]), 40, "{login}");
    assert_eq!(u(&j["by_name"][2]["errors"]["http_4xx"]), 20);
    assert!(
        r.stdout.contains("login 20 (extract_failed 20)"),
        "{}",
        r.stdout
    );
    // At the server: a bad user's session ends at its login; a good user's goes on.
    for session in server.stats()["sessions"].as_array().unwrap() {
        let user = session["user"].as_str().unwrap();
        let paths: Vec<&str> = session["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["path"].as_str().unwrap())
            .collect();
        if user.starts_with("bad") {
            assert_eq!(paths, ["/flow/login"], "{session}");
        } else {
            assert_eq!(
                paths,
                ["/flow/login", "/flow/page/1", "/flow/logout"],
                "{session}"
            );
            assert_eq!(u(&session["rejected"]["wrong_csrf"]), 1, "{session}");
        }
    }
}

#[test]
fn a_flow_file_with_a_mistake_is_refused_before_any_load_naming_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (text, says) in [
        (
            "[[steps]]\nname = \"a\"\npath = \"/x?t=${token}\"\n",
            "no earlier step extracts `token`",
        ),
        (
            "[[steps]]\nname = \"a\"\npath = \"/x\"\n[[steps]]\nname = \"a\"\npath = \"/y\"\n",
            "`a`",
        ),
        ("[[steps]]\nname = \"a\"\npth = \"/x\"\n", "pth"),
    ] {
        let flow = write("bad.toml", text);
        let r = run(&["http://127.0.0.1:9/", "--flow", &flow, "-d", "1s"]);
        assert_eq!(r.code(), Some(2), "{text}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{text}: {}", r.stderr);
        assert!(r.stderr.contains("--flow"), "{}", r.stderr);
    }
    // WebSocket steps: only on a socket's own step, and a flow on the server's http:// URL.
    for (text, url, says) in [
        (
            "[[steps]]\nname = \"a\"\npath = \"/x\"\nreply_contains = \"ok\"\n",
            "http://127.0.0.1:9/",
            "add websocket = true",
        ),
        (
            "[[steps]]\nname = \"a\"\nwebsocket = true\npath = \"/chat\"\n",
            "ws://127.0.0.1:9/",
            "http://",
        ),
    ] {
        let flow = write("bad.toml", text);
        let r = run(&[url, "--flow", &flow, "-d", "1s"]);
        assert_eq!(r.code(), Some(2), "{text}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{text}: {}", r.stderr);
        assert!(r.stderr.contains("--flow"), "{}", r.stderr);
    }
}

/// A plan whose scenario is a flow, inline: a step of sessions the server sustains and one
/// far past its pages' capacity (one place of 20 ms: 50 pages per second, one page per
/// session). The report counts loads in sessions per second and has the sessions table.
#[test]
fn a_plan_loads_a_flow_in_sessions_per_second_and_reports_its_sessions() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let plan = util::lab::write_plan(
        "flow-plan",
        r#"
name = "flow-plan"
[[target]]
name = "app"
command = ["{loadlab}", "serve", "scenario", "--bind", "127.0.0.1:{port}", "--workers", "1",
           "--flow-capacity", "1", "--flow-work-ms", "20"]
ready = { http = "http://127.0.0.1:{port}/health", status = 200 }

[[scenario]]
name = "users"
url = "http://127.0.0.1:{port}/"
timeout = "2s"
[scenario.flow]
think = "50ms"
[[scenario.flow.steps]]
name = "login"
method = "POST"
path = "/flow/login"
body = "user=u${seq}"
headers = { Content-Type = "application/x-www-form-urlencoded" }
extract = [{ var = "token", json = "/token" }]
[[scenario.flow.steps]]
name = "page"
path = "/flow/page/1"
headers = { Authorization = "Bearer ${token}" }

[load]
model = "open"
steps = [10, 150]
step_duration = "3s"
pause = "300ms"

[slo]
p99_ms = 300
"#,
    );
    let out = temp_path("flow-bundle");
    let o = util::lab::lab(&plan, &out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let steps = util::lab::steps(&out);
    assert_eq!(steps.len(), 2, "{stdout}\n{stderr}");
    let (low, high) = (&steps[0], &steps[1]);
    assert_eq!(low["load"].as_f64(), Some(10.0));
    assert_eq!(low["verdict"]["sustained"], true, "{}", low["verdict"]);
    assert_eq!(high["verdict"]["sustained"], false, "{}", high["verdict"]);
    // The page, not the login, broke: its step names it.
    let failed: Vec<&str> = high["verdict"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert!(failed.contains(&"page"), "{}", high["verdict"]);
    assert!(!failed.contains(&"login"), "{}", high["verdict"]);
    let sessions = &low["result"]["sessions"];
    assert_eq!(u(&sessions["aborted"]), 0, "{sessions}");
    assert!(u(&sessions["started"]) >= 25, "{sessions}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for says in [
        "knee (sessions/s)",
        "#### Sessions",
        "#### By step of the flow",
        "| offered sessions/s | started |",
        "knee between 10 and 150 sessions/s",
    ] {
        assert!(report.contains(says), "report lacks {says:?}:\n{report}");
    }
    // report.html: the same Sessions table, loads in sessions/s, and the achieved requests
    // against the line of offered sessions × their 2 requests (not y = x).
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for says in [
        "<h4>Sessions</h4>",
        "offered load (sessions/s)",
        "achieved = offered × 2 requests per session",
    ] {
        assert!(html.contains(says), "report.html lacks {says:?}");
    }
    assert!(!html.contains("<title>achieved = offered</title>"));
}

#[test]
fn a_plan_with_a_flow_and_requests_or_over_http2_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let flow = "[scenario.flow]\n[[scenario.flow.steps]]\nname = \"a\"\npath = \"/\"\n";
    util::lab::assert_plans_rejected(
        "flow",
        &[
            (
                format!("name = \"t\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[[scenario.request]]\nurl = \"/x\"\n{flow}[load]\nsteps = [1]\n"),
                "not both",
            ),
            (
                format!("name = \"t\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\nprotocol = \"http2\"\n{flow}[load]\nsteps = [1]\n"),
                "HTTP/1.1",
            ),
            (
                "name = \"t\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\nflow = \"no-such-flow.toml\"\n[load]\nsteps = [1]\n".to_string(),
                "scenario[0].flow",
            ),
        ],
    );
}

/// Two agents in network namespaces of their own drive one flow: the coordinator's merged
/// sessions are exactly what the server's book saw, each user (`${seq}`, strided across the
/// agents) is one session, and none is out of order.
#[test]
#[ignore = "needs root, iproute2 and curl, for network namespaces (./test.sh)"]
fn two_agents_run_one_flow_and_their_sessions_merge_exactly() {
    use util::fabric::{Fabric, HUB_IP};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(2);
    let mut server = Fabric::command(&f.hub, loadlab_bin())
        .args([
            "serve",
            "scenario",
            "--bind",
            &format!("{HUB_IP}:8080"),
            "--workers",
            "1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    let token = temp_path("token");
    std::fs::write(&token, "dGVzdC10b2tlbi1mb3ItbG9hZGxhYg==\n").unwrap();
    let coordinator = format!("{HUB_IP}:7879");
    let mut agents: Vec<Child> = (0..2)
        .map(|i| {
            util::spawn_agent(
                &mut Fabric::command(&f.leaves[i], loadlab_bin()),
                &coordinator,
                &token,
                &format!("a{i}"),
            )
        })
        .collect();
    let flow = write("flow.toml", &login_browse(r#""30ms""#));
    let json = temp_path("dist.json");
    let o = Fabric::command(&f.hub, loadlab_bin())
        .args(["run", &format!("http://{HUB_IP}:8080/"), "--flow", &flow])
        .args([
            "--rate",
            "40",
            "-d",
            "3s",
            "--agents",
            "2",
            "--listen",
            &coordinator,
        ])
        .arg("--token-file")
        .arg(&token)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    for a in &mut agents {
        let _ = a.wait();
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    util::assert_schema_valid(&r);
    assert_eq!(r["agents"].as_array().map(Vec::len), Some(2));
    let s = &r["sessions"];
    // Stats from the hub namespace, where the server listens.
    let stats_out = Fabric::command(&f.hub, "curl")
        .args(["-s", &format!("http://{HUB_IP}:8080/flow/stats")])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stats: Value = serde_json::from_slice(&stats_out.stdout).unwrap();
    let totals = &stats["totals"];
    assert_eq!(u(&s["started"]), 120, "{s}");
    assert_eq!(u(&totals["sessions_started"]), u(&s["started"]), "{totals}");
    assert_eq!(
        u(&totals["sessions_completed"]),
        u(&s["completed"]),
        "{totals}"
    );
    assert_eq!(u(&totals["out_of_order"]), 0, "{totals}");
    assert_eq!(u(&s["aborted"]), 0, "{s}");
    // Every user name once: the agents' `${seq}` never collide.
    let mut users: Vec<&str> = stats["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["user"].as_str().unwrap())
        .collect();
    users.sort_unstable();
    let n = users.len();
    users.dedup();
    assert_eq!(users.len(), n, "a user name was used twice");
    // The merged requests are the steps' requests.
    let by_name: u64 = r["by_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| u(&x["requests"]))
        .sum();
    assert_eq!(by_name, u(&r["requests"]));
    assert_eq!(u(&totals["requests"]), u(&r["requests"]), "{totals}");
}

/// Closed loop: `--connections` users, each starting a new session when its last one ends;
/// a request count is refused (sessions run for a time).
#[test]
fn closed_loop_users_run_sessions_back_to_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Scenario::start(&[]);
    let flow = write("flow.toml", &login_browse(r#""1ms""#));
    let r = run(&[&server.url(), "--flow", &flow, "-c", "4", "-d", "2s"]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("closed loop, 4 users (sessions of 12 requests, back to back)"),
        "{}",
        r.stdout
    );
    let s = &r.json()["sessions"];
    assert_eq!(u(&s["aborted"]), 0, "{s}");
    // Four users, each ending at most one session unfinished.
    assert!(u(&s["running_at_end"]) <= 4, "{s}");
    assert!(u(&s["completed"]) >= 8, "{s}");
    let totals = &server.stats()["totals"];
    assert_eq!(u(&totals["out_of_order"]), 0, "{totals}");
    assert_eq!(
        u(&totals["sessions_completed"]),
        u(&s["completed"]),
        "{totals}"
    );
    // A connection per session (the default): one opened for every session started.
    assert!(
        u(&r.json()["connections_opened"]) >= u(&s["started"]),
        "{}",
        r.json()["connections_opened"]
    );
    // `connection = "reuse"`: each user keeps its connection from one session to the next.
    let reuse = write(
        "flow-reuse.toml",
        &format!("connection = \"reuse\"\n{}", login_browse(r#""1ms""#)),
    );
    let r = run(&[&server.url(), "--flow", &reuse, "-c", "4", "-d", "2s"]);
    let j = r.json();
    assert_eq!(u(&j["sessions"]["aborted"]), 0, "{}", j["sessions"]);
    assert!(u(&j["sessions"]["completed"]) >= 8, "{}", j["sessions"]);
    assert_eq!(u(&j["connections_opened"]), 4, "{}", r.stdout);
    let r = run(&[&server.url(), "--flow", &flow, "-c", "4", "-n", "100"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("a duration"), "{}", r.stderr);
}

/// A login-then-browse app on gunicorn (a pre-fork Python server nobody here wrote) with 2
/// synchronous workers, every request holding one for 20 ms. It signs a token and a session
/// cookie per user (HMAC), checks both on every later request, and appends what it saw to
/// a log shared by its workers.
const GUNICORN_APP: &str = r#"
import hashlib, hmac, json, os, time
KEY = b"loadlab-test"
LOG = os.environ["FLOW_LOG"]

def sign(kind, user):
    return hmac.new(KEY, (kind + ":" + user).encode(), hashlib.sha256).hexdigest()[:24]

def note(line):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)

def reply(start, status, body, headers=()):
    body = body.encode()
    start(status, [("Content-Type", "application/json"),
                   ("Content-Length", str(len(body)))] + list(headers))
    return [body]

def user_of(environ):
    jar = dict(c.strip().split("=", 1) for c in environ.get("HTTP_COOKIE", "").split(";") if "=" in c)
    user, _, mac = jar.get("sid", "").partition(".")
    token = environ.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ")
    if user and hmac.compare_digest(mac, sign("sid", user)) and token == sign("token", user):
        return user
    return None

def app(environ, start):
    time.sleep(0.02)
    path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
    if path == "/login" and method == "POST":
        n = int(environ.get("CONTENT_LENGTH") or 0)
        user = json.loads(environ["wsgi.input"].read(n))["user"]
        note("login " + user)
        cookie = "sid=%s.%s; Path=/; HttpOnly" % (user, sign("sid", user))
        return reply(start, "200 OK", json.dumps({"token": sign("token", user)}),
                     [("Set-Cookie", cookie)])
    user = user_of(environ)
    if user is None:
        note("refused " + method + " " + path)
        return reply(start, "401 Unauthorized", '{"error": "no such user"}')
    if path == "/page":
        note("page " + user)
        return reply(start, "200 OK", json.dumps({"user": user}))
    if path == "/logout" and method == "POST":
        note("logout " + user)
        return reply(start, "200 OK", "{}")
    note("unknown " + method + " " + path)
    return reply(start, "404 Not Found", "{}")
"#;

#[test]
#[ignore = "needs gunicorn (./test.sh installs it)"]
fn a_flow_knee_on_gunicorn_is_in_sessions_per_second_and_names_its_two_workers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_path("gunicorn-flow");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.py"), GUNICORN_APP).unwrap();
    let log = dir.join("seen.log");
    let gunicorn = util::server::gunicorn(&dir, &[("FLOW_LOG", log.as_os_str())]);
    let port = gunicorn.port;
    // Five requests of 20 ms per session on 2 workers: 20 sessions/s at most.
    let flow = write(
        "gunicorn-flow.toml",
        r#"
think = "10ms"
[[steps]]
name = "login"
method = "POST"
path = "/login"
headers = { Content-Type = "application/json" }
body = '{"user": "u${uuid}"}'
extract = [{ var = "token", json = "/token" }]
[[steps]]
loop = 3
steps = [{ name = "page", path = "/page", headers = { Authorization = "Bearer ${token}" } }]
[[steps]]
name = "logout"
method = "POST"
path = "/logout"
headers = { Authorization = "Bearer ${token}" }
"#,
    );
    let out = temp_path("gunicorn-flow-bundle");
    let url = format!("http://127.0.0.1:{port}/");
    let (o, _) = util::output_within(
        Command::new(loadlab_bin())
            .args([
                "knee",
                "-q",
                &url,
                "--flow",
                &flow,
                "--cpus",
                "1",
                "--threads",
                "1",
            ])
            .args(["--step", "3s", "--warmup", "500ms", "--pause", "300ms"])
            .args([
                "--slo",
                "p99<1s",
                "--start",
                "5",
                "--max",
                "80",
                "--confirm",
                "0",
            ])
            .args(["--timeout", "10s", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(300),
    );
    drop(gunicorn);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("sessions/s"), "{stdout}");
    eprintln!("{stdout}");
    let configs = util::lab::lines(&out.join("configs.jsonl"));
    let k = &configs[0]["knees"][0];
    let range = &k["outcome"]["range"];
    let (lo, hi) = (range[0].as_f64().unwrap(), range[1].as_f64().unwrap());
    assert!(
        lo >= 10.0 && hi <= 24.0,
        "knee {lo}..{hi} sessions/s for 20: {k}"
    );
    let f = &k["diagnosis"]["findings"][0];
    assert_eq!(f["bottleneck"], "concurrency_bound", "{}", k["diagnosis"]);
    let in_service = f["figures"]["in_service"].as_f64().unwrap();
    assert!(
        (1.5..=2.5).contains(&in_service),
        "≈{in_service} for 2 workers"
    );
    // What gunicorn's app saw: never a request without its user's own token and cookie, and
    // every user's requests in the flow's order (a user may be cut short by a step's end).
    let seen = std::fs::read_to_string(&log).unwrap();
    let mut at: std::collections::HashMap<&str, usize> = Default::default();
    let order = ["login", "page", "page", "page", "logout"];
    let mut logouts = 0;
    for line in seen.lines() {
        let (what, who) = line.split_once(' ').unwrap();
        assert!(what != "refused" && what != "unknown", "{line}");
        let i = at.entry(who).or_insert(0);
        assert_eq!(
            order.get(*i),
            Some(&what),
            "user {who} out of order at {line}"
        );
        *i += 1;
        logouts += usize::from(what == "logout");
    }
    // Loadlab's completed sessions (measured windows only) all logged out at the server.
    let completed: u64 = util::lab::lines(&out.join("steps.jsonl"))
        .iter()
        .map(|s| u(&s["result"]["sessions"]["completed"]))
        .sum();
    assert!(completed >= 50, "{completed} sessions completed");
    assert!(
        logouts as u64 >= completed,
        "{logouts} logouts < {completed}"
    );
}

#[test]
fn compare_shows_two_runs_sessions_side_by_side_untested() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Scenario::start(&[]);
    // The same flow twice at the same rate: users all good, then every second one bad
    // (its login's extraction fails, which ends its session).
    let flow = write("compare-flow.toml", LOGIN_CHECKED_THEN_PAGE);
    let mut files = Vec::new();
    for (name, bad) in [("good", false), ("half-bad", true)] {
        let data = users_csv(&format!("compare-{name}.csv"), bad);
        let r = run(&[
            &server.url(),
            "--flow",
            &flow,
            "--data",
            &data,
            "--data-order",
            "unique",
            "--rate",
            "40",
            "-d",
            "3s",
        ]);
        let path = temp_path(&format!("compare-{name}.json"));
        std::fs::write(&path, r.json().to_string()).unwrap();
        files.push(path.display().to_string());
    }
    let (o, _) = util::output_within(
        Command::new(loadlab_bin()).args(["compare", &files[0], &files[1]]),
        std::time::Duration::from_secs(60),
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{said}");
    let row = said
        .lines()
        .find(|l| l.trim_start().starts_with("sessions at 40 sessions/s"))
        .unwrap_or_else(|| panic!("no sessions row:\n{said}"));
    for says in [
        "40 of 40 done, 0 aborted",
        "20 of 40 done, 20 aborted",
        "aborted 0.0 % → 50.0 %, not tested for noise",
    ] {
        assert!(row.contains(says), "{row}");
    }
    // Its achieved rate is requests, said so beside a load in sessions.
    assert!(said.contains("achieved req/s at 40 sessions/s"), "{said}");
    // Each input is named by its flow's steps, not by its first request's method.
    let sent = format!("flow login → page at {}", server.url());
    assert!(said.contains(&sent), "no '{sent}':\n{said}");
    // The JSON: the committed schema, the counts.
    let (o, _) = util::output_within(
        Command::new(loadlab_bin()).args(["compare", "--json", &files[0], &files[1]]),
        std::time::Duration::from_secs(60),
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schema/comparison.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let step = &v["pairs"][0]["series"][0]["steps"][0];
    assert_eq!(u(&step["baseline"]["sessions"]["completed"]), 40, "{step}");
    assert_eq!(u(&step["other"]["sessions"]["aborted"]), 20, "{step}");
}

#[test]
fn a_flows_achieved_gate_compares_requests_with_the_requests_its_sessions_offered() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = Scenario::start(&[]);
    // 50 sessions/s of 4 requests: 200 req/s offered (not 50: achieved over the session
    // rate would read 4.0 and pass any `achieved>=` gate).
    let flow = write(
        "gate-flow.toml",
        r#"
[[steps]]
name = "login"
method = "POST"
path = "/flow/login"
headers = { Content-Type = "application/json" }
body = '{"user": "u${seq}"}'
extract = [{ var = "token", json = "/token" }]
[[steps]]
loop = 3
steps = [{ name = "page", path = "/flow/page/1", headers = { Authorization = "Bearer ${token}" } }]
"#,
    );
    let r = run(&[
        &server.url(),
        "--flow",
        &flow,
        "--rate",
        "50",
        "-d",
        "3s",
        "--slo",
        "achieved<=1.5",
    ]);
    assert!(r.stdout.contains("of 200 req/s offered)"), "{}", r.stdout);
    assert!(r.stdout.contains("[PASS] achieved<=1.5"), "{}", r.stdout);
}

/// A chat service on Node's http and `ws` (Debian's node-ws), nobody here wrote either:
/// `POST /login` answers `{"token": "tN"}` and sets the cookie `sid=sN`; the WebSocket at
/// `/chat?token=tN` is upgraded only with the cookie of the same N (401 otherwise), greets
/// with `{"hello": …}`, answers `{"join": …}` with a typing notice and then `{"joined": …,
/// "id": K}` (K its own count), and `{"say": …, "id": K}` with `{"echo": …}`. `GET /stats`:
/// upgrades, joins, says with the id their socket's join got (`says_ok`) and without
/// (`says_bad`), refusals, and the close codes the sockets ended with.
fn node_chat() -> util::server::Server {
    let js = r#"
const http = require('http');
const { WebSocketServer } = require('/usr/share/nodejs/ws');
const st = { logins: 0, upgrades: 0, refused: 0, joins: 0, says_ok: 0, says_bad: 0, closes: {} };
let n = 0, k = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/login') {
    n += 1; st.logins += 1;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Set-Cookie': 'sid=s' + n + '; Path=/' });
      res.end(JSON.stringify({ token: 't' + n }));
    });
    return;
  }
  if (req.url === '/stats') { res.writeHead(200, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(st)); return; }
  res.writeHead(404); res.end();
});
const wss = new WebSocketServer({ noServer: true });
server.on('upgrade', (req, socket, head) => {
  const u = new URL(req.url, 'http://x');
  const token = u.searchParams.get('token') || '';
  const sid = ((req.headers.cookie || '').match(/sid=s(\d+)/) || [])[1];
  if (u.pathname !== '/chat' || !sid || token !== 't' + sid) {
    st.refused += 1;
    socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    st.upgrades += 1;
    let id = null;
    ws.send(JSON.stringify({ hello: sid }));
    ws.on('message', (m) => {
      const msg = JSON.parse(m.toString());
      if (msg.join !== undefined) {
        k += 1; id = k; st.joins += 1;
        ws.send(JSON.stringify({ typing: true }));
        setTimeout(() => ws.send(JSON.stringify({ joined: msg.join, id: id })), 5);
      } else if (msg.say !== undefined) {
        if (msg.id === id) st.says_ok += 1; else st.says_bad += 1;
        ws.send(JSON.stringify({ echo: msg.say }));
      }
    });
    ws.on('close', (code) => { st.closes[code] = (st.closes[code] || 0) + 1; });
  });
});
server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));
"#;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "node", "-e", js]);
    util::server::Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok())
}

/// `GET /stats` of [`node_chat`].
fn chat_stats(port: u16) -> Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1;
    // Node may answer chunked: take the JSON object whatever the framing.
    serde_json::from_str(&body[body.find('{').unwrap()..=body.rfind('}').unwrap()]).unwrap()
}

/// Log in over HTTP, then join a room and say something on a WebSocket whose upgrade
/// carries the token (in the path) and the login's cookie (from the jar).
const CHAT_FLOW: &str = r#"
[[steps]]
name = "login"
method = "POST"
path = "/login"
body = '{"user": "u${seq}"}'
extract = [{ var = "token", json = "/token" }]

[[steps]]
name = "join"
websocket = true
path = "/chat?token=${token}"
body = '{"join": "lobby"}'
reply_contains = '"joined"'
extract = [{ var = "id", json = "/id" }]

[[steps]]
name = "say"
websocket = true
path = "/chat?token=${token}"
body = '{"say": "hi ${seq}", "id": ${id}}'
reply_contains = '"echo"'
"#;

/// Each session of a flow with WebSocket steps opens one socket (its upgrade carrying the
/// login's token and cookie), passes over the greeting and the typing notice to the reply
/// its step waits for, sends the id it extracted from that reply, and closes with 1000.
/// A refused upgrade counts under its step with its status and ends only that session;
/// a reply that never comes ends it at the timeout.
#[test]
#[ignore = "needs Node's ws (./test.sh installs node-ws)"]
fn a_flow_joins_a_chat_on_a_websocket_with_its_login_and_says_what_it_extracted() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = node_chat();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let flow = write("chat.toml", CHAT_FLOW);
    let r = run(&[
        &url, "--flow", &flow, "--rate", "20", "-d", "2s", "--cpus", "1",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let s = &j["sessions"];
    let started = u(&s["started"]);
    assert_eq!(started, 40, "{s}");
    // A session still running at the end of the window is not completed: at 20 per second
    // and a few ms per session, at most a couple.
    let completed = u(&s["completed"]);
    assert!(completed + 3 >= started, "{s}");
    assert_eq!(u(&s["aborted"]), 0, "{s}\n{}", r.stdout);
    let by: Vec<(&str, u64, u64)> = j["by_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let codes = &n["status_codes"];
            (
                n["name"].as_str().unwrap(),
                codes["200"].as_u64().unwrap_or(0),
                codes["101"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(by[0].0, "login");
    assert_eq!((by[1].0, by[2].0), ("join", "say"), "{by:?}");
    assert!(by[1].2 >= completed && by[2].2 >= completed, "{by:?}");
    assert!(r.stdout.contains("101:"), "{}", r.stdout);
    // The server's count: one socket per session that joined, each say with its own id.
    // (A socket's close reaches the server's count a moment after loadlab has exited.)
    let mut st = chat_stats(server.port);
    for _ in 0..20 {
        let closed: u64 = st["closes"].as_object().unwrap().values().map(u).sum();
        if closed >= u(&st["upgrades"]) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        st = chat_stats(server.port);
    }
    assert_eq!(u(&st["refused"]), 0, "{st}");
    assert_eq!(u(&st["upgrades"]), by[1].2.max(u(&st["joins"])), "{st}");
    assert_eq!(u(&st["joins"]), by[1].2, "{st} {by:?}");
    assert_eq!(u(&st["says_ok"]), by[2].2, "{st} {by:?}");
    assert_eq!(u(&st["says_bad"]), 0, "{st}");
    // Every socket was closed with a close frame of 1000, at its session's end.
    assert_eq!(
        st["closes"],
        serde_json::json!({"1000": u(&st["upgrades"])}),
        "{st}"
    );

    // A token that is not the cookie's: each upgrade is refused with 401, counted under
    // `join`, and ends its session there (the login's 200s are still counted).
    let wrong = write(
        "chat-wrong.toml",
        &CHAT_FLOW.replace("/chat?token=${token}", "/chat?token=x${token}"),
    );
    let r = run(&[
        &url, "--flow", &wrong, "--rate", "20", "-d", "1s", "--cpus", "1",
    ]);
    let j = r.json();
    let join = &j["by_name"][1];
    assert_eq!(join["name"], "join");
    let refused = u(&join["status_codes"]["401"]);
    assert!(refused >= 18, "{join}");
    assert_eq!(u(&join["errors"]["http_4xx"]), refused, "{join}");
    let aborted = &j["sessions"]["aborted_by_step"];
    assert_eq!(aborted[0]["step"], "join", "{aborted}");
    assert_eq!(u(&aborted[0]["sessions"]), refused, "{aborted}");

    // A reply that never comes (nothing the server says holds it): the step ends at the
    // timeout, counted as a request timeout, and the session with it.
    let never = write(
        "chat-never.toml",
        &CHAT_FLOW.replace("'\"joined\"'", "'\"never\"'"),
    );
    let r = run(&[
        &url,
        "--flow",
        &never,
        "--rate",
        "5",
        "-d",
        "1s",
        "--timeout",
        "300ms",
        "--cpus",
        "1",
    ]);
    let j = r.json();
    let join = &j["by_name"][1];
    assert_eq!(
        u(&join["errors"]["request_timeout"]),
        5,
        "{join}\n{}",
        r.stdout
    );
    assert_eq!(u(&j["sessions"]["aborted"]), 5, "{}", j["sessions"]);
}

/// Connections opened at a rate, each for a lifetime: a flow of WebSocket steps at 40
/// sessions a second, each session's socket living through four messages a quarter of a
/// second apart (about 0.75 s). Node's `ws` counts the sockets open at once: by Little's
/// law about 40 × 0.75 = 30 while the sessions overlap, and every one opened once per
/// session and closed with 1000.
#[test]
#[ignore = "needs Node's ws (./test.sh installs node-ws)"]
fn websocket_connections_opened_at_a_rate_each_live_their_flow_and_overlap_by_littles_law() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let js = r#"
const http = require('http');
const { WebSocketServer } = require('/usr/share/nodejs/ws');
const st = { opened: 0, open: 0, peak: 0, messages: 0, closes: {} };
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(st));
});
const wss = new WebSocketServer({ server });
wss.on('connection', (ws) => {
  st.opened += 1; st.open += 1; st.peak = Math.max(st.peak, st.open);
  ws.on('message', (m) => { st.messages += 1; ws.send(m); });
  ws.on('close', (code) => { st.open -= 1; st.closes[code] = (st.closes[code] || 0) + 1; });
});
server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));
"#;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "node", "-e", js]);
    let server = util::server::Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    let flow = write(
        "lifetime.toml",
        r#"
think = "250ms"

[[steps]]
loop = 4
steps = [{ name = "tick", websocket = true, path = "/live", body = "tick ${seq}" }]
"#,
    );
    let url = format!("http://127.0.0.1:{}/", server.port);
    let r = run(&[
        &url, "--flow", &flow, "--rate", "40", "-d", "3s", "--cpus", "1",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let s = &j["sessions"];
    assert_eq!(u(&s["started"]), 120, "{s}");
    assert_eq!(u(&s["aborted"]), 0, "{s}");
    let mut st = chat_stats(server.port);
    for _ in 0..20 {
        if u(&st["open"]) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        st = chat_stats(server.port);
    }
    // One socket per session, each closed by loadlab with 1000, even those of the sessions
    // the window's end cut short (still thinking then); every reply counted is a message
    // the server echoed, four per completed session.
    assert_eq!(u(&st["opened"]), 120, "{st}");
    assert_eq!(st["closes"], serde_json::json!({"1000": 120}), "{st}");
    let (completed, running) = (u(&s["completed"]), u(&s["running_at_end"]));
    assert_eq!(completed + running, 120, "{s}");
    let replies = u(&j["by_name"][0]["status_codes"]["101"]);
    assert_eq!(u(&st["messages"]), replies, "{st}");
    assert!(
        replies >= 4 * completed && replies < 4 * completed + 4 * running,
        "{s}"
    );
    // Sessions overlap by rate × lifetime: the lifetime is three think times (0.75 s) and
    // the replies' few milliseconds, so about 30 open at once. Judged against the
    // lifetimes loadlab measured (a late wake-up lengthens a session, and the overlap with
    // it), a socket opened in the instant another closes adding one.
    let lifetime = &s["duration_ms"];
    let (p50, max) = (
        lifetime["p50"].as_f64().unwrap(),
        lifetime["max"].as_f64().unwrap(),
    );
    assert!((750.0..1000.0).contains(&p50), "{s}");
    let peak = u(&st["peak"]) as f64;
    assert!(
        peak >= 40.0 * p50 / 1000.0 - 2.0 && peak <= 40.0 * max / 1000.0 + 2.0,
        "{st} {lifetime}"
    );
}

/// An answer streamed as server-sent events, as LLM servers stream tokens, on Node's
/// `http` (nobody here wrote it): `POST /v1/chat` answers `text/event-stream`, its first
/// token after 60 ms, four more 20 ms apart, then `data: [DONE]`, and ends. `GET /stats`:
/// the streams opened, the prompts they carried, and the `Accept` each asked with.
fn node_tokens() -> util::server::Server {
    let js = r#"
const http = require('http');
const st = { streams: 0, prompts: [], accept: {} };
const server = http.createServer((req, res) => {
  if (req.url === '/stats') { res.writeHead(200, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(st)); return; }
  let body = '';
  req.on('data', (c) => body += c);
  req.on('end', () => {
    st.streams += 1;
    st.prompts.push(JSON.parse(body).prompt);
    st.accept[req.headers.accept] = (st.accept[req.headers.accept] || 0) + 1;
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    let i = 0;
    const next = () => {
      if (i < 5) { res.write('data: {"token": "t' + i + '", "n": ' + i + '}\n\n'); i += 1; setTimeout(next, 20); }
      else { res.end('data: [DONE]\n\n'); }
    };
    setTimeout(next, 60);
  });
});
server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));
"#;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "node", "-e", js]);
    util::server::Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok())
}

/// Time to first token and to the end of the answer, as two event-stream steps on one
/// stream: the first opens it with its POST and takes the first event (its token
/// extracted), the second waits on the same stream for `[DONE]`. Neither can be shorter
/// than the server's own pauses (60 ms to the first token, 100 ms more to [DONE]); a step
/// waiting for an event the stream ends without is a closed connection, its session
/// aborted there.
#[test]
#[ignore = "needs Node (./test.sh installs nodejs)"]
fn a_flow_times_the_first_token_and_the_end_of_a_streamed_answer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = node_tokens();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let flow = r#"
[[steps]]
name = "first_token"
sse = true
method = "POST"
path = "/v1/chat"
headers = { Content-Type = "application/json" }
body = '{"prompt": "p${seq}"}'
extract = [{ var = "tok", json = "/token" }]

[[steps]]
name = "done"
sse = true
path = "/v1/chat"
reply_contains = "[DONE]"
"#;
    let r = run(&[
        &url,
        "--flow",
        &write("tokens.toml", flow),
        "--rate",
        "20",
        "-d",
        "2s",
        "--cpus",
        "1",
    ]);
    assert_eq!(r.code(), Some(0), "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let s = &j["sessions"];
    assert_eq!(u(&s["started"]), 40, "{s}");
    assert_eq!(u(&s["aborted"]), 0, "{s}\n{}", r.stdout);
    let first = &j["by_name"][0];
    let done = &j["by_name"][1];
    assert_eq!(
        (first["name"].as_str(), done["name"].as_str()),
        (Some("first_token"), Some("done"))
    );
    // Every reply an event of a 200 stream; one stream per session, each asked for as an
    // event stream, with its own prompt.
    let firsts = u(&first["status_codes"]["200"]);
    assert!(firsts >= 38, "{first}");
    let st = chat_stats(server.port);
    assert_eq!(u(&st["streams"]), firsts, "{st}");
    assert_eq!(
        st["accept"],
        serde_json::json!({"text/event-stream": firsts}),
        "{st}"
    );
    let mut prompts: Vec<&str> = st["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    prompts.sort_unstable();
    prompts.dedup();
    assert_eq!(prompts.len() as u64, firsts, "{st}");
    // The server's pauses bound the latencies from below (they run from each step's
    // intended time; [DONE]'s from the first token's arrival, which a late read of it
    // moves by a few ms); the upper bounds leave a busy host room.
    let (f50, d50) = (
        first["latency_ms"]["p50"].as_f64().unwrap(),
        done["latency_ms"]["p50"].as_f64().unwrap(),
    );
    assert!(
        (60.0..400.0).contains(&f50),
        "first token p50 {f50} ms: {first}"
    );
    assert!((90.0..600.0).contains(&d50), "[DONE] p50 {d50} ms: {done}");

    // Waiting for what the stream never sends: it ends after [DONE], and the step's wait
    // ends with it, a closed connection, not a timeout.
    let never = flow.replace("\"[DONE]\"", "\"[NEVER]\"");
    let r = run(&[
        &url,
        "--flow",
        &write("never.toml", &never),
        "--rate",
        "10",
        "-d",
        "1s",
    ]);
    let j = r.json();
    let done = &j["by_name"][1];
    let closed = u(&done["errors"]["connection_closed"]);
    assert!(closed >= 9, "{done}\n{}", r.stdout);
    assert_eq!(u(&j["sessions"]["aborted"]), closed, "{}", j["sessions"]);
    assert_eq!(u(&done["errors"]["request_timeout"]), 0, "{done}");
}
