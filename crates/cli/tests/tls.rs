//! https:// through rustls: --insecure accepts a self-signed certificate; without it the
//! handshake fails and is counted as such. The system's trust store is used (a CA added to
//! it the way OpenSSL reads it, with SSL_CERT_FILE or SSL_CERT_DIR), --cacert on top of it.
//! Client certificates (--cert/--key, a plan's cert/key) against Debian's nginx requiring
//! one (`ssl_verify_client on`), and the mistakes a user can make with them.
//!
//! nginx must be installed (`.ci/run` installs it); without it these tests fail, they do
//! not skip.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use util::lab::{lab_within, lines, LAB_BOUND};
use util::nginx::{log, Nginx};
use util::tls::{self_signed, tls_server, Ca};
use util::{finish, loadlab_bin, output_within, run, run_bound, temp_path, RunOutput};

#[test]
fn https_with_insecure_succeeds() {
    let (addr, served, _rt) = tls_server(self_signed());
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "200", "-c", "4", "--insecure", "-q"]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["successful"], 200);
    assert_eq!(served.load(Ordering::Relaxed), 200);
    // 200 requests to a local server: a bound that catches a hang, not a threshold.
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);
}

#[test]
fn https_with_untrusted_certificate_fails_the_handshake() {
    let (addr, _served, _rt) = tls_server(self_signed());
    let url = format!("https://localhost:{}/", addr.port());
    let r = run(&[&url, "-n", "10", "-c", "2", "-q"]);
    assert_eq!(r.code(), Some(1));
    assert_eq!(
        r.error_count("tls_handshake"),
        10,
        "{:?}",
        r.json()["errors"]
    );
    // 10 handshakes refused at once: a bound that catches a hang, not a threshold.
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);
}

/// A directory of PEM files for a test: `name.pem` for each text given.
fn pem_dir(files: &[(&str, &str)]) -> PathBuf {
    let dir = temp_path("pem");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// `loadlab SUB ARGS --json TMP` with exactly these trust-store variables set (any the
/// test process has are removed, so a run without them reads the real system store).
fn run_env(sub: &str, args: &[&str], env: &[(&str, &str)]) -> RunOutput {
    let json = temp_path("result.json");
    let mut cmd = Command::new(loadlab_bin());
    cmd.arg(sub)
        .args(args)
        .arg("--json")
        .arg(&json)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (output, took) = output_within(&mut cmd, run_bound(args));
    let mut r = finish(output, &json);
    r.took = took;
    r
}

/// The certificates for an mTLS setup: the server's CA (what loadlab is given with
/// --cacert), the server's certificate, the clients' CA (what nginx trusts), a client
/// certificate from it, and one from an authority nginx does not know.
struct Mtls {
    dir: PathBuf,
}

impl Mtls {
    fn new() -> Mtls {
        let (server_ca, client_ca, stranger_ca) = (Ca::new(), Ca::new(), Ca::new());
        let (server, server_key) = server_ca.issue_pem(&["127.0.0.1"]);
        let (client, client_key) = client_ca.issue_pem(&["loadlab-client"]);
        let (stranger, stranger_key) = stranger_ca.issue_pem(&["loadlab-client"]);
        let dir = pem_dir(&[
            ("ca.pem", &server_ca.pem()),
            ("server.pem", &server),
            ("server.key", &server_key),
            ("client-ca.pem", &client_ca.pem()),
            ("client.pem", &client),
            ("client.key", &client_key),
            ("stranger.pem", &stranger),
            ("stranger.key", &stranger_key),
        ]);
        Mtls { dir }
    }

    fn path(&self, name: &str) -> String {
        path(&self.dir, name)
    }

    /// nginx answering `200 ok` over TLS only to clients with a certificate from the
    /// clients' CA.
    fn nginx(&self) -> Nginx {
        let d = self.dir.display();
        Nginx::with_servers(&format!(
            "access_log off;\n  server {{ listen 127.0.0.1:{{port}} ssl; \
             ssl_certificate {d}/server.pem; ssl_certificate_key {d}/server.key; \
             ssl_verify_client on; ssl_client_certificate {d}/client-ca.pem; \
             location / {{ return 200 \"ok\"; }} }}"
        ))
    }
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn nginx_requiring_a_client_certificate_answers_only_runs_that_present_one() {
    let m = Mtls::new();
    let nginx = m.nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.http);
    let (ca, cert, key) = (m.path("ca.pem"), m.path("client.pem"), m.path("client.key"));
    let base = [url.as_str(), "-n", "200", "-c", "4", "--cacert", &ca, "-q"];

    let mut args = base.to_vec();
    args.extend(["--cert", &cert, "--key", &key]);
    let r = run(&args);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stderr, log(&nginx.dir));
    assert_eq!(r.json()["successful"], 200, "{}", r.json());
    assert_eq!(r.json()["errors_total"], 0);
    assert_eq!(r.json()["status_codes"]["200"], 200);
    // 200 requests to a local server: a bound that catches a hang, not a threshold.
    assert!(r.took < Duration::from_secs(60), "took {:?}", r.took);

    // Without a certificate the handshake completes (nginx asks for one, does not demand
    // it at the TLS level) and every request is answered 400 "No required SSL certificate
    // was sent": counted as HTTP 4xx errors, none successful, exit status 1.
    let r = run(&base);
    assert_eq!(r.code(), Some(1), "{}", r.stderr);
    assert_eq!(r.json()["successful"], 0, "{}", r.json());
    assert_eq!(r.error_count("http_4xx"), 200, "{}", r.json());
    assert_eq!(r.json()["status_codes"]["400"], 200, "{}", r.json());
    assert_eq!(r.error_count("tls_handshake"), 0);

    // A certificate from an authority nginx does not trust: refused the same way (400
    // "The SSL certificate error"), so the certificate, not just any, is what counts.
    let mut args = base.to_vec();
    let (stranger, stranger_key) = (m.path("stranger.pem"), m.path("stranger.key"));
    args.extend(["--cert", &stranger, "--key", &stranger_key]);
    let r = run(&args);
    assert_eq!(r.json()["successful"], 0, "{}", r.json());
    assert_eq!(r.json()["status_codes"]["400"], 200, "{}", r.json());
    assert_eq!(r.code(), Some(1));
}

