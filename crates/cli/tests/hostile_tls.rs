//! TLS servers that must not be trusted: a certificate for another name, an expired one,
//! one from an authority nobody named, and a handshake that never completes. Each is a
//! named error after a bounded time; the same authority's valid certificate (the control)
//! succeeds, so each refusal is for its own reason. Plans verify certificates too, unless a
//! scenario says `insecure = true`, which the report states.

mod util;

use std::time::{Duration, Instant};

use util::lab::{lab_within, lines, LAB_BOUND};
use util::tls::{stalled_handshake_server, tls_server, Ca};
use util::{temp_path, RunOutput};

fn run_https(port: u16, extra: &[&str]) -> RunOutput {
    let url = format!("https://127.0.0.1:{port}/");
    let mut args = vec![url.as_str(), "-d", "1s", "-c", "2", "--timeout", "1s", "-q"];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let r = util::run(&args);
    assert!(started.elapsed() < Duration::from_secs(15), "{extra:?}");
    r
}

fn ca_file(ca: &Ca) -> String {
    let path = temp_path("ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    path.display().to_string()
}

#[test]
fn only_a_valid_certificate_for_the_name_from_a_trusted_authority_passes() {
    let ca = Ca::new();
    let trusted = ca_file(&ca);
    // The control: a valid certificate for 127.0.0.1 from the CA given with --cacert.
    let (good, served, _a) = tls_server(ca.issue(&["127.0.0.1"], false));
    let r = run_https(good.port(), &["--cacert", &trusted]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.json()["errors_total"], 0, "{}", r.json());
    assert!(served.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // The same certificate without --cacert: an unknown authority.
    let r = run_https(good.port(), &[]);
    assert!(r.error_count("tls_handshake") > 0);
    assert_eq!(r.json()["successful"], 0);
    assert_eq!(r.code(), Some(1));

    for (what, issued) in [
        (
            "another name",
            ca.issue(&["localhost", "example.test"], false),
        ),
        ("expired", ca.issue(&["127.0.0.1"], true)),
    ] {
        let (addr, served, _b) = tls_server(issued);
        let r = run_https(addr.port(), &["--cacert", &trusted]);
        assert!(r.error_count("tls_handshake") > 0, "{what}: {}", r.json());
        assert_eq!(r.json()["successful"], 0, "{what}");
        assert_eq!(r.code(), Some(1), "{what}");
        assert_eq!(
            served.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "{what}"
        );
    }
}

#[test]
fn a_handshake_that_stalls_is_a_connect_timeout_on_time() {
    let (addr, _server) = stalled_handshake_server();
    for extra in [&[][..], &["--rate", "20"][..]] {
        let r = run_https(addr.port(), extra);
        assert!(
            r.error_count("connect_timeout") > 0,
            "{extra:?}: {}",
            r.json()
        );
        assert_eq!(r.json()["successful"], 0);
        assert_eq!(r.code(), Some(1));
    }
}

#[test]
fn a_cacert_that_is_not_pem_is_refused() {
    let path = temp_path("bad.pem");
    std::fs::write(&path, "not a certificate").unwrap();
    let r = run_https(1, &["--cacert", path.to_str().unwrap()]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--cacert"), "{}", r.stderr);
    let r = run_https(1, &["--cacert", "/nonexistent/ca.pem"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
}

#[test]
fn plans_verify_certificates_unless_a_scenario_says_insecure() {
    let ca = Ca::new();
    let (addr, _served, _s) = tls_server(ca.issue(&["127.0.0.1"], false));
    let dir = temp_path("tls-plan");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let plan = |extra: &str| {
        let path = dir.join(format!("plan-{}.toml", extra.len()));
        std::fs::write(
            &path,
            format!(
                "name = \"tls\"\n[[scenario]]\nname = \"s\"\nurl = \"https://127.0.0.1:{}/\"\ntimeout = \"1s\"\n{extra}\n[load]\nsteps = [20]\nstep_duration = \"1s\"\nconnections = 2\nthreads = 1\n",
                addr.port()
            ),
        )
        .unwrap();
        path
    };
    let step = |extra: &str| {
        let out = temp_path("tls-bundle");
        // One 1 s step with a 1 s timeout, its report and charts: a generous bound for a
        // loaded machine, not a performance threshold.
        let (o, took) = lab_within(&plan(extra), &out, LAB_BOUND);
        // The step ran (even when every request failed the handshake): exit 0.
        assert_eq!(
            o.status.code(),
            Some(0),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(took < Duration::from_secs(30), "{extra:?}: took {took:?}");
        let steps = lines(&out.join("steps.jsonl"));
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        (steps[0]["result"].clone(), report)
    };
    // By default: verified, and this authority is unknown.
    let (r, report) = step("");
    assert!(r["errors"]["tls_handshake"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["successful"], 0);
    assert!(!report.contains("TLS not verified"));
    // Trusting the plan's CA file: verified and accepted.
    let (r, _) = step("cacert = \"ca.pem\"");
    assert_eq!(r["errors_total"], 0, "{r}");
    assert!(r["successful"].as_u64().unwrap() > 0);
    // insecure = true: accepted without checks, and the report says so.
    let (r, report) = step("insecure = true");
    assert_eq!(r["errors_total"], 0, "{r}");
    assert!(
        report.contains("**TLS not verified**: scenario `s` ran with `insecure = true`"),
        "{report}"
    );
}
