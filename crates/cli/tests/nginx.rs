//! End to end against Debian's nginx with its defaults: `keepalive_requests 1000` closes
//! every keep-alive connection (HTTP/1.1 with `Connection: close`, HTTP/2 with `GOAWAY`)
//! after 1,000 requests. loadlab must report zero errors where every request was answered
//! in the end, and show the closes and the re-sent requests.
//!
//! nginx must be installed (`.ci/run` installs it); without it this test fails, it does
//! not skip.

mod util;

use std::process::Command;

use util::nginx::{log, nginx_binary, Nginx};
use util::{run, temp_path};

/// A listener beside the run whose accept queue overflows all along (another server on the
/// host, another test): backlog 1, accepting nothing, four connections opened to it every
/// 250 ms (400 at most) until dropped. The kernel's overflow counters are the network
/// namespace's, so they grow with it; the target's own listening socket's do not.
struct OverflowingNeighbour {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OverflowingNeighbour {
    fn start() -> OverflowingNeighbour {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: listen again (a backlog of 1) on a socket we own.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 1) }, 0);
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let _listener = listener;
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
                },
                sin_zero: [0; 8],
            };
            let mut held = Vec::new();
            while !stopped.load(Ordering::Relaxed) && held.len() < 400 {
                for _ in 0..4 {
                    // SAFETY: a non-blocking socket we create and own, connected once.
                    unsafe {
                        let fd = libc::socket(
                            libc::AF_INET,
                            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                            0,
                        );
                        assert!(fd >= 0);
                        libc::connect(
                            fd,
                            &addr as *const libc::sockaddr_in as *const libc::sockaddr,
                            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                        );
                        held.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        });
        OverflowingNeighbour {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for OverflowingNeighbour {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn u(j: &serde_json::Value, key: &str) -> u64 {
    j[key].as_u64().unwrap_or_else(|| panic!("{key}: {j}"))
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn stock_nginx_closing_every_thousand_requests_is_not_an_error() {
    let nginx = Nginx::start();

    // HTTP/1.1, 16 requests pipelined: the 1,000th response says Connection: close.
    let url = format!("http://127.0.0.1:{}/", nginx.http);
    let r = run(&[&url, "-n", "50000", "-c", "8", "--pipeline", "16"]);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}\n{}", r.stdout, log(&nginx.dir));
    assert_eq!(u(j, "successful"), 50_000);
    assert!(u(j, "resent_unprocessed") > 0, "{}", r.stdout);
    // 50 connections' worth; up to 8 end the run part-way through their 1,000.
    assert!(u(j, "server_closes") >= 40, "{}", r.stdout);
    let per = j["requests_per_server_close"].as_f64().unwrap();
    assert!((990.0..=1000.0).contains(&per), "{per}");

    // HTTP/2 over TLS: GOAWAY after 1,000 streams, 128 in flight.
    let url = format!("https://localhost:{}/", nginx.https);
    let r = run(&[
        "--http2",
        &url,
        "--insecure",
        "-n",
        "50000",
        "-c",
        "4",
        "--concurrency",
        "128",
    ]);
    let j = r.json();
    assert_eq!(u(j, "errors_total"), 0, "{}\n{}", r.stdout, log(&nginx.dir));
    assert_eq!(u(j, "successful"), 50_000);
    assert!(u(j, "server_closes") >= 40, "{}", r.stdout);
    assert!(r.stdout.contains("server closes"), "{}", r.stdout);
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn the_readme_nginx_plan_runs_with_a_relative_out_from_another_directory() {
    // The README's example, as written: its `{files}` must be absolute for nginx, whose
    // working directory is the plan's, to find its configuration.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let marker = "<!-- example: nginx plan";
    let block = &readme[readme.find(marker).expect("the README's nginx plan")..];
    let start = block.find("```toml\n").unwrap() + "```toml\n".len();
    let text = &block[start..start + block[start..].find("```").unwrap()];
    let plans = temp_path("nginx-plan");
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::write(plans.join("nginx.toml"), text).unwrap();
    let elsewhere = temp_path("nginx-cwd");
    std::fs::create_dir_all(&elsewhere).unwrap();
    nginx_binary();
    let o = Command::new(util::loadlab_bin())
        .args(["lab", "-q", "--quick"])
        .arg(plans.join("nginx.toml"))
        .args(["--out", "rel/b"])
        .current_dir(&elsewhere)
        .env(
            "PATH",
            format!("/usr/sbin:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let configs = std::fs::read_to_string(elsewhere.join("rel/b/configs.jsonl")).unwrap();
    let statuses: Vec<String> = configs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["status"].to_string())
        .collect();
    assert_eq!(statuses, ["\"completed\"", "\"completed\""], "{configs}");
    // nginx read the configuration of its own configuration's directory.
    for workers in ["1", "2"] {
        let conf = std::fs::read_to_string(
            elsewhere.join(format!("rel/b/files/workers_{workers}/nginx.conf")),
        )
        .unwrap_or_else(|e| panic!("workers={workers}: {e}"));
        assert!(
            conf.contains(&format!("worker_processes {workers};")),
            "{conf}"
        );
        assert!(
            conf.contains(&format!("pid {}/", elsewhere.join("rel/b").display())),
            "{conf}"
        );
    }
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn a_proxys_gateway_timeouts_name_its_upstream_run_after_run_not_a_server_shedding_work() {
    // The upstream: Python's http.server serving two requests at a time, 50 ms each (40
    // req/s), its listen queue long enough that nginx's connects never wait in it.
    let py = "import time, threading\n\
        from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler\n\
        pool = threading.Semaphore(2)\n\
        class H(BaseHTTPRequestHandler):\n\
        \x20   def do_GET(self):\n\
        \x20       with pool: time.sleep(0.05)\n\
        \x20       self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n\
        \x20       self.wfile.write(b'ok')\n\
        \x20   def log_message(self, *a): pass\n\
        class S(ThreadingHTTPServer):\n\
        \x20   request_queue_size = 1024\n\
        \x20   def handle_error(self, *a): pass\n\
        s = S(('127.0.0.1', 0), H)\n\
        print('port', s.server_address[1], flush=True)\n\
        s.serve_forever()\n";
    // A fresh pair for each run: the upstream works off the requests nginx gave up on for
    // many seconds after a run that overloaded it.
    let start = || {
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "0", "/usr/bin/python3", "-c", py]);
        let upstream = util::server::Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
        // nginx gives up on it after a second: 504 (gateway timeout).
        let nginx = Nginx::with_servers(&format!(
            "access_log off;\n  server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://127.0.0.1:{}; proxy_read_timeout 1s; }} }}",
            upstream.port
        ));
        (upstream, nginx)
    };
    let dir = temp_path("gateway");
    std::fs::create_dir_all(&dir).unwrap();
    let mut whys = Vec::new();
    for run in 0..2 {
        let (upstream, nginx) = start();
        let plan = dir.join(format!("gateway-{run}.toml"));
        std::fs::write(
            &plan,
            format!(
                "name = \"gateway\"\n[[scenario]]\nname = \"page\"\nurl = \"http://127.0.0.1:{}/\"\ntimeout = \"3s\"\n\
                 [load]\nmodel = \"open\"\nsteps = [10, 150]\nstep_duration = \"4s\"\nwarmup = \"500ms\"\npause = \"500ms\"\nthreads = 1\ncpus = \"1\"\n\
                 [probe]\nlisten = {}\n",
                nginx.http, nginx.http
            ),
        )
        .unwrap();
        let out = dir.join(format!("out-{run}"));
        let neighbour = OverflowingNeighbour::start();
        util::lab::lab_ok(&plan, &out);
        drop(neighbour);
        let steps = util::lab::steps(&out);
        assert!(
            steps[0]["verdict"]["sustained"].as_bool().unwrap(),
            "{}",
            steps[0]
        );
        let over = &steps[1];
        assert!(!over["verdict"]["sustained"].as_bool().unwrap(), "{over}");
        let gateway = over["result"]["status_codes"]["504"].as_u64().unwrap_or(0);
        assert!(gateway > 0, "no 504 at 150 req/s: {}", over["result"]);
        let f = util::lab::server_finding(&over["diagnosis"]);
        let evidence = f["evidence"].as_str().unwrap().to_string();
        assert_eq!(f["bottleneck"], "upstream", "{}", over["diagnosis"]);
        assert!(evidence.contains("with 504 (gateway timeout"), "{evidence}");
        // Named by the proxy's own connections to it.
        assert!(
            evidence.contains(&format!("its upstream 127.0.0.1:{} (up to", upstream.port)),
            "{evidence}"
        );
        let named: Vec<String> = over["diagnosis"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["bottleneck"].as_str().unwrap().to_string())
            .collect();
        assert!(!named.contains(&"refused".to_string()), "{named:?}");
        // The neighbour's overflows counted in the namespace, none at nginx's listener.
        assert!(!named.contains(&"accept_queue".to_string()), "{named:?}");
        let ruled_out = over["diagnosis"]["ruled_out"].to_string();
        assert!(
            ruled_out.contains("none at the target's own listening socket")
                && ruled_out.contains("another listener's queue overflowed"),
            "{ruled_out}"
        );
        whys.push(f["bottleneck"].as_str().unwrap().to_string());
        drop(nginx);
        drop(upstream);
    }
    assert_eq!(whys[0], whys[1], "the same why run after run");
}