#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn a_plan_scenario_presents_its_cert_and_key_and_keeps_the_key_out_of_the_bundle() {
    let m = Mtls::new();
    let nginx = m.nginx();
    // The plan beside its certificates, named relative to it.
    let plan = |name: &str, tls: &str| {
        let path = m.dir.join(name);
        std::fs::write(
            &path,
            format!(
                "name = \"mtls\"\n[[scenario]]\nname = \"s\"\nurl = \"https://127.0.0.1:{}/\"\n\
                 timeout = \"1s\"\ncacert = \"ca.pem\"\n{tls}\n[load]\nsteps = [20]\n\
                 step_duration = \"1s\"\nconnections = 2\nthreads = 1\n",
                nginx.http
            ),
        )
        .unwrap();
        path
    };
    let out = temp_path("mtls-bundle");
    let (o, took) = lab_within(
        &plan("ok.toml", "cert = \"client.pem\"\nkey = \"client.key\""),
        &out,
        LAB_BOUND,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}\n{}", log(&nginx.dir));
    // One 1 s step, its report and charts: a bound for a loaded machine, not a threshold.
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let r = &lines(&out.join("steps.jsonl"))[0]["result"];
    assert_eq!(r["errors_total"], 0, "{r}");
    assert!(r["successful"].as_u64().unwrap() > 0, "{r}");
    for file in ["plan.json", "report.md", "report.html"] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(!text.contains("PRIVATE KEY"), "{file} holds the key");
    }

    // A key that is not the certificate's is refused before any load, naming the key.
    let (o, _) = lab_within(
        &plan(
            "mismatch.toml",
            "cert = \"client.pem\"\nkey = \"stranger.key\"",
        ),
        &temp_path("never"),
        LAB_BOUND,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("scenario[0].key = stranger.key") && stderr.contains("does not match"),
        "{stderr}"
    );
    // A certificate without its key.
    let (o, _) = lab_within(
        &plan("nokey.toml", "cert = \"client.pem\""),
        &temp_path("never"),
        LAB_BOUND,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("scenario[0].key"), "{stderr}");
}

