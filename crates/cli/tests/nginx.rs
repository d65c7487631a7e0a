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