#[test]
fn the_system_trust_store_is_trusted_and_cacert_adds_to_it() {
    let (ca, other_ca) = (Ca::new(), Ca::new());
    let store = pem_dir(&[("corporate-ca.pem", &ca.pem())]);
    let other = pem_dir(&[("ca.pem", &other_ca.pem())]);
    let (ca_file, other_file) = (path(&store, "corporate-ca.pem"), path(&other, "ca.pem"));
    let store_dir = store.display().to_string();
    let (addr, served, _s) = tls_server(ca.issue(&["127.0.0.1"], false));
    let url = format!("https://127.0.0.1:{}/", addr.port());
    let args = [url.as_str(), "-n", "50", "-c", "2", "--timeout", "2s", "-q"];

    // The CA in the store, as a file or a directory: trusted without --cacert; --cacert
    // of another authority adds to the store, it does not replace it.
    for env in [("SSL_CERT_FILE", &ca_file), ("SSL_CERT_DIR", &store_dir)] {
        for extra in [&[][..], &["--cacert", &other_file][..]] {
            let mut a = args.to_vec();
            a.extend_from_slice(extra);
            let r = run_env("run", &a, &[(env.0, env.1.as_str())]);
            assert_eq!(r.code(), Some(0), "{env:?} {extra:?}: {}", r.stderr);
            assert_eq!(r.json()["successful"], 50, "{env:?} {extra:?}");
            assert_eq!(r.json()["warnings"], serde_json::json!([]));
        }
    }
    assert_eq!(served.load(Ordering::Relaxed), 200);

    // Not in the system's store (nor among the public roots): every handshake fails.
    let r = run_env("run", &args, &[]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr);
    assert_eq!(r.error_count("tls_handshake"), 50, "{}", r.json());
    assert_eq!(r.json()["successful"], 0);

    // A store that cannot be read: the bundled public roots stand in (this CA is not among
    // them), the run goes on and says so once.
    let r = run_env("run", &args, &[("SSL_CERT_FILE", "/nonexistent/ca.pem")]);
    assert_eq!(r.error_count("tls_handshake"), 50, "{}", r.json());
    let warnings = r.json()["warnings"].as_array().unwrap();
    let about_store: Vec<_> = warnings
        .iter()
        .filter(|w| {
            w.as_str()
                .unwrap()
                .contains("trust store could not be read")
        })
        .collect();
    assert_eq!(about_store.len(), 1, "{warnings:?}");
    assert!(
        r.stdout.contains("trust store could not be read"),
        "{}",
        r.stdout
    );
}

#[test]
fn client_certificate_mistakes_are_refused_naming_the_flag_and_the_file() {
    let m = Mtls::new();
    let url = "https://127.0.0.1:1/";
    let temp_dir = || {
        let dir = temp_path("cwd");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let refused = |sub: &str, extra: &[&str], needles: &[&str]| {
        let (o, _) = output_within(
            Command::new(loadlab_bin())
                .args([sub, url, "-q"])
                .args(extra)
                .args(match sub {
                    "knee" => ["--out", "never"],
                    _ => ["-n", "1"],
                })
                .current_dir(temp_dir()),
            LAB_BOUND,
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{sub} {extra:?}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{sub} {extra:?}: no {n:?} in {stderr}");
        }
    };
    let (cert, key) = (m.path("client.pem"), m.path("client.key"));
    let stranger_key = m.path("stranger.key");
    let missing = m.path("missing.pem");
    refused(
        "run",
        &["--cert", &missing, "--key", &key],
        &["--cert", &missing, "cannot read"],
    );
    refused(
        "run",
        &["--cert", &cert, "--key", &missing],
        &["--key", &missing, "cannot read"],
    );
    refused(
        "run",
        &["--cert", &cert, "--key", &stranger_key],
        &["--key", &stranger_key, "does not match", &cert],
    );
    // The certificate given as the key: a PEM file without a private key.
    refused(
        "run",
        &["--cert", &cert, "--key", &cert],
        &["--key", "has no private key"],
    );
    // The key given as the certificate.
    refused(
        "run",
        &["--cert", &key, "--key", &key],
        &["--cert", &key, "has no certificate"],
    );
    refused("run", &["--cert", &cert], &["--key"]);
    refused("run", &["--key", &key], &["--cert"]);
    // knee checks the same before its first step, in the words of its flags.
    refused(
        "knee",
        &["--cert", &cert, "--key", &stranger_key],
        &[
            "--key",
            &stranger_key,
            "of the --cert certificate",
            "does not match",
        ],
    );

    for sub in ["run", "grpc", "knee"] {
        let o = Command::new(loadlab_bin())
            .args([sub, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(
            help.contains("--cert <FILE>")
                && help.contains("(mTLS)")
                && help.contains("--key <FILE>"),
            "{sub}: {help}"
        );
        assert!(help.contains("system's trust store"), "{sub}: {help}");
    }
}

/// A login flow over TLS against nginx, which checks on every page that the bearer token
/// and the session cookie (set `Secure`: sent only over https) belong to one login
/// (`$request_id` of the login in both; a PCRE back-reference compares them).
#[test]
#[ignore = "needs nginx (./test.sh installs it)"]
fn a_flow_over_tls_sends_each_sessions_secure_cookie_and_token_to_nginx() {
    let ca = Ca::new();
    let (cert, key) = ca.issue_pem(&["127.0.0.1"]);
    let dir = pem_dir(&[
        ("ca.pem", &ca.pem()),
        ("server.pem", &cert),
        ("server.key", &key),
    ]);
    let d = dir.display();
    let nginx = Nginx::with_servers(&format!(
        "access_log off;\n  \
         map \"$http_authorization|$cookie_sid\" $who {{ \
           \"~^Bearer t-([0-9a-f]{{32}})\\|\\1$\" ok; default bad; }}\n  \
         server {{ listen 127.0.0.1:{{port}} ssl; \
           ssl_certificate {d}/server.pem; ssl_certificate_key {d}/server.key; \
           default_type application/json; \
           location = /login {{ add_header Set-Cookie \"sid=$request_id; Path=/; Secure; HttpOnly\"; \
             return 200 '{{\"token\":\"t-$request_id\"}}'; }} \
           location = /page {{ if ($who != ok) {{ return 401; }} return 200 'page'; }} \
           location = /logout {{ if ($who != ok) {{ return 401; }} return 200 'bye'; }} }}"
    ));
    let url = format!("https://127.0.0.1:{}/", nginx.http);
    let ca_path = path(&dir, "ca.pem");
    // The flow with the page's Authorization header `page_auth`, run at 50 sessions/s.
    let run_flow = |page_auth: &str, duration: &str| {
        let f = temp_path("tls-flow.toml");
        std::fs::write(
            &f,
            format!(
                "think = \"5ms\"\n\
                 [[steps]]\nname = \"login\"\nmethod = \"POST\"\npath = \"/login\"\n\
                 extract = [{{ var = \"token\", json = \"/token\" }}]\n\
                 [[steps]]\nloop = 3\nsteps = [{{ name = \"page\", path = \"/page\", \
                 headers = {{ Authorization = \"{page_auth}\" }} }}]\n\
                 [[steps]]\nname = \"logout\"\nmethod = \"POST\"\npath = \"/logout\"\n\
                 headers = {{ Authorization = \"Bearer ${{token}}\" }}\n"
            ),
        )
        .unwrap();
        run(&[
            &url,
            "--flow",
            f.to_str().unwrap(),
            "--cacert",
            &ca_path,
            "--rate",
            "50",
            "-d",
            duration,
            "-q",
        ])
    };
    let r = run_flow("Bearer ${token}", "2s");
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stderr, log(&nginx.dir));
    let j = r.json();
    let s = &j["sessions"];
    let started = s["started"].as_u64().unwrap();
    assert!(started >= 80, "{s}");
    assert_eq!(s["aborted"], 0, "{s}\n{}", r.stdout);
    assert_eq!(
        s["completed"].as_u64().unwrap() + s["running_at_end"].as_u64().unwrap(),
        started,
        "{s}"
    );
    assert_eq!(j["errors_total"], 0, "{j}");
    assert_eq!(j["errors"]["tls_handshake"], 0);
    // nginx does check: a page sent with another token ends every session there.
    let r = run_flow("Bearer t-00000000000000000000000000000000", "1s");
    let s = &r.json()["sessions"];
    assert_eq!(s["completed"], 0, "{s}");
    let by = &s["aborted_by_step"];
    assert_eq!(by[0]["step"], "page", "{s}");
    assert_eq!(by[0]["sessions"], s["aborted"], "{s}");
    assert!(r.json()["status_codes"]["401"].as_u64().unwrap() > 0);
}
